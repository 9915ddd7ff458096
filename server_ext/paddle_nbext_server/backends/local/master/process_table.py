"""The job master's reading of the process list: one pass over `/proc` per check resolves every
replica's processes (its group plus its leader's descendants, `processes` says why both), their
CPU time and resident memory, and the master's own children, for the memory check, the sweep of
adopted orphans and the resource-use samples (`usage_sampler`).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field

from ....runtime.supervise import proc_stat_fields
from ..processes import gone_errors

#: Indexes into a stat line's fields after the command name (proc(5) numbers minus 3).
_UTIME_FIELD, _STIME_FIELD, _RSS_FIELD = 11, 12, 21
PAGE_SIZE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
#: Clock ticks per second of the utime/stime fields.
CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100

# psutil is imported where it is used: the job master starts its replicas before it needs it,
# and importing it was a sixth of the master's start-up.


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
        except gone_errors():
            continue
    return total
