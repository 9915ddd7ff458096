"""Kernel-enforced memory limits of local replicas; the master's RSS sampler stays the reporter.

Sampling alone lets a fast allocator run far past its limit between two samples.  So each replica
with a memory field also gets a limit the kernel holds, by the first mechanism that applies:

* `CGROUP` — `c.LocalBackend.cgroup_root` names a cgroup v2 directory this server may create
  children in (memory in its `cgroup.subtree_control`, e.g. a systemd `Delegate=yes` slice): the
  replica runs in a child cgroup of its own with `memory.max` = its memory field, no swap and
  `memory.oom.group` (the kernel kills all of the replica's processes together at the limit);
  `memory.events` tells afterwards that the kernel did it.  If the cgroup cannot be created the
  replica falls back to `RLIMIT`, and its log says why.
* `RLIMIT` — `RLIMIT_AS` = the memory field + `c.LocalBackend.memory_headroom`, set on the
  replica before it starts (and so on every process it starts, each on its own): address space,
  not resident memory, so it needs headroom (an idle Paddle trainer maps ~2 GiB to use ~300 MiB);
  an allocation past it fails (`MemoryError`, `std::bad_alloc`).  Not for replicas with GPUs,
  whose drivers map far more address space than they use.

The replica's reason names the mechanism that stopped it (`reason`).
"""

from __future__ import annotations

import contextlib
import os
import resource
from dataclasses import dataclass

from paddle_nbext.model.contract import format_bytes

from ..records import Plan, ReplicaPlan

CGROUP = "cgroup v2 memory.max"
RLIMIT = "RLIMIT_AS"
#: What an allocation refused by RLIMIT_AS leaves in a replica's log (Python, C++, C, CUDA-less Paddle).
_REFUSED = ("MemoryError", "std::bad_alloc", "Cannot allocate memory", "ResourceExhaustedError", "out of memory")


@dataclass(frozen=True)
class KernelLimit:
    """The limit the kernel holds one start of a replica to."""

    mechanism: str  # CGROUP or RLIMIT
    limit: int  # bytes: memory.max, or the address space of RLIMIT_AS
    cgroup: str = ""  # the replica's own cgroup dir (CGROUP)


def planned(replica: ReplicaPlan, plan: Plan, attempt: int) -> KernelLimit | None:
    """The kernel limit of this start (`attempt`: the replica's restarts so far); None when
    the replica has no memory field or no mechanism applies."""
    if not replica.memory:
        return None
    if plan.cgroup_root:
        name = f"paddle-nbext-{plan.job}-{replica.key}-{os.getpid()}-{attempt}"
        return KernelLimit(CGROUP, replica.memory, os.path.join(plan.cgroup_root, name))
    return address_space(replica, plan)


def address_space(replica: ReplicaPlan, plan: Plan) -> KernelLimit | None:
    """The `RLIMIT` limit of the replica, None where it would break it (GPUs) or is turned off."""
    if not replica.memory or plan.memory_headroom <= 0 or replica.gpus:
        return None
    return KernelLimit(RLIMIT, replica.memory + plan.memory_headroom)


def prepare(limit: KernelLimit) -> None:
    """Before the replica starts (in the master): create its cgroup with the limit.  OSError
    when the cgroup cannot be created or configured (then nothing is left behind)."""
    if limit.mechanism != CGROUP:
        return
    os.mkdir(limit.cgroup)
    try:
        for name, value in (("memory.max", str(limit.limit)), ("memory.swap.max", "0"), ("memory.oom.group", "1")):
            path = os.path.join(limit.cgroup, name)
            if name == "memory.max" or os.path.exists(path):  # swap and oom.group are optional
                with open(path, "w") as handle:
                    handle.write(value)
    except OSError:
        release(limit)
        raise


def enter(limit: KernelLimit | None) -> None:
    """In the replica's process before exec (it must not raise there): join the cgroup, or set
    RLIMIT_AS (never above a hard limit already lower)."""
    if limit is None:
        return
    with contextlib.suppress(OSError, ValueError):
        if limit.mechanism == CGROUP:
            with open(os.path.join(limit.cgroup, "cgroup.procs"), "w") as handle:
                handle.write("0")  # cgroup v2: "0" is the writing process itself
        else:
            _, hard = resource.getrlimit(resource.RLIMIT_AS)
            value = limit.limit if hard == resource.RLIM_INFINITY else min(limit.limit, hard)
            resource.setrlimit(resource.RLIMIT_AS, (value, hard))


def stopped_by_kernel(limit: KernelLimit | None, exit_code: int, log_tail: str) -> bool:
    """The replica that ended with `exit_code` was stopped by its kernel limit: the cgroup
    counted an OOM kill, or, under RLIMIT_AS, it failed right after an allocation was refused."""
    if limit is None or exit_code == 0:
        return False
    if limit.mechanism == CGROUP:
        try:
            with open(os.path.join(limit.cgroup, "memory.events")) as handle:
                events = dict(line.split(maxsplit=1) for line in handle if " " in line)
        except OSError:
            return False
        return int(events.get("oom_kill", "0").strip() or 0) > 0
    return any(marker in log_tail for marker in _REFUSED)


def reason(limit: KernelLimit, replica: ReplicaPlan, memory_text: str) -> str:
    """The replica's reason when its kernel limit stopped it, naming the mechanism."""
    if limit.mechanism == CGROUP:
        return f"MemoryLimitExceeded: killed by the kernel at its limit of {memory_text} ({CGROUP})"
    return (
        f"MemoryLimitExceeded: the kernel refused memory beyond {format_bytes(limit.limit)} of address space "
        f"({memory_text} + {format_bytes(limit.limit - replica.memory)} headroom, {RLIMIT})"
    )


def release(limit: KernelLimit | None) -> None:
    """After the replica ended: remove its cgroup (a cgroup whose processes are gone)."""
    if limit is not None and limit.mechanism == CGROUP:
        with contextlib.suppress(OSError):
            os.rmdir(limit.cgroup)
