"""Admission of a local job by its master, beside the other local jobs of the same jobs dir.

A job waits as Pending (reason in words) until its CPU, memory and GPUs fit beside what the other
admitted jobs hold: each admitted job records its resources in its status (`Admitted`), and every
master reads those and records its own under one file lock in the jobs dir (`lock`), so two
masters never both take the last core.  Under the same lock the job's planned ports are checked
again (`recheck_ports`): they were picked at submit, by asking the kernel, with no lock.

`lifecycle.Master.try_admit` decides with these; this module reads the other jobs and words the
wait.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

from paddle_nbext.model.contract import format_bytes, format_cores

from ..ports import free_ports, port_free
from ..processes import pid_alive
from ..record_files import read_master_pid, read_record, write_record
from ..record_json import NewerRecord
from ..records import Capacity, Plan, ResourceRequest, StatusRecord

ADMISSION_LOCK = ".admission.lock"


@contextlib.contextmanager
def lock(jobs_dir: Path) -> Iterator[None]:
    """Hold the jobs dir's admission lock (every master of `jobs_dir` takes it to admit)."""
    with open(jobs_dir / ADMISSION_LOCK, "a+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def admitted_others(job_dir: Path) -> list[tuple[Path, StatusRecord]]:
    """The other jobs of this jobs dir that hold resources now (admitted, not ended, their
    master alive), with their status records."""
    found = []
    for sibling in job_dir.parent.iterdir():
        if sibling == job_dir or not sibling.is_dir() or master_gone(sibling):
            continue
        try:
            other = read_record(StatusRecord, sibling)
        except (OSError, ValueError, NewerRecord):
            continue
        if other.admitted is None or other.terminal or not pid_alive(other.master_pid):
            continue
        found.append((sibling, other))
    return found


def others_usage(others: list[tuple[Path, StatusRecord]], owner: str) -> tuple[float, int, set[int], list[str]]:
    """What `others` hold together (cores, memory bytes, GPU ids) and their names for `owner`'s
    message: only `owner`'s own job names; another user's job is counted, never named ("")."""
    cpu, memory, gpus, names = 0.0, 0, set(), []
    for _, other in others:
        held = other.admitted
        assert held is not None
        cpu += held.cpu
        memory += held.memory
        gpus.update(held.gpus)
        names.append(other.status.name if other.status.owner == owner else "")
    return cpu, memory, gpus, names


def others_ports(others: list[tuple[Path, StatusRecord]]) -> set[int]:
    """Every replica port the other admitted jobs planned: they may not listen yet (their
    replicas are still starting), so the kernel would call those ports free."""
    ports: set[int] = set()
    for sibling, _ in others:
        try:
            plan = read_record(Plan, sibling)
        except (OSError, ValueError, NewerRecord):
            continue
        ports.update(plan.ports())
    return ports


def shortfall(capacity: Capacity, request: ResourceRequest, used_cpu: float, used_memory: int, free_gpus: list[int]) -> list[str]:
    """What of `request` does not fit beside what the others use, in words (empty: it fits)."""
    free_cpu = capacity.cpu - used_cpu
    free_memory = capacity.memory - used_memory
    short = []
    if request.cpu > free_cpu + 1e-9:
        short.append(f"{format_cores(request.cpu)} CPU (free: {format_cores(max(free_cpu, 0))} of {format_cores(capacity.cpu)})")
    if request.memory > free_memory:
        short.append(
            f"{format_bytes(request.memory)} memory (free: {format_bytes(max(free_memory, 0))} of {format_bytes(capacity.memory)})"
        )
    if request.gpus > len(free_gpus):
        short.append(f"{request.gpus} GPU (free: {len(free_gpus)} of {len(capacity.gpus)})")
    return short


def recheck_ports(job_dir: Path, plan: Plan, others: set[int], also: frozenset[int] | set[int] = frozenset()) -> None:
    """Ports were picked at submit, by asking the kernel, with no lock: two jobs submitted
    together can be given the same one, and a job that waited may find one taken since.
    Under the admission lock, a port another admitted job planned (``others``: it may not
    listen yet), one this job plans twice, or one something listens on, is picked anew (and
    `plan` rewritten in `job_dir`)."""
    changed = False
    planned = plan.ports()
    seen: set[int] = set()
    for replica in plan.replicas:
        host, _ = replica.host_port
        block = set(replica.ports)
        if block & (others | set(also) | seen) or not all(port_free(host, port) for port in block):
            port = free_ports(host, len(block), avoid=planned | others | seen | set(also))
            replica.endpoint = f"{host}:{port}"
            block = set(replica.ports)
            planned |= block
            changed = True
        seen |= block
    if changed:
        write_record(job_dir, plan)


def admitted_words(request: ResourceRequest) -> str:
    """`2 CPU, 4 GiB memory, 1 GPU on this machine`: what the timeline says a job was admitted with."""
    gpus = f", {request.gpus} GPU" if request.gpus else ""
    return f"{format_cores(request.cpu)} CPU, {format_bytes(request.memory)} memory{gpus} on this machine"


def master_gone(job_dir: Path) -> bool:
    """The job's `master.pid` names a process that no longer exists: a job that ended (or whose
    master died), which holds nothing, so its status need not be read.  Parsing every ended
    job's status.json made admission, and so every job's start, ~0.35 ms slower per job in the
    jobs dir (0.1 s with 300).  Unreadable pid file, or a process by that pid: not known gone."""
    pid = read_master_pid(job_dir)
    if pid is None:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:  # another user's process by that pid: it exists
        return False
    return False


def held_by(others: list[str]) -> str:
    """`; held by your running local jobs a, b and 2 jobs of other users` (names: "" for a job of
    another user, whose name this user may not learn)."""
    own = sorted(name for name in others if name)
    foreign = len(others) - len(own)
    parts = []
    if own:
        parts.append(f"your running local job{'s' if len(own) != 1 else ''} {', '.join(own)}")
    if foreign:
        parts.append(f"{foreign} running job{'s' if foreign != 1 else ''} of other users")
    return f"; held by {' and '.join(parts)}" if parts else ""
