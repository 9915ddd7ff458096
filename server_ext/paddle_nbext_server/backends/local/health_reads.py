"""What the server answers about a local job's health: its resource use (the master's
`usage.json`) and its timeline (`timeline.jsonl`), read from the job dir in a worker thread.

When resource use is missing the answer says why in words (`available: false`, `reason`), so the
panel and the CLI can tell "off on this server" from "not started yet" from "an older job".
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from paddle_nbext.model.contract import Phase

from ... import timeline
from . import usage
from .records import Plan
from .store import JobStore


def unavailable(name: str, reason: str) -> dict[str, Any]:
    """A usage answer without figures, saying why."""
    return {"name": name, "available": False, "reason": reason, "sampled": None, "interval": None, "replicas": []}


def read_usage(store: JobStore, name: str, owner: str) -> dict[str, Any]:
    """`GET /jobs/{name}/usage` of a local job (`JobNotFound` for anyone else's)."""
    job_dir, files = store.owned(name, owner)
    phase = files.record.status.phase
    document = usage.read(job_dir)
    if document is not None:
        return {
            "name": name,
            "available": True,
            "reason": None,
            "sampled": document.get("sampled"),
            "interval": document.get("interval"),
            "replicas": document["replicas"],
        }
    interval = _planned_interval(job_dir)
    if interval is None:
        return unavailable(name, "this job was started by an earlier paddle-nbext, whose job master did not measure resource use")
    if interval <= 0:
        return unavailable(name, "resource use is off on this server (c.LocalBackend.usage_interval = 0)")
    if phase == Phase.PENDING:
        return unavailable(name, "the job has not started yet, so nothing runs to measure")
    if files.record.terminal:
        return unavailable(name, "the job ended before its first sample of resource use")
    return unavailable(name, f"the first sample of resource use comes within {interval:g} s of the start")


def _planned_interval(job_dir: Path) -> float | None:
    """The plan's sampling interval; None for a plan of a release that did not sample (its
    plan.json has no `usage_interval`), or one that cannot be read."""
    try:
        data = json.loads((job_dir / Plan.KIND).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    value = data.get("usage_interval") if isinstance(data, dict) else None
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def read_timeline(store: JobStore, name: str, owner: str, since: int) -> dict[str, Any]:
    """`GET /jobs/{name}/timeline` of a local job: the entries after `since`, oldest first."""
    job_dir, _ = store.owned(name, owner)
    entries = timeline.read(job_dir, since)
    return {
        "name": name,
        "available": True,
        "reason": None,
        "entries": [entry.to_dict() for entry in entries],
        "last": entries[-1].seq if entries else since,
    }
