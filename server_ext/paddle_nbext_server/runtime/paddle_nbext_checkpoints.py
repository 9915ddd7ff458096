"""Checkpoints of a job's training code: `save_checkpoint`, `latest`, `resume_from` (users import
them from `paddle_nbext_job`).

    import paddle, paddle_nbext_job as job
    start = 0
    resume = job.resume_from()            # the same for every rank of this attempt
    if resume is not None:
        model.set_state_dict(paddle.load(resume.file("model.pdparams")))
        opt.set_state_dict(paddle.load(resume.file("opt.pdopt")))
        start = resume.step + 1
    for step in range(start, steps):
        ...
        if step % 100 == 0 and rank == 0:
            with job.save_checkpoint(step, ranks=1) as directory:
                paddle.save(model.state_dict(), os.path.join(directory, "model.pdparams"))
                paddle.save(opt.state_dict(), os.path.join(directory, "opt.pdopt"))

Layout of the job's checkpoint directory (`PADDLE_NBEXT_CHECKPOINT_DIR`, in the user's home,
the same for every replica and every attempt of the job):
  step-<12 digits>/                   a complete checkpoint: its files and CHECKPOINT.json
  .attempts/<attempt>                 when each whole-job attempt began (paddle_nbext_fence)
  .partial-<12 digits>-<attempt>/     one being written; every saving rank leaves
                                      `.rank-<r>.done` in it when its files are written, and
                                      the rank that completes the count renames the directory
                                      to step-<n> (one atomic rename: never half visible)
A crash in the middle of a save leaves only a partial directory, which no reader looks at and
the next publish of a later attempt removes.

Why a checkpoint is published by one rename: a reader (a resumed attempt, the server's list) must
never see half of one, whatever rank crashes where.  Standard library only, and nothing of
paddle-nbext but the attempt fence and `report()`'s flush: it is imported by user code in job
images (the bundle's `pylib/`).
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import threading
import time
from collections.abc import Mapping

if __package__:  # the installed package (the server reads checkpoints through this module)
    from . import paddle_nbext_fence as fence
    from . import paddle_nbext_report
else:  # a job's pylib/, where the fence and report modules are shipped beside this one
    import paddle_nbext_fence as fence  # type: ignore[import-not-found,no-redef]
    import paddle_nbext_report  # type: ignore[import-not-found,no-redef]

__all__ = [
    "Checkpoint",
    "CheckpointError",
    "checkpoint_dir",
    "checkpoints",
    "latest",
    "manifest",
    "prune",
    "resume_from",
    "save_checkpoint",
]

#: The job's checkpoint directory (set by both backends); unset: `save_checkpoint` needs `directory=`.
CHECKPOINT_DIR_VAR = "PADDLE_NBEXT_CHECKPOINT_DIR"
#: How many complete checkpoints a publish keeps (the job field `keep_checkpoints`).
KEEP_VAR = "PADDLE_NBEXT_KEEP_CHECKPOINTS"
#: The checkpoint this attempt of the job resumes from (its directory and step), set by the job's
#: runner when the job starts or restarts whole; unset when it starts from scratch.
RESUME_VAR = "PADDLE_NBEXT_RESUME_FROM"
RESUME_STEP_VAR = "PADDLE_NBEXT_RESUME_STEP"
#: Which whole-job start this is (a partial checkpoint of another attempt is a dead one).
ATTEMPT_VAR = "PADDLE_NBEXT_ATTEMPT"
DEFAULT_KEEP = 3
#: The checkpoint directory's name inside the job's directory (`~/.paddle-jobs/<job>/checkpoints`).
CHECKPOINTS_SUBDIR = "checkpoints"
MANIFEST = "CHECKPOINT.json"
STEP_PREFIX = "step-"
PARTIAL_PREFIX = ".partial-"
STEP_DIGITS = 12


class CheckpointError(RuntimeError):
    """A checkpoint that cannot be saved: no directory, a bad step, or the save itself failed."""


class Checkpoint:
    """One complete checkpoint: its `step`, directory `path` and publish `time` (epoch seconds)."""

    __slots__ = ("step", "path", "time")

    def __init__(self, step: int, path: str, time: float) -> None:
        self.step = step
        self.path = path
        self.time = time

    def file(self, name: str) -> str:
        """The path of one file of the checkpoint, e.g. `file("model.pdparams")`."""
        return os.path.join(self.path, name)

    def size(self) -> int:
        """Bytes of its files."""
        return tree_size(self.path)

    def to_dict(self) -> dict[str, object]:
        return {"step": self.step, "path": self.path, "time": self.time, "size": self.size()}

    def __repr__(self) -> str:
        return f"Checkpoint(step={self.step}, path={self.path!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Checkpoint) and (self.step, self.path) == (other.step, other.path)

    def __hash__(self) -> int:
        return hash((self.step, self.path))


def tree_size(path: str | os.PathLike[str]) -> int:
    """Bytes of the files under `path` (0 when it does not exist)."""
    total = 0
    for root, _, names in os.walk(path):
        for name in names:
            try:
                total += os.lstat(os.path.join(root, name)).st_size
            except OSError:
                pass
    return total


def checkpoint_dir(env: Mapping[str, str] | None = None) -> str | None:
    """The job's checkpoint directory, None outside a job."""
    value = (os.environ if env is None else env).get(CHECKPOINT_DIR_VAR, "").strip()
    return value or None


