"""Resource use of a local job's replicas, sampled by its master: CPU cores and resident memory
of each replica's whole process tree (launcher, entry point, ranks, whatever they start), beside
its request and limit.

The job's master samples it (`UsageSampler.sample`, from the `ProcessTable` it reads anyway for
the memory check, so sampling adds no pass over /proc) every `Plan.usage_interval` seconds and
writes `usage.json` in the job dir (`usage.write`); the server only reads that file.  So watching
costs the server one small read per job and refresh, the numbers outlive the server, and a
replica's peak is still there after the job ended.

CPU is the change of the tree's CPU time (user + system clock ticks, `/proc/<pid>/stat`) over
the wall time between two samples: 1.0 is one core busy.  A process that appeared since the last
sample counts with all its CPU time (it started within the interval); one that ended since is
missed for its last interval.  Memory is the sum of resident set sizes (RSS), as the memory limit
is checked; shared pages count once per process, as `ps` and the limit count them.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from paddle_nbext.model.contract import now_iso

from ..records import ReplicaPlan
from ..usage import VERSION
from .process_table import CLOCK_TICKS, PAGE_SIZE, ProcessTable

#: What names a rank's process: the launcher gives each rank of a trainer its local rank.
RANK_VAR = b"PADDLE_LOCAL_RANK="
#: Samples kept per replica for its sparkline (two minutes at the default interval).
HISTORY = 60


@dataclass
class TreeReading:
    """CPU over the last interval and memory of one process tree (a replica's, or one rank's of a trainer), with its peaks."""

    cpu: float | None = None
    memory: int | None = None
    peak_cpu: float = 0.0
    peak_memory: int = 0
    ticks: dict[int, int] = field(default_factory=dict)  # pid -> CPU ticks at the last sample
    sampled_at: float | None = None

    def read(self, table: ProcessTable, pids: set[int], moment: float) -> None:
        ticks = {pid: table.use[pid][0] for pid in pids if pid in table.use}
        memory = sum(table.use[pid][1] for pid in ticks) * PAGE_SIZE
        cpu = None
        if self.sampled_at is not None and moment > self.sampled_at:
            used = sum(now_ticks - self.ticks.get(pid, 0) for pid, now_ticks in ticks.items())
            cpu = max(0.0, used / CLOCK_TICKS / (moment - self.sampled_at))
        self.ticks, self.sampled_at = ticks, moment
        self.cpu, self.memory = cpu, memory
        self.peak_memory = max(self.peak_memory, memory)
        if cpu is not None:
            self.peak_cpu = max(self.peak_cpu, cpu)

    def stop(self) -> None:
        self.cpu, self.memory, self.ticks, self.sampled_at = None, None, {}, None


def rank_of(pid: int) -> int | None:
    """The local rank a process was started as (its `PADDLE_LOCAL_RANK`), None when it has none
    or cannot be read."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as handle:
            environ = handle.read()
    except OSError:
        return None
    for item in environ.split(b"\0"):
        if item.startswith(RANK_VAR):
            try:
                return int(item[len(RANK_VAR) :])
            except ValueError:
                return None
    return None


@dataclass
class ReplicaUsage(TreeReading):
    """One replica's latest reading of its whole process tree (cores over the last interval, None
    before two samples and after the end; bytes resident, None while not running), its peaks and
    its recent history."""

    plan: ReplicaPlan = field(kw_only=True)
    processes: int = 0
    history: deque[tuple[float, float | None, int | None]] = field(default_factory=lambda: deque(maxlen=HISTORY))
    #: A trainer of several ranks: each rank's own tree (the launcher's child started as that rank).
    ranks: dict[int, TreeReading] = field(default_factory=dict)

    def observe_memory(self, used: int) -> None:
        """A memory reading between samples (the memory check's): counts towards the peak."""
        self.peak_memory = max(self.peak_memory, used)

    def to_dict(self, phase: str) -> dict[str, Any]:
        plan = self.plan
        return {
            "role": plan.role,
            "index": plan.index,
            "phase": phase,
            "cpu": None if self.cpu is None else round(self.cpu, 3),
            "memory": self.memory,
            "processes": self.processes,
            "peak_cpu": round(self.peak_cpu, 3),
            "peak_memory": self.peak_memory,
            "cpu_request": plan.cpu,
            # Local replicas get `cpu` as thread counts, not as a cap the kernel enforces.
            "cpu_limit": None,
            "memory_request": plan.memory or None,
            "memory_limit": plan.memory or None,
            "history": [
                {"t": round(t, 3), "cpu": cpu if cpu is None else round(cpu, 3), "memory": memory} for t, cpu, memory in self.history
            ],
            **({"ranks": [self._rank_dict(rank) for rank in sorted(self.ranks)]} if plan.ranks > 1 else {}),
        }

    def _rank_dict(self, rank: int) -> dict[str, Any]:
        reading = self.ranks[rank]
        return {
            "rank": rank,
            "cpu": None if reading.cpu is None else round(reading.cpu, 3),
            "memory": reading.memory,
            "peak_cpu": round(reading.peak_cpu, 3),
            "peak_memory": reading.peak_memory,
        }


class UsageSampler:
    """The master's readings of its replicas, by replica key (`ReplicaPlan.key`)."""

    def __init__(self, replicas: list[ReplicaPlan]) -> None:
        self.replicas = {plan.key: ReplicaUsage(plan=plan) for plan in replicas}
        self._rank_of: dict[int, int | None] = {}  # pid -> its local rank (read once per process)

    def sample(self, table: ProcessTable, leaders: dict[str, int | None], now: float | None = None) -> None:
        """Read every replica from `table`; `leaders` maps each key to its launcher's pid, or None
        for a replica that does not run (its figures go blank, its peaks stay)."""
        moment = time.monotonic() if now is None else now
        wall = time.time()
        for key, usage in self.replicas.items():
            leader = leaders.get(key)
            if leader is None:
                if usage.memory is not None:
                    usage.history.append((wall, None, None))
                usage.stop()
                usage.processes = 0
                for reading in usage.ranks.values():
                    reading.stop()
                continue
            pids = table.replica_processes(leader)
            usage.read(table, pids, moment)
            usage.processes = len(pids)
            usage.history.append((wall, usage.cpu, usage.memory))
            if usage.plan.ranks > 1:
                self._sample_ranks(usage, table, leader, moment)
        self._rank_of = {pid: rank for pid, rank in self._rank_of.items() if pid in table.alive}

    def _sample_ranks(self, usage: ReplicaUsage, table: ProcessTable, leader: int, moment: float) -> None:
        """Each rank's own figures: the launcher's child started as that rank, and what it starts."""
        seen = set()
        for child in table.children.get(leader, []):
            if child not in self._rank_of:
                self._rank_of[child] = rank_of(child)
            rank = self._rank_of[child]
            if rank is None:
                continue
            seen.add(rank)
            usage.ranks.setdefault(rank, TreeReading()).read(table, {child} | table.descendants(child), moment)
        for rank, reading in usage.ranks.items():
            if rank not in seen:
                reading.stop()

    def document(self, phases: dict[str, str], interval: float) -> dict[str, Any]:
        """What `usage.json` holds (and `GET /jobs/{name}/usage` answers, with the job's name)."""
        return {
            "version": VERSION,
            "sampled": now_iso(),
            "interval": interval,
            "replicas": [usage.to_dict(phases.get(key, "")) for key, usage in self.replicas.items()],
        }
