"""A local job whose directory cannot take its end (here: the disk filled up while it ran, a
real tmpfs filled by a real file) ends in words naming the path and the error, and the end is
written into the directory, not lost, once there is room again.  Real master, real replica."""

from __future__ import annotations

import asyncio
import errno
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from paddle_jobs.local_jobs import OWNER, backend_for, make_home, request, wait_until
from paddle_nbext_server.backends.local import pending_end
from paddle_nbext_server.backends.local.processes import pid_alive
from paddle_nbext_server.backends.local.record_files import read_record
from paddle_nbext_server.backends.local.records import StatusRecord

pytestmark = pytest.mark.skipif(os.geteuid() != 0 or shutil.which("mount") is None, reason="mounts a small tmpfs for the home (needs root)")


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    disk = tmp_path / "disk"
    disk.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(disk)], check=True)
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


def fill(disk: Path) -> Path:
    """Write a file until the disk refuses (ENOSPC); returns it (remove it to make room)."""
    filler = disk / "filler"
    with open(filler, "wb") as handle:
        block = b"\0" * (1 << 20)
        try:
            while True:
                handle.write(block)
                handle.flush()
        except OSError as error:
            assert error.errno == errno.ENOSPC, error
    return filler


def recorded_phase(job_dir: Path) -> str:
    return str(read_record(StatusRecord, job_dir).status.phase)


def test_an_end_the_full_disk_refuses_is_shown_with_why_and_written_once_there_is_room(small_disk: Path, tmp_path: Path) -> None:
    home = make_home(small_disk)
    release = tmp_path / "release"  # outside the full disk
    entry = f"sh -c 'while [ ! -e {release} ]; do sleep 0.1; done'"  # says nothing: its log needs no room

    async def scenario() -> None:
        backend = backend_for(home, poll_interval=0.2)
        await backend.start()
        try:
            await backend.submit(request(home, mode="collective", trainers=1, job_name="cramped", entry_point=entry))
            await wait_until(backend, "cramped", lambda s: s.phase == "Running" and s.replicas[0].phase == "Running")
            job_dir = home / ".paddle-jobs" / "cramped"
            master = int((job_dir / "master.pid").read_text())
            filler = fill(small_disk)
            release.touch()

            ended = await wait_until(backend, "cramped", lambda s: s.phase == "Succeeded", timeout=120)
            assert ended.message.startswith("All 1 trainer finished successfully.")
            assert f"cannot write {job_dir / 'status.json'}: No space left on device" in ended.message
            assert "it will be as soon as the directory can be written again" in ended.message
            assert recorded_phase(job_dir) == "Running"  # not recorded yet ...
            assert pid_alive(master)  # ... and its master waits to record it

            filler.unlink()
            deadline = time.monotonic() + 120
            while recorded_phase(job_dir) != "Succeeded":
                assert time.monotonic() < deadline, "the end was never written once there was room"
                await asyncio.sleep(0.2)
            recorded = await wait_until(backend, "cramped", lambda s: "not recorded" not in s.message, timeout=60)
            assert (recorded.phase, recorded.message) == ("Succeeded", "All 1 trainer finished successfully.")
            assert pending_end.read(job_dir) is None
            while pid_alive(master):
                assert time.monotonic() < deadline, "the master stayed after recording the end"
                await asyncio.sleep(0.2)
            await backend.delete("cramped", OWNER)
        finally:
            await backend.stop()

    asyncio.run(scenario())
