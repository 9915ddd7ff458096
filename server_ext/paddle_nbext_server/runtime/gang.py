"""How a trainer's launcher runs its ranks: one child process per rank, supervised as one.

* Output: every line a rank writes goes to the launcher's stdout (the local replica log, the
  pod's log) and to the attempt file when there is one, prefixed `[rank <r>] `, whole lines
  only, so a reader tells the ranks apart and two ranks never interleave inside a line (what
  `torchrun --tee` and launch's `workerlog.<r>` files give, in the one log the panel shows).
* Signals: SIGTERM, SIGINT and SIGHUP to the launcher go on to every rank; once they all ended
  the launcher ends with 128 + N, as a shell reports a process stopped by signal N.
* Failures: the first rank that ends with a non-zero code (not stopped by us) fails the trainer:
  the other ranks get SIGTERM, SIGKILL after `STOP_GRACE_SECONDS`, and the launcher's last line
  is `trainer <i> rank <r> failed: <that rank's last exception line>` (the line every backend
  then reads as the failure reason), its exit code the rank's.
* Processes: the launcher is a child subreaper and, where the job runner keeps the output itself
  (`supervised`, the local backend), it kills everything below it when the runner dies, as
  `supervise.run_supervised` does for one process.

Standard library only: this file is shipped into every job.
"""

from __future__ import annotations

import collections
import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from types import FrameType

if __package__:
    from . import policy, supervise
else:  # a plain script: the bundle's files beside this one
    import policy  # type: ignore[import-not-found,no-redef]
    import supervise  # type: ignore[import-not-found,no-redef]

#: Seconds the other ranks get to end after SIGTERM when one rank failed, before SIGKILL.
STOP_GRACE_SECONDS = 5.0
#: Seconds the output pumps keep reading after every rank ended (a background process a rank
#: left may hold its pipe open for ever).
DRAIN_SECONDS = 2.0
#: Lines of each rank's own output kept to find its failure line.
TAIL_LINES = 200
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
FORWARDED = (*STOP_SIGNALS, signal.SIGQUIT, signal.SIGUSR1)


def rank_prefix(rank: int) -> bytes:
    """What each line of rank `rank`'s output starts with in the trainer's log."""
    return f"[rank {rank}] ".encode()


class Output:
    """Where the ranks' lines go: fd 1 and `copy` (the attempt file), one whole line at a time."""

    def __init__(self, copy: Callable[[bytes], None] | None) -> None:
        self.copy = copy
        self.lock = threading.Lock()
        self.stdout_ok = True

    def line(self, data: bytes) -> None:
        with self.lock:
            if self.stdout_ok:
                try:
                    view = memoryview(data)
                    while view:
                        view = view[os.write(1, view) :]
                except OSError:
                    self.stdout_ok = False  # the runtime's pipe is gone; the file still gets everything
            if self.copy is not None:
                self.copy(data)


class Rank:
    """One rank's process, its output pump and what it said last."""

    def __init__(self, rank: int, process: subprocess.Popen[bytes], output: Output) -> None:
        self.rank = rank
        self.process = process
        self.code: int | None = None
        self.stopped = False  # it was still running when we stopped it
        self.tail: collections.deque[str] = collections.deque(maxlen=TAIL_LINES)
        assert process.stdout is not None
        self.pump = threading.Thread(
            target=self._pump, args=(process.stdout.fileno(), output), name=f"paddle-nbext-rank-{rank}", daemon=True
        )
        self.pump.start()

    def _pump(self, fd: int, output: Output) -> None:
        prefix = rank_prefix(self.rank)
        pending = b""
        while True:
            try:
                data = os.read(fd, 65536)
            except OSError:
                data = b""
            if not data:
                break
            pending += data
            *lines, pending = pending.split(b"\n")
            for line in lines:
                self._emit(prefix, line, output)
        if pending:
            self._emit(prefix, pending, output)

    def _emit(self, prefix: bytes, line: bytes, output: Output) -> None:
        self.tail.append(line.decode("utf-8", errors="replace"))
        output.line(prefix + line + b"\n")

    def failure(self) -> str:
        """Why this rank failed, in its own words (`policy.failure_line`), else its exit."""
        return policy.failure_line("\n".join(self.tail)) or policy.describe_exit(self.code)

    def signal(self, signum: int) -> None:
        if self.code is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                self.process.send_signal(signum)


def _exit_code(status: int) -> int:
    code = os.waitstatus_to_exitcode(status)
    return 128 - code if code < 0 else code


def raised(rank: Rank) -> bool:
    """Whether the rank's own code raised (its output holds a Python traceback)."""
    return any(line.strip() == "Traceback (most recent call last):" for line in rank.tail)


def blamed(ranks: Sequence[Rank]) -> Rank | None:
    """The rank whose failure failed the trainer: one that printed a Python traceback (its error,
    where the others only aborted because a peer was gone) — even one we stopped: in real pods a
    peer's abort (SIGABRT, 134) often ends first, while the rank that raised is still shutting
    down after its traceback — else the first that failed on its own."""
    failed = [rank for rank in ranks if rank.code not in (None, 0)]
    for rank in sorted(failed, key=lambda each: each.stopped):  # own failures first
        if raised(rank):
            return rank
    own = [rank for rank in failed if not rank.stopped]
    return own[0] if own else None


