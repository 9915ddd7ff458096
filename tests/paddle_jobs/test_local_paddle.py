"""Real Paddle jobs through the local backend: parameter-server and collective training end to
end, a crashing trainer, a killed pserver, cancel, and a backend recreated mid-run (as after a
Jupyter restart).  Each job costs seconds on a busy machine, so one run serves several checks."""

from __future__ import annotations

import asyncio
import os
import re
import signal
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from paddle_jobs.local_jobs import (
    OWNER,
    backend_for,
    job_record,
    leftover_processes,
    losses,
    make_home,
    request,
    wait_for_log,
    wait_terminal,
    wait_until,
)
from paddle_nbext.model.status import JobStatus

pytestmark = pytest.mark.paddle

PS: dict[str, Any] = {"pservers": 2, "trainers": 2, "pserver_cpu": "500m", "trainer_cpu": "500m"}
SLOW = "python ps_train.py --steps 400 --step-delay 0.05 --print-every 10"


@pytest.fixture(scope="module")
def ps_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A 2+2 PS job submitted by one backend object and finished under another one (a server
    restart in between), with its events and a log follower running across the end."""
    home = make_home(tmp_path_factory.mktemp("ps"))

    async def scenario() -> dict[str, Any]:
        first = backend_for(home)
        await first.start()
        await first.submit(request(home, job_name="ps-ok", entry_point="python ps_train.py", **PS))
        await wait_until(first, "ps-ok", lambda s: s.phase == "Running")
        await first.stop()
        second = backend_for(home)
        await second.start()
        seen: list[str] = []
        try:
            follower = asyncio.create_task(_collect(second.follow_logs("ps-ok", OWNER, "trainer", 0)))
            async with second.events.subscribe() as queue:
                while True:
                    event = await asyncio.wait_for(queue.get(), timeout=240)
                    if event.job and event.name == "ps-ok":
                        seen.append(event.job["phase"])
                        if event.job["phase"] in ("Succeeded", "Failed", "Cancelled"):
                            break
            followed = await asyncio.wait_for(follower, timeout=60)
            return {
                "home": home,
                "events": seen,
                "status": await second.get_job("ps-ok", OWNER),
                "followed": followed,
                "logs": [await second.read_logs("ps-ok", OWNER, "trainer", i) for i in (0, 1)],
                "tail": await second.read_logs("ps-ok", OWNER, "trainer", 0, tail=2),
            }
        finally:
            await second.stop()

    return asyncio.run(scenario())


async def _collect(stream: AsyncIterator[str]) -> str:
    return "".join([chunk async for chunk in stream])


def test_ps_job_succeeds_under_a_recreated_backend(ps_run: dict[str, Any]) -> None:
    status = ps_run["status"]
    assert status.phase == "Succeeded", status.message
    assert ps_run["events"][-1] == "Succeeded"
    phases = {(r.role, r.index): (r.phase, r.exit_code) for r in status.replicas}
    assert phases[("trainer", 0)] == ("Succeeded", 0) and phases[("trainer", 1)] == ("Succeeded", 0)
    # Pservers never exit by themselves: the master stopped them, which is a normal end.
    assert phases[("pserver", 0)][0] == "Stopped" and phases[("pserver", 1)][0] == "Stopped"


def test_ps_trainers_loss_falls(ps_run: dict[str, Any]) -> None:
    for log in ps_run["logs"]:
        values = losses(log)
        assert len(values) >= 5, log[-2000:]
        assert values[-1] < values[0] / 4, values


def test_ps_logs_follow_until_the_end_and_tail(ps_run: dict[str, Any]) -> None:
    assert "step 0 loss" in ps_run["followed"] and "trainer 0 done" in ps_run["followed"]
    assert len(ps_run["tail"].splitlines()) == 2
    assert ps_run["logs"][0].endswith(ps_run["tail"])


def test_paddle_info_and_warning_lines_are_quiet_by_default(ps_run: dict[str, Any]) -> None:
    """Paddle's C++ INFO/WARNING lines (glog: `I1201 06:29:17.266114 569 file.cc:12] ...`) are
    most of a log at Paddle's default level and read like failures; the launcher hides them."""
    glog = re.compile(r"^[IW]\d{4} \d{2}:\d{2}:\d{2}\.\d+", re.M)
    for log in ps_run["logs"]:
        assert "step 0 loss" in log
        assert not glog.findall(log), log[-2000:]


