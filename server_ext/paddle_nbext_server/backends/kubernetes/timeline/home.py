"""A Kubernetes job's timeline entries from its folder in the home: the environment's steps, the
first step reported, checkpoints saved, and the replicas' health files (warnings and recoveries
the in-pod launchers write), with the times those files say.

The in-cluster master does not mount the home, so only the server can read these; it does so in a
worker thread, and often (every couple of seconds per running job), so every source is read again
only when its stat signature (inode, size, mtime) changed since the last look: a job whose files
did not change costs a few `stat`s.  A health file is read on from where the last read stopped
while it only grows (a launcher appends to it), and from the start when it was replaced.

Health files (`<logs>/<role>-<index>.health.jsonl`, written by the launcher in each pod) hold one
JSON object a line, `{"t": iso, "kind": "warning"|"recovered", "text", "role", "index",
"attempt": N}`, from two watches (memory, stall: `replica_health.watch_of`); a warning stands now
when it is its watch's last line of the current attempt (`replica_health.active_warnings`).

One `HomeReader` per job; not thread-safe by itself (the keeper runs one pass of a job at a time).
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ....jobfiles.metrics import MetricsFile
from ....runtime import environments, paddle_nbext_job, replica_health
from .objects import Derived, stamp, stamp_epoch

HEALTH_SUFFIX = replica_health.HEALTH_SUFFIX
HEALTH_KINDS = frozenset({"warning", "recovered"})
#: The most of a health file read in one look (a file that grew by more is read on next time).
HEALTH_READ_LIMIT = 1024 * 1024

Signature = tuple[int, int, int]


def signature(path: Path) -> Signature | None:
    try:
        found = os.stat(path)
    except OSError:
        return None
    return (found.st_ino, found.st_size, found.st_mtime_ns)


@dataclass(frozen=True)
class ActiveWarning:
    """A warning that stands now: the last line of a replica's health file, of `attempt`."""

    role: str
    index: int
    attempt: int
    text: str

    @property
    def stall(self) -> bool:
        return replica_health.watch_of({"text": self.text}) == "stall"


@dataclass
class _HealthFile:
    signature: Signature | None = None
    inode: int | None = None
    offset: int = 0
    last: dict[str, dict[str, Any]] = field(default_factory=dict)  # watch -> its last line


