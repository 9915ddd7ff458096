"""Plain-text and HTML renderings of job statuses, shared by the reprs, the widgets and the CLI.

Pure functions of the typed job status the REST client returns (`paddle_nbext.model.status.JobStatus`,
docs/architecture.md "Job status"), so every view of a job says the same thing and can be tested
without a server.
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Mapping
from datetime import datetime, timezone
from typing import Any

from .model.contract import Phase, format_bytes, is_terminal, parse_time
from .model.status import JobStatus, ReplicaStatus
from .words import PHASE_COLOURS, PREPARING_PHASE, is_preparing, replica_name, replica_summary, shown_phase

__all__ = [
    "PHASE_COLOURS",
    "age",
    "checkpoints_text",
    "delete_text",
    "jobs_html",
    "jobs_text",
    "phase_badge",
    "replica_counts",
    "status_html",
    "status_text",
]


def age(created: str | None, now: datetime | None = None) -> str:
    """Compact age like kubectl's: `42s`, `5m`, `3h`, `2d`."""
    start = parse_time(created)
    if start is None:
        return "?"
    now = now or datetime.now(timezone.utc)
    seconds = max(0, int((now - start).total_seconds()))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def replica_counts(status: JobStatus) -> str:
    """`pserver 1/1 running · trainers 1/2 running, 1 succeeded`: the words the panel uses."""
    return replica_summary(status)


def _replicas(status: JobStatus) -> list[ReplicaStatus]:
    return sorted(status.replicas, key=lambda replica: (replica.role, replica.index))


def phase_badge(phase: str) -> str:
    # A preparing job is not training yet: it wears Pending's colour, not Running's.
    colour = PHASE_COLOURS.get(Phase.PENDING if phase == PREPARING_PHASE else phase, "#4a5568")
    return (
        f'<span class="paddle-phase paddle-phase-{html.escape(phase.lower())}" '
        f'style="background:{colour};color:white;border-radius:3px;padding:0 5px">{html.escape(phase)}</span>'
    )


def status_text(status: JobStatus) -> str:
    """Multi-line text for terminals and `print(job)`."""
    lines = [f"Job {status.name}: {status.phase} — {status.message or ''}".rstrip(" —")]
    counts = replica_counts(status)
    if counts:
        lines.append(f"  replicas: {counts}")
    resumed = resumed_text(status)
    if resumed:
        lines.append(f"  {resumed}")
    for replica in _replicas(status):
        reason = f" ({replica.reason})" if replica.reason else ""
        restarts = f", {replica.restarts} restarts" if replica.restarts else ""
        lines.append(f"  {replica_name(replica.role, replica.index)}: {replica.phase}{reason}{restarts}")
    return "\n".join(lines)


def resumed_text(status: JobStatus) -> str:
    """`resumed from job mnist-1 at step 800` for a job that Resume started, else ''."""
    link = status.resumed_from
    if not link:
        return ""
    step = link.get("step")
    return f"resumed from job {link.get('job')}" + (f" at step {step}" if step is not None else "")


def status_html(status: JobStatus) -> str:
    """A small card: name, phase badge, message, replica table (reasons in words)."""
    name = html.escape(str(status.name))
    preparing = is_preparing(status)

    def building(replica: ReplicaStatus) -> bool:  # a running replica of a preparing job
        return preparing and str(replica.phase) == "Running"

    rows = "".join(
        "<tr><td>{name}</td><td>{phase}</td><td>{reason}</td><td>{restarts}</td></tr>".format(
            name=html.escape(replica_name(str(r.role), r.index)),
            phase=phase_badge(PREPARING_PHASE if building(r) else str(r.phase)),
            reason=html.escape(str(status.message) if building(r) else str(r.reason or "")),
            restarts=r.restarts,
        )
        for r in _replicas(status)
    )
    table = (
        "<table class='paddle-replicas'><thead><tr><th>replica</th><th>phase</th><th>reason</th>"
        f"<th>restarts</th></tr></thead><tbody>{rows}</tbody></table>"
        if rows
        else ""
    )
    return (
        f"<div class='paddle-job'><b>{name}</b> {phase_badge(shown_phase(status))} "
        f"<span class='paddle-message'>{html.escape(str(status.message or ''))}</span>"
        f"<div class='paddle-counts'>{html.escape(replica_counts(status))} · age {age(status.created)}</div>"
        + (f"<div class='paddle-resumed-from'>{html.escape(resumed_text(status))}</div>" if status.resumed_from else "")
        + f"{table}</div>"
    )