def test_ps_job_leaves_no_process(ps_run: dict[str, Any]) -> None:
    assert leftover_processes(ps_run["home"], "ps-ok") == []


def test_collective_job_succeeds_and_learns(home: Path) -> None:
    async def scenario() -> tuple[JobStatus, str]:
        backend = backend_for(home)
        await backend.submit(
            request(home, job_name="dp", mode="collective", trainers=2, trainer_cpu="500m", entry_point="python collective_train.py")
        )
        return await wait_terminal(backend, "dp"), await backend.read_logs("dp", OWNER, "trainer", 1)

    status, log = asyncio.run(scenario())
    assert status.phase == "Succeeded", status.message
    values = losses(log)
    assert values[-1] < values[0] / 4, values
    assert leftover_processes(home, "dp") == []


def test_crashing_trainer_fails_the_job_with_code_and_tail(home: Path) -> None:
    entry = "python ps_train.py --crash-trainer 1 --crash-step 20 --crash-code 3 --step-delay 0.02"

    async def scenario() -> JobStatus:
        backend = backend_for(home)
        await backend.submit(request(home, job_name="crash", entry_point=entry, **PS))
        return await wait_terminal(backend, "crash")

    status = asyncio.run(scenario())
    assert status.phase == "Failed"
    assert "trainer 1 failed with exit code 3" in status.message
    assert "simulated crash at step 20" in status.message  # the log tail
    phases = {(r.role, r.index): r for r in status.replicas}
    assert phases[("trainer", 1)].exit_code == 3 and phases[("trainer", 1)].phase == "Failed"
    assert phases[("pserver", 0)].phase == "Stopped" and phases[("pserver", 1)].phase == "Stopped"
    assert leftover_processes(home, "crash") == []


def test_a_trainer_that_raises_fails_the_job_with_the_exceptions_own_words(home: Path) -> None:
    """User code fails with an exception, and Paddle prints its shutdown lines after the
    traceback: the job's message is the exception line, not Paddle's last log line."""
    entry = "python ps_train.py --raise-trainer 1 --raise-step 20 --step-delay 0.02"

    async def scenario() -> tuple[JobStatus, str]:
        backend = backend_for(home)
        # Paddle's own INFO lines on (they are quiet by default), as a user debugging would.
        await backend.submit(request(home, job_name="raises", entry_point=entry, env={"GLOG_minloglevel": "0"}, **PS))
        return await wait_terminal(backend, "raises"), await backend.read_logs("raises", OWNER, "trainer", 1)

    status, log = asyncio.run(scenario())
    assert status.phase == "Failed"
    assert "Traceback (most recent call last):" in log
    after = log.split("ValueError: bad batch", 1)[1].strip().splitlines()[1:]
    assert after, log[-2000:]  # Paddle's own lines follow the traceback
    assert status.message.startswith("trainer 1 failed with exit code 1: ValueError: bad batch at step 20: x has NaN values"), (
        status.message
    )
    assert leftover_processes(home, "raises") == []


def test_killed_pserver_fails_the_job(home: Path) -> None:
    async def scenario() -> JobStatus:
        backend = backend_for(home)
        await backend.submit(request(home, job_name="pskill", entry_point=SLOW, **PS))
        await wait_for_log(backend, "pskill", "trainer", 0, "step 20 loss")
        os.kill(job_record(home, "pskill")["processes"]["pserver-1"], signal.SIGKILL)
        return await wait_terminal(backend, "pskill")

    status = asyncio.run(scenario())
    assert status.phase == "Failed"
    assert "pserver 1 ended with killed by signal 9" in status.message
    assert all(r.phase == "Stopped" for r in status.replicas if r.role == "trainer")
    assert leftover_processes(home, "pskill") == []


def test_cancel_mid_run_keeps_logs(home: Path) -> None:
    async def scenario() -> tuple[JobStatus, str, JobStatus]:
        backend = backend_for(home)
        await backend.submit(request(home, job_name="stopme", entry_point=SLOW, **PS))
        await wait_for_log(backend, "stopme", "trainer", 1, "step 10 loss")
        status = await backend.cancel("stopme", OWNER)
        return status, await backend.read_logs("stopme", OWNER, "trainer", 1), await backend.get_job("stopme", OWNER)

    status, log, again = asyncio.run(scenario())
    assert status.phase == "Cancelled" and again.phase == "Cancelled"
    assert all(r.phase == "Stopped" for r in status.replicas)
    assert "step 10 loss" in log
    assert leftover_processes(home, "stopme") == []
