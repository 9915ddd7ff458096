"""What `%%paddle_submit --wait` (and `%paddle_resume --wait`) show while they block: before,
the cell stayed blank until the job ended and then showed a card without the progress bar and
loss sparkline that the non-wait output has.

In a notebook the job's live status view (phase, replicas, progress bar, sparkline) shows while
the cell waits and makes way, at the end, for the ended job's card, which has them too
(`Job._repr_html_`).  In terminal IPython a line is printed whenever the phase or the progress
(in whole percents) changes.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any, TextIO

from .client import PaddleNbextError
from .metrics import progress_fraction
from .words import shown_phase

if TYPE_CHECKING:
    from .api import Job


def progress_line(job: Job, body: dict[str, Any] | None) -> str:
    """`name: Running · 45% (step 90/200)`; the phase alone before anything was reported."""
    line = f"{job.name}: {shown_phase(job.last)}"
    progress = (body or {}).get("progress")
    fraction = progress_fraction(progress, job.phase)
    if fraction is not None and progress:
        step, total = progress.get("step"), progress.get("total")
        line += f" · {fraction * 100:.0f}%" + (f" (step {step}/{total})" if total else "")
    return line


def wait_showing_progress(job: Job, *, poll: float = 1.0, out: TextIO | None = None) -> Job:
    """Block until the job ends, showing its progress meanwhile; returns the job."""
    from .api import _in_widget_frontend

    if _in_widget_frontend():
        from IPython.display import display as show

        view = job.widget(interval=poll)
        show(view)  # type: ignore[no-untyped-call]  # IPython leaves display() unannotated
        try:
            job.wait(poll=poll)
        finally:
            view.close()  # the ended job's card (with progress and sparkline) takes its place
        return job
    stream = out if out is not None else sys.stdout
    said = ""

    def say(_status: Any) -> None:
        nonlocal said
        try:
            body: dict[str, Any] | None = job.metrics_raw(points=1)
        except PaddleNbextError:
            body = None  # a server without metrics: the phase alone
        line = progress_line(job, body)
        if line != said:
            said = line
            print(line, file=stream, flush=True)

    return job.wait(poll=poll, on_status=say)
