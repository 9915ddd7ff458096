"""`report()`: training code tells paddle-nbext its step and metrics, in any image with Python 3
(users import it from `paddle_nbext_job`, which also holds the checkpoint API).

    from paddle_nbext_job import report
    report(step, total=steps, loss=float(loss), acc=accuracy)

The launcher puts this module on every replica's `PYTHONPATH` (the bundle's `pylib/`) and names
the replica's metrics file in `PADDLE_NBEXT_METRICS_FILE`, next to the replica's logs (local:
`<job dir>/logs/`, Kubernetes: `~/.paddle-jobs/<job>/logs/` on the home volume).  Each call
becomes one JSON line there, `{"t": epoch seconds, "step": n, "total": m or null, "m": {name:
value}}`, which the server reads for `GET /jobs/{name}/metrics`.  A trainer that runs several ranks
gives each its own file (rank 0 the replica's, rank r `<role>-<index>.rank-<r>.metrics.jsonl`) and
each point the rank too (`"rank": r`, from `PADDLE_NBEXT_RANK`).

A call costs a few microseconds: it converts the values to floats (so no tensor, and no autograd
graph behind one, is kept alive) and appends them to a list; a daemon thread writes the list out
every `FLUSH_SECONDS`, and once more at exit.  It never raises into training code: a value that
is not a finite number, a step that is not a whole number, a full disk or a file past its budget
(`PADDLE_NBEXT_METRICS_BUDGET` bytes) is counted, said once on stderr (the replica's log) and
summed up at exit.  Outside a job (no file named) every call returns at once and does nothing.

Three sources write these points, one at a time per process, so nothing is reported twice:
an explicit `report()` call; the `Model.fit` hook (`paddle_nbext_hapi`, through
`report_automatic`), which the first explicit `report()` turns off for the rest of the process;
and, in the launcher, the trainer's printed lines (`log_progress`), which stop once this process
writes: its first write leaves a claim beside the file (`CLAIM_SUFFIX`) that the launcher's
reader yields to (`Reporter(yield_to=...)`).

Standard library only, and nothing of paddle-nbext but the attempt fence: it is imported by user
code in job images (the bundle's `pylib/`).
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import shutil
import sys
import threading
import time
from collections import deque
from collections.abc import Mapping

if __package__:  # the installed package (the server reads checkpoints through this module)
    from . import paddle_nbext_fence as fence
else:  # a job's pylib/, where the fence module is shipped beside this one
    import paddle_nbext_fence as fence  # type: ignore[import-not-found,no-redef]

__all__ = ["Reporter", "flush", "report", "report_automatic", "reporter_from"]

#: The replica's metrics file, set by the launcher; unset or empty: `report` is a no-op.
FILE_VAR = "PADDLE_NBEXT_METRICS_FILE"
#: Bytes one replica's file may grow to; later points are dropped (counted, said once).
BUDGET_VAR = "PADDLE_NBEXT_METRICS_BUDGET"
#: The process's rank when its trainer runs several (set by the launcher), written into each point.
RANK_VAR = "PADDLE_NBEXT_RANK"
DEFAULT_BUDGET = 64 * 1024 * 1024
#: The buffer is written at least this often (seconds).
FLUSH_SECONDS = 0.5
PREFIX = "paddle-nbext report()"
#: Seconds the launcher's reader of built-in progress lines keeps its first points back, while
#: the code's own reports (flushed every FLUSH_SECONDS) may still claim the file.
YIELD_GRACE = 3.0
#: Beside a metrics file once its replica's own process wrote to it: the launcher's reader of
#: printed lines then stops writing there (log_progress.py).
CLAIM_SUFFIX = ".claimed"


def _budget(env: Mapping[str, str]) -> int:
    raw = env.get(BUDGET_VAR, "").strip()
    return int(raw) if raw.isdigit() else DEFAULT_BUDGET


class Reporter:
    """One replica's buffer and file.  `add` runs in the training thread and only appends;
    `flush` (the writer thread, exit, or an explicit `flush()`) formats and writes."""

    def __init__(
        self,
        path: str,
        budget: int = DEFAULT_BUDGET,
        *,
        interval: float = FLUSH_SECONDS,
        rank: int | None = None,
        yield_to: str | None = None,
        hold: float = 0.0,
    ) -> None:
        self.path = path
        # The launcher's reader of printed lines: it writes only until this claim exists (the
        # replica's own process wrote), and never takes the file over from that process.
        self.yield_to = yield_to
        self.yielded = False
        self.hold = hold  # seconds the first points wait for the claim (`_holding`)
        self.rank = rank
        # A rank of a trainer that runs several says which in every point (`"rank": r`).
        self._rank_text = "" if rank is None else f',"rank":{rank}'
        self.budget = budget
        self.interval = interval
        self.pending: deque[tuple[float, int, int | None, dict[str, float]]] = deque()
        self.written = 0  # bytes in the file (as found when first opened, plus what we wrote)
        self.invalid = 0  # calls or values refused
        self.dropped = 0  # points not written (disk error, budget)
        self._fd: int | None = None
        self._said: set[str] = set()
        self._names: dict[str, str] = {}  # metric name -> its JSON text
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        # The first point this process writes says so (`"start":true`): the server reads a
        # later start as a restart, whose points replace the earlier ones from its first step.
        self._started = False

    # -------------------------------------------------------------- the training thread
    def add(self, step: object, total: object, metrics: Mapping[str, object]) -> None:
        if type(step) is not int:
            if isinstance(step, bool) or not hasattr(step, "__index__"):
                self._refuse("step", step)
                return
            step = int(step.__index__())  # numpy and paddle integers
        if total is not None and type(total) is not int:
            if isinstance(total, bool) or not hasattr(total, "__index__"):
                self._refuse("total", total)
                return
            total = int(total.__index__())
        values: dict[str, float] = {}
        for name, raw in metrics.items():
            try:
                value = float(raw)  # type: ignore[arg-type]
            except (TypeError, ValueError, RuntimeError):
                self._refuse(name, raw)
                continue
            if value - value != 0.0:  # inf or nan, faster than math.isfinite plus a call
                self._refuse(name, raw)
                continue
            values[name] = value
        self.pending.append((time.time(), step, total, values))
        if self._thread is None:
            self._start()

    def _refuse(self, what: str, value: object) -> None:
        self.invalid += 1
        self.say_once(
            "invalid",
            f"ignored {what}={value!r:.80} (steps and totals must be whole numbers, metrics finite numbers); later ones are counted",
        )

    # -------------------------------------------------------------- the writer
    def _start(self) -> None:
        with self._lock:
            if self._thread is not None:
                return
            self._thread = threading.Thread(target=self._run, name="paddle-nbext-report", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.flush()

    def _line(self, point: tuple[float, int, int | None, dict[str, float]]) -> str:
        when, step, total, values = point
        names = self._names
        parts = []
        for name, value in values.items():
            text = names.get(name)
            if text is None:
                text = names[name] = json.dumps(str(name))
            parts.append(f"{text}:{value!r}")
        return f'{{"t":{when:.3f},"step":{step},"total":{"null" if total is None else total}{self._rank_text},"m":{{{",".join(parts)}}}}}\n'

    def flush(self, durable: bool = False) -> None:
        """Write what is buffered (`durable`: and make it reach the disk, a network file
        system's servers included); never raises."""
        self._flush()
        if durable and self._fd is not None:
            try:
                os.fsync(self._fd)
            except OSError as error:
                self.say_once("sync", f"cannot sync {self.path} ({error.strerror or error}); training goes on")

    def _holding(self) -> bool:
        """Whether the launcher's reader of printed lines (`yield_to`) still keeps its first points
        back: for `hold` seconds the code's own process may claim the file (its reports are
        flushed within `FLUSH_SECONDS`).  Written at once, they would mark a start of their own,
        which the code's first write would then read as a restart."""
        if self.yield_to is None or self._started or self._stop.is_set() or not self.pending:
            return False
        return time.time() - self.pending[0][0] < self.hold and not os.path.exists(self.yield_to)

    def _flush(self) -> None:
        with self._lock:
            if self._holding():
                return
            pending = self.pending
            points = [pending.popleft() for _ in range(len(pending))]  # atomic pops: a racing add is kept
            if not points:
                return
            try:
                lines = [self._line(point).encode("utf-8") for point in points]
                if not self._started:
                    lines[0] = lines[0][:-2] + b',"start":true}\n'
                    self._started = True
            except Exception as error:  # a metric name that is not text, say
                self.invalid += len(points)
                self.say_once("format", f"could not format {len(points)} points ({error}); they are dropped")
                return
            self._write(lines)

    def _open(self) -> int:
        if self._fd is None:
            directory = os.path.dirname(self.path)
            if directory:
                os.makedirs(directory, exist_ok=True)
            if self.yield_to is None:
                _take_over(self.path)
                _claim(self.path + CLAIM_SUFFIX)
            flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | getattr(os, "O_CLOEXEC", 0)
            self._fd = os.open(self.path, flags, 0o644)
            _adopt_directory_owner(self.path, self._fd)
            self.written = os.fstat(self._fd).st_size
        return self._fd

    def _write(self, lines: list[bytes]) -> None:
        if self.yield_to is not None and (self.yielded or os.path.exists(self.yield_to)):
            if not self.yielded:
                self.yielded = True
                self.say_once("yielded", "the training code reports its progress itself; printed lines are no longer read")
            return
        newer = fence.newer_attempt()
        if newer is not None:  # the job restarted whole without this attempt: its curves are the new one's
            self.dropped += len(lines)
            self.say_once("fenced", f"the job restarted whole as attempt {newer}; this replica's points are dropped")
            return
        try:
            fd = self._open()
            room, fitting = self.budget - self.written, 0
            for line in lines:
                if len(line) > room:
                    break
                room -= len(line)
                fitting += 1
            if fitting < len(lines):
                self.dropped += len(lines) - fitting
                self.say_once("budget", f"{self.path} reached its budget of {self.budget} bytes ({BUDGET_VAR}); later points are dropped")
            view = memoryview(b"".join(lines[:fitting]))
            while view:
                view = view[os.write(fd, view) :]
                self.written = self.budget - room - len(view)
        except OSError as error:
            self.dropped += len(lines)
            self.say_once("write", f"cannot write {self.path} ({error.strerror or error}); training goes on, points are dropped")

    def say_once(self, kind: str, message: str) -> None:
        if kind in self._said:
            return
        self._said.add(kind)
        try:
            print(f"{PREFIX}: {message}", file=sys.stderr, flush=True)
        except Exception:  # a closed stderr must not matter either
            pass

    def close(self) -> None:
        """Stop the writer, write the rest, and sum up what was refused or dropped."""
        self._stop.set()
        self.flush()
        if self.invalid or self.dropped:
            try:
                print(f"{PREFIX}: {self.invalid} values refused, {self.dropped} points not written", file=sys.stderr, flush=True)
            except Exception:
                pass
        with self._lock:
            fd, self._fd = self._fd, None
        if fd is not None:
            try:
                os.close(fd)
            except OSError:
                pass

    def forget_after_fork(self) -> None:
        """In a forked child (a data loader worker, say): a fresh buffer and writer of its own."""
        self.pending = deque()
        self._lock = threading.Lock()
        self._thread = None
        self._stop = threading.Event()
        self._fd = None
        self._started = True  # the parent's points and the child's are one run


def _claim(path: str) -> None:
    """Leave the claim that makes the launcher's reader of printed lines stop (best effort)."""
    with contextlib.suppress(OSError):
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o644))


