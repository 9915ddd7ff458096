"""Which notifiable events a job's status and timeline hold, each found once.

A job's end is its phase (`Failed`, `Succeeded`); a stall, a memory warning and the admission of
a job that waited are entries of its timeline (`jobfiles/timeline.py`), in the words the health
rules wrote them (`runtime/health_rules.py`: "Stalled: no progress for 10 min since step 1234;
...", "Memory: trainer 1 uses 1.8 GiB of its 2 GiB limit; ...").

What was already looked at is remembered per job (`JobCursor`: the phase and the last timeline
`seq`) in a file per user, so a server restart neither repeats an event nor misses one that
happened while it was down.  A job first met is looked at from its beginning when it was
created after the user's settings began to be watched (`Cursors.since`), else only from now:
turning notifications on never floods the user with old news.

Each event has an id made of what it is about (owner, job, its creation time, the phase or the
timeline `seq`), the same every time it is derived, so the outbox drops a second copy.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from paddle_nbext.model.contract import Phase, now_iso
from paddle_nbext.model.status import JobStatus

from .store import owner_key, private_dir, read_json, write_json

#: Phases that end a job, as events (a cancel is the user's own doing: no event).
PHASE_EVENTS = {str(Phase.FAILED): "failed", str(Phase.SUCCEEDED): "succeeded"}
#: Timeline warnings by their first word (health_rules' and the masters' wording).
WARNING_EVENTS = {"Stalled:": "stalled", "Memory:": "memory"}
#: Events that need the job's timeline read while it runs.
TIMELINE_EVENTS = frozenset({"stalled", "memory", "started"})


@dataclass(frozen=True)
class Found:
    """One event: what happened to which job, in the job's own words."""

    id: str
    kind: str  # a key of prefs.EVENTS
    owner: str
    job: str
    phase: str
    words: str
    time: str

    def to_dict(self) -> dict[str, Any]:
        return dict(vars(self))

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Found:
        return cls(**{key: str(data[key]) for key in ("id", "kind", "owner", "job", "phase", "words", "time")})


def event_id(owner: str, job: str, created: str, what: str) -> str:
    return hashlib.sha256("\0".join((owner, job, created, what)).encode("utf-8")).hexdigest()[:40]


@dataclass
class JobCursor:
    """How far one job has been looked at."""

    created: str
    phase: str | None  # None: not seen yet (a new job: every phase change counts)
    seq: int = 0  # the last timeline entry looked at
    waited: bool = False  # a `waiting` entry was seen (its `admitted` is a "started" event)


def phase_event(job: JobStatus, cursor: JobCursor) -> Found | None:
    """The job's end, when it ended since the cursor's look."""
    kind = PHASE_EVENTS.get(str(job.phase))
    if kind is None or cursor.phase == str(job.phase):
        return None
    words = job.message or ("the job ended successfully" if kind == "succeeded" else "the job failed")
    return Found(
        event_id(job.owner, job.name, job.created, f"phase:{job.phase}"),
        kind,
        job.owner,
        job.name,
        job.phase,
        words,
        job.finished or now_iso(),
    )


def timeline_events(job: JobStatus, cursor: JobCursor, entries: list[dict[str, Any]]) -> list[Found]:
    """The events among timeline entries after the cursor's `seq` (which it moves on).  A cursor
    at -1 (a job met after it began) only learns where the timeline is and whether it waits."""
    found: list[Found] = []
    baseline = cursor.seq < 0
    for entry in sorted(entries, key=lambda e: int(e.get("seq") or 0)):
        seq, kind, text = int(entry.get("seq") or 0), str(entry.get("kind") or ""), str(entry.get("text") or "")
        if seq <= cursor.seq:
            continue
        cursor.seq = seq
        event = None
        if kind == "warning":
            event = next((name for prefix, name in WARNING_EVENTS.items() if text.startswith(prefix)), None)
            text = text.split(":", 1)[1].strip() if event else text
        elif kind == "waiting":
            cursor.waited = True
        elif kind == "admitted" and cursor.waited:
            event, cursor.waited = "started", False
        if event is not None and not baseline:
            what = event_id(job.owner, job.name, job.created, f"timeline:{seq}")
            found.append(Found(what, event, job.owner, job.name, job.phase, text, str(entry.get("t") or now_iso())))
    cursor.seq = max(cursor.seq, 0)
    return found


def _parse(when: str) -> datetime | None:
    try:
        return datetime.fromisoformat(when.replace("Z", "+00:00"))
    except ValueError:
        return None


class Cursors:
    """One user's cursors, kept in `<state dir>/cursors/<user>.json` (blocking; call in a thread)."""

    def __init__(self, home: Path, owner: str, since: str | None = None) -> None:
        """`since`: when the user turned notifications on (their settings saved), for a user first
        looked at: a job submitted right after, before the first look, is news."""
        self.path = home / "cursors" / f"{owner_key(owner)}.json"
        data = read_json(self.path)
        data = data if isinstance(data, dict) and data.get("owner") == owner else {}
        self.owner = owner
        self.since: str = str(data.get("since") or since or now_iso())
        self.jobs: dict[str, JobCursor] = {}
        for name, raw in (data.get("jobs") or {}).items():
            if isinstance(raw, dict) and isinstance(raw.get("created"), str):
                phase = raw.get("phase")
                self.jobs[name] = JobCursor(
                    raw["created"], phase if isinstance(phase, str) else None, int(raw.get("seq") or 0), bool(raw.get("waited"))
                )
        self._saved = self._snapshot()

    def cursor(self, job: JobStatus) -> JobCursor:
        """The job's cursor; a job first met (or a new job under an old name) gets one that
        starts at its beginning if it is newer than `since`, else at what it is now."""
        cursor = self.jobs.get(job.name)
        if cursor is not None and cursor.created == job.created:
            return cursor
        created, since = _parse(job.created), _parse(self.since)
        fresh = created is not None and since is not None and created >= since
        cursor = JobCursor(job.created, None) if fresh else JobCursor(job.created, str(job.phase), seq=-1)
        self.jobs[job.name] = cursor
        return cursor

    def forget_others(self, names: set[str]) -> None:
        """Drop the cursors of jobs that are gone."""
        for name in list(self.jobs):
            if name not in names:
                del self.jobs[name]

    def _snapshot(self) -> dict[str, Any]:
        return {
            "owner": self.owner,
            "since": self.since,
            "jobs": {name: dict(vars(cursor)) for name, cursor in sorted(self.jobs.items())},
        }

    def save(self) -> None:
        """Write the cursors when they changed (after the events they found are in the outbox)."""
        snapshot = self._snapshot()
        if snapshot == self._saved and self.path.exists():
            return
        private_dir(self.path.parent)
        write_json(self.path, snapshot)
        self._saved = snapshot
