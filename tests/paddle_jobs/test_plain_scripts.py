"""What a new user tries first, as real Paddle jobs on the local backend: a plain script with no
mode, a script that never serves submitted in ps mode, and user code that raises in collective
mode. Each ends the way the user reads it: Succeeded, or Failed in the error's own words."""

from __future__ import annotations

import asyncio
import shlex
from pathlib import Path

from paddle_jobs.local_jobs import OWNER, backend_for, leftover_processes, request, wait_terminal
from paddle_nbext.model.status import JobStatus

# Trainers train longer than a pserver takes to run the same plain code and end (as in the
# reported case, where Paddle's import on the trainers outlasted the pserver's exit).
NEVER_SERVES = "python -c \"import os, time, paddle; time.sleep(4 if os.environ['TRAINING_ROLE'] == 'TRAINER' else 0); print('hi')\""


def test_a_plain_script_with_no_mode_runs_as_trainers_and_succeeds(home: Path) -> None:
    async def scenario() -> tuple[JobStatus, str]:
        backend = backend_for(home)
        await backend.submit(
            request(home, job_name="plain", entry_point="python -c \"import paddle; print('hello from', paddle.__version__)\"", trainers=2)
        )
        return await wait_terminal(backend, "plain"), await backend.read_logs("plain", OWNER, "trainer", 1)

    status, log = asyncio.run(scenario())
    assert status.phase == "Succeeded", status.message
    assert status.spec["mode"] == "collective" and status.spec["pservers"] == 0
    assert sorted((r.role, r.index) for r in status.replicas) == [("trainer", 0), ("trainer", 1)]
    assert "hello from 3." in log


def test_a_ps_job_whose_code_never_serves_fails_saying_what_to_do(home: Path) -> None:
    async def scenario() -> JobStatus:
        backend = backend_for(home)
        await backend.submit(request(home, job_name="noserve", entry_point=NEVER_SERVES, mode="ps", pservers=1, trainers=1))
        return await wait_terminal(backend, "noserve")

    status = asyncio.run(scenario())
    assert status.phase == "Failed"
    assert status.message.startswith("pserver 0 ended with exit code 0 before the trainers finished: its code never served."), (
        status.message
    )
    assert "fleet.run_server()" in status.message and "mode=collective" in status.message
    assert leftover_processes(home, "noserve") == []


def test_a_collective_rank_that_raises_fails_with_the_exceptions_own_words(home: Path) -> None:
    """The other rank aborts when its peer dies; the job names the rank whose code raised."""
    entry = "python collective_train.py --raise-rank 1 --raise-step 5 --step-delay 0.05"

    async def scenario() -> tuple[JobStatus, str]:
        backend = backend_for(home)
        await backend.submit(
            request(
                home,
                job_name="dpraise",
                mode="collective",
                trainers=2,
                trainer_cpu="500m",
                entry_point=entry,
                env={"GLOG_minloglevel": "0"},
            )
        )
        return await wait_terminal(backend, "dpraise"), await backend.read_logs("dpraise", OWNER, "trainer", 1)

    status, log = asyncio.run(scenario())
    assert status.phase == "Failed"
    assert "Traceback (most recent call last):" in log
    assert "trainer 1 failed with exit code 1: ValueError: bad batch at step 5: x has NaN values" in status.message, status.message
    assert leftover_processes(home, "dpraise") == []


def test_the_user_guides_minimal_ps_cell_trains_as_documented(home: Path) -> None:
    """The cell the user guide offers as a working parameter-server job is one: its body run
    with its flags, as `%%paddle_submit` runs it (written as paddle_entry.py), succeeds."""
    guide = (Path(__file__).resolve().parents[2] / "docs" / "user-guide.md").read_text(encoding="utf-8")
    section = guide.split("### Parameter-server jobs", 1)[1].split("\n### ", 1)[0]
    cell = section.split("```python\n", 1)[1].split("```", 1)[0]
    magic, body = cell.split("\n", 1)
    flags = shlex.split(magic)[1:]
    fields = {flags[i][2:].replace("-", "_"): flags[i + 1] for i in range(0, len(flags), 2) if flags[i] != "--wait"}
    assert fields == {"job_name": "ps-minimal", "pservers": "1", "trainers": "2"}

    async def scenario() -> tuple[JobStatus, str]:
        backend = backend_for(home)
        await backend.submit(request(home, entry_script=body, entry_point="python paddle_entry.py", **fields))
        return await wait_terminal(backend, "ps-minimal"), await backend.read_logs("ps-minimal", OWNER, "trainer", 1)

    status, log = asyncio.run(scenario())
    assert status.phase == "Succeeded", status.message
    assert status.spec["mode"] == "ps"
    losses = [float(line.split()[-1]) for line in log.splitlines() if line.startswith("step ")]
    assert len(losses) == 5 and losses[-1] < losses[0], log[-2000:]