def _adopt_directory_owner(path: str, fd: int) -> None:
    """A replica running as root (some images do) would leave a root file in the user's home
    that the notebook cannot delete with the job: give it the owner of its directory."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return
    try:
        directory = os.stat(os.path.dirname(path) or ".")
        if os.fstat(fd).st_uid != directory.st_uid:
            os.fchown(fd, directory.st_uid, directory.st_gid)
    except OSError:
        pass


def _take_over(path: str) -> None:
    """Give this process a file of its own under `path`: a copy of what is there, renamed over
    it.  An earlier process of the replica (a whole-job restart's previous attempt, still running
    on a node cut off from the others) may still hold unwritten points of the old file in its
    file system client's cache; written later, they land in the old file, never over this one's
    points (CephFS writes back a client's cache when its session comes back)."""
    try:
        if os.stat(path).st_size == 0:
            return
    except OSError:
        return
    staging = f"{path}.{os.getpid()}.{threading.get_ident()}.copy"
    try:
        shutil.copyfile(path, staging)
        with open(staging, "rb+") as copy:
            # What the earlier process's client wrote back last may end inside a line: end it,
            # or this process's first point would be glued to it and lost.
            if copy.seek(0, os.SEEK_END) and (copy.seek(-1, os.SEEK_END), copy.read(1))[1] != b"\n":
                copy.write(b"\n")
        os.replace(staging, path)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(staging)


def reporter_from(env: Mapping[str, str]) -> Reporter | None:
    """The reporter a replica with this environment uses; None outside a job."""
    path = env.get(FILE_VAR, "").strip()
    rank = env.get(RANK_VAR, "").strip()
    return Reporter(path, _budget(env), rank=int(rank) if rank.isdigit() else None) if path else None


_reporter = reporter_from(os.environ)
if _reporter is not None:
    atexit.register(_reporter.close)
    if hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=_reporter.forget_after_fork)


#: True once the code called `report()` itself: the automatic sources stop for this process.
_explicit = False


def report(step: int, total: int | None = None, **metrics: float) -> None:
    """Record this replica's `step` (of `total`, if known) and metric values; never raises.
    The first call turns the automatic `Model.fit` reports off for the rest of the process."""
    global _explicit
    _explicit = True
    reporter = _reporter
    if reporter is None:
        return
    try:
        reporter.add(step, total, metrics)
    except Exception:
        pass


def report_automatic(step: int, total: int | None, metrics: Mapping[str, object]) -> bool:
    """What the `Model.fit` hook reports: as `report`, unless the code has called `report` itself
    (then nothing, and False: the hook stops).  Never raises."""
    reporter = _reporter
    if _explicit or reporter is None:
        return False
    try:
        reporter.add(step, total, metrics)
    except Exception:
        pass
    return True


def flush(durable: bool = False) -> None:
    """Write what `report` buffered now (it is written within a second anyway); `durable`: and
    make it reach the disk (a checkpoint does: the curve it resumes on must survive the node)."""
    if _reporter is not None:
        _reporter.flush(durable)
