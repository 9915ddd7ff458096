"""What the server answers about a local job's health: its resource use (the master's
`usage.json`) and its timeline (`timeline.jsonl`), read from the job dir in a worker thread.

When resource use is missing the answer says why in words (`available: false`, `reason`), so the
panel and the CLI can tell "off on this server" from "not started yet" from "an older job".

The event ticker asks about every watched running job every second, so both files are parsed
only when their signature (one `stat`) changed since the last read (`HealthReader`): a job whose
master wrote nothing new costs two `stat`s.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

from paddle_nbext.model.contract import Phase
from paddle_nbext.model.status import JobStatus

from ...jobfiles import timeline
from . import usage
from .records import Plan
from .store import Signature, signature


def unavailable(name: str, reason: str) -> dict[str, Any]:
    """A usage answer without figures, saying why."""
    return {"name": name, "available": False, "reason": reason, "sampled": None, "interval": None, "replicas": []}


class HealthReader:
    """Reads jobs' `usage.json` and `timeline.jsonl`, each parsed again only when it changed."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._usage: dict[Path, tuple[Signature, dict[str, Any] | None]] = {}
        self._timeline: dict[Path, tuple[Signature, list[timeline.Entry]]] = {}

    def forget(self, job_dir: Path) -> None:
        with self._lock:
            self._usage.pop(job_dir, None)
            self._timeline.pop(job_dir, None)

    def _usage_document(self, job_dir: Path) -> dict[str, Any] | None:
        stamp = signature(job_dir / usage.FILE)
        if stamp is None:
            return None
        with self._lock:
            cached = self._usage.get(job_dir)
        if cached is not None and cached[0] == stamp:
            return cached[1]
        document = usage.read(job_dir)
        with self._lock:
            self._usage[job_dir] = (stamp, document)
        return document

    def entries(self, job_dir: Path) -> list[timeline.Entry]:
        stamp = signature(job_dir / timeline.FILE)
        if stamp is None:
            return []
        with self._lock:
            cached = self._timeline.get(job_dir)
        if cached is not None and cached[0] == stamp:
            return cached[1]
        entries = timeline.read(job_dir)
        with self._lock:
            self._timeline[job_dir] = (stamp, entries)
        return entries

    def usage(self, job_dir: Path, status: JobStatus) -> dict[str, Any]:
        """`GET /jobs/{name}/usage` of the local job in `job_dir`, whose status is `status`."""
        name = status.name
        document = self._usage_document(job_dir)
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
        if status.phase == Phase.PENDING:
            return unavailable(name, "the job has not started yet, so nothing runs to measure")
        if status.terminal:
            return unavailable(name, "the job ended before its first sample of resource use")
        return unavailable(name, f"the first sample of resource use comes within {interval:g} s of the start")

    def timeline(self, job_dir: Path, name: str, since: int) -> dict[str, Any]:
        """`GET /jobs/{name}/timeline` of the local job in `job_dir`: the entries after `since`."""
        entries = [entry for entry in self.entries(job_dir) if entry.seq > since]
        return {
            "name": name,
            "available": True,
            "reason": None,
            "entries": [entry.to_dict(public=True) for entry in entries],
            "last": entries[-1].seq if entries else since,
        }


def _planned_interval(job_dir: Path) -> float | None:
    """The plan's sampling interval; None for a plan of a release that did not sample (its
    plan.json has no `usage_interval`), or one that cannot be read."""
    try:
        data = json.loads((job_dir / Plan.KIND).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    value = data.get("usage_interval") if isinstance(data, dict) else None
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None
