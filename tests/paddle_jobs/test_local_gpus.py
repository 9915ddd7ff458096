"""GPUs on the local backend come from `c.LocalBackend.gpu_pool` through CUDA_VISIBLE_DEVICES.

No GPU is needed: each trainer prints the devices it was given, and the test reads that from the
replica logs, which is exactly what a Paddle process would see."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from paddle_jobs.local_jobs import OWNER, backend_for, leftover_processes, request, wait_terminal, wait_until
from paddle_nbext.model.status import JobStatus

PRINT_DEVICES = "echo devices=$CUDA_VISIBLE_DEVICES; sleep 30"


def test_each_trainer_gets_its_own_gpus_and_a_job_waits_for_free_ones(home: Path) -> None:
    async def scenario() -> tuple[list[str], JobStatus, JobStatus]:
        backend = backend_for(home, gpu_pool=[0, 1, 2])
        spec: dict[str, Any] = {"mode": "collective", "trainers": 2, "trainer_gpu": 1, "entry_point": PRINT_DEVICES}
        await backend.submit(request(home, job_name="gpus", **spec))
        await wait_until(backend, "gpus", lambda s: s.phase == "Running")
        logs: list[str] = []
        for index in (0, 1):
            while "devices=" not in (text := await backend.read_logs("gpus", OWNER, "trainer", index)):
                await asyncio.sleep(0.2)
            logs.append(text)
        # Two of three GPUs are taken: a job asking for two more must wait, saying why.
        await backend.submit(request(home, job_name="more-gpus", **spec))
        waiting = await wait_until(backend, "more-gpus", lambda s: s.phase == "Pending" and "GPU" in s.message)
        await backend.cancel("gpus", OWNER)
        await wait_until(backend, "more-gpus", lambda s: s.phase == "Running")
        await backend.cancel("more-gpus", OWNER)
        return logs, waiting, await wait_terminal(backend, "gpus")

    logs, waiting, first = asyncio.run(scenario())
    devices = [line.split("=", 1)[1].strip() for text in logs for line in text.splitlines() if line.startswith("devices=")]
    assert len(devices) == 2 and all(d in ("0", "1", "2") for d in devices)
    assert devices[0] != devices[1], "two trainers must never share a GPU"
    assert waiting.phase == "Pending"
    assert first.phase == "Cancelled"
    assert leftover_processes(home, "gpus") == [] and leftover_processes(home, "more-gpus") == []


def test_each_rank_gets_its_gpu_of_its_trainers_share_of_the_pool(home: Path) -> None:
    """An 8-GPU pool runs 2 trainers x 4 GPUs as 8 ranks: each trainer sees its 4 GPUs, each rank
    selects its own of them (counted inside the trainer's CUDA_VISIBLE_DEVICES) and no rank is
    moved to gloo."""
    entry = (
        'echo "rank=$PADDLE_GLOBAL_RANK visible=$CUDA_VISIBLE_DEVICES selected=$FLAGS_selected_gpus backend=${PADDLE_DISTRI_BACKEND:-none}"'
    )

    async def scenario() -> tuple[JobStatus, list[str]]:
        backend = backend_for(home, gpu_pool=[7, 6, 5, 4, 3, 2, 1, 0])
        spec: dict[str, Any] = {"mode": "collective", "trainers": 2, "trainer_gpu": 4, "entry_point": entry}
        await backend.submit(request(home, job_name="rank-gpus", **spec))
        status = await wait_terminal(backend, "rank-gpus")
        return status, [await backend.read_logs("rank-gpus", OWNER, "trainer", index) for index in (0, 1)]

    status, logs = asyncio.run(scenario())
    assert status.phase == "Succeeded", status.message
    seen = {}
    for index, text in enumerate(logs):
        lines = sorted(line for line in text.splitlines() if " rank=" in line)
        assert len(lines) == 4, text
        fields = [dict(part.split("=", 1) for part in line.split("] ", 1)[1].split()) for line in lines]
        assert {f["visible"] for f in fields} == {fields[0]["visible"]} and len(fields[0]["visible"].split(",")) == 4
        for field in fields:
            assert int(field["rank"]) // 4 == index
            assert field["selected"] == str(int(field["rank"]) % 4) and field["backend"] == "none"
        seen[index] = set(fields[0]["visible"].split(","))
    assert not seen[0] & seen[1] and seen[0] | seen[1] == {str(g) for g in range(8)}
    assert leftover_processes(home, "rank-gpus") == []