def trainer_exit_code(culprit: Rank) -> int:
    """The trainer's exit code for its culprit: a rank that raised ends the trainer as an
    exception does (its code, 1 when we stopped it mid-shutdown), so that the job's policy reads
    it as the cause, not as one more replica aborted by another's failure."""
    code = culprit.code or 1
    if raised(culprit) and not 0 < code < 128:
        return 1
    return code


def run_ranks(
    argv: list[str],
    envs: Sequence[Mapping[str, str]],
    *,
    label: str,
    say: Callable[[str], None],
    copy: Callable[[bytes], None] | None = None,
    supervised: bool = False,
) -> int:
    """Run `argv` once per environment of `envs` (rank r gets `envs[r]`) and wait for them all;
    `label` names the trainer in messages (`trainer 1`), `say` writes the launcher's own lines,
    `copy` receives the output for the attempt file.  Returns 0 when every rank succeeded, 128 + N
    after a stop by signal N, else the exit code of the rank that failed."""
    supervise.prctl(supervise.PR_SET_CHILD_SUBREAPER, 1)
    parent = os.getppid()
    ranks: list[Rank] = []
    stop: list[int] = []
    by_pid: dict[int, Rank] = {}

    def forward(signum: int, _frame: FrameType | None) -> None:
        if signum in STOP_SIGNALS and not stop:
            stop.append(signum)
            for each in ranks:
                each.stopped = each.stopped or each.code is None
        for each in ranks:
            each.signal(signum)

    def parent_died(_signum: int, _frame: FrameType | None) -> None:
        supervise.kill_all_below(os.getpid())
        os._exit(128 + signal.SIGKILL)

    for forwarded in FORWARDED:
        signal.signal(forwarded, forward)
    if supervised:
        signal.signal(supervise.PARENT_DEATH_SIGNAL, parent_died)
        supervise.prctl(supervise.PR_SET_PDEATHSIG, supervise.PARENT_DEATH_SIGNAL)
        if os.getppid() != parent:  # the runner died before the signal was set
            return 128 + signal.SIGKILL
    output = Output(copy)
    sys.stdout.flush()
    sys.stderr.flush()
    for rank, env in enumerate(envs):
        if stop:
            break
        process = subprocess.Popen(argv, env=dict(env), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, restore_signals=True)
        ranks.append(Rank(rank, process, output))
        by_pid[process.pid] = ranks[-1]
    if stop:
        for each in ranks:
            each.signal(stop[0])
    killer: threading.Timer | None = None

    def kill_the_rest() -> None:
        for each in ranks:
            each.signal(signal.SIGKILL)

    def ended(pid: int, status: int) -> None:
        nonlocal killer
        rank = by_pid.get(pid)
        if rank is None:
            return  # an orphan re-parented to us (we are a subreaper, or PID 1)
        rank.code = _exit_code(status)
        rank.process.returncode = rank.code
        if rank.code == 0 or rank.stopped or killer is not None or stop:
            return
        # The first failure: whatever else already ended did so on its own, the rest is stopped.
        with contextlib.suppress(ChildProcessError):
            while True:
                other, other_status = os.waitpid(-1, os.WNOHANG)
                if other == 0:
                    break
                ended(other, other_status)
        for each in ranks:
            if each.code is None:
                each.stopped = True
                each.signal(signal.SIGTERM)
        killer = threading.Timer(STOP_GRACE_SECONDS, kill_the_rest)
        killer.daemon = True
        killer.start()

    while any(each.code is None for each in ranks):
        try:
            pid, status = os.wait()
        except InterruptedError:
            continue
        except ChildProcessError:
            break  # cannot happen while a rank runs; a failure rather than a hang
        ended(pid, status)
    if killer is not None:
        killer.cancel()
    deadline = time.monotonic() + DRAIN_SECONDS
    for each in ranks:
        each.pump.join(max(0.0, deadline - time.monotonic()))
    for stray in supervise.descendants(os.getpid()):  # what a rank left running
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(stray, signal.SIGKILL)
    culprit = blamed(ranks)
    # A rank that raised is the trainer's failure even when the trainer itself is being stopped
    # (SIGTERM: the Job controller stops the rest of a failed Job, and across nodes a peer's
    # abort can end the Job before this launcher has reported its rank): say so and exit as the
    # exception did, so that the job names this rank, not the peer that aborted because of it.
    if culprit is not None and (not stop or raised(culprit)):
        say(f"{label} rank {culprit.rank} failed: {culprit.failure()}")
        return trainer_exit_code(culprit)
    if stop:
        return 128 + stop[0]
    if any(each.code not in (None, 0) for each in ranks):  # only ranks we stopped failed: cannot be
        return 1
    return 0
