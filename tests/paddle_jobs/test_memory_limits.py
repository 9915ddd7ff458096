"""Memory limits of local replicas that hold: the kernel refuses what a replica allocates past
its limit (RLIMIT_AS here; a delegated cgroup v2 where configured, see test_local_limits.py), the
sampler still reports resident memory, and the replica's reason names the mechanism."""

from __future__ import annotations

import asyncio
from pathlib import Path

from paddle_jobs.local_jobs import backend_for, leftover_processes, request, wait_terminal
from paddle_nbext.model.status import JobStatus

#: Allocates 4 × the 100Mi limit at once: faster than any sampler could see it.
HOG = 'python -c "import time; block = bytearray(400 << 20); time.sleep(120)"'


def test_a_replica_allocating_4x_its_limit_is_stopped_by_the_kernel_naming_rlimit_as(home: Path) -> None:
    async def scenario() -> JobStatus:
        backend = backend_for(home, memory_headroom=64 << 20)
        await backend.submit(request(home, job_name="hog4", mode="collective", trainers=1, entry_point=HOG, trainer_mem="100Mi"))
        return await wait_terminal(backend, "hog4")

    status = asyncio.run(scenario())
    assert status.phase == "Failed"
    reason = status.replicas[0].reason
    assert reason == "MemoryLimitExceeded: the kernel refused memory beyond 164Mi of address space (100Mi + 64Mi headroom, RLIMIT_AS)"
    assert reason in status.message and "MemoryError" in status.message
    assert leftover_processes(home, "hog4") == []


def test_without_a_kernel_limit_the_sampler_stops_it_and_says_so(home: Path) -> None:
    async def scenario() -> JobStatus:
        backend = backend_for(home, memory_headroom=0)
        await backend.submit(request(home, job_name="hog0", mode="collective", trainers=1, entry_point=HOG, trainer_mem="100Mi"))
        return await wait_terminal(backend, "hog0")

    status = asyncio.run(scenario())
    assert status.phase == "Failed"
    reason = status.replicas[0].reason
    assert reason is not None and reason.startswith("MemoryLimitExceeded: used ")
    assert " of 100Mi (resident memory, sampled; peak " in reason and reason.endswith(" MiB)")
    assert leftover_processes(home, "hog0") == []


def test_a_cgroup_that_cannot_be_made_falls_back_to_rlimit_as_and_the_log_says_why(home: Path, tmp_path: Path) -> None:
    async def scenario() -> tuple[JobStatus, str]:
        backend = backend_for(home, memory_headroom=64 << 20, cgroup_root=str(tmp_path / "no-such-cgroup"))
        await backend.submit(request(home, job_name="hogcg", mode="collective", trainers=1, entry_point=HOG, trainer_mem="100Mi"))
        status = await wait_terminal(backend, "hogcg")
        return status, await backend.read_logs("hogcg", "alice", "trainer", 0)

    status, log = asyncio.run(scenario())
    assert f"[paddle-nbext] cannot create the cgroup {tmp_path / 'no-such-cgroup'}/paddle-nbext-hogcg-trainer-0-" in log
    assert "; RLIMIT_AS holds it instead" in log
    reason = status.replicas[0].reason
    assert reason is not None and reason.endswith("(100Mi + 64Mi headroom, RLIMIT_AS)")
