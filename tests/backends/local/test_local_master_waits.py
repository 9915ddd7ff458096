"""How the local path waits without work of its own: the master wakes when a replica ends
rather than at its next poll, reads the process list from `/proc` (the same table psutil gives),
passes by ended jobs at admission without reading them, and a started backend keeps its answer
about the replicas' Paddle fresh in the background, so a submit never waits for the probe."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from paddle_nbext_server.backends.local import LocalBackend
from paddle_nbext_server.backends.local.master.process_table import ProcessTable
from paddle_nbext_server.backends.local.master.replica import wait_for_exit
from paddle_nbext_server.events import EventHub

#: A leader whose child leaves the group (`setsid`) and then says its pid (on the shared stdout).
TREE = """
import subprocess, sys, time
subprocess.Popen([sys.executable, "-c", "import os, time; os.setsid(); print(os.getpid(), flush=True); time.sleep(60)"])
time.sleep(60)
"""


def test_the_wait_ends_when_a_replica_ends_not_at_its_timeout() -> None:
    short = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(0.3)"])
    long = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        began = time.monotonic()
        wait_for_exit([long, short], 120)
        # The timeout is 400 times the short process's life: returning before it means the
        # wait noticed the end (a plain sleep would have taken the whole 120 s).
        assert time.monotonic() - began < 60
        assert short.poll() == 0 and long.poll() is None
    finally:
        long.kill()
        long.wait()
        short.wait()


def test_a_wait_on_nothing_is_a_sleep() -> None:
    began = time.monotonic()
    wait_for_exit([], 0.05)
    assert time.monotonic() - began >= 0.05


def test_the_process_table_from_proc_is_the_one_psutil_gives() -> None:
    """A leader with a child that left its group (`setsid`): both readings see the same parents,
    groups and live processes for them."""
    leader = subprocess.Popen([sys.executable, "-c", TREE], stdout=subprocess.PIPE, text=True, start_new_session=True)
    child = 0
    try:
        assert leader.stdout is not None
        child = int(leader.stdout.readline())
        ours, theirs = ProcessTable.read(), ProcessTable._read_psutil()
        for table in (ours, theirs):
            assert table.replica_processes(leader.pid) == {leader.pid, child}
            assert child in table.children[leader.pid]
            assert table.groups[leader.pid] == [leader.pid]
        assert ours.children.get(os.getpid(), []).count(leader.pid) == 1
        assert sorted(ours.groups[leader.pid]) == sorted(theirs.groups[leader.pid])
    finally:
        ProcessTable.read()  # a reading while a member is a zombie must not fail either
        os.killpg(leader.pid, 9)
        if child:
            os.kill(child, 9)
        leader.wait()
        for table in (ProcessTable.read(), ProcessTable._read_psutil()):
            assert leader.pid not in table.alive


def test_a_started_backend_probes_the_replicas_paddle_again_in_the_background(tmp_path: Path) -> None:
    async def scenario() -> None:
        backend = LocalBackend(events=EventHub(), jobs_dir=str(tmp_path / "jobs"))
        backend._paddle.ttl = 0.4  # probes again every 0.2 s
        await backend.start()
        try:
            first = backend._paddle.cached()
            assert first is not None
            deadline = time.monotonic() + 60
            while backend._paddle.cached() is first and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            assert backend._paddle.cached() is not first  # a new answer, with no submit asking
        finally:
            await backend.stop()
        assert backend._paddle_refresher is None and backend._watcher is None

    asyncio.run(scenario())


def test_an_exited_unreaped_child_is_still_a_child_in_the_table() -> None:
    """The master reaps what it adopted from the same reading: zombies are its children too."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    try:
        deadline = time.monotonic() + 60
        while Path(f"/proc/{child.pid}/stat").read_text().rpartition(")")[2].split()[0] != "Z" and time.monotonic() < deadline:
            time.sleep(0.02)
        for table in (ProcessTable.read(), ProcessTable._read_psutil()):
            assert child.pid in table.children_of(os.getpid())
            assert child.pid not in table.alive
    finally:
        child.wait()


def test_admission_reads_no_job_whose_master_is_gone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An ended job holds nothing: a `master.pid` naming no process is enough to pass it by; a
    job whose master runs, or whose pid file says nothing, is read as before."""
    from paddle_nbext.model.status import JobStatus
    from paddle_nbext_server.backends.local.master import admission
    from paddle_nbext_server.backends.local.record_files import read_record, write_record
    from paddle_nbext_server.backends.local.records import Admitted, Capacity, JobRecord, Plan, ResourceRequest, StatusRecord

    jobs = tmp_path / "jobs"

    def job(name: str, pid: int | None) -> Path:
        job_dir = jobs / name
        job_dir.mkdir(parents=True)
        plan = Plan(
            job=name,
            mode="collective",
            entry_point="true",
            workdir=str(job_dir),
            job_dir=str(job_dir),
            python=sys.executable,
            launcher=str(job_dir / "runtime" / "launcher.py"),
            capacity=Capacity(cpu=4.0, memory=1 << 34),
            request=ResourceRequest(cpu=1.0, memory=1 << 20),
        )
        write_record(job_dir, plan)
        write_record(job_dir, JobRecord(owner="alice", created="2026-01-01T00:00:00Z"))
        status = JobStatus(name=name, owner="alice", backend="local", phase="Running", message="", spec={}, created="")
        write_record(job_dir, StatusRecord(status, master_pid=os.getpid(), admitted=Admitted(cpu=1.0, memory=1 << 20)))
        if pid is not None:
            (job_dir / "master.pid").write_text(str(pid))
        return job_dir

    ended = subprocess.Popen([sys.executable, "-c", "pass"])
    ended.wait()
    own = job("own", os.getpid())
    job("gone", ended.pid)  # its master exited (and was reaped): nothing to read
    job("running", os.getpid())
    job("no-pid-file", None)
    read: list[str] = []
    original = read_record  # what admission calls by that name

    def counting(kind: type[StatusRecord], job_dir: Path) -> StatusRecord:
        read.append(job_dir.name)
        return original(kind, job_dir)

    monkeypatch.setattr(admission, "read_record", counting)
    held = sorted(path.name for path, _ in admission.admitted_others(own))
    assert held == ["no-pid-file", "running"]
    assert sorted(read) == ["no-pid-file", "running"]


def test_a_server_stopping_just_as_a_jobs_master_ends_stops(tmp_path: Path) -> None:
    """The server's shutdown cancels the watcher while a master's end wakes it (a job ending as
    the user stops Jupyter): the watcher must end, or shutting Jupyter down hangs for good.  The
    cancel is sent a few loop steps after the wake-up, so one of them lands in the window where
    Python 3.11's `asyncio.wait_for` returns normally and the cancel is lost."""

    async def scenario() -> None:
        backend = LocalBackend(events=EventHub(), jobs_dir=str(tmp_path / "jobs"))
        backend.poll_interval = 3600.0  # only a master's end (or the stop) wakes the watcher
        for steps in range(5):
            await backend.start()
            ended = backend._master_ended
            assert ended is not None
            while not ended._waiters:  # the watcher waits on it now
                await asyncio.sleep(0.01)
            ended.set()  # a master ended
            for _ in range(steps):
                await asyncio.sleep(0)
            stopping = asyncio.ensure_future(backend.stop())
            done, _ = await asyncio.wait({stopping}, timeout=60)
            assert stopping in done, f"the backend never stopped when its stop came {steps} loop steps after a master ended"

    asyncio.run(scenario())
