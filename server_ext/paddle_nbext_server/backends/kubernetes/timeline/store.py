"""A Kubernetes job's `timeline.jsonl`, written by the server (its only writer) in the job's logs
dir in the home, and read back for `GET /jobs/{name}/timeline`.

The server derives entries again and again from what it sees (timeline_objects, timeline_home),
also after a restart, so it must know what it has written already.  Each line carries its
entry's stable `key` (written in the same `write` as the entry, so an entry and its key are never
apart), and the keys of entries that a bounding rewrite drops are kept in a small sidecar,
`timeline.keys` (appended to before the rewrite): without them a restarted server would add the
dropped entries again, as new ones, at the end.  The sidecar is bounded too (`MAX_KEPT_KEYS`, the
newest kept): a key older than that is about an object that is long gone.

Keys are scoped by the job record's uid (`<uid>/<key>`): a job submitted again under the name of
an ended one whose folder stayed (no snapshot, the record expired) starts a timeline of its own,
the earlier one kept beside it as `timeline.<its uid>.jsonl`.

Ordering: `seq` is the order entries were written, and stays the reader's cursor (`since`); an
entry derived late (the server was down when it happened) has an older `t` than entries written
before it.  The answer lists entries by `t` (then `seq`), and `last` is the highest `seq` in it,
so a client asking `since=last` still gets every entry written after, and places each by `t`.
"""

from __future__ import annotations

import contextlib
import os
import threading
from pathlib import Path
from typing import Any

from paddle_nbext.model.contract import parse_time

from ....jobfiles import timeline
from .home import Signature, signature
from .objects import Derived

KEYS_FILE = "timeline.keys"
MAX_KEPT_KEYS = 4000


class KeyedTimeline(timeline.TimelineWriter):
    """`timeline.TimelineWriter` that remembers the keys it wrote, durably, for the job whose
    record has the uid `scope`."""

    def __init__(self, logs_dir: Path, scope: str = "") -> None:
        self.prefix = f"{scope}/" if scope else ""
        self.keys_path = logs_dir / KEYS_FILE
        _set_aside_another_jobs(logs_dir, self.prefix)
        super().__init__(logs_dir)
        self.keys: set[str] = {entry.key for entry in timeline.read(logs_dir) if entry.key}
        self.keys.update(_kept_keys(self.keys_path))

    def add_new(self, entries: list[Derived]) -> list[timeline.Entry]:
        """Write the entries whose key is new, oldest first (one per key); what was written."""
        fresh: dict[str, Derived] = {}
        for entry in sorted(entries, key=lambda each: (each.epoch, each.key)):
            key = self.prefix + entry.key
            if key not in self.keys and key not in fresh:
                fresh[key] = entry
        written = []
        for key, entry in fresh.items():
            added = self.add(entry.kind, entry.text, role=entry.role, index=entry.index, t=entry.t, key=key)
            if not self.written:
                break  # the file cannot be written now (a full disk): the rest waits for the next pass
            self.keys.add(key)
            written.append(added)
        return written

    def has(self, key: str) -> bool:
        """Whether the entry of (unscoped) `key` is written."""
        return self.prefix + key in self.keys

    def dropping(self, entries: list[timeline.Entry]) -> None:
        keys = [entry.key for entry in entries if entry.key]
        if not keys:
            return
        kept = [*_kept_keys(self.keys_path), *keys]
        with contextlib.suppress(OSError):
            if len(kept) > MAX_KEPT_KEYS:
                timeline.write_lines(self.keys_path, kept[-MAX_KEPT_KEYS // 2 :])
            else:
                with open(self.keys_path, "a", encoding="utf-8") as handle:
                    handle.write("".join(f"{key}\n" for key in keys))


def _set_aside_another_jobs(logs_dir: Path, prefix: str) -> None:
    """Move the timeline of an earlier job of the same name (keys of another scope) aside."""
    if not prefix:
        return
    keys = [entry.key for entry in timeline.read(logs_dir) if entry.key]
    if not keys or any(key.startswith(prefix) for key in keys):
        return
    other = keys[0].split("/", 1)[0] if "/" in keys[0] else "earlier"
    with contextlib.suppress(OSError):
        os.replace(logs_dir / timeline.FILE, logs_dir / f"timeline.{other}.jsonl")
        (logs_dir / KEYS_FILE).unlink(missing_ok=True)


def _kept_keys(path: Path) -> list[str]:
    try:
        return [line for line in path.read_text(encoding="utf-8").splitlines() if line]
    except OSError:
        return []


class TimelineFiles:
    """Reads jobs' timeline files for answers, each parsed again only when it changed."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._read: dict[Path, tuple[Signature, list[timeline.Entry]]] = {}

    def forget(self, logs_dir: Path) -> None:
        with self._lock:
            self._read.pop(logs_dir, None)

    def entries(self, logs_dir: Path) -> list[timeline.Entry] | None:
        """The file's entries, None when there is no file."""
        seen = signature(logs_dir / timeline.FILE)
        if seen is None:
            return None
        with self._lock:
            cached = self._read.get(logs_dir)
        if cached is not None and cached[0] == seen:
            return cached[1]
        entries = timeline.read(logs_dir)
        with self._lock:
            self._read[logs_dir] = (seen, entries)
        return entries

    def answer(self, logs_dir: Path, name: str, since: int, problem: str | None) -> dict[str, Any]:
        """`GET /jobs/{name}/timeline`: the entries after `since`, by time (see the module's
        docstring); `available: false` only while there is no file and the server says why."""
        entries = self.entries(logs_dir)
        if entries is None and problem:
            return {"name": name, "available": False, "reason": problem, "entries": [], "last": since}
        after = [entry for entry in entries or [] if entry.seq > since]
        after.sort(key=lambda entry: (_epoch(entry.t), entry.seq))
        return {
            "name": name,
            "available": True,
            "reason": None,
            "entries": [entry.to_dict(public=True) for entry in after],
            "last": max((entry.seq for entry in after), default=since),
        }


def _epoch(text: str) -> float:
    moment = parse_time(text)
    return moment.timestamp() if moment is not None else 0.0


def ensure_dir(logs_dir: Path) -> str | None:
    """Make the job's logs dir when its job folder exists (never the folder itself: a job being
    deleted must not get it back); the problem in words when it cannot."""
    if not logs_dir.parent.is_dir():
        return "the job's folder is not in the home yet (its replicas have not started)"
    try:
        os.makedirs(logs_dir, exist_ok=True)
    except OSError as error:
        return f"the job's logs folder cannot be written ({error.strerror or error})"
    return None
