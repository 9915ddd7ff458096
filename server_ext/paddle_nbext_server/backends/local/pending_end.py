"""A job's end that its own directory cannot take yet (a full disk, a read-only remount, changed
permissions), kept where the server finds it.

The master records every state in the job dir (`status.json`).  When the end cannot be written
there, the master keeps it in a private runtime dir of the user instead, keeps retrying the job
dir, and removes this copy once the end is recorded.  Meanwhile the server shows that end, with
the path and the error that keep it from the job dir, instead of a job that looks "Running" for
ever; and nothing is lost: the end is written as soon as the directory can take it.

The copy is named by a digest of the job dir's path, in `$XDG_RUNTIME_DIR/paddle-nbext` (else
`<tmp>/paddle-nbext-<uid>`), a dir only its owner may enter; a copy in a dir of anybody else's
is never read.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import stat
import tempfile
from pathlib import Path

from .record_files import write_atomic


@functools.cache
def runtime_dir() -> Path:
    """The user's private dir for pending ends (made 0700 when missing; looked up once)."""
    runtime = os.environ.get("XDG_RUNTIME_DIR", "")
    base = (
        Path(runtime) / "paddle-nbext"
        if runtime and os.path.isdir(runtime)
        else Path(tempfile.gettempdir()) / f"paddle-nbext-{os.getuid()}"
    )
    base.mkdir(mode=0o700, parents=True, exist_ok=True)
    return base


def _private(directory: Path) -> bool:
    """Only a dir of our own that nobody else may write counts (another user could plant a copy)."""
    try:
        info = os.lstat(directory)
    except OSError:
        return False
    return stat.S_ISDIR(info.st_mode) and info.st_uid == os.getuid() and not info.st_mode & 0o022


def path_for(job_dir: Path) -> Path:
    digest = hashlib.sha256(str(job_dir.resolve()).encode()).hexdigest()[:32]
    return runtime_dir() / f"{digest}.end.json"


def write(job_dir: Path, status_json: str, error: str) -> None:
    """Keep the end (`StatusRecord` JSON) and why the job dir refused it."""
    body = {"job_dir": str(job_dir.resolve()), "error": error, "status": status_json}
    write_atomic(path_for(job_dir), json.dumps(body))


def read(job_dir: Path) -> tuple[str, str] | None:
    """(the `StatusRecord` JSON, the error) of a pending end of this job dir, else None."""
    path = path_for(job_dir)
    if not _private(path.parent):
        return None
    try:
        body = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(body, dict) or body.get("job_dir") != str(job_dir.resolve()) or not isinstance(body.get("status"), str):
        return None
    return body["status"], str(body.get("error") or "")


def signature(job_dir: Path) -> tuple[int, int, int] | None:
    """Whether (and which version of) a pending end exists: one `stat`."""
    try:
        info = os.stat(path_for(job_dir))
    except OSError:
        return None
    return (info.st_mtime_ns, info.st_size, info.st_ino)


def clear(job_dir: Path) -> None:
    with contextlib.suppress(OSError):
        path_for(job_dir).unlink()
