"""Training health with real Paddle through the local backend: gloo collective jobs of two
trainers whose trainer 1 goes quiet (its peer keeps logging; no collective is pending, so gloo has
nothing to time out) are marked stalled in words and then warned about, restarted from their
checkpoint or failed as `on_stall` says; and a rank stopped with SIGSTOP inside the training loop,
whose peer then blocks in `all_reduce`, is marked stalled before gloo's own time-out fails the job
(gloo gives up after 30 s with Paddle 3.0; the stall watch here waits 3 s).

Every wait is for a state (the job's message, phase or timeline), never for a length of time."""

from __future__ import annotations

import asyncio
import json
import os
import signal
from pathlib import Path
from typing import Any

import pytest

from paddle_jobs.local_jobs import OWNER, backend_for, job_record, request, wait_terminal, wait_until

pytest.importorskip("paddle")
pytestmark = pytest.mark.paddle

#: Collective training that reports every step; after step 3 trainer 1 goes quiet (no report, no
#: output) until the file GO_FILE exists, while trainer 0 logs a heartbeat: a data loader stuck in
#: one trainer.  Only in the first attempt, so a restart trains through.  Saves a checkpoint at step 2.
#: With FINISH_FILE set, both trainers then log until that file exists.
QUIET = """\
import os, time
from pathlib import Path
import paddle
import paddle.distributed as dist
from paddle_nbext_job import flush, report, resume_from, save_checkpoint

dist.init_parallel_env()
rank = dist.get_rank()
go = Path(os.environ["GO_FILE"])
first_attempt = os.environ.get("PADDLE_NBEXT_ATTEMPT", "0") == "0"
resumed = resume_from()
start = resumed.step + 1 if resumed else 1
print(f"rank {rank} starts at step {start}", flush=True)
for step in range(start, 7):
    value = paddle.to_tensor([float(rank + 1)])
    dist.all_reduce(value)
    report(step, total=6, loss=1.0 / step)
    flush()
    print(f"rank {rank} step {step}", flush=True)
    if step == 2 and rank == 0:
        with save_checkpoint(step, ranks=1) as directory:
            Path(directory, "state.txt").write_text(str(step))
    if step == 3 and first_attempt:
        while not go.exists():
            if rank == 0:
                print("rank 0 waiting for its peer", flush=True)
            time.sleep(0.3)
finish = os.environ.get("FINISH_FILE")
while finish and not Path(finish).exists():  # the test's turn to look at the running job
    print(f"rank {rank} trained, waiting to finish", flush=True)
    time.sleep(0.3)
print(f"rank {rank} done", flush=True)
"""

#: Collective training that all_reduces and reports every step until STOP_FILE exists.
LOOP = """\
import os, time
from pathlib import Path
import paddle
import paddle.distributed as dist
from paddle_nbext_job import flush, report

dist.init_parallel_env()
rank = dist.get_rank()
stop = Path(os.environ["STOP_FILE"])
step = 0
while not stop.exists():
    step += 1
    value = paddle.to_tensor([float(rank + 1)])
    dist.all_reduce(value)
    report(step, loss=float(value.numpy()[0]))
    flush()
    print(f"rank {rank} step {step}", flush=True)
    time.sleep(0.2)
"""


def _submit_fields(home: Path, script: str, **fields: Any) -> dict[str, Any]:
    (home / "code" / "health_train.py").write_text(script)
    return {"entry_point": "python health_train.py", "mode": "collective", "trainers": 2, "trainer_cpu": "500m", **fields}


async def _timeline(backend: Any, name: str) -> list[dict[str, Any]]:
    entries: list[dict[str, Any]] = (await backend.timeline(name, OWNER))["entries"]
    return entries


def test_a_quiet_trainer_is_marked_stalled_and_the_mark_goes_when_it_trains_again(home: Path) -> None:
    asyncio.run(_a_quiet_trainer_is_marked_stalled_and_the_mark_goes_when_it_trains_again(home))


async def _a_quiet_trainer_is_marked_stalled_and_the_mark_goes_when_it_trains_again(home: Path) -> None:
    go, finish = home / "go", home / "finish"
    backend = backend_for(home)
    fields = _submit_fields(home, QUIET, stall_timeout=3, env={"GO_FILE": str(go), "FINISH_FILE": str(finish)})
    name = (await backend.submit(request(home, **fields)))["name"]
    try:
        status = await wait_until(backend, name, lambda s: "stalled" in s.message or s.terminal)
        assert status.phase == "Running", status.to_dict()
        assert status.message.startswith("Training is stalled: no progress for ")
        assert " since step 3; trainer 1 last wrote at " in status.message
        stalls = [entry for entry in await _timeline(backend, name) if entry["kind"] == "warning"]
        assert [(entry["role"], entry["index"]) for entry in stalls] == [("trainer", 1)]
        go.write_text("")
        status = await wait_until(backend, name, lambda s: "stalled" not in s.message or s.terminal)
        assert status.phase == "Running", status.to_dict()
        finish.write_text("")
        status = await wait_terminal(backend, name)
        assert status.phase == "Succeeded", status.to_dict()
        kinds = [entry["kind"] for entry in await _timeline(backend, name)]
        assert kinds.index("first_step") < kinds.index("checkpoint") < kinds.index("warning") < kinds.index("recovered")
        assert kinds[-1] == "ended"
    finally:
        go.write_text("")
        finish.write_text("")
        await backend.cancel(name, OWNER)