def jobs_text(statuses: Iterable[JobStatus]) -> str:
    listed = list(statuses)
    if not listed:
        return "No jobs."
    header = ("NAME", "PHASE", "REPLICAS", "AGE")
    rows = [(str(s.name), str(s.phase), replica_counts(s), age(s.created)) for s in listed]
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(4)]
    return "\n".join("  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip() for row in [header, *rows])


def jobs_html(statuses: Iterable[JobStatus]) -> str:
    rows = "".join(
        f"<tr><td>{html.escape(str(s.name))}</td><td>{phase_badge(shown_phase(s))}</td>"
        f"<td>{html.escape(replica_counts(s))}</td><td>{age(s.created)}</td>"
        f"<td>{html.escape(str(s.message or ''))}</td></tr>"
        for s in statuses
    )
    if not rows:
        return "<i>No jobs.</i>"
    return (
        "<table class='paddle-jobs'><thead><tr><th>name</th><th>phase</th><th>replicas</th><th>age</th>"
        f"<th>message</th></tr></thead><tbody>{rows}</tbody></table>"
    )


def cancel_text(name: str, phase_before: str, phase_after: str) -> str:
    """What a cancel did, in words: a job that had already ended says so instead of claiming to
    be cancelled (`Cancelled x: Succeeded.` read as if the cancel had stopped a finished job)."""
    if is_terminal(phase_before):
        return f"{name} had already ended ({phase_before}); nothing to cancel."
    if phase_after == Phase.CANCELLED:
        return f"Cancelled {name}."
    return f"Cancelling {name}: its replicas are being stopped ({phase_after})."


def checkpoints_text(body: Mapping[str, Any]) -> str:
    """`paddle-nbext checkpoints NAME`: one line per checkpoint (step, time, size), newest last,
    then the totals and the job it was resumed from."""
    items = body.get("checkpoints") or []
    lines = [f"{'STEP':>10}  {'SAVED':20}  SIZE"]
    lines += [f"{item['step']:>10}  {item['time']:20}  {format_bytes(item['size'])}" for item in items]
    if not items:
        lines = [f"{body.get('name', 'The job')} has no checkpoints (training code saves them with paddle_nbext_job.save_checkpoint)."]
    lines.append(
        f"Checkpoints: {len(items)}, {format_bytes(body.get('size') or 0)} in {body.get('directory', '?')}; "
        f"the whole job: {format_bytes(body.get('job_size') or 0)}."
    )
    origin = body.get("resumed_from")
    if isinstance(origin, Mapping) and origin.get("job"):
        lines.append(f"Resumed from job {origin['job']} at step {origin.get('step')}.")
    return "\n".join(lines)


def delete_text(name: str, sizes: Mapping[str, Any], kept: Mapping[str, Any] | None) -> str:
    """`Deleted NAME, freeing 1.2Gi.` plus where kept checkpoints went."""
    freed = sizes.get("job_size")
    if kept is not None and isinstance(freed, int):
        freed -= int(kept.get("size") or 0)
    text = f"Deleted {name}" + (f", freeing {format_bytes(max(freed, 0))}" if isinstance(freed, int) else "") + "."
    if kept is not None:
        text += f" Its checkpoints ({format_bytes(int(kept.get('size') or 0))}) are kept in {kept.get('kept')}."
    return text
