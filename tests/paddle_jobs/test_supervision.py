"""No process of a local job runs unsupervised: a replica runs its entry point without a shell in
between (unless it needs one), its processes die when its master dies whatever was killed
before, and a restarted server stops what a job whose master is gone left running.

Processes are found the way an operator would: by scanning /proc for the job's name in their
environment (every replica process inherits `PADDLE_NBEXT_JOB`), not through the job's records.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import psutil
import pytest

from paddle_jobs.local_jobs import OWNER, backend_for, job_record, request, wait_for_log, wait_terminal, wait_until
from paddle_nbext.model.status import JobStatus

SLOW_PS = "python ps_train.py --steps 2000 --step-delay 0.05 --print-every 10"
SLEEPER = "python -c \"import time; print('up', flush=True); time.sleep(300)\""


def job_processes(name: str) -> list[int]:
    """Pids of live processes whose environment says they belong to job `name`."""
    marker = f"PADDLE_NBEXT_JOB={name}".encode()
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"{entry.path}/environ", "rb") as handle:
                environ = handle.read().split(b"\0")
            if marker in environ and psutil.Process(int(entry.name)).status() != psutil.STATUS_ZOMBIE:
                found.append(int(entry.name))
        except (OSError, psutil.Error):
            continue
    return found


def settle(name: str, wait: float = 30.0) -> list[int]:
    """The job's processes once they had `wait` seconds to go (returns early when none are left)."""
    deadline = time.monotonic() + wait
    while (alive := job_processes(name)) and time.monotonic() < deadline:
        time.sleep(0.2)
    return alive


def master_pid(home: Path, name: str) -> int:
    return int((home / ".paddle-jobs" / name / "master.pid").read_text())


SERVER = textwrap.dedent(
    """
    import asyncio, sys
    sys.path.insert(0, {tests!r})
    from pathlib import Path
    from paddle_jobs.local_jobs import backend_for, request

    async def main():
        backend = backend_for(Path({home!r}))
        await backend.start()
        await backend.submit(request(Path({home!r}), job_name={name!r}, entry_point={entry!r}, **{fields!r}))
        print("submitted", flush=True)
        await asyncio.sleep(3600)

    asyncio.run(main())
    """
)


@pytest.mark.paddle
def test_kill_9_of_the_server_then_of_the_master_leaves_no_process(home: Path) -> None:
    fields = {"pservers": 1, "trainers": 2, "pserver_cpu": "500m", "trainer_cpu": "500m"}
    code = SERVER.format(tests=str(Path(__file__).parents[1]), home=str(home), name="sup", entry=SLOW_PS, fields=fields)
    server = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None and server.stdout.readline().strip() == "submitted"

        async def training() -> None:
            await wait_for_log(backend_for(home), "sup", "trainer", 1, "step 10 loss")

        asyncio.run(training())
        assert len(job_processes("sup")) >= 6  # 3 launchers and the 3 Paddle processes they run
    finally:
        server.kill()  # kill -9 of the server
        server.wait()
    os.kill(master_pid(home, "sup"), signal.SIGKILL)
    assert settle("sup") == []


def test_the_entry_point_runs_without_a_shell_when_it_needs_none(home: Path) -> None:
    async def scenario() -> list[list[str]]:
        backend = backend_for(home)
        await backend.submit(request(home, job_name="direct", mode="collective", trainers=1, entry_point=SLEEPER))
        await wait_for_log(backend, "direct", "trainer", 0, "up")
        leader = job_record(home, "direct")["processes"]["trainer-0"]
        commands = [child.cmdline() for child in psutil.Process(leader).children(recursive=True)]
        await backend.cancel("direct", OWNER)
        return commands

    commands = asyncio.run(scenario())
    assert len(commands) == 1 and os.path.basename(commands[0][0]).startswith("python") and commands[0][1] == "-c"
    assert settle("direct") == []


def test_a_shell_entry_point_and_what_it_starts_in_the_background_all_end_with_the_master(home: Path) -> None:
    entry = "sleep 300 & " + SLEEPER

    async def scenario() -> None:
        backend = backend_for(home)
        await backend.submit(request(home, job_name="shell", mode="collective", trainers=1, entry_point=entry))
        await wait_for_log(backend, "shell", "trainer", 0, "up")

    asyncio.run(scenario())
    assert len(job_processes("shell")) >= 3  # launcher, sh or its background sleep, python
    os.kill(master_pid(home, "shell"), signal.SIGKILL)
    assert settle("shell") == []


def test_a_restarted_server_stops_what_a_job_whose_master_is_gone_left_running(home: Path) -> None:
    """The launcher is stopped (so it cannot act on its master's death), then the master and the
    launcher are killed: the entry point is an orphan of init, found and stopped by the next
    server, which records the job as ended."""

    async def start() -> None:
        backend = backend_for(home)
        await backend.submit(request(home, job_name="orphan", mode="collective", trainers=1, entry_point=SLEEPER))
        await wait_for_log(backend, "orphan", "trainer", 0, "up")

    asyncio.run(start())
    launcher = job_record(home, "orphan")["processes"]["trainer-0"]
    os.kill(launcher, signal.SIGSTOP)
    os.kill(master_pid(home, "orphan"), signal.SIGKILL)
    os.kill(launcher, signal.SIGKILL)
    time.sleep(1.0)  # let the kernel re-parent the entry point
    orphans = job_processes("orphan")
    assert orphans and all(psutil.Process(pid).ppid() != launcher for pid in orphans)

    async def restart() -> str:
        backend = backend_for(home)
        await backend.start()
        try:
            status = await wait_until(backend, "orphan", lambda s: s.phase == "Failed")
            return status.message
        finally:
            await backend.stop()

    assert "master stopped" in asyncio.run(restart())
    assert settle("orphan") == []


@pytest.mark.paddle
def test_a_killed_ps_trainer_under_max_restarts_1_restarts_the_job_which_completes(home: Path) -> None:
    """Restarted alone, a PS trainer waits for ever at the pservers' barrier for its peers (the
    job read "1/2 trainers finished" for good); the whole job is started again and completes."""
    fields: dict[str, Any] = {"pservers": 1, "trainers": 2, "pserver_cpu": "500m", "trainer_cpu": "500m", "max_restarts": 1}
    entry = "python ps_train.py --steps 120 --step-delay 0.02 --print-every 10"

    async def scenario() -> tuple[JobStatus, str, str]:
        backend = backend_for(home)
        await backend.start()
        try:
            await backend.submit(request(home, job_name="again", entry_point=entry, **fields))
            await wait_for_log(backend, "again", "trainer", 1, "step 20 loss")
            leader = job_record(home, "again")["processes"]["trainer-1"]
            (paddle,) = psutil.Process(leader).children()
            paddle.kill()  # the trainer's Python itself, as the OOM killer or a user would
            status = await wait_terminal(backend, "again")
            previous = await backend.read_logs("again", OWNER, "trainer", 1, previous=True)
            current = await backend.read_logs("again", OWNER, "trainer", 1)
            return status, previous, current
        finally:
            await backend.stop()

    status, previous, current = asyncio.run(scenario())
    assert status.phase == "Succeeded", status.message
    assert {(r.role, r.index): r.restarts for r in status.replicas} == {("pserver", 0): 1, ("trainer", 0): 1, ("trainer", 1): 1}
    assert "step 20 loss" in previous and "trainer 1 done" not in previous
    assert "restart 1 of trainer-1" in current and "trainer 1 done" in current
    assert settle("again") == []
