"""Real Paddle, local backend: a collective job that saves a checkpoint every K steps is killed
after a checkpoint, restarts whole, resumes at the checkpoint's step + 1 and ends Succeeded with
one continuous curve (issue 26)."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path
from typing import Any

import pytest

from paddle_jobs.local_jobs import OWNER, backend_for, job_record, request, wait_terminal, wait_until
from paddle_nbext.model.status import JobStatus
from paddle_nbext_server.handlers.health import goodput_of
from paddle_nbext_server.runtime import paddle_nbext_job

pytestmark = pytest.mark.paddle

STEPS = 80


async def read_metrics(backend: Any, name: str) -> dict[str, Any]:
    files = await backend.metrics_files(name, OWNER)
    return await asyncio.to_thread(backend.metrics.read, name, files, None, None)


def test_a_killed_collective_job_restarts_whole_and_resumes_from_its_checkpoint(home: Path) -> None:
    name = "ckpt-resume"
    checkpoints = home / ".paddle-jobs" / name / "checkpoints"

    async def scenario() -> dict[str, Any]:
        backend = backend_for(home)
        await backend.start()
        try:
            entry = f"python collective_train.py --steps {STEPS} --step-delay 0.1 --checkpoint-every 10 --print-every 1"
            await backend.submit(
                request(home, job_name=name, entry_point=entry, trainers=2, trainer_cpu="500m", max_restarts=1, keep_checkpoints=2)
            )

            def saved_twenty(status: JobStatus) -> bool:
                assert status.phase not in ("Succeeded", "Failed", "Cancelled"), f"ended before the kill: {status.to_dict()}"
                latest = paddle_nbext_job.latest(checkpoints)
                return latest is not None and latest.step >= 20

            await wait_until(backend, name, saved_twenty)
            killed_after = paddle_nbext_job.latest(checkpoints)
            assert killed_after is not None
            group = job_record(home, name)["processes"]["trainer-1"]
            os.killpg(group, signal.SIGKILL)  # a crash of trainer 1: no chance to clean up
            resumed = await wait_until(backend, name, lambda s: "resumed from step" in s.message or s.phase in ("Succeeded", "Failed"))
            final = await wait_terminal(backend, name)
            return {
                "killed_after": killed_after.step,
                "resumed": resumed,
                "final": final,
                "metrics": await read_metrics(backend, name),
                "goodput": await goodput_of(backend, name, OWNER),
                "logs": [await backend.read_logs(name, OWNER, "trainer", i) for i in (0, 1)],
            }
        finally:
            await backend.stop()

    result = asyncio.run(scenario())
    final, resumed = result["final"], result["resumed"]
    assert final.phase == "Succeeded", final.to_dict()
    assert all(replica.restarts == 1 for replica in final.replicas), final.to_dict()
    # The job said where it resumed from: the latest checkpoint when it restarted.
    words = resumed.message
    assert "resumed from step " in words, resumed.to_dict()
    step = int(words.split("resumed from step ")[1].split(")")[0].split(";")[0].rstrip("."))
    assert step >= result["killed_after"] and step % 10 == 0
    # Every rank loaded that checkpoint (the restarted attempt's log).
    for index, log in enumerate(result["logs"]):
        assert f"trainer {index} resumed from step {step}" in log, log[-2000:]
    # One continuous curve per trainer: every step 1..STEPS once, in order, and the restart marked
    # where the resumed attempt's first point is (the checkpoint's step + 1).
    # Trainer 0 saves (and so flushes its points with each checkpoint): its curve is whole.
    # Trainer 1 was SIGKILLed: what it reported after its last flush (at most half a second) is
    # lost, but nothing is there twice or goes back, and the resumed attempt's points are all there.
    for replica in result["metrics"]["replicas"]:
        steps = replica["series"]["loss"]["step"]
        if replica["index"] == 0:
            assert steps == list(range(1, STEPS + 1)), steps
        assert steps == sorted(set(steps)) and steps[-(STEPS - step) :] == list(range(step + 1, STEPS + 1)), (replica["index"], steps)
        assert [mark["step"] for mark in replica["restarts"]] == [step + 1], replica["restarts"]
    # Goodput: the restart is one recovery whose seconds are lost; the rest of the wall time is
    # training or the start (issue 46).
    goodput = result["goodput"]
    assert goodput["recoveries"] == 1 and goodput["lost_seconds"] > 0 and 0 < goodput["fraction"] < 1, goodput
    assert goodput["training_seconds"] + goodput["lost_seconds"] <= goodput["wall_seconds"], goodput
    # Retention kept the last 2 complete checkpoints and no partial one (beside the attempts'
    # markers, `.attempts/`: one per whole start).
    assert sorted(p.name for p in checkpoints.iterdir()) == [".attempts", "step-000000000070", "step-000000000080"]
    assert sorted(p.name for p in (checkpoints / ".attempts").iterdir()) == ["0", "1"]