def _directory(directory: str | os.PathLike[str] | None) -> str:
    found = os.fspath(directory) if directory is not None else checkpoint_dir()
    if not found:
        raise CheckpointError(f"no checkpoint directory: outside a paddle-nbext job pass directory= (or set {CHECKPOINT_DIR_VAR})")
    return found


def _step_of(name: str, prefix: str) -> int | None:
    digits = name[len(prefix) :].split("-", 1)[0] if name.startswith(prefix) else ""
    return int(digits) if digits.isdigit() and digits.isascii() else None


def checkpoints(directory: str | os.PathLike[str] | None = None) -> list[Checkpoint]:
    """Every complete checkpoint, oldest step first (none when the directory does not exist)."""
    found = os.fspath(directory) if directory is not None else checkpoint_dir()
    if not found:
        return []
    try:
        names = os.listdir(found)
    except OSError:
        return []
    result = []
    for name in names:
        step = _step_of(name, STEP_PREFIX)
        if step is None or len(name) != len(STEP_PREFIX) + STEP_DIGITS:
            continue
        path = os.path.join(found, name)
        try:
            when = os.stat(os.path.join(path, MANIFEST)).st_mtime
        except OSError:
            continue  # not one we published
        result.append(Checkpoint(step, path, when))
    known = fence.fences(os.path.join(found, fence.FENCE_SUBDIR))
    if len(known) > 1:  # a whole restart happened: what a superseded attempt saved late is not one
        result = [each for each in result if not _stale(manifest(each.path), known)]
    return sorted(result, key=lambda each: each.step)


def _stale(record: Mapping[str, object], known: Mapping[str, float]) -> bool:
    return fence.stale(record.get("attempt"), record.get("time"), known)


def latest(directory: str | os.PathLike[str] | None = None) -> Checkpoint | None:
    """The complete checkpoint of the highest step, None when there is none."""
    every = checkpoints(directory)
    return every[-1] if every else None


def resume_from(env: Mapping[str, str] | None = None) -> Checkpoint | None:
    """The checkpoint this attempt starts from, the same for every rank: the one the job's
    runner named when it started the job (`PADDLE_NBEXT_RESUME_FROM`; set empty: from scratch),
    else the latest one not saved by this attempt after this process started (a rank that starts
    late must not take what a faster rank of its own attempt saved meanwhile: with
    `PADDLE_NBEXT_ATTEMPT` a checkpoint of another attempt, or of this one from before this process
    started, as after a queue suspended and re-admitted the job), else `latest()`.  None: start
    from scratch."""
    source = os.environ if env is None else env
    path = source.get(RESUME_VAR, "").strip()
    if path:
        step = source.get(RESUME_STEP_VAR, "").strip()
        number = int(step) if step.isdigit() else _step_of(os.path.basename(path.rstrip("/")), STEP_PREFIX)
        if number is not None:
            try:
                when = os.stat(os.path.join(path, MANIFEST)).st_mtime
            except OSError:
                when = 0.0
            return Checkpoint(number, path, when)
    if source.get(RESUME_VAR) is not None:  # the runner said: from scratch
        return None
    every = checkpoints(checkpoint_dir(source))
    if source.get(ATTEMPT_VAR, "").strip():
        attempt, started = _attempt(source), process_started()
        every = [each for each in every if _usable(manifest(each.path), attempt, started)]
    return every[-1] if every else None


def _usable(record: Mapping[str, object], attempt: str, started: float) -> bool:
    saved = record.get("time")
    before = isinstance(saved, (int, float)) and not isinstance(saved, bool) and saved < started
    return record.get("attempt") != attempt or before


_IMPORTED = time.time()


def process_started() -> float:
    """When this process started (epoch seconds; from /proc, else when this module was imported)."""
    try:
        with open("/proc/self/stat") as handle:
            fields = handle.read().rsplit(")", 1)[1].split()
        ticks = int(fields[19])  # starttime: clock ticks after boot (field 22 of proc(5))
        with open("/proc/stat") as handle:
            boot = next(int(line.split()[1]) for line in handle if line.startswith("btime "))
        return boot + ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, StopIteration):
        return _IMPORTED


