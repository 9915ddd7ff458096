"""The local job dir's record files: read and written so that no reader ever sees half of one.

Files are written atomically and durably (`write_atomic`: a sibling temp file, fsync, rename,
fsync of the dir), so a crash or power loss leaves the old record or the new one, never a
truncated or empty file; and read without following symlinks, without blocking on a FIFO and
up to `MAX_RECORD_BYTES` (`read_text`).  What a file holds and how its JSON is checked is
`records` (the types and their codecs) and `record_json`.
"""

from __future__ import annotations

import contextlib
import os
import stat
import threading
import time
from pathlib import Path
from typing import TypeVar

from .record_json import RecordDamaged
from .records import JobRecord, Plan, StatusRecord

#: The job dir's file naming its master's pid (`read_master_pid`).
MASTER_PID_FILE = "master.pid"

Record = TypeVar("Record", JobRecord, Plan, StatusRecord)

#: Records are small (a spec, a few hundred replicas); a bigger file is damage, not a record.
MAX_RECORD_BYTES = 32 << 20


def read_text(path: Path) -> str:
    """A record file's text.  OSError when absent or not a regular file (a symlink is not
    followed, a FIFO is not waited on), `RecordDamaged` when larger than `MAX_RECORD_BYTES`,
    UnicodeDecodeError (a ValueError) when not UTF-8."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise OSError(f"{path.name} is not a regular file")
        data = handle.read(MAX_RECORD_BYTES + 1)
    if len(data) > MAX_RECORD_BYTES:
        raise RecordDamaged(f"it is larger than {MAX_RECORD_BYTES >> 20} MiB")
    return data.decode("utf-8")


def read_master_pid(job_dir: Path) -> int | None:
    """The pid in the job's `master.pid` (written when its master starts); None when the file is
    absent, unreadable (`read_text`: no symlink, no FIFO) or names no pid above 1."""
    try:
        pid = int(read_text(job_dir / MASTER_PID_FILE).strip())
    except (OSError, ValueError):
        return None
    return pid if pid > 1 else None


def read_record(kind: type[Record], job_dir: Path) -> Record:
    """The record of type `kind` in `job_dir` (its file is `kind.KIND`).  OSError when absent,
    `RecordDamaged`/ValueError when unreadable, `NewerRecord` when too new."""
    return kind.from_json(read_text(job_dir / kind.KIND))


def write_record(job_dir: Path, record: JobRecord | Plan | StatusRecord) -> None:
    """Write `record` to its file in `job_dir` (`write_atomic`)."""
    write_atomic(job_dir / record.KIND, record.to_json())


def write_atomic(path: Path, text: str) -> None:
    """Replace `path` by `text` so that readers, a crash and a power loss only ever leave the old
    file or the new one: a sibling temp file is written and fsynced, renamed over `path`, and the
    dir fsynced so the rename itself is on disk.  The temp file is removed if anything fails.

    The new file's mtime is later than the old one's, even when the clock has not moved on
    (coarse timestamps, a clock stepped back): readers tell versions apart by (mtime, size,
    inode) without reading (`store.signature`), and file systems reuse the inode of the version
    before last, so an equal mtime and size would hide a change, such as a job's end."""
    try:
        before = os.stat(path).st_mtime_ns
    except OSError:
        before = 0
    stamp = max(time.time_ns(), before + 1)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(text.encode("utf-8"))
            handle.flush()
            os.utime(handle.fileno(), ns=(stamp, stamp))
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    _fsync_dir(path.parent)


def _fsync_dir(directory: Path) -> None:
    """Make a rename in `directory` durable (best effort: some file systems refuse it)."""
    try:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