class HomeReader:
    """What one job's folder in the home says, read again only where a file changed."""

    def __init__(self, logs_dir: Path, checkpoint_dir: Path) -> None:
        self.logs_dir = logs_dir
        self.checkpoint_dir = checkpoint_dir
        self._environment: Signature | None = None
        self._checkpoints: Signature | None = None
        self._metrics: dict[Path, Signature] = {}
        self._first_step: Derived | None = None
        self._health: dict[tuple[str, int], _HealthFile] = {}

    def read(self, replicas: list[tuple[str, int]], trainer_metrics: list[MetricsFile]) -> list[Derived]:
        """The entries of every source that changed since the last `read` (an unchanged source
        yields nothing new: its entries were returned before)."""
        found: list[Derived] = []
        found.extend(self._environment_entries())
        found.extend(self._checkpoint_entries())
        if self._first_step is None:
            self._first_step = self._first_step_entry(trainer_metrics)
            if self._first_step is not None:
                found.append(self._first_step)
        for role, index in replicas:
            found.extend(self._health_entries(role, index))
        return found

    def active_warnings(self, attempt: int) -> list[ActiveWarning]:
        """The warnings that stand now for the replicas of `attempt` (the record's whole-job
        attempt): per replica and watch, its last line when that is a warning of that attempt
        (a memory warning that cleared leaves a stall that still holds standing)."""
        standing = []
        for (role, index), health in sorted(self._health.items()):
            for last in replica_health.active_warnings(list(health.last.values()), attempt):
                standing.append(ActiveWarning(role, index, attempt, str(last.get("text") or "").strip()))
        return standing

    # ------------------------------------------------------------------ sources

    def _environment_entries(self) -> list[Derived]:
        path = self.logs_dir / environments.STATUS_FILE
        seen = signature(path)
        if seen is None or seen == self._environment:
            return []
        self._environment = seen
        status = environments.read_json(str(path))
        state = status.get("state") if status else None
        moment = status.get("time") if status else None
        if not isinstance(state, str) or not isinstance(moment, (int, float)) or isinstance(moment, bool):
            return []
        assert status is not None
        if state == "building":
            text = f"{environments.phase_message(status) or 'Preparing environment'}."
        elif state == "ready":
            packages = status.get("packages")
            what = f" ({packages} package{'s' if packages != 1 else ''})" if isinstance(packages, int) else ""
            text = f"Environment {'reused' if status.get('reused') else 'ready'}{what}."
        elif state == "failed":
            text = f"The environment could not be built: {status.get('reason') or 'see the environment log'}."
        else:
            return []
        when = stamp_epoch(float(moment))
        return [Derived(f"environment:{state}:{int(moment * 1000)}", when, "environment", text)] if when else []

    def _checkpoint_entries(self) -> list[Derived]:
        # A checkpoint is published by renaming its directory into this one, and retention
        # removes old ones: either changes the directory's own signature.
        seen = signature(self.checkpoint_dir)
        if seen is None or seen == self._checkpoints:
            return []
        self._checkpoints = seen
        found = []
        for each in paddle_nbext_job.checkpoints(self.checkpoint_dir):
            when = stamp_epoch(each.time)
            if when is not None:
                found.append(
                    Derived(f"checkpoint:{each.step}:{int(each.time * 1000)}", when, "checkpoint", f"Checkpoint at step {each.step} saved.")
                )
        return found

    def _first_step_entry(self, files: list[MetricsFile]) -> Derived | None:
        """The earliest point any trainer reported (each file's first line), once one has."""
        first: tuple[float, int] | None = None
        for each in files:
            seen = signature(each.path)
            if seen is None or seen[1] == 0 or self._metrics.get(each.path) == seen:
                continue
            self._metrics[each.path] = seen
            point = _first_point(each.path)
            if point is not None and stamp_epoch(point[0]) is not None and (first is None or point[0] < first[0]):
                first = point
        when = stamp_epoch(first[0]) if first is not None else None
        if first is None or when is None:
            return None
        return Derived("first_step", when, "first_step", f"First progress reported: step {first[1]}.")

    def _health_entries(self, role: str, index: int) -> list[Derived]:
        path = self.logs_dir / f"{role}-{index}{HEALTH_SUFFIX}"
        health = self._health.setdefault((role, index), _HealthFile())
        seen = signature(path)
        if seen is None:
            self._health[(role, index)] = _HealthFile()
            return []
        if seen == health.signature:
            return []
        if seen[0] != health.inode or seen[1] < health.offset:
            health.offset, health.last, health.inode = 0, {}, seen[0]  # new or replaced: from the start
        try:
            with open(path, "rb") as handle:
                handle.seek(health.offset)
                chunk = handle.read(HEALTH_READ_LIMIT)
        except OSError:
            return []
        complete = chunk[: chunk.rfind(b"\n") + 1]  # a line still being written waits
        health.offset += len(complete)
        health.signature = seen if len(complete) == len(chunk) else None
        found = []
        for line in complete.splitlines():
            entry = _health_line(line, role, index)
            if entry is None:
                continue
            data, derived = entry
            health.last[replica_health.watch_of(data)] = data
            found.append(derived)
        return found


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _health_line(line: bytes, role: str, index: int) -> tuple[dict[str, Any], Derived] | None:
    """One line of a replica's health file as (its object, its entry); None for anything else."""
    try:
        data = json.loads(line)
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    kind, text, when = data.get("kind"), data.get("text"), stamp(data.get("t"))
    if kind not in HEALTH_KINDS or not isinstance(text, str) or not text.strip() or when is None:
        return None
    attempt = _int(data.get("attempt"))
    digest = hashlib.sha1(line.strip(), usedforsecurity=False).hexdigest()[:12]
    text = text.strip()
    return data, Derived(
        f"health:{role}-{index}:{attempt}:{digest}", when, str(kind), text if text.endswith(".") else f"{text}.", role, index
    )


def _first_point(path: Path) -> tuple[float, int] | None:
    """(time, step) of the first complete point in a metrics file, None when it has none yet."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(64 * 1024)
    except OSError:
        return None
    for line in head.split(b"\n")[:-1]:
        try:
            data = json.loads(line)
        except ValueError:
            continue
        if not isinstance(data, dict):
            continue
        moment, step = data.get("t"), _int(data.get("step"))
        if isinstance(moment, (int, float)) and not isinstance(moment, bool) and step is not None:
            return float(moment), step
    return None
