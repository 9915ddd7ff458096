"""One replica as the job's master runs it: its launcher's process (a started interpreter, or a
fork of the master: `spawn`), its log, what is recorded of it, and the wait for the launchers'
ends that wakes the master's loop."""

from __future__ import annotations

import os
import select
import subprocess
import time
from pathlib import Path

from paddle_nbext.model.contract import ReplicaPhase, format_bytes
from paddle_nbext.model.status import ReplicaStatus

from ..records import ReplicaPlan
from . import forked, limits

#: How much of a replica's log the policy and the port-clash check read (its end).
LOG_TAIL_BYTES = 4096


#: A replica's launcher: a started interpreter, or a fork of the master (`forked`).
LauncherProcess = subprocess.Popen[bytes] | forked.ForkedLauncher


def wait_for_exit(processes: list[LauncherProcess], timeout: float) -> None:
    """Sleep up to `timeout` seconds, returning as soon as one of `processes` ends (a pidfd per
    process, Linux 5.3+): the master acts on a trainer's end, or a stopped pserver's, when it
    happens rather than at its next poll.  Where pidfds are missing, a plain sleep."""
    fds: list[int] = []
    try:
        for process in processes:
            try:
                fds.append(os.pidfd_open(process.pid))
            except (AttributeError, OSError):  # no pidfd_open (old kernel, not Linux), or already reaped
                time.sleep(timeout)
                return
        if fds:
            select.select(fds, [], [], timeout)
        else:
            time.sleep(timeout)
    finally:
        for fd in fds:
            os.close(fd)


class Replica:
    """One replica's process and what is recorded of it."""

    def __init__(self, plan: ReplicaPlan, logs: Path) -> None:
        self.plan = plan
        self.logs = logs  # the job's logs dir
        self.memory_text = plan.memory_text or (format_bytes(plan.memory) if plan.memory else "")
        self.phase: str = ReplicaPhase.PENDING
        self.reason: str | None = None
        self.exit_code: int | None = None
        self.restarts = 0
        self.started: str | None = None
        self.finished: str | None = None
        self.process: LauncherProcess | None = None
        self.stopping = False
        self.kill_reason: str | None = None
        self.kernel_limit: limits.KernelLimit | None = None  # of the current start
        self.log_start = 0  # where this start's output begins in its log (earlier starts' is before)

    @property
    def role(self) -> str:
        return self.plan.role

    @property
    def index(self) -> int:
        return self.plan.index

    @property
    def key(self) -> str:
        return self.plan.key

    def log_path(self, previous: bool = False) -> Path:
        """`logs/<role>-<index>.log`, or the log of the start before a restart (`.previous.log`)."""
        return self.logs / f"{self.key}{'.previous' if previous else ''}.log"

    def log_tail(self) -> str:
        try:
            with open(self.log_path(), "rb") as handle:
                handle.seek(0, os.SEEK_END)
                size = handle.tell()
                handle.seek(max(0, size - LOG_TAIL_BYTES))
                return handle.read().decode("utf-8", errors="replace")
        except OSError:
            return ""

    def output_of_this_start(self) -> str:
        """The end of what the replica wrote since its current start (not an earlier start's)."""
        try:
            with open(self.log_path(), "rb") as handle:
                size = handle.seek(0, os.SEEK_END)
                handle.seek(max(self.log_start, size - LOG_TAIL_BYTES))
                return handle.read().decode("utf-8", errors="replace")
        except OSError:
            return ""

    @property
    def live_process(self) -> LauncherProcess | None:
        """The replica's process while it has not been reaped."""
        return self.process if self.process is not None and self.process.returncode is None else None

    def record(self) -> ReplicaStatus:
        return ReplicaStatus(
            role=self.role,
            index=self.index,
            phase=self.phase,
            reason=self.reason,
            exit_code=self.exit_code,
            restarts=self.restarts,
            started=self.started,
            finished=self.finished,
        )
