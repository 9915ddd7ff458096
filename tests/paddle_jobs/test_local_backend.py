"""The local backend with small shell/Python jobs (no Paddle): admission, memory limit, timeout,
restarts, a killed master, refused packages and dry runs.  Real masters and launchers run."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from paddle_jobs.local_jobs import (
    OWNER,
    TERMINAL,
    backend_for,
    job_record,
    leftover_processes,
    request,
    wait_terminal,
    wait_until,
)
from paddle_nbext.model.status import JobStatus
from paddle_nbext_server.backends.base import SubmitRequest
from paddle_nbext_server.backends.local import LocalBackend
from paddle_nbext_server.backends.local.record_files import read_record
from paddle_nbext_server.backends.local.records import Plan
from paddle_nbext_server.errors import InvalidRequest, JobExists, JobNotFound

SLEEPER = "sleep 120"


def collective(**fields: Any) -> dict[str, Any]:
    return {"mode": "collective", "trainers": 1, "entry_point": SLEEPER, **fields}


def test_memory_limit_exceeded_stops_the_replica(home: Path) -> None:
    hog = "python -c \"import time; block = b'x' * (300 << 20); time.sleep(120)\""

    async def scenario() -> JobStatus:
        backend = backend_for(home)
        await backend.submit(request(home, **collective(job_name="hog", entry_point=hog, trainer_mem="100Mi")))
        return await wait_terminal(backend, "hog")

    status = asyncio.run(scenario())
    assert status.phase == "Failed"
    assert "MemoryLimitExceeded: used" in status.message and "of 100Mi" in status.message
    reason = status.replicas[0].reason
    assert reason is not None and reason.startswith("MemoryLimitExceeded")
    assert leftover_processes(home, "hog") == []


def test_job_that_does_not_fit_waits_pending_then_starts(home: Path) -> None:
    async def scenario() -> tuple[JobStatus, JobStatus, JobStatus]:
        backend = backend_for(home, max_cpu=1.0, cpu_overcommit=1.0)
        await backend.submit(request(home, **collective(job_name="first")))
        await wait_until(backend, "first", lambda s: s.phase == "Running")
        await backend.submit(request(home, **collective(job_name="second")))
        waiting = await wait_until(backend, "second", lambda s: "Waiting for resources:" in s.message)
        await backend.cancel("first", OWNER)
        started = await wait_until(backend, "second", lambda s: s.phase == "Running")
        cancelled = await backend.cancel("second", OWNER)
        return waiting, started, cancelled

    waiting, started, cancelled = asyncio.run(scenario())
    assert waiting.phase == "Pending"
    assert "1 CPU" in waiting.message and "first" in waiting.message
    assert started.phase == "Running"
    assert cancelled.phase == "Cancelled"
    assert leftover_processes(home, "first") == [] and leftover_processes(home, "second") == []


def test_timeout_fails_with_deadline_exceeded(home: Path) -> None:
    async def scenario() -> JobStatus:
        backend = backend_for(home)
        await backend.submit(request(home, **collective(job_name="slow", timeout=2)))
        return await wait_terminal(backend, "slow")

    status = asyncio.run(scenario())
    assert status.phase == "Failed" and "DeadlineExceeded" in status.message
    assert status.replicas[0].phase == "Stopped"
    assert leftover_processes(home, "slow") == []


def test_failed_trainer_is_restarted_and_previous_log_kept(home: Path) -> None:
    flaky = "if [ -e ran-once ]; then echo second try; else touch ran-once; echo first try; exit 5; fi"

    async def scenario() -> tuple[JobStatus, str, str]:
        backend = backend_for(home)
        await backend.submit(request(home, **collective(job_name="flaky", entry_point=flaky, max_restarts=1)))
        status = await wait_terminal(backend, "flaky")
        current = await backend.read_logs("flaky", OWNER, "trainer", 0)
        previous = await backend.read_logs("flaky", OWNER, "trainer", 0, previous=True)
        return status, current, previous

    status, current, previous = asyncio.run(scenario())
    assert status.phase == "Succeeded"
    assert status.replicas[0].restarts == 1
    assert "second try" in current and "first try" not in current
    assert "first try" in previous


def test_master_killed_marks_the_job_failed_and_stops_replicas(home: Path) -> None:
    async def scenario() -> JobStatus:
        backend = backend_for(home)
        await backend.start()
        try:
            await backend.submit(request(home, **collective(job_name="orphan")))
            await wait_until(backend, "orphan", lambda s: s.phase == "Running")
            os.kill(job_record(home, "orphan")["master_pid"], signal.SIGKILL)
            return await wait_terminal(backend, "orphan")
        finally:
            await backend.stop()

    status = asyncio.run(scenario())
    assert status.phase == "Failed" and "master" in status.message
    assert leftover_processes(home, "orphan") == []


@pytest.mark.parametrize("package", ["/etc", "no-such-dir"])
def test_refused_package_writes_nothing(home: Path, package: str) -> None:
    backend = backend_for(home)
    with pytest.raises(InvalidRequest) as error:
        asyncio.run(backend.submit(request(home, **collective(job_name="refused", trainer_package=package))))
    assert error.value.field == "trainer_package"
    assert not (home / ".paddle-jobs" / "refused").exists()


def test_cell_body_needs_a_snapshot(home: Path) -> None:
    backend = backend_for(home)
    with pytest.raises(InvalidRequest) as error:
        asyncio.run(backend.submit(request(home, entry_script="print(1)", **collective(job_name="cell", snapshot=False))))
    assert error.value.field == "snapshot"
    assert not (home / ".paddle-jobs" / "cell").exists()


def test_job_bigger_than_the_machine_is_refused(home: Path) -> None:
    backend = backend_for(home, max_cpu=2.0, cpu_overcommit=1.0)
    with pytest.raises(InvalidRequest) as error:
        asyncio.run(backend.submit(request(home, **collective(job_name="huge", trainers=3))))
    assert error.value.field == "trainer_cpu" and "at most 2" in error.value.message
    with pytest.raises(InvalidRequest) as error:
        asyncio.run(backend.submit(request(home, **collective(job_name="gpu", trainer_gpu=1))))
    assert error.value.field == "trainer_gpu"
    assert not (home / ".paddle-jobs" / "huge").exists()


def test_dry_run_plans_every_process_and_creates_nothing(home: Path) -> None:
    backend = backend_for(home)
    result = asyncio.run(
        backend.submit(
            request(home, job_name="preview", entry_point="python ps_train.py", pservers=2, trainers=2, trainer_cpu="500m"), dry_run=True
        )
    )
    assert result["dry_run"] is True and result["job"]["phase"] == "Pending"
    processes = result["plan"]["processes"]
    assert [(p["role"], p["index"]) for p in processes] == [("pserver", 0), ("pserver", 1), ("trainer", 0), ("trainer", 1)]
    trainer = processes[3]["env"]
    assert trainer["PADDLE_NBEXT_ROLE"] == "trainer" and trainer["PADDLE_NBEXT_INDEX"] == "1"
    assert trainer["PADDLE_NBEXT_PSERVER_ENDPOINTS"].count("127.0.0.1:") == 2
    assert trainer["PADDLE_NBEXT_CPU"] == "0.5"
    assert not (home / ".paddle-jobs" / "preview").exists()


def test_name_taken_and_other_owners_jobs(home: Path) -> None:
    async def scenario() -> tuple[JobStatus, list[JobStatus]]:
        backend = backend_for(home)
        await backend.submit(request(home, **collective(job_name="mine", entry_point="true")))
        with pytest.raises(JobExists):
            await backend.submit(request(home, **collective(job_name="mine", entry_point="true")))
        with pytest.raises(JobNotFound):
            await backend.get_job("mine", "mallory")
        assert await backend.list_jobs("mallory") == []
        status = await wait_terminal(backend, "mine")
        listed = await backend.list_jobs(OWNER)
        await backend.delete("mine", OWNER)
        return status, listed

    status, listed = asyncio.run(scenario())
    assert status.phase == "Succeeded"
    assert [s.name for s in listed] == ["mine"]
    assert not (home / ".paddle-jobs" / "mine").exists()


def test_listing_follows_what_masters_write_and_cancel_at_once(home: Path) -> None:
    """`list_jobs` answers from memory; the watcher must bring it the status a master writes on
    disk (here: the job finishing), and a cancel must show in the very next listing."""
    gated = "while [ ! -e release ]; do sleep 0.1; done; echo released"

    async def listed(backend: LocalBackend, name: str) -> JobStatus:
        return next(s for s in await backend.list_jobs(OWNER) if s.name == name)

    async def list_until(backend: LocalBackend, name: str, predicate: Callable[[JobStatus], bool], timeout: float = 240.0) -> JobStatus:
        deadline = asyncio.get_running_loop().time() + timeout
        while not predicate(status := await listed(backend, name)):
            assert asyncio.get_running_loop().time() < deadline, f"listing still shows {status.to_dict()}"
            await asyncio.sleep(0.1)
        return status

    async def scenario() -> tuple[JobStatus, JobStatus, JobStatus, JobStatus]:
        backend = backend_for(home, poll_interval=0.2)
        await backend.start()
        try:
            await backend.submit(request(home, **collective(job_name="gated", entry_point=gated)))
            await backend.submit(request(home, **collective(job_name="keeper")))
            # Admission says "Starting replicas." (Running, its replica still Pending) a moment first.
            running = await list_until(backend, "gated", lambda s: s.phase == "Running" and s.replicas[0].phase == "Running")
            (home / ".paddle-jobs" / "gated" / "package" / "release").touch()
            # Only listings from here on: get_job would read through and hide a stale cache.
            finished = await list_until(backend, "gated", lambda s: s.phase in TERMINAL)
            await list_until(backend, "keeper", lambda s: s.phase == "Running")
            cancelled = await backend.cancel("keeper", OWNER)
            after_cancel = await listed(backend, "keeper")
            return running, finished, cancelled, after_cancel
        finally:
            await backend.stop()

    running, finished, cancelled, after_cancel = asyncio.run(scenario())
    assert running.message == "Training is running."
    assert finished.phase == "Succeeded" and finished.replicas[0].phase == "Succeeded" and finished.finished
    assert cancelled.phase == "Cancelled" and after_cancel.phase == "Cancelled"
    assert leftover_processes(home, "gated") == [] and leftover_processes(home, "keeper") == []


def test_a_second_server_on_the_same_jobs_dir_sees_jobs_come_and_go(home: Path) -> None:
    """Two servers (e.g. JupyterLab restarted while the old one shuts down, or two servers of
    one user) share `~/.paddle-jobs`: a job one submits, ends or deletes must show in the other's
    listing, which answers from memory and only re-reads what changed on disk."""

    async def names(backend: LocalBackend) -> dict[str, str]:
        return {s.name: s.phase for s in await backend.list_jobs(OWNER)}

    async def until(backend: LocalBackend, predicate: Callable[[dict[str, str]], bool], timeout: float = 240.0) -> dict[str, str]:
        deadline = asyncio.get_running_loop().time() + timeout
        while not predicate(seen := await names(backend)):
            assert asyncio.get_running_loop().time() < deadline, f"listing still shows {seen}"
            await asyncio.sleep(0.1)
        return seen

    async def scenario() -> tuple[dict[str, str], dict[str, str], dict[str, str]]:
        watcher, other = backend_for(home, poll_interval=0.1), backend_for(home)
        await watcher.start()
        try:
            await other.submit(request(home, **collective(job_name="elsewhere", entry_point="echo hi")))
            appeared = await until(watcher, lambda seen: "elsewhere" in seen)
            ended = await until(watcher, lambda seen: seen.get("elsewhere") in TERMINAL)
            await other.delete("elsewhere", OWNER)
            gone = await until(watcher, lambda seen: "elsewhere" not in seen)
            return appeared, ended, gone
        finally:
            await watcher.stop()

    appeared, ended, gone = asyncio.run(scenario())
    assert "elsewhere" in appeared and ended["elsewhere"] == "Succeeded" and gone == {}


# Code that fails as soon as its snapshot (its working dir) is gone, the way user code that
# reads its files lazily does: the master must not act on that failure (a restart, or an end
# waiting to be written into a dir that no longer exists) instead of exiting.
FAILS_WITHOUT_ITS_FILES = 'sh -c \'while [ -d "$PWD" ]; do sleep 0.1; done; echo "snapshot gone" >&2; exit 3\''


@pytest.mark.parametrize("entry_point", [SLEEPER, FAILS_WITHOUT_ITS_FILES], ids=["code-runs-on", "code-fails"])
def test_removing_a_running_jobs_dir_by_hand_leaves_no_process_behind(home: Path, entry_point: str) -> None:
    """People do `rm -rf ~/.paddle-jobs/<job>`; the job's master must notice that its record is
    gone, stop the replicas and exit, instead of running them forever."""
    import shutil
    import time

    from paddle_nbext_server.backends.local.master.process_table import ProcessTable
    from paddle_nbext_server.backends.local.processes import pid_alive

    async def scenario() -> None:
        backend = backend_for(home)
        await backend.submit(request(home, **collective(job_name="orphan", entry_point=entry_point)))
        await wait_until(backend, "orphan", lambda s: s.phase == "Running" and bool(job_record(home, "orphan").get("pids")))

    asyncio.run(scenario())
    job_dir = home / ".paddle-jobs" / "orphan"
    pids = [int((job_dir / "master.pid").read_text()), *job_record(home, "orphan")["pids"]]
    shutil.rmtree(job_dir)
    deadline = time.monotonic() + 60
    while (alive := [pid for pid in pids if pid_alive(pid) or ProcessTable.read().groups.get(pid)]) and time.monotonic() < deadline:
        time.sleep(0.2)

    def described(pid: int) -> str:  # what it is, so that a failure says which process stayed
        try:
            return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()[:200]
        except OSError:
            return "(gone)"

    assert alive == [], f"processes of the removed job still run: {[(pid, described(pid)) for pid in alive]}"


def _bare_python() -> str | None:
    """An interpreter without paddle-nbext (not this virtualenv's), or None if there is none."""
    for candidate in ("/usr/bin/python3", os.path.join(sys.base_prefix, "bin", "python3")):
        if os.access(candidate, os.X_OK):
            probe = subprocess.run([candidate, "-c", "import paddle_nbext_server"], cwd="/", capture_output=True, check=False)
            if probe.returncode != 0:
                return candidate
    return None


def test_replicas_run_the_bundle_written_at_submit_with_a_bare_interpreter(home: Path, tmp_path: Path) -> None:
    """The job's replicas run `<job_dir>/runtime/launcher.py` (written at submit, so an upgrade
    under a running job changes nothing in it) with the configured interpreter, even one that has
    no paddle-nbext installed: the launcher needs only its sibling contract.py."""
    bare = _bare_python()
    if bare is None:
        pytest.skip("no Python 3 interpreter without paddle-nbext on this machine")
    calls = tmp_path / "python-calls.log"
    wrapper = tmp_path / "bin" / "python"
    wrapper.parent.mkdir()
    # Paddle's distribution metadata (all the launcher's preflight reads), not paddle-nbext.
    paddle = tmp_path / "site" / "paddlepaddle-3.0.0.dist-info"
    paddle.mkdir(parents=True)
    (paddle / "METADATA").write_text("Metadata-Version: 2.1\nName: paddlepaddle\nVersion: 3.0.0\n", encoding="utf-8")
    wrapper.write_text(f'#!/bin/sh\nprintf "%s\\n" "$*" >> "{calls}"\nPYTHONPATH="{paddle.parent}" exec "{bare}" "$@"\n')
    wrapper.chmod(0o755)
    gated = "while [ ! -e release ]; do sleep 0.1; done; echo released"

    async def scenario() -> tuple[Plan, list[bool], JobStatus]:
        backend = backend_for(home, python=str(wrapper))
        await backend.submit(request(home, **collective(job_name="bundled", entry_point=gated)))
        await wait_until(backend, "bundled", lambda s: s.phase == "Running" and s.replicas[0].phase == "Running")
        job_dir = home / ".paddle-jobs" / "bundled"
        plan = read_record(Plan, job_dir)
        launcher_while_running = Path(plan.launcher)
        present = [launcher_while_running.exists(), (launcher_while_running.parent / "contract.py").exists()]
        (job_dir / "package" / "release").touch()
        return plan, present, await wait_terminal(backend, "bundled")

    plan, present, status = asyncio.run(scenario())
    job_dir = (home / ".paddle-jobs" / "bundled").resolve()
    assert Path(plan.launcher).resolve() == job_dir / "runtime" / "launcher.py"
    assert present == [True, True]
    assert status.phase == "Succeeded", status.message
    # Besides the backend asking that interpreter which Paddle it has (runtime/preflight.py from a
    # probe copy of the bundle), the only program it ran is the job's own launcher.
    ran = [call for call in calls.read_text().split() if not call.endswith("/preflight.py")]
    assert ran == [plan.launcher], "the replica must run the job's own launcher with the configured python"


def test_a_job_waiting_behind_another_users_job_is_not_told_its_name(home: Path) -> None:
    """Admission counts every job on the machine but names only the asking user's own."""

    async def scenario() -> JobStatus:
        backend = backend_for(home, max_cpu=1.0, cpu_overcommit=1.0)
        await backend.submit(request(home, **collective(job_name="secret-plan")))
        await wait_until(backend, "secret-plan", lambda s: s.phase == "Running")
        theirs = request(home, **collective(job_name="bobs-job"))
        await backend.submit(SubmitRequest(spec=theirs.spec, owner="bob", home=home))
        deadline = asyncio.get_running_loop().time() + 120
        while "Waiting for resources:" not in (waiting := await backend.get_job("bobs-job", "bob")).message:
            assert asyncio.get_running_loop().time() < deadline, waiting.message
            await asyncio.sleep(0.1)
        await backend.cancel("bobs-job", "bob")
        await backend.cancel("secret-plan", OWNER)
        return waiting

    waiting = asyncio.run(scenario())
    assert waiting.phase == "Pending"
    assert "held by 1 running job of other users" in waiting.message, waiting.message
    assert "secret-plan" not in waiting.message
    assert leftover_processes(home, "secret-plan") == []


BIND_WHEN_TOLD = """
import os, pathlib, socket, time
go = pathlib.Path(os.environ["GO_FILE"])
while not go.exists():  # the test takes the port first, as another program might
    time.sleep(0.05)
host, port = os.environ["PADDLE_CURRENT_ENDPOINT"].rsplit(":", 1)
server = socket.socket()
server.bind((host, int(port)))
server.listen()
print("bound", port, flush=True)
"""


def test_a_port_taken_between_admission_and_the_replicas_bind_is_planned_anew_not_a_failure(home: Path, tmp_path: Path) -> None:
    """Another program binds a replica's port after the admission checked it (issue 28): the
    replica fails to bind, and the master starts the job again on new ports, without counting a
    restart, instead of failing the job."""
    from paddle_nbext_server.backends.local.record_files import read_record
    from paddle_nbext_server.backends.local.records import Plan

    (home / "code" / "bind_when_told.py").write_text(BIND_WHEN_TOLD)
    go = tmp_path / "go"
    job_dir = home / ".paddle-jobs" / "squatted"

    async def scenario() -> tuple[int, JobStatus, str]:
        backend = backend_for(home)
        await backend.submit(
            request(home, **collective(job_name="squatted", entry_point="python bind_when_told.py", env={"GO_FILE": str(go)}))
        )
        await wait_until(backend, "squatted", lambda s: s.replicas[0].phase == "Running")
        host, port = read_record(Plan, job_dir).replicas[0].host_port
        with socket.socket() as squatter:
            squatter.bind((host, port))
            squatter.listen()
            go.touch()
            final = await wait_terminal(backend, "squatted")
        return port, final, await backend.read_logs("squatted", OWNER, "trainer", 0)

    taken, final, log = asyncio.run(scenario())
    assert final.phase == "Succeeded", final.message
    assert final.replicas[0].restarts == 0
    assert read_record(Plan, job_dir).replicas[0].host_port[1] != taken
    assert f"port {taken} of trainer-0 was taken by another program; starting again on new ports" in log
    assert "Address already in use" in log and "bound" in log
