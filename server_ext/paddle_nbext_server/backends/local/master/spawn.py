"""Starting one replica's launcher, as the job's master does at every start and restart: a fork
of the master when it can (`forked`), else a new interpreter running the job's `launcher.py`;
either way in a session of its own, with the replica's kernel memory limit (`limits`) and a
parent-death signal, its output appended to its log.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
from collections.abc import Callable
from typing import BinaryIO

from ....runtime import supervise
from ..records import Plan
from . import forked, limits
from .replica import LauncherProcess, Replica


def set_parent_death_signal(master: int) -> None:
    """Runs in the child before exec: if the master dies abruptly (SIGKILL), the kernel sends
    SIGKILL to the replica's launcher until the launcher replaces it by its own catchable signal
    (`supervise.run_supervised`), on which it kills everything below it: no process is left.
    A master that died between the fork and this call is gone before the signal was armed (the
    kernel never sends it): the child, already someone else's, ends at once instead."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    if os.getppid() != master:
        os._exit(1)


class ReplicaSpawner:
    """Starts the replicas of one job's plan; the job's launcher is imported once, for forks."""

    def __init__(self, plan: Plan) -> None:
        self.plan = plan
        self._bundle_launcher: Callable[[], int] | None = None
        self._bundle_loaded = False

    def spawn(self, replica: Replica, python: str, env: dict[str, str], log: BinaryIO) -> tuple[LauncherProcess, limits.KernelLimit | None]:
        """Start `replica`'s launcher with `python` and `env`, its output appended to `log` (where
        this start's output begins is `replica.log_start`); its process and kernel limit."""
        kernel_limit = self.kernel_limit_for(replica, log)
        log.flush()
        replica.log_start = log.tell()

        master = os.getpid()

        def prepare_child() -> None:
            set_parent_death_signal(master)
            limits.enter(kernel_limit)

        supervise.mark("master.spawn", replica.key)
        main = self.bundle_launcher() if forked.can_fork(python, env, kernel_limit) else None
        process: LauncherProcess
        if main is not None:  # what `python launcher.py` would be, without starting Python again
            process = forked.fork_launcher(
                main, launcher=self.plan.launcher, env=env, cwd=self.plan.workdir, log=log, prepare=prepare_child
            )
        else:
            process = subprocess.Popen(
                [python, self.plan.launcher],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=self.plan.workdir,
                env=env,
                start_new_session=True,
                preexec_fn=prepare_child,  # noqa: PLW1509 - the master runs no threads
            )
        return process, kernel_limit

    def bundle_launcher(self) -> Callable[[], int] | None:
        """The job's launcher's `main`, imported once (`forked.load_launcher`); None: start each
        launcher as a new interpreter."""
        if not self._bundle_loaded:
            self._bundle_launcher = forked.load_launcher(self.plan.launcher)
            self._bundle_loaded = True
        return self._bundle_launcher

    def kernel_limit_for(self, replica: Replica, log: BinaryIO) -> limits.KernelLimit | None:
        """The kernel memory limit of this start of `replica` (`limits`), its cgroup created; a
        cgroup that cannot be made falls back to RLIMIT_AS, and the replica's log says why."""
        planned = limits.planned(replica.plan, self.plan, replica.restarts)
        if planned is None:
            return None
        try:
            limits.prepare(planned)
        except OSError as error:
            fallback = limits.address_space(replica.plan, self.plan)
            instead = f"{limits.RLIMIT} holds it instead" if fallback is not None else "only the sampler watches it"
            log.write(f"[paddle-nbext] cannot create the cgroup {planned.cgroup} ({error.strerror or error}); {instead}\n".encode())
            log.flush()
            return fallback
        return planned
