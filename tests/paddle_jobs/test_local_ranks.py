"""Trainers of several ranks with real Paddle on the local backend (issue 23): a collective job of
2 trainers × 3 gloo ranks trains and succeeds, a rank that raises fails the job naming its trainer
and rank, and a `python -m paddle.distributed.launch` entry point runs the same job, one launch
per trainer rendezvousing through the master the job gives it."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

import pytest

from paddle_jobs.local_jobs import OWNER, backend_for, leftover_processes, losses, request, wait_terminal
from paddle_nbext.model.status import JobStatus

pytestmark = pytest.mark.paddle

#: 2 trainers x 3 ranks on a 2-core machine: six Paddle processes of ~300 MiB each.
RANKS: dict[str, Any] = {"mode": "collective", "trainers": 2, "procs_per_trainer": 3, "trainer_cpu": "500m", "trainer_mem": "3Gi"}
RANK_LINE = re.compile(r"^\[rank (\d)\] (.*)$")


def by_rank(log: str) -> dict[int, str]:
    """The trainer's log split per rank (its lines are prefixed `[rank r] `)."""
    found: dict[int, list[str]] = {}
    for line in log.splitlines():
        match = RANK_LINE.match(line)
        if match:
            found.setdefault(int(match[1]), []).append(match[2])
    return {rank: "\n".join(lines) for rank, lines in found.items()}


def test_two_trainers_of_three_ranks_train_and_succeed(home: Path) -> None:
    async def scenario() -> tuple[JobStatus, list[str]]:
        backend = backend_for(home)
        await backend.submit(request(home, job_name="ranks", entry_point="python collective_train.py --steps 60", **RANKS))
        status = await wait_terminal(backend, "ranks")
        return status, [await backend.read_logs("ranks", OWNER, "trainer", index) for index in range(2)]

    status, logs = asyncio.run(scenario())
    assert status.phase == "Succeeded", status.message
    assert [(r.role, r.index, r.phase) for r in status.replicas] == [("trainer", 0, "Succeeded"), ("trainer", 1, "Succeeded")]
    for index, log in enumerate(logs):
        ranks = by_rank(log)
        assert sorted(ranks) == [0, 1, 2], log[-3000:]
        for rank, text in ranks.items():
            assert f"trainer {3 * index + rank} of 6 training for 60 steps" in text, text[-2000:]
            values = losses(text)
            assert values[-1] < values[0] / 4, (index, rank, values)
    logs_dir = home / ".paddle-jobs" / "ranks" / "logs"
    for index in range(2):
        for rank in range(3):
            name = f"trainer-{index}{f'.rank-{rank}' if rank else ''}.metrics.jsonl"
            points = [json.loads(line) for line in (logs_dir / name).read_text().splitlines()]
            assert points[-1]["step"] == 60 and {p["rank"] for p in points} == {rank}, name
    assert leftover_processes(home, "ranks") == []


def test_a_rank_that_raises_fails_the_job_naming_trainer_and_rank(home: Path) -> None:
    entry = "python collective_train.py --steps 400 --step-delay 0.02 --raise-rank 4 --raise-step 10"

    async def scenario() -> tuple[JobStatus, str]:
        backend = backend_for(home)
        await backend.submit(request(home, job_name="rank-raises", entry_point=entry, **RANKS))
        return await wait_terminal(backend, "rank-raises"), await backend.read_logs("rank-raises", OWNER, "trainer", 1)

    status, log = asyncio.run(scenario())
    assert status.phase == "Failed"
    # Global rank 4 is rank 1 of trainer 1.
    # Named once: not "trainer 1 failed with exit code 1: trainer 1 rank 1 failed: ...".
    assert status.message == "trainer 1 rank 1 failed: ValueError: bad batch at step 10: x has NaN values", status.message
    assert "[rank 1] ValueError: bad batch at step 10: x has NaN values" in log
    assert leftover_processes(home, "rank-raises") == []


def test_a_launch_entry_point_runs_the_same_job(home: Path) -> None:
    entry = "python -m paddle.distributed.launch --nproc_per_node 3 collective_train.py --steps 60"
    fields = {**RANKS, "procs_per_trainer": 1}

    async def scenario() -> JobStatus:
        backend = backend_for(home)
        await backend.submit(request(home, job_name="launched", entry_point=entry, **fields))
        return await wait_terminal(backend, "launched")

    status = asyncio.run(scenario())
    logs_dir = home / ".paddle-jobs" / "launched" / "logs"
    assert status.phase == "Succeeded", status.message
    for index in range(2):
        for rank in range(3):
            worker = (logs_dir / f"trainer-{index}.launch" / f"workerlog.{rank}").read_text()
            assert f"trainer {3 * index + rank} of 6 training for 60 steps" in worker, worker[-2000:]
            values = losses(worker)
            assert values[-1] < values[0] / 4, (index, rank, values)
    assert leftover_processes(home, "launched") == []


def test_ps_trainers_of_two_ranks_are_four_trainers_to_the_pservers(home: Path) -> None:
    """In ps mode every rank of a trainer is one PS trainer: 2 trainers x 2 ranks train as
    trainers 0-3 against the pservers (which count all four) and the job succeeds."""
    fields: dict[str, Any] = {
        "pservers": 2,
        "trainers": 2,
        "procs_per_trainer": 2,
        "pserver_cpu": "500m",
        "trainer_cpu": "500m",
        "trainer_mem": "2Gi",
    }

    async def scenario() -> tuple[JobStatus, list[str]]:
        backend = backend_for(home)
        await backend.submit(request(home, job_name="ps-ranks", entry_point="python ps_train.py", **fields))
        status = await wait_terminal(backend, "ps-ranks")
        return status, [await backend.read_logs("ps-ranks", OWNER, "trainer", index) for index in range(2)]

    status, logs = asyncio.run(scenario())
    assert status.phase == "Succeeded", status.message
    for index, log in enumerate(logs):
        ranks = by_rank(log)
        assert sorted(ranks) == [0, 1], log[-3000:]
        for rank, text in ranks.items():
            assert f"trainer {2 * index + rank} done" in text, text[-2000:]
            values = losses(text)
            assert values[-1] < values[0], (index, rank, values)
    assert leftover_processes(home, "ps-ranks") == []
