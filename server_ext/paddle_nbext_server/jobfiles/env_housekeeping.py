"""Housekeeping of jobs' Python environments (issue 25; `runtime/environments.py` builds them):
what the user has under the envs dir (`<jobs dir>/envs`), how big each is, when a job last
started with it and which running job uses it; and removing those no running job uses.

Removal is safe against a job building the same environment at that moment: it takes the
environment's build lock (`.locks/<key>.lock`, the one builders hold) without waiting, renames
the directory to a hidden `.<key>.removing-*` name while holding it (so no job can find a
half-removed environment; a job that starts later simply builds it again), and only then
deletes the files.  A lock held by someone else means "being built or removed right now": the
environment is skipped (prune) or the request is a 409 (delete).

Blocking file work throughout: the handlers run these functions in a thread.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import shutil
import tempfile
import time
from collections.abc import Collection, Iterator, Mapping
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from paddle_nbext.model.contract import format_time

from ..errors import BackendError, InvalidState
from ..runtime import environments
from ..runtime.paddle_nbext_job import tree_size

#: In the envs dir: lock files and build notes, and the installers' download caches.
LOCKS_DIR = ".locks"
CACHE_DIR = ".cache"
DAY = 86400.0
#: A build directory this old whose lock nobody holds is what a crashed build left.
LEFTOVER_AGE = DAY
DEFAULT_UNUSED_DAYS = 30
KEY = re.compile(r"^[0-9a-f]{16}$")
_LEFTOVER = re.compile(r"^\.(?:(?P<key>[0-9a-f]{16})\.(?P<kind>building|removing)|cache\.(?P<cache>removing))-")
_FAILED = ".failed.json"


class EnvironmentNotFound(BackendError):
    status = 404
    code = "not_found"


def iso(epoch: Any) -> str | None:
    """An epoch time as the API writes times, None when there is none."""
    if not isinstance(epoch, (int, float)) or isinstance(epoch, bool) or epoch <= 0:
        return None
    return format_time(datetime.fromtimestamp(epoch, timezone.utc))


@contextlib.contextmanager
def build_lock(envs_dir: Path, key: str) -> Iterator[bool]:
    """Hold the environment's build lock when nobody holds it now (yields True), else yield
    False at once.  Lock files stay: removing one another process may have open would let two
    holders in."""
    locks = envs_dir / LOCKS_DIR
    try:
        locks.mkdir(exist_ok=True)
        fd = os.open(locks / f"{key}.lock", os.O_RDWR | os.O_CREAT, 0o644)
    except OSError:
        yield False
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            yield False
            return
        yield True
    finally:
        os.close(fd)


def _building_now(envs_dir: Path) -> bool:
    """Whether some job holds a build lock now (so it may be writing into the cache)."""
    try:
        names = os.listdir(envs_dir / LOCKS_DIR)
    except OSError:
        return False
    for name in names:
        key = name.removesuffix(".lock")
        if name.endswith(".lock") and KEY.match(key):
            with build_lock(envs_dir, key) as free:
                if not free:
                    return True
    return False


def _hide(envs_dir: Path, name: str) -> Path:
    """Rename `envs_dir/name` to a hidden `.<name>.removing-*` name beside it (`.cache` to
    `.cache.removing-*`); returns that path."""
    hidden = Path(tempfile.mkdtemp(prefix=f".{name.lstrip('.')}.removing-", dir=envs_dir))
    try:
        os.replace(envs_dir / name, hidden)  # a directory onto an empty one: atomic
    except OSError:
        with contextlib.suppress(OSError):
            hidden.rmdir()
        raise
    return hidden


def _last_used(path: Path, info: Mapping[str, Any]) -> float:
    try:
        return (path / environments.LAST_USED_FILE).stat().st_mtime
    except OSError:
        value = info.get("built")
        return float(value) if isinstance(value, (int, float)) else 0.0


def _strings(value: Any) -> list[str]:
    return [str(each) for each in value] if isinstance(value, list) else []


def _text(value: Any) -> str | None:
    return str(value) if isinstance(value, (str, int, float)) and not isinstance(value, bool) and str(value) else None


def _entry(info: Mapping[str, Any], in_use: Mapping[str, list[str]], own_jobs: Collection[str]) -> dict[str, Any]:
    path = Path(str(info["path"]))
    key = path.name
    built_by = _text(info.get("built_by"))
    return {
        "key": key,
        "requirements": _strings(info.get("requirements")),
        "requirements_file": _text(info.get("requirements_file")),
        "python": _text(info.get("python")),
        "image": _text(info.get("image")),
        "installer": _text(info.get("installer")),
        "packages": _strings(info.get("installed")),
        "size": tree_size(path),
        "built": iso(info.get("built")),
        # Environments of a shared jobs dir may have been built by another user's job: only
        # the caller's own job names are shown.
        "built_by": built_by if built_by in own_jobs else None,
        "last_used": iso(info.get("last_used")),
        "in_use_by": sorted(in_use.get(key, [])),
    }


def describe(envs_dir: Path, in_use: Mapping[str, list[str]], own_jobs: Collection[str]) -> dict[str, Any]:
    """`GET /environments`: every built environment, most recently used first, with the totals."""
    found = environments.environments(str(envs_dir))
    found.sort(key=lambda info: (-float(info.get("last_used") or 0), str(info["path"])))
    entries = [_entry(info, in_use, own_jobs) for info in found]
    return {
        "path": str(envs_dir),
        "environments": entries,
        "count": len(entries),
        "bytes": sum(entry["size"] for entry in entries),
        "cache_bytes": tree_size(envs_dir / CACHE_DIR),
    }


def in_use_words(jobs: list[str]) -> str:
    return f"running job{'s' if len(jobs) > 1 else ''} {', '.join(sorted(jobs))}"


def remove(envs_dir: Path, key: str, in_use: Mapping[str, list[str]]) -> dict[str, Any]:
    """`DELETE /environments/{key}`: remove one environment; 404 when there is none, 409 when a
    running job uses it or its lock is held."""
    path = envs_dir / key
    if not (path / environments.INFO_FILE).is_file():
        raise EnvironmentNotFound(f"no environment {key} in {envs_dir}", "key")
    users = in_use.get(key)
    if users:
        raise InvalidState(f"environment {key} is in use by {in_use_words(users)}; remove it once that job has ended", "key")
    with build_lock(envs_dir, key) as free:
        if not free:
            raise InvalidState(f"environment {key} is being built or used right now; try again in a moment", "key")
        if not (path / environments.INFO_FILE).is_file():
            raise EnvironmentNotFound(f"no environment {key} in {envs_dir}", "key")
        size = tree_size(path)
        try:
            hidden = _hide(envs_dir, key)
        except OSError as error:
            raise InvalidState(f"environment {key} cannot be removed: {error.strerror or error}", "key") from None
    shutil.rmtree(hidden, ignore_errors=True)  # what is left (a file of another owner) goes at the next prune
    return {"key": key, "size": size}


def prune(
    envs_dir: Path,
    in_use: Mapping[str, list[str]],
    *,
    unused_days: float = DEFAULT_UNUSED_DAYS,
    dry_run: bool = False,
    cache: bool = False,
    now: float | None = None,
) -> dict[str, Any]:
    """`POST /environments/prune`: remove the environments no job started with for `unused_days`
    and no running job uses, what crashed builds and removals left, and remembered build
    failures of jobs that are not running; with `cache`, the installers' download cache too.
    With `dry_run`, say what would go and remove nothing."""
    now = time.time() if now is None else now
    cutoff = now - unused_days * DAY
    running = {job for jobs in in_use.values() for job in jobs}
    removed: list[dict[str, Any]] = []
    kept: list[dict[str, Any]] = []
    for info in environments.environments(str(envs_dir)):
        path = Path(str(info["path"]))
        key = path.name
        if float(info.get("last_used") or 0) >= cutoff:
            continue
        users = in_use.get(key)
        if users:
            kept.append({"key": key, "reason": f"in use by {in_use_words(users)}"})
            continue
        with build_lock(envs_dir, key) as free:
            if not free:
                kept.append({"key": key, "reason": "being built or used right now"})
                continue
            last_used = _last_used(path, info)
            if last_used >= cutoff:  # a job started with it since it was listed
                kept.append({"key": key, "reason": "a job started with it just now"})
                continue
            item = {"key": key, "size": tree_size(path), "last_used": iso(last_used), "packages": len(_strings(info.get("installed")))}
            hidden = None
            if not dry_run:
                try:
                    hidden = _hide(envs_dir, key)
                except OSError as error:
                    kept.append({"key": key, "reason": f"cannot be removed: {error.strerror or error}"})
                    continue
        if hidden is not None:
            shutil.rmtree(hidden, ignore_errors=True)
        removed.append(item)
    leftovers = _leftovers(envs_dir, now, dry_run)
    failures = _failure_notes(envs_dir, running, dry_run)
    cache_part = _cache(envs_dir, dry_run) if cache else None
    freed = sum(item["size"] for item in removed) + sum(item["size"] for item in leftovers) + (cache_part or {}).get("size", 0)
    return {
        "dry_run": dry_run,
        "unused_days": unused_days,
        "removed": removed,
        "kept": kept,
        "leftovers": leftovers,
        "failures": failures,
        "cache": cache_part,
        "freed": freed,
    }


def _leftovers(envs_dir: Path, now: float, dry_run: bool) -> list[dict[str, Any]]:
    """Hidden directories of crashed builds (older than a day, their lock free) and of removals
    that did not finish."""
    found = []
    try:
        names = sorted(os.listdir(envs_dir))
    except OSError:
        return []
    for name in names:
        match = _LEFTOVER.match(name)
        path = envs_dir / name
        if match is None or not path.is_dir() or path.is_symlink():
            continue
        if match.group("kind") == "building":
            try:
                age = now - path.stat().st_mtime
            except OSError:
                continue
            if age < LEFTOVER_AGE:
                continue
            with build_lock(envs_dir, match.group("key")) as free:
                if not free:
                    continue  # a build in progress (a long one)
        size = tree_size(path)
        if not dry_run:
            shutil.rmtree(path, ignore_errors=True)
        found.append({"name": name, "size": size})
    return found


def _failure_notes(envs_dir: Path, running: Collection[str], dry_run: bool) -> list[str]:
    """Remembered build failures (`.locks/<key>.failed.json`), except those of a running job
    (its retries must fail with the same words rather than build again)."""
    locks = envs_dir / LOCKS_DIR
    try:
        names = sorted(os.listdir(locks))
    except OSError:
        return []
    keys = []
    for name in names:
        key = name.removesuffix(_FAILED)
        if not name.endswith(_FAILED) or not KEY.match(key):
            continue
        note = environments.read_json(str(locks / name)) or {}
        if note.get("job") in running:
            continue
        if not dry_run:
            with contextlib.suppress(OSError):
                (locks / name).unlink()
        keys.append(key)
    return keys


def _cache(envs_dir: Path, dry_run: bool) -> dict[str, Any]:
    """Empty the installers' download cache, unless a build is running (it may be reading it)."""
    path = envs_dir / CACHE_DIR
    size = tree_size(path)
    if size == 0 and not path.exists():
        return {"size": 0, "emptied": False, "reason": None}
    if _building_now(envs_dir):
        return {"size": 0, "emptied": False, "reason": "a job is building an environment now; prune the cache later"}
    if not dry_run:
        try:
            hidden = _hide(envs_dir, CACHE_DIR)
        except OSError as error:
            return {"size": 0, "emptied": False, "reason": f"cannot be removed: {error.strerror or error}"}
        shutil.rmtree(hidden, ignore_errors=True)
    return {"size": size, "emptied": True, "reason": None}
