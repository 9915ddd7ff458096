"""Plain-text and HTML renderings of job statuses, shared by the reprs, the widgets and the CLI.

Pure functions of the status dicts the REST API returns (docs/architecture.md, "Job status"), so
every view of a job says the same thing and can be tested without a server.
"""
from __future__ import annotations

import html
from collections.abc import Iterable, Mapping
from datetime import datetime, timezone
from typing import Any

__all__ = ["PHASE_COLOURS", "age", "replica_counts", "status_text", "status_html", "jobs_text", "jobs_html", "phase_badge"]

PHASE_COLOURS = {
    "Pending": "#b7791f",
    "Running": "#2b6cb0",
    "Succeeded": "#2f855a",
    "Failed": "#c53030",
    "Cancelled": "#718096",
    "Stopped": "#718096",
}


def _parse_time(value: str | None) -> datetime | None:
    if not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def age(created: str | None, now: datetime | None = None) -> str:
    """Compact age like kubectl's: `42s`, `5m`, `3h`, `2d`."""
    start = _parse_time(created)
    if start is None:
        return "?"
    now = now or datetime.now(timezone.utc)
    seconds = max(0, int((now - start).total_seconds()))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def replica_counts(status: Mapping[str, Any]) -> str:
    """`pserver 1/1 running, trainer 1/2 succeeded` — the busiest state per role."""
    parts = []
    for role, counts in (status.get("roles") or {}).items():
        desired = counts.get("desired", 0)
        for state in ("failed", "running", "pending", "succeeded", "stopped"):
            if counts.get(state):
                parts.append(f"{role} {counts[state]}/{desired} {state}")
                break
        else:
            parts.append(f"{role} 0/{desired}")
    return ", ".join(parts)


def phase_badge(phase: str) -> str:
    colour = PHASE_COLOURS.get(phase, "#4a5568")
    return (
        f'<span class="paddle-phase paddle-phase-{html.escape(phase.lower())}" '
        f'style="background:{colour};color:white;border-radius:3px;padding:0 5px">{html.escape(phase)}</span>'
    )


def status_text(status: Mapping[str, Any]) -> str:
    """Multi-line text for terminals and `print(job)`."""
    lines = [f"Job {status.get('name')}: {status.get('phase')} — {status.get('message') or ''}".rstrip(" —")]
    counts = replica_counts(status)
    if counts:
        lines.append(f"  replicas: {counts}")
    for replica in status.get("replicas") or []:
        reason = f" ({replica['reason']})" if replica.get("reason") else ""
        restarts = f", {replica['restarts']} restarts" if replica.get("restarts") else ""
        lines.append(f"  {replica.get('role')}-{replica.get('index')}: {replica.get('phase')}{reason}{restarts}")
    return "\n".join(lines)


def status_html(status: Mapping[str, Any]) -> str:
    """A small card: name, phase badge, message, replica table (reasons in words)."""
    name = html.escape(str(status.get("name")))
    rows = "".join(
        "<tr><td>{role}-{index}</td><td>{phase}</td><td>{reason}</td><td>{restarts}</td></tr>".format(
            role=html.escape(str(r.get("role"))),
            index=r.get("index"),
            phase=phase_badge(str(r.get("phase"))),
            reason=html.escape(str(r.get("reason") or "")),
            restarts=r.get("restarts", 0),
        )
        for r in status.get("replicas") or []
    )
    table = (
        "<table class='paddle-replicas'><thead><tr><th>replica</th><th>phase</th><th>reason</th>"
        f"<th>restarts</th></tr></thead><tbody>{rows}</tbody></table>"
        if rows
        else ""
    )
    return (
        f"<div class='paddle-job'><b>{name}</b> {phase_badge(str(status.get('phase')))} "
        f"<span class='paddle-message'>{html.escape(str(status.get('message') or ''))}</span>"
        f"<div class='paddle-counts'>{html.escape(replica_counts(status))} · age {age(status.get('created'))}</div>"
        f"{table}</div>"
    )


def jobs_text(statuses: Iterable[Mapping[str, Any]]) -> str:
    statuses = list(statuses)
    if not statuses:
        return "No jobs."
    header = ("NAME", "PHASE", "REPLICAS", "AGE")
    rows = [(str(s.get("name")), str(s.get("phase")), replica_counts(s), age(s.get("created"))) for s in statuses]
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(4)]
    return "\n".join("  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip() for row in [header, *rows])


def jobs_html(statuses: Iterable[Mapping[str, Any]]) -> str:
    rows = "".join(
        f"<tr><td>{html.escape(str(s.get('name')))}</td><td>{phase_badge(str(s.get('phase')))}</td>"
        f"<td>{html.escape(replica_counts(s))}</td><td>{age(s.get('created'))}</td>"
        f"<td>{html.escape(str(s.get('message') or ''))}</td></tr>"
        for s in statuses
    )
    if not rows:
        return "<i>No jobs.</i>"
    return (
        "<table class='paddle-jobs'><thead><tr><th>name</th><th>phase</th><th>replicas</th><th>age</th>"
        f"<th>message</th></tr></thead><tbody>{rows}</tbody></table>"
    )
