"""Processes of local jobs, through psutil: liveness, finding a job's processes, and stopping them;
the server (its store) and the job's master both use these (the master's own reading of the
process list is `master.process_table`).

A replica is started as the leader of its own process group (`start_new_session`), so its pid
is also its group id.  Its processes are that group plus the leader's descendants: a child that
calls `setsid` leaves the group but stays in the tree, and one that double-forks leaves the tree
but stays in the group; either way it is counted against the replica's memory and stopped with
it.  Zombies (exited, not yet reaped) count as gone everywhere: they hold no memory and cannot
be stopped.

Every replica process also carries its job dir in its environment (`JOB_DIR_VAR`, inherited by
all it starts), and so does the master (a launcher it forks keeps the environment the master
started with, as `/proc` shows it): when a master is gone, whatever was killed before,
`marked_processes` still finds what its replicas left running, so the backend can stop them.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterable
from pathlib import Path

from .records import JOB_DIR_VAR

_PROC = Path("/proc")


# psutil is imported where it is used: the job master starts its replicas before it needs it,
# and importing it was a sixth of the master's start-up.


def gone_errors() -> tuple[type[Exception], ...]:
    """The errors of a process that is gone (or not ours to read)."""
    import psutil

    return (psutil.NoSuchProcess, psutil.ZombieProcess, psutil.AccessDenied)


def pid_alive(pid: int | None) -> bool:
    """True for a running process; a zombie counts as dead."""
    import psutil

    if not pid or pid <= 0:
        return False
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except gone_errors():
        return False


def runs_job_master(pid: int, job_dir: Path) -> bool:
    """The live process `pid` is the master of `job_dir` (a pid reused by another program, or
    by the master of another job, does not count).  The master gets its job dir as its last
    argument; two servers may spell the same jobs dir differently, so paths are compared real."""
    import psutil

    try:
        process = psutil.Process(pid)
        if process.status() == psutil.STATUS_ZOMBIE:
            return False
        arguments = process.cmdline()
    except gone_errors():
        return False
    if not arguments:
        return False
    wanted = str(job_dir)
    return wanted in arguments or os.path.realpath(arguments[-1]) == os.path.realpath(wanted)


def signal_replica(leader: int, sig: int) -> None:
    """Send `sig` to the replica's process group and to every descendant of its leader (some may
    have left the group).  Processes that are already gone are no error."""
    import psutil

    try:
        strays = psutil.Process(leader).children(recursive=True)
    except gone_errors():
        strays = []
    try:
        os.killpg(leader, sig)
    except (ProcessLookupError, PermissionError):
        pass
    for process in strays:
        try:
            process.send_signal(sig)
        except gone_errors():
            pass


def marked_processes(root: Path) -> dict[str, list[int]]:
    """Live processes (this one excepted) whose environment names a job dir directly under
    `root`, as {job dir name: pids}: one pass over /proc.  Processes of other users cannot be
    read and are not listed; a process that cleared its environment is not found here, but it is
    still in its replica's process group, which the master and the launcher stop."""
    wanted = os.path.realpath(root)
    marker = f"{JOB_DIR_VAR}=".encode()
    found: dict[str, list[int]] = {}
    try:
        entries = list(os.scandir(_PROC))
    except OSError:
        return found
    for entry in entries:
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            with open(f"{entry.path}/environ", "rb") as handle:
                environ = handle.read()
        except OSError:
            continue
        for item in environ.split(b"\0"):
            if item.startswith(marker):
                job_dir = os.path.realpath(item[len(marker) :].decode("utf-8", errors="replace"))
                if os.path.dirname(job_dir) == wanted and pid_alive(int(entry.name)):
                    found.setdefault(os.path.basename(job_dir), []).append(int(entry.name))
                break
    return found


def kill_processes(pids: Iterable[int]) -> None:
    """SIGKILL each of `pids`; ones already gone (or not ours) are no error."""
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