def manifest(path: str) -> dict[str, object]:
    """A complete checkpoint's CHECKPOINT.json (`step`, `time`, `ranks`, `attempt`; a resumed
    job's first checkpoint also `resumed_from`, the job it came from); {} when unreadable."""
    try:
        with open(os.path.join(path, MANIFEST)) as handle:
            data = json.load(handle)
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _rank() -> int:
    for name in ("PADDLE_GLOBAL_RANK", "PADDLE_TRAINER_ID"):
        value = os.environ.get(name, "").strip()
        if value.isdigit():
            return int(value)
    return 0


def _world() -> int:
    for name in ("PADDLE_GLOBAL_SIZE", "PADDLE_TRAINERS_NUM"):
        value = os.environ.get(name, "").strip()
        if value.isdigit() and int(value) > 0:
            return int(value)
    return 1


def _keep(keep: int | None) -> int:
    if keep is not None:
        return keep
    raw = os.environ.get(KEEP_VAR, "").strip()
    return int(raw) if raw.isdigit() else DEFAULT_KEEP


def _attempt(env: Mapping[str, str] | None = None) -> str:
    return fence.attempt_name(env)


class save_checkpoint:  # noqa: N801 - used as `with save_checkpoint(step) as directory:`
    """`with save_checkpoint(step) as directory:` write this rank's files of the checkpoint of
    `step` into `directory`; the checkpoint becomes visible (`latest()`) only once every one of
    the `ranks` saving ranks left the block without an exception.

    `ranks`: how many ranks save this step (default: every rank of the job); with one saving rank
    (`if rank == 0:`) pass `ranks=1`.  Ranks that save share the directory, so each writes files
    of its own names (`model.rank-3.pdparams`).  `rank` defaults to the process's global rank.
    `keep`: complete checkpoints to keep (default: the job's `keep_checkpoints`, else 3); the
    publishing rank removes older ones.  `durable=True` also flushes the files to disk before
    publishing (survives a machine crash, costs a sync).  An exception in the block discards
    this rank's part, and a crash leaves only a partial directory: the previous checkpoint stays
    the latest either way."""

    def __init__(
        self,
        step: int,
        *,
        ranks: int | None = None,
        rank: int | None = None,
        keep: int | None = None,
        directory: str | os.PathLike[str] | None = None,
        durable: bool = False,
    ) -> None:
        if type(step) is not int:
            if isinstance(step, bool) or not hasattr(step, "__index__"):
                raise CheckpointError(f"step must be a whole number, got {step!r:.80}")
            step = int(step.__index__())
        if not 0 <= step < 10**STEP_DIGITS:
            raise CheckpointError(f"step must be between 0 and {10**STEP_DIGITS - 1}, got {step}")
        self.step = step
        self.ranks = _world() if ranks is None else ranks
        self.rank = _rank() if rank is None else rank
        if self.ranks < 1 or not 0 <= self.rank:
            raise CheckpointError(f"ranks must be at least 1 and rank at least 0, got ranks={self.ranks}, rank={self.rank}")
        self.keep = _keep(keep)
        self.root = _directory(directory)
        self.durable = durable
        self.attempt = _attempt()
        self.partial = os.path.join(self.root, f"{PARTIAL_PREFIX}{step:0{STEP_DIGITS}d}-{self.attempt}")
        self.final = os.path.join(self.root, f"{STEP_PREFIX}{step:0{STEP_DIGITS}d}")
        #: The published checkpoint once this rank's save completed it, else None.
        self.published: Checkpoint | None = None

    def __enter__(self) -> str:
        # What this process reported up to the checkpoint is on disk before the checkpoint can
        # be: a crash after it, or the loss of its node, loses no point the resumed curve goes
        # on from (on a network file system, unsynced writes live in the node's client cache).
        paddle_nbext_report.flush(durable=True)
        os.makedirs(self.partial, exist_ok=True)
        return self.partial

    def __exit__(self, kind: object, error: object, trace: object) -> None:
        if kind is not None:
            return  # this rank's part never counts; the partial dir goes with the next publish
        self.publish()

    def publish(self) -> Checkpoint | None:
        """Mark this rank's part done; the rank that completes the count publishes."""
        if self.durable:
            _sync_tree(self.partial)
        marker = os.path.join(self.partial, f".rank-{self.rank}.done")
        with open(marker, "w") as handle:
            handle.write(f"{time.time():.3f}\n")
        try:
            names = os.listdir(self.partial)
        except FileNotFoundError:  # the last rank counted this marker and published meanwhile
            return self._published_by_peer()
        done = [name for name in names if name.startswith(".rank-") and name.endswith(".done")]
        if len(done) < self.ranks:
            return None
        newer = fence.newer_attempt()
        if newer is not None:  # the job restarted whole without this attempt: publish nothing
            _remove_tree(self.partial)
            raise CheckpointError(
                f"checkpoint of step {self.step} discarded: this job restarted whole as attempt {newer} "
                f"while attempt {self.attempt} still ran (its node was lost or cut off)"
            )
        record = {"step": self.step, "time": time.time(), "ranks": self.ranks, "attempt": self.attempt}
        staging = os.path.join(self.partial, f".{MANIFEST}.{self.rank}")
        with open(staging, "w") as handle:
            json.dump(record, handle)
        try:
            os.replace(staging, os.path.join(self.partial, MANIFEST))
        except FileNotFoundError:
            return self._published_by_peer()
        if self.durable:
            _sync_tree(self.partial)
        try:
            self._rename_into_place()
        except FileNotFoundError:
            return self._published_by_peer()
        self.published = Checkpoint(self.step, self.final, time.time())
        prune(self.root, self.keep, newest=self.step)
        return self.published

    def _rename_into_place(self) -> None:
        try:
            os.rename(self.partial, self.final)
            return
        except OSError as error:
            if not os.path.isdir(self.final) or isinstance(error, FileNotFoundError):
                raise
        # An earlier attempt published this step already: this attempt's replaces it.
        old = os.path.join(self.root, f".old-{self.step:0{STEP_DIGITS}d}-{self.attempt}-{self.rank}")
        os.rename(self.final, old)
        os.rename(self.partial, self.final)
        _remove_tree(old)

    def _published_by_peer(self) -> Checkpoint | None:
        """Another rank completed the count at the same moment and renamed the directory first."""
        if os.path.isfile(os.path.join(self.final, MANIFEST)):
            self.published = Checkpoint(self.step, self.final, time.time())
        return self.published


