"""Replica logs of local jobs: `logs/<role>-<index>.log` (and `.previous.log` after a restart),
written by the master; read whole, tailed, or followed until the replica ends.

Reading a tail costs what the tail costs, not what the file does (`log_tail.read_end`: backwards
from the end, in bounded memory).  Following reads only what was appended since the last step, starts over when a restart rotated
the file (new inode), and never cuts a UTF-8 character in two between chunks.  All functions
block (files): the backend runs them in threads.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from ...jobfiles.log_tail import read_end
from ..base import replica_not_found
from .record_files import read_record
from .record_json import NewerRecord
from .records import StatusRecord
from .store import JobStore

#: Bytes of a partial UTF-8 character a chunk may end with (a character is at most 4 bytes).
_MAX_CONTINUATION = 4


def log_path(store: JobStore, name: str, owner: str, role: str, index: int, previous: bool) -> tuple[Path, Path]:
    """(job dir, the replica's log file) of the owner's job; 404 naming the field (`role` or
    `index`) when it has no such replica."""
    job_dir, files = store.owned(name, owner)
    files.require_manageable()
    known = {(r.role, r.index) for r in files.record.status.replicas}
    if (role, index) not in known:
        raise replica_not_found(name, role, index, sum(1 for r, _ in known if r == role))
    return job_dir, job_dir / "logs" / f"{role}-{index}{'.previous' if previous else ''}.log"


def tail(text: str, lines: int | None) -> str:
    """The last `lines` lines of `text` (all of it for None)."""
    if lines is None:
        return text
    if lines <= 0:
        return ""
    return "".join(text.splitlines(keepends=True)[-lines:])


def read_log(path: Path, lines: int | None) -> str:
    """The log's text (a replica that never started has none yet), or its last `lines` lines."""
    try:
        with open(path, "rb") as handle:
            data, _ = read_end(handle, lines)
    except FileNotFoundError:
        return ""
    return tail(data.decode("utf-8", errors="replace"), lines)


def replica_ended(job_dir: Path, role: str, index: int) -> bool:
    """No more output will come: the job ended, or this replica ended and will not restart."""
    try:
        record = read_record(StatusRecord, job_dir)
    except NewerRecord:
        return True  # this code cannot tell; a follower must not hang on a job it cannot read
    except (OSError, ValueError):
        return not job_dir.exists()
    return record.replica_ended(role, index)


@dataclass
class Follow:
    """Where a follower of one replica's log is."""

    job_dir: Path
    path: Path
    role: str
    index: int
    position: int = 0
    inode: int | None = None
    partial: bytes = b""  # the start of a UTF-8 character whose rest is not written yet

    def start_at_tail(self, lines: int) -> str:
        """The log's last `lines` lines; following continues after them."""
        try:
            with open(self.path, "rb") as handle:
                data, self.position = read_end(handle, lines)
                self.inode = os.fstat(handle.fileno()).st_ino
        except FileNotFoundError:
            return ""
        return tail(data.decode("utf-8", errors="replace"), lines)

    def step(self) -> tuple[str, bool]:
        """(text appended since the last step, whether the replica has ended).  The end is
        checked before reading, so the last output is always part of the final step."""
        ended = replica_ended(self.job_dir, self.role, self.index)
        try:
            with open(self.path, "rb") as handle:
                inode = os.fstat(handle.fileno()).st_ino
                if inode != self.inode:  # a restart rotated the log: start the new one
                    self.inode, self.position = inode, 0
                handle.seek(self.position)
                data = handle.read()
                self.position += len(data)
        except FileNotFoundError:
            data = b""
        pending = self.partial + data
        cut = len(pending) if ended else _complete_prefix(pending)
        self.partial = pending[cut:]
        return pending[:cut].decode("utf-8", errors="replace"), ended


def _complete_prefix(data: bytes) -> int:
    """Length of the longest prefix of `data` that does not end inside a UTF-8 character."""
    cut = len(data)
    while cut > 0 and cut > len(data) - _MAX_CONTINUATION and (data[cut - 1] & 0xC0) == 0x80:
        cut -= 1
    if cut > 0 and data[cut - 1] >= 0xC0:
        cut -= 1
    return cut
