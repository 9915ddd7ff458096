"""A job's checkpoints as the server sees them (issue 26): listing them with their sizes, linking
an ended job's latest checkpoint into a new job that resumes from it, and what a delete frees.

The checkpoints themselves are written by the replicas (`runtime/paddle_nbext_checkpoints.py`) into
`<job dir>/checkpoints/` in the user's home, which the server reads at the same path (both
backends: the job dir is the one whose `logs/` hold the metrics files).  All of it blocks
(files): call it in a thread.
"""

from __future__ import annotations

import datetime
import json
import os
import shutil
import time
from pathlib import Path
from typing import Any

from ..runtime import paddle_nbext_checkpoints, paddle_nbext_fence

#: In a resumed job's checkpoint directory: which job and checkpoint it resumed from.  Retention
#: never removes it (it removes only checkpoint directories), so the link outlives the checkpoint.
RESUMED_FROM = "RESUMED_FROM.json"
#: Where a delete that keeps the checkpoints moves them, in the user's home.
KEPT_DIR = "paddle-checkpoints"
#: The attempt written into a linked checkpoint's manifest: no attempt of the new job has it, so
#: its replicas resume from it (`paddle_nbext_checkpoints.resume_from`).
LINKED_ATTEMPT = "resumed"


def iso(epoch: float) -> str:
    return datetime.datetime.fromtimestamp(epoch, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def resumed_from(directory: Path) -> dict[str, Any] | None:
    """`{"job", "step", "path"}` of the checkpoint a job resumed from, None if it was not resumed."""
    try:
        data = json.loads((directory / RESUMED_FROM).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def describe(directory: Path) -> dict[str, Any]:
    """The body of `GET /jobs/{name}/checkpoints`."""
    found = paddle_nbext_checkpoints.checkpoints(directory)
    items = [{"step": each.step, "time": iso(each.time), "size": each.size(), "path": each.path} for each in found]
    return {
        "directory": str(directory),
        "checkpoints": items,
        "latest": items[-1] if items else None,
        # Bytes the checkpoints take (the attempt markers, a few bytes of bookkeeping, are not one).
        "size": paddle_nbext_checkpoints.tree_size(directory)
        - paddle_nbext_checkpoints.tree_size(directory / paddle_nbext_fence.FENCE_SUBDIR),
        "resumed_from": resumed_from(directory),
    }


def link_checkpoint(source: paddle_nbext_checkpoints.Checkpoint, target: Path, job: str) -> paddle_nbext_checkpoints.Checkpoint:
    """Make `source` (an ended job's checkpoint) the first checkpoint of `target` (a new job's
    checkpoint directory): hard links where the filesystem allows (no copy of the data; the
    files are never rewritten in place, a save makes new ones), else copies; published the way
    the API publishes (a partial directory renamed into place).  Idempotent."""
    final = target / f"{paddle_nbext_checkpoints.STEP_PREFIX}{source.step:0{paddle_nbext_checkpoints.STEP_DIGITS}d}"
    if not (final / paddle_nbext_checkpoints.MANIFEST).is_file():
        target.mkdir(parents=True, exist_ok=True)
        partial = (
            target / f"{paddle_nbext_checkpoints.PARTIAL_PREFIX}{source.step:0{paddle_nbext_checkpoints.STEP_DIGITS}d}-{LINKED_ATTEMPT}"
        )
        shutil.rmtree(partial, ignore_errors=True)
        shutil.copytree(source.path, partial, copy_function=_link_or_copy, ignore=shutil.ignore_patterns(".rank-*.done"))
        manifest = {"step": source.step, "time": time.time(), "ranks": 1, "attempt": LINKED_ATTEMPT, "resumed_from": job}
        (partial / paddle_nbext_checkpoints.MANIFEST).unlink(missing_ok=True)  # a link: never write through it
        (partial / paddle_nbext_checkpoints.MANIFEST).write_text(json.dumps(manifest))
        os.rename(partial, final)
    link = {"job": job, "step": source.step, "path": source.path}
    (target / RESUMED_FROM).write_text(json.dumps(link))
    return paddle_nbext_checkpoints.Checkpoint(source.step, str(final), time.time())


def _link_or_copy(source: str, target: str) -> None:
    try:
        os.link(source, target)
    except OSError:
        shutil.copy2(source, target)


def keep_aside(directory: Path, job: str, home: Path) -> Path | None:
    """Move a job's checkpoints out of its job dir before the job is deleted, to
    `~/paddle-checkpoints/<job>-<UTC time>/` (outside the jobs dir, so nothing of paddle-nbext
    ever removes them); None when it has none."""
    if not paddle_nbext_checkpoints.checkpoints(directory):
        return None
    kept = home / KEPT_DIR / f"{job}-{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}"
    kept.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.rename(directory, kept)
    except OSError:  # another filesystem than the home's (a jobs dir elsewhere)
        shutil.copytree(directory, kept, copy_function=_link_or_copy, ignore=shutil.ignore_patterns(paddle_nbext_fence.FENCE_SUBDIR))
    # The job's attempt markers (`paddle_nbext_fence`) meant something to its replicas only.
    shutil.rmtree(kept / paddle_nbext_fence.FENCE_SUBDIR, ignore_errors=True)
    return kept


def resumed_checkpoint(directory: Path, attempt: str, started: float | None) -> paddle_nbext_checkpoints.Checkpoint | None:
    """The checkpoint the replicas of `attempt` (the `PADDLE_NBEXT_ATTEMPT` they run with) resumed
    from, seen from outside the job: `paddle_nbext_checkpoints.resume_from()`'s rule, the latest complete
    checkpoint that another attempt saved (or this one before its replicas `started`, epoch
    seconds: a queue's re-admission).  So it is the latest that existed when the restart began,
    also after this attempt saved its own.  None when there is none, or the directory cannot be
    read; never raises.

    None too until the attempt's fence marker is there: the replicas resume once their launcher
    has raised it, so only then does the fence exclude what the previous attempt's cut-off
    replicas published after the restart began (a checkpoint 0.075 s after it was once named
    "resumed from" while the replicas, rightly, loaded the one before)."""
    label = paddle_nbext_checkpoints._attempt({paddle_nbext_checkpoints.ATTEMPT_VAR: attempt})
    if not (directory / paddle_nbext_fence.FENCE_SUBDIR / label).is_file():
        return None
    try:
        every = paddle_nbext_checkpoints.checkpoints(directory)
        usable = [
            each for each in every if paddle_nbext_checkpoints._usable(paddle_nbext_checkpoints.manifest(each.path), label, started or 0.0)
        ]
    except Exception:  # a home that went away under the read: no words rather than no status
        return None
    return usable[-1] if usable else None


def resumed_words(checkpoint: paddle_nbext_checkpoints.Checkpoint) -> str:
    """`resumed from step 20` (`of job mnist-1` when it is the checkpoint Resume linked from an
    ended job), the local master's words."""
    origin = paddle_nbext_checkpoints.manifest(checkpoint.path).get("resumed_from")
    return f"resumed from step {checkpoint.step}" + (f" of job {origin}" if isinstance(origin, str) and origin else "")