def prune(directory: str | os.PathLike[str], keep: int, *, newest: int | None = None, wait: bool = False) -> list[int]:
    """Retire complete checkpoints beyond the newest `keep` (0: keep all) and the partial
    directories of dead attempts (another attempt's, at or below `newest`); the retired steps.

    Retiring is one rename each (to `.deleting-...`: no longer a checkpoint, at once); the files
    are removed by a background thread, so a training loop never waits for the disk to free
    100 MB (`wait=True` waits; at exit the module waits too; what a crash leaves is removed by
    the next prune)."""
    root = os.fspath(directory)
    removed: list[int] = []
    every = checkpoints(root)
    doomed: list[str] = []
    if keep > 0:
        for old in every[: max(0, len(every) - keep)]:
            doomed.append(old.path)
            removed.append(old.step)
    try:
        names = os.listdir(root)
    except OSError:
        names = []
    attempt = _attempt()
    for name in names:
        if name.startswith((DELETING_PREFIX, ".old-")):
            doomed.append(os.path.join(root, name))
            continue
        step = _step_of(name, PARTIAL_PREFIX)
        if newest is None or step is None or step > newest:
            continue
        if not name.endswith(f"-{attempt}") or step < newest:
            doomed.append(os.path.join(root, name))
    retired = []
    for path in doomed:
        name = os.path.basename(path)
        if name.startswith(DELETING_PREFIX):
            retired.append(path)
            continue
        target = os.path.join(root, f"{DELETING_PREFIX}{name.lstrip('.')}-{os.getpid()}-{time.monotonic_ns()}")
        try:
            os.rename(path, target)
        except OSError:
            continue  # gone already (another rank's prune)
        retired.append(target)
    if retired:
        worker = threading.Thread(target=_remove_all, args=(retired,), name="paddle-nbext-prune", daemon=True)
        worker.start()
        _removals.append(worker)
        if wait:
            worker.join()
    return removed


#: A retired checkpoint or partial directory being removed (`prune`).
DELETING_PREFIX = ".deleting-"
_removals: list[threading.Thread] = []


def _remove_all(paths: list[str]) -> None:
    for path in paths:
        shutil.rmtree(path, ignore_errors=True)


def wait_for_removals() -> None:
    """Wait until every retired checkpoint's files are removed (at exit, and for tests)."""
    while _removals:
        _removals.pop().join()


atexit.register(wait_for_removals)


def _remove_tree(path: str) -> None:
    shutil.rmtree(path, ignore_errors=True)


def _sync_tree(path: str) -> None:
    for root, _, names in os.walk(path):
        for name in names:
            try:
                fd = os.open(os.path.join(root, name), os.O_RDONLY)
            except OSError:
                continue
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
