"""Resolving and snapshotting the trainer package, shared by both backends.

The package must be a directory inside the user's home (the home volume is what Kubernetes
replicas mount, and the local backend must not read other people's files).  With `snapshot`
the directory is copied into the job's own dir, so editing the notebook's files while a job runs
changes nothing in that job.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from paddle_nbext.spec import JobSpec, SpecError

ENTRY_SCRIPT_NAME = "paddle_entry.py"
SNAPSHOT_IGNORE = shutil.ignore_patterns(".paddle-jobs", ".ipynb_checkpoints", "__pycache__", ".git", "node_modules")
MAX_SNAPSHOT_BYTES = 512 * 1024 * 1024


def resolve_package(spec: JobSpec, home: Path) -> Path:
    """The package dir as an absolute real path inside `home`; SpecError on trainer_package otherwise."""
    home_real = Path(os.path.realpath(home))
    raw = spec.trainer_package or str(home_real)
    candidate = Path(os.path.expanduser(raw))
    if not candidate.is_absolute():
        candidate = home_real / candidate
    real = Path(os.path.realpath(candidate))
    if real != home_real and home_real not in real.parents:
        raise SpecError("trainer_package", f"'{raw}' is outside your home directory ({home_real}); put the code under it")
    if not real.exists():
        raise SpecError("trainer_package", f"'{raw}' does not exist; give a directory under {home_real}")
    if not real.is_dir():
        raise SpecError("trainer_package", f"'{raw}' is a file; give the directory that holds your training code")
    return real


def _tree_size(root: Path, limit: int) -> int:
    total = 0
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d not in (".paddle-jobs", ".ipynb_checkpoints", "__pycache__", ".git", "node_modules")]
        for filename in filenames:
            try:
                total += os.lstat(os.path.join(dirpath, filename)).st_size
            except OSError:
                continue
            if total > limit:
                return total
    return total


def make_snapshot(source: Path, target: Path, entry_script: str | None, *, max_bytes: int = MAX_SNAPSHOT_BYTES) -> Path:
    """Copy `source` to `target` (which must not exist), then write the cell's entry script.

    Refuses packages larger than `max_bytes` (a home dir with data sets in it is a common slip)."""
    size = _tree_size(source, max_bytes)
    if size > max_bytes:
        raise SpecError(
            "trainer_package",
            f"'{source}' holds more than {max_bytes // 2**20} MiB; point trainer_package at the code directory "
            "(keep data outside it) or set snapshot to false",
        )
    shutil.copytree(source, target, symlinks=True, ignore=SNAPSHOT_IGNORE)
    if entry_script is not None:
        (target / ENTRY_SCRIPT_NAME).write_text(entry_script, encoding="utf-8")
    return target
