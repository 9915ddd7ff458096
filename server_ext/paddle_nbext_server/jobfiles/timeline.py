"""A job's timeline: one ordered list of what happened to it, with times, in words.

Stored as `timeline.jsonl` in the job's dir, one JSON object per line:

    {"seq": 7, "t": "2026-12-05T14:02:11.250Z", "kind": "warning", "text": "trainer 1 uses ...",
     "role": "trainer", "index": 1}

`seq` counts entries from 1 and never goes back, so a reader asks for what came after the last
`seq` it saw (`GET /jobs/{name}/timeline?since=7`, the `timeline` event) and a rewrite that
bounds the file never makes a reader see an entry twice.  `kind` is one of `KINDS`; `role` and
`index` are there when the entry is about one replica.  A writer that derives entries again from
what it sees (the Kubernetes backend's server) gives each a stable `key`, kept on the line (never
in an answer: `Entry.to_dict(public=True)`), so it can tell what it has written already.

Why a file in the job dir rather than the server's memory: the local job's master, a detached
process, sees almost everything first (admission, starts, exits, restarts, warnings) and must be
able to say it while no server runs; a restarted server reads the file and shows the same list.

Bounded: a job restarting or warning for days must not grow a file without end.  When a writer
finds more than `MAX_ENTRIES` lines it rewrites the file (atomically) with the first `KEEP_HEAD`
entries (how the job began), one `omitted` entry saying how many were dropped, and the newest
`KEEP_TAIL`; readers skip lines they cannot parse (a line cut by a crash).

Standard library only: the master and the server both import it.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from paddle_nbext.model.contract import now_iso

FILE = "timeline.jsonl"

#: The kinds of entry, in the order a job usually meets them.
KINDS = (
    "submitted",
    "waiting",
    "admitted",
    "started",
    "environment",
    "first_step",
    "checkpoint",
    "warning",
    "recovered",
    "restart",
    "resumed",
    "replica_ended",
    "ended",
    "omitted",
)
#: Kinds that deserve a notification where they are shown live (the panel, the CLI).
NOTIFY_KINDS = frozenset({"warning", "restart"})

MAX_ENTRIES = 500
KEEP_HEAD = 20
KEEP_TAIL = 400
#: The longest text an entry keeps (a replica's failure line can be long).
MAX_TEXT = 500


@dataclass(frozen=True)
class Entry:
    seq: int
    t: str
    kind: str
    text: str
    role: str | None = None
    index: int | None = None
    #: What the entry is about, stable across derivations (the Kubernetes backend's dedup key).
    key: str | None = None

    def to_dict(self, public: bool = False) -> dict[str, Any]:
        """The line's object; `public`: the answer's (without the writer's `key`)."""
        data: dict[str, Any] = {"seq": self.seq, "t": self.t, "kind": self.kind, "text": self.text}
        if self.role is not None:
            data["role"] = self.role
            data["index"] = self.index
        if self.key is not None and not public:
            data["key"] = self.key
        return data

    @classmethod
    def from_dict(cls, data: Any) -> Entry | None:
        """The entry a line holds; None for anything that is not one (never raises)."""
        if not isinstance(data, dict):
            return None
        seq, t, kind, text = data.get("seq"), data.get("t"), data.get("kind"), data.get("text")
        if isinstance(seq, bool) or not isinstance(seq, int) or not all(isinstance(v, str) for v in (t, kind, text)):
            return None
        role, index = data.get("role"), data.get("index")
        if not isinstance(role, str) or isinstance(index, bool) or not isinstance(index, int):
            role, index = None, None
        key = data.get("key")
        return cls(seq=seq, t=t, kind=kind, text=text, role=role, index=index, key=key if isinstance(key, str) else None)  # type: ignore[arg-type]


def read(job_dir: Path | str, since: int = 0) -> list[Entry]:
    """The job's entries after `since`, oldest first; [] when it has none (or no file yet)."""
    try:
        with open(Path(job_dir) / FILE, "rb") as handle:
            raw = handle.read()
    except OSError:
        return []
    entries = []
    for line in raw.splitlines():
        try:
            entry = Entry.from_dict(json.loads(line))
        except ValueError:
            continue
        if entry is not None and entry.seq > since:
            entries.append(entry)
    entries.sort(key=lambda entry: entry.seq)
    return entries


class TimelineWriter:
    """Appends entries to one job's timeline; the job's single writer (its master).

    Never raises: a timeline that cannot be written (a full disk) must not stop a job, and the
    entries are simply missing from it."""

    def __init__(self, job_dir: Path | str) -> None:
        self.path = Path(job_dir) / FILE
        existing = read(job_dir)
        self.seq = existing[-1].seq if existing else 0
        self.lines = len(existing)
        self.kinds_seen = {entry.kind for entry in existing}
        self.written = False  # whether the last `add` reached the file

    def add(
        self, kind: str, text: str, *, role: str | None = None, index: int | None = None, t: str | None = None, key: str | None = None
    ) -> Entry:
        self.seq += 1
        entry = Entry(seq=self.seq, t=t or now_iso(), kind=kind, text=text[:MAX_TEXT], role=role, index=index, key=key)
        line = json.dumps(entry.to_dict(), separators=(",", ":")) + "\n"
        self.written = False
        with contextlib.suppress(OSError):
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o644)
            try:
                os.write(fd, line.encode("utf-8"))
            finally:
                os.close(fd)
            self.lines += 1
            self.written = True
        self.kinds_seen.add(kind)
        if self.lines > MAX_ENTRIES:
            self._bound()
        return entry

    def _bound(self) -> None:
        """Keep the first `KEEP_HEAD` and the newest `KEEP_TAIL` entries, and say how many went."""
        entries = read(self.path.parent)
        if len(entries) <= MAX_ENTRIES:
            self.lines = len(entries)
            return
        head, tail = entries[:KEEP_HEAD], entries[-KEEP_TAIL:]
        dropped = len(entries) - len(head) - len(tail)
        marker = Entry(
            seq=tail[0].seq - 1 if tail[0].seq - 1 > head[-1].seq else head[-1].seq,
            t=tail[0].t,
            kind="omitted",
            text=f"{dropped} earlier entries were dropped to keep the timeline short",
        )
        kept = [*head, marker, *[entry for entry in tail if entry.seq > marker.seq]]
        kept_seqs = {entry.seq for entry in kept if entry is not marker}  # the marker takes a dropped one's seq
        self.dropping([entry for entry in entries if entry.seq not in kept_seqs])
        write_lines(self.path, (json.dumps(entry.to_dict(), separators=(",", ":")) for entry in kept))
        self.lines = len(kept)

    def dropping(self, entries: list[Entry]) -> None:
        """Called with the entries a bounding rewrite is about to drop, before it writes (a
        writer that must remember what it wrote keeps their keys elsewhere)."""


def write_lines(path: Path, lines: Iterable[str]) -> None:
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with contextlib.suppress(OSError):
        temporary.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
        os.replace(temporary, path)
