"""The content hash of every file in a job's package snapshot, for comparing runs' code
(`GET /compare`, `comparison.code_differences`).

A snapshot is written once at submit and never changed by paddle-nbext, so its manifest is
worked out once per snapshot and kept (`ManifestCache`, keyed by the directory and its inode and
change time, so a job deleted and submitted again under the same name is hashed anew).  Reading
is bounded like the snapshot itself (`package.MAX_SNAPSHOT_FILES`, `MAX_SNAPSHOT_BYTES`), never
follows a link (the snapshot holds none; one put there later is skipped) and never raises for a
file that cannot be read: its hash is empty, so it differs from every readable one.  Blocking: call it in a
thread.
"""

from __future__ import annotations

import hashlib
import os
import stat
import threading
from collections import OrderedDict
from pathlib import Path

from .package import MAX_SNAPSHOT_BYTES, MAX_SNAPSHOT_FILES, SKIPPED_NAMES

#: Snapshots whose manifests are kept (the most recently compared).
CACHED_MANIFESTS = 64
_CHUNK = 1024 * 1024
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC

#: A manifest: relative path (with `/`) -> sha256 hex of its content ("" for a file that could
#: not be read, so it differs from any readable one).
Manifest = dict[str, str]


def _hash_file(path: str) -> str:
    try:
        descriptor = os.open(path, _READ_FLAGS)
    except OSError:
        return ""
    digest = hashlib.sha256()
    try:
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):
            return ""
        while chunk := os.read(descriptor, _CHUNK):
            digest.update(chunk)
    except OSError:
        return ""
    finally:
        os.close(descriptor)
    return digest.hexdigest()


def read_manifest(root: Path, max_files: int = MAX_SNAPSHOT_FILES, max_bytes: int = MAX_SNAPSHOT_BYTES) -> Manifest:
    """Hash every regular file under `root` (sorted walk, its own stack), at most `max_files`
    files and `max_bytes` bytes (a snapshot is never larger; a directory grown past that after
    the fact is compared as far as the bounds reach)."""
    manifest: Manifest = {}
    pending = [""]
    read = 0
    while pending:
        relative = pending.pop()
        try:
            entries = sorted(os.scandir(root / relative) if relative else os.scandir(root), key=lambda entry: entry.name)
        except OSError:
            continue
        for entry in entries:
            if entry.name in SKIPPED_NAMES:
                continue
            path = f"{relative}/{entry.name}" if relative else entry.name
            try:
                info = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if stat.S_ISDIR(info.st_mode):
                pending.append(path)
            elif stat.S_ISREG(info.st_mode):
                if len(manifest) >= max_files or read + info.st_size > max_bytes:
                    return manifest
                read += info.st_size
                manifest[path] = _hash_file(entry.path)
    return manifest


class ManifestCache:
    """Manifests of the snapshots compared lately, worked out once each."""

    def __init__(self, limit: int = CACHED_MANIFESTS) -> None:
        self._manifests: OrderedDict[tuple[str, int, int], Manifest] = OrderedDict()
        self._limit = limit
        self._lock = threading.Lock()

    def manifest(self, root: Path) -> Manifest | None:
        """The snapshot's manifest, None when there is no snapshot at `root`."""
        try:
            info = os.stat(root)
        except OSError:
            return None
        if not stat.S_ISDIR(info.st_mode):
            return None
        key = (str(root), info.st_ino, info.st_ctime_ns)
        with self._lock:
            known = self._manifests.get(key)
            if known is not None:
                self._manifests.move_to_end(key)
                return known
        manifest = read_manifest(root)
        with self._lock:
            self._manifests[key] = manifest
            while len(self._manifests) > self._limit:
                self._manifests.popitem(last=False)
        return manifest
