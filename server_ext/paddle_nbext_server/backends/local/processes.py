"""Processes of local jobs, through psutil: liveness, a replica's processes, their memory, and
stopping them.

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
from dataclasses import dataclass, field
from pathlib import Path

from ...runtime.supervise import proc_stat_fields
from .records import JOB_DIR_VAR

_PROC = Path("/proc")
#: Indexes into a stat line's fields after the command name (proc(5) numbers minus 3).
_UTIME_FIELD, _STIME_FIELD, _RSS_FIELD = 11, 12, 21
PAGE_SIZE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
#: Clock ticks per second of the utime/stime fields.
CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


# psutil is imported where it is used: the job master starts its replicas before it needs it,
# and importing it was a sixth of the master's start-up.


def _gone() -> tuple[type[Exception], ...]:
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
    except _gone():
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
    except _gone():
        return False
    if not arguments:
        return False
    wanted = str(job_dir)
    return wanted in arguments or os.path.realpath(arguments[-1]) == os.path.realpath(wanted)


@dataclass
class ProcessTable:
    """One reading of every live process's parent and group, so the replicas of a job can be
    resolved together at the cost of a single pass over the process list."""

    alive: set[int] = field(default_factory=set)
    groups: dict[int, list[int]] = field(default_factory=dict)  # group id -> pids
    children: dict[int, list[int]] = field(default_factory=dict)  # parent pid -> pids
    zombies: dict[int, list[int]] = field(default_factory=dict)  # parent pid -> exited, unreaped children
    #: pid -> (CPU clock ticks used so far, user + system; resident pages), from the same stat
    #: lines: what resource use (`usage`) and the memory check read, without a second pass.
    use: dict[int, tuple[int, int]] = field(default_factory=dict)

    @classmethod
    def read(cls) -> ProcessTable:
        """One pass over `/proc` (each process's stat line holds its state, parent and group);
        through psutil where there is no `/proc`.  `/proc` directly because psutil's objects
        per process made the master's memory check, twice a second, cost it ~10 ms of CPU each
        on a machine of 80 processes, taken from the job's own replicas."""
        try:
            processes = proc_stat_fields()
        except OSError:
            return cls._read_psutil()
        table = cls()
        for pid, fields in processes:
            if len(fields) < 3:
                continue
            parent, group = int(fields[1]), int(fields[2])
            if fields[0] == b"Z":
                table.zombies.setdefault(parent, []).append(pid)
                continue
            table.alive.add(pid)
            table.groups.setdefault(group, []).append(pid)
            table.children.setdefault(parent, []).append(pid)
            if len(fields) > _RSS_FIELD:
                table.use[pid] = (int(fields[_UTIME_FIELD]) + int(fields[_STIME_FIELD]), int(fields[_RSS_FIELD]))
        return table

    def resident(self, pids: Iterable[int]) -> int | None:
        """Resident bytes of `pids` from this reading; None when it has no such figures (read
        through psutil), so callers ask psutil instead."""
        if not self.use:
            return None
        return sum(self.use.get(pid, (0, 0))[1] for pid in pids) * PAGE_SIZE

    @classmethod
    def _read_psutil(cls) -> ProcessTable:
        import psutil

        table = cls()
        for process in psutil.process_iter(["ppid", "status"]):
            info = process.info
            if info.get("status") == psutil.STATUS_ZOMBIE and info.get("ppid") is not None:
                table.zombies.setdefault(info["ppid"], []).append(process.pid)
            if info.get("status") in (None, psutil.STATUS_ZOMBIE):
                continue
            try:
                group = os.getpgid(process.pid)
            except OSError:
                continue
            table.alive.add(process.pid)
            table.groups.setdefault(group, []).append(process.pid)
            if info.get("ppid") is not None:
                table.children.setdefault(info["ppid"], []).append(process.pid)
        return table

    def descendants(self, pid: int) -> set[int]:
        found: set[int] = set()
        pending = list(self.children.get(pid, []))
        while pending:
            child = pending.pop()
            if child not in found:
                found.add(child)
                pending.extend(self.children.get(child, []))
        return found

    def children_of(self, pid: int) -> list[int]:
        """Every child of `pid`, live or exited and not yet reaped."""
        return self.children.get(pid, []) + self.zombies.get(pid, [])

    def replica_processes(self, leader: int) -> set[int]:
        """The live processes of the replica whose leader (and group id) is `leader`."""
        members = set(self.groups.get(leader, [])) | self.descendants(leader)
        if leader in self.alive:
            members.add(leader)
        return members


def resident_bytes(pids: Iterable[int]) -> int:
    """Resident memory (RSS) of the given processes in bytes; vanished ones count 0."""
    import psutil

    total = 0
    for pid in pids:
        try:
            total += psutil.Process(pid).memory_info().rss
        except _gone():
            continue
    return total


def signal_replica(leader: int, sig: int) -> None:
    """Send `sig` to the replica's process group and to every descendant of its leader (some may
    have left the group).  Processes that are already gone are no error."""
    import psutil

    try:
        strays = psutil.Process(leader).children(recursive=True)
    except _gone():
        strays = []
    try:
        os.killpg(leader, sig)
    except (ProcessLookupError, PermissionError):
        pass
    for process in strays:
        try:
            process.send_signal(sig)
        except _gone():
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
