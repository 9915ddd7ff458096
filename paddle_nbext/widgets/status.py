"""Live status view of one job: phase badge, message, replica table, each replica's resource use
(CPU and memory beside request and limit, a bar against the limit: `_usage_html`), and what its
replicas `report()` (a progress bar and a sparkline of the loss, every trainer overlaid),
refreshed until it ends."""

from __future__ import annotations

import html
from typing import Any, Protocol

import ipywidgets as widgets

from .. import display
from .. import metrics as job_metrics
from ..client import ApiError, PaddleNbextError
from ..health import Usage
from ..metrics import SPARKLINE_POINTS
from ..model.contract import is_terminal
from ..model.status import JobStatus
from ._poll import Poller, comm_alive, watch_comm_close
from ._theme import error_html, stylesheet, themed
from ._usage_html import usage_html


class WatchedJob(Protocol):
    """What the view needs of a job: `paddle_nbext.api.Job` is one. A protocol rather than an
    import, so the API (which offers this view) and the view do not import each other."""

    @property
    def name(self) -> str: ...

    @property
    def phase(self) -> str: ...

    @property
    def last(self) -> JobStatus: ...

    def status(self) -> JobStatus: ...

    def metrics_raw(self, points: int | None = None, since: str | None = None) -> dict[str, Any]: ...

    def usage(self) -> Usage: ...


class JobStatusView(widgets.VBox):
    """Shows `job` and refreshes it every `interval` seconds (one request each) until the job ends,
    the view is closed, or the frontend goes away.  `phases` records every phase shown."""

    def __init__(self, job: WatchedJob, interval: float = 2.0, **kwargs: Any):
        self.job = job
        self.html = widgets.HTML(value=display.status_html(job.last))
        self.error = widgets.HTML(value="")
        self.metrics = widgets.HTML(value="")
        #: Each replica's resource use (`job.usage()`), refreshed with the status.
        self.usage = widgets.HTML(value="")
        self.usage.add_class("paddle-usage-view")
        super().__init__(children=(stylesheet(), self.html, self.usage, self.metrics, self.error), **kwargs)
        self.add_class("paddle-job-status")
        themed(self)
        self.phases: list[str] = [job.phase]
        self.poller = Poller(interval, self.refresh, lambda: comm_alive(self), name=f"paddle-status-{job.name}")
        watch_comm_close(self, self.poller)
        if not is_terminal(job.phase):
            self.poller.start()
        else:
            self.refresh_metrics(str(job.phase))
            self.refresh_usage(ended=True)

    @property
    def phase(self) -> str:
        """The phase the view shows (its card was drawn with it)."""
        return self.phases[-1]

    def refresh(self) -> bool:
        """One request; returns False when there is nothing more to watch."""
        try:
            status = self.job.status()
        except ApiError as error:
            if error.status == 404:
                self.error.value = error_html(html.escape(error.message))
                return False
            self.error.value = error_html(html.escape(str(error)))
            return True
        except PaddleNbextError as error:
            self.error.value = error_html(html.escape(str(error)))
            return True
        self.error.value = ""
        self.html.value = display.status_html(status)
        if status.phase != self.phases[-1]:
            self.phases.append(str(status.phase))
        self.refresh_metrics(str(status.phase))
        self.refresh_usage(ended=status.terminal)
        return not status.terminal

    def refresh_metrics(self, phase: str) -> None:
        """Progress and sparkline from one metrics request; a server without metrics (or a
        failed request) leaves them as they were: the status matters more."""
        try:
            body = self.job.metrics_raw(points=SPARKLINE_POINTS)
        except PaddleNbextError:
            return
        self.metrics.value = job_metrics.metrics_html(body, phase)

    def refresh_usage(self, ended: bool) -> None:
        """Each replica's figures from one usage request (only its peak once the job `ended`); a
        failed request leaves them as they were, as for the metrics."""
        try:
            usage = self.job.usage()
        except PaddleNbextError:
            return
        value = usage_html(usage.to_dict(), ended)
        if self.usage.value != value:
            self.usage.value = value

    def close(self) -> None:
        self.poller.stop()
        super().close()
