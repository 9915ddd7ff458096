"""Small files on disk for notifications, written so a crash leaves the old version or the new
one, never half of either: a private temp file fsynced, renamed over the target, and the dir
fsynced.  Blocking: callers on the event loop go through `asyncio.to_thread`.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import threading
from pathlib import Path
from typing import Any


def private_dir(path: Path) -> Path:
    """`path`, made (0700: settings hold addresses and webhook tokens) when missing."""
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    return path


def owner_key(owner: str) -> str:
    """A file name for a user: any user name (slashes, dots, unicode) maps to a safe, fixed-length one."""
    return hashlib.sha256(owner.encode("utf-8")).hexdigest()[:32]


def write_json(path: Path, data: Any) -> None:
    """Replace `path` by `data` as JSON, atomically and durably (mode 0600)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(json.dumps(data, separators=(",", ":")).encode("utf-8"))
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    sync_dir(path.parent)


def sync_dir(directory: Path) -> None:
    """Make a rename or a new name in `directory` survive a power loss."""
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def read_json(path: Path) -> Any:
    """The JSON in `path`; None when it is missing or damaged (a damaged file is as good as none)."""
    try:
        return json.loads(path.read_bytes())
    except (OSError, ValueError):
        return None