def test_on_stall_restart_resumes_from_the_checkpoint_and_counts_the_restart(home: Path) -> None:
    asyncio.run(_on_stall_restart_resumes_from_the_checkpoint_and_counts_the_restart(home))


async def _on_stall_restart_resumes_from_the_checkpoint_and_counts_the_restart(home: Path) -> None:
    go = home / "never"  # the first attempt never goes on: only the restart can finish the job
    backend = backend_for(home)
    fields = _submit_fields(home, QUIET, stall_timeout=3, on_stall="restart", max_restarts=1, env={"GO_FILE": str(go)})
    name = (await backend.submit(request(home, **fields)))["name"]
    try:
        status = await wait_terminal(backend, name)
        assert status.phase == "Succeeded", status.to_dict()
        assert "restart 1 of 1: the job stalled (no progress for " in status.message
        assert "resumed from step 2" in status.message
        assert all(replica.restarts == 1 for replica in status.replicas)
        log = await backend.read_logs(name, OWNER, "trainer", 1)
        assert "rank 1 starts at step 3" in log  # the second attempt went on from the checkpoint
        entries = await _timeline(backend, name)
        kinds = [entry["kind"] for entry in entries]
        assert kinds.index("warning") < kinds.index("restart") < kinds.index("resumed")
        assert "Every replica resumes from step 2" in entries[kinds.index("resumed")]["text"]
    finally:
        await backend.cancel(name, OWNER)


def test_on_stall_fail_ends_the_job_in_words(home: Path) -> None:
    asyncio.run(_on_stall_fail_ends_the_job_in_words(home))


async def _on_stall_fail_ends_the_job_in_words(home: Path) -> None:
    go = home / "never"
    backend = backend_for(home)
    fields = _submit_fields(home, QUIET, stall_timeout=3, on_stall="fail", env={"GO_FILE": str(go)})
    name = (await backend.submit(request(home, **fields)))["name"]
    try:
        status = await wait_terminal(backend, name)
        assert status.phase == "Failed", status.to_dict()
        assert status.message.startswith("The job stalled: no progress for ")
        assert "since step 3; trainer 1 last wrote at " in status.message and status.message.endswith("on_stall is 'fail'.")
        assert {replica.phase for replica in status.replicas} == {"Stopped"}
    finally:
        await backend.cancel(name, OWNER)


def test_a_rank_stopped_by_sigstop_is_marked_stalled_before_gloo_times_out(home: Path) -> None:
    asyncio.run(_a_rank_stopped_by_sigstop_is_marked_stalled_before_gloo_times_out(home))


async def _a_rank_stopped_by_sigstop_is_marked_stalled_before_gloo_times_out(home: Path) -> None:
    stop = home / "stop"
    backend = backend_for(home)
    fields = _submit_fields(home, LOOP, stall_timeout=3, env={"STOP_FILE": str(stop)})
    name = (await backend.submit(request(home, **fields)))["name"]
    try:
        await wait_until(backend, name, lambda s: s.terminal or "step" in _steps(home, name))
        leader = job_record(home, name)["processes"]["trainer-1"]
        os.killpg(leader, signal.SIGSTOP)  # the whole replica: its launcher and its Paddle process
        status = await wait_until(backend, name, lambda s: "stalled" in s.message or s.terminal)
        assert status.phase == "Running", status.to_dict()  # before gloo's own time-out
        assert status.message.startswith("Training is stalled: no progress for ")
        # Then gloo gives up on the stopped peer and the job fails with gloo's words.
        status = await wait_terminal(backend, name, timeout=600)
        assert status.phase == "Failed", status.to_dict()
        assert "TIMEOUT" in status.message, status.message
        kinds = [entry["kind"] for entry in await _timeline(backend, name)]
        assert kinds.index("warning") < kinds.index("replica_ended") < kinds.index("ended")
    finally:
        stop.write_text("")
        await backend.cancel(name, OWNER)


def _steps(home: Path, name: str) -> str:
    """Trainer 1's reports so far (empty before its first)."""
    path = home / ".paddle-jobs" / name / "logs" / "trainer-1.metrics.jsonl"
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return ""
    return "step" if len([line for line in lines if json.loads(line).get("step", 0) >= 3]) else ""
