"""Damaged job-dir records of the local backend, across a server restart (a new backend started
on the same jobs dir): each damage has one user-visible outcome.

A job that ended Succeeded and whose master is gone gets its status.json truncated, emptied, put
in a wrong shape, replaced by a FIFO, or written by a newer release.  The restarted backend starts
(job routes would otherwise answer 503), lists the job as Unknown with the file named (or, for a
newer release, as it recorded it), never rewrites the recorded outcome with a guess ("Failed: was
it killed?"), keeps every other job as it was, and deletes the job on request, freeing its name.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
from pathlib import Path
from typing import Any

import pytest

from paddle_nbext.model.status import JobStatus
from paddle_nbext_server.backends.local import LocalBackend
from paddle_nbext_server.backends.local.record_files import write_atomic
from paddle_nbext_server.backends.local.records import StatusRecord
from paddle_nbext_server.backends.local.store import JobFiles, JobStore
from paddle_nbext_server.events import EventHub

OWNER = "alice"
RECORDS_FSYNC = "paddle_nbext_server.backends.local.record_files.os.fsync"  # what record_files.write_atomic calls
CREATED = "2026-01-01T10:00:00.000Z"
SPEC = {"job_name": "done", "mode": "collective", "trainers": 1, "entry_point": "true", "max_restarts": 0}
JOB = {"version": 1, "owner": OWNER, "spec": SPEC, "created": CREATED, "created_epoch": 1767261600.0, "package": "/p"}
SUCCEEDED: dict[str, Any] = {
    "version": 1,
    "name": "done",
    "owner": OWNER,
    "backend": "local",
    "phase": "Succeeded",
    "message": "All 1 trainer finished successfully.",
    "spec": SPEC,
    "created": CREATED,
    "started": "2026-01-01T10:00:01.000Z",
    "finished": "2026-01-01T10:05:00.000Z",
    "replicas": [
        {
            "role": "trainer",
            "index": 0,
            "phase": "Succeeded",
            "reason": None,
            "exit_code": 0,
            "restarts": 0,
            "started": "2026-01-01T10:00:01.000Z",
            "finished": "2026-01-01T10:05:00.000Z",
        }
    ],
    "master_pid": 999999999,
    "processes": {},
    "admitted": None,
    "pids": [999999998],
}
#: A Running job whose master is gone: the restarted backend records it as lost (nothing was
#: recorded, so that is no guess over an outcome), which a damaged neighbour must not prevent.
RUNNING = {**SUCCEEDED, "name": "other", "phase": "Running", "finished": None, "message": "Training is running."}
RUNNING["replicas"] = [{**SUCCEEDED["replicas"][0], "phase": "Running", "exit_code": None, "finished": None}]

FULL = json.dumps(SUCCEEDED, indent=1)
DAMAGES = {
    "truncated": FULL[: len(FULL) // 2],
    "empty": "",
    "wrong type": json.dumps({**SUCCEEDED, "replicas": "none"}),
    "unknown phase": json.dumps({**SUCCEEDED, "phase": "Finished"}),
    "process group as pid": json.dumps({**SUCCEEDED, "processes": {"trainer-0": 0}}),
    "negative pid": json.dumps({**SUCCEEDED, "processes": {"trainer-0": -5}}),
    "spec count as text": json.dumps({**SUCCEEDED, "spec": {**SPEC, "trainers": "two"}}),
    "a list": "[1, 2]",
    "nested too deep": "[" * 100_000 + "]" * 100_000,
    "not utf-8": '{"name": "\xff"}'.encode("latin-1").decode("latin-1") + "\udcff",
}


def make_job(root: Path, name: str, status: str | None, job: dict[str, Any] | str | None = None) -> Path:
    job_dir = root / name
    (job_dir / "logs").mkdir(parents=True)
    job_text = job if isinstance(job, str) else json.dumps({**JOB, "spec": {**SPEC, "job_name": name}} if job is None else job)
    (job_dir / "job.json").write_text(job_text)
    (job_dir / "master.pid").write_text("999999999")
    if status is not None:
        (job_dir / "status.json").write_bytes(status.encode("utf-8", errors="surrogateescape"))
    return job_dir


def backend(root: Path) -> LocalBackend:
    return LocalBackend(events=EventHub(), jobs_dir=str(root), poll_interval=0.05)


def restarted(root: Path, watch_for: float = 0.4) -> dict[str, JobStatus]:
    """What a server restarted on `root` lists after its watcher ran for a few polls."""

    async def scenario() -> dict[str, JobStatus]:
        local = backend(root)
        await local.start()
        try:
            await asyncio.sleep(watch_for)
            return {status.name: status for status in await local.list_jobs(OWNER)}
        finally:
            await local.stop()

    return asyncio.run(scenario())


@pytest.mark.parametrize("damage", sorted(DAMAGES))
def test_a_damaged_status_of_an_ended_job_reads_unknown_and_is_never_rewritten(tmp_path: Path, damage: str) -> None:
    job_dir = make_job(tmp_path, "done", DAMAGES[damage])
    before = (job_dir / "status.json").read_bytes()
    make_job(tmp_path, "other", json.dumps(RUNNING))
    make_job(tmp_path, "fine", FULL.replace('"done"', '"fine"'))

    jobs = restarted(tmp_path)

    assert set(jobs) == {"done", "other", "fine"}
    assert jobs["done"].phase == "Unknown"
    assert jobs["done"].message.startswith(f"{job_dir / 'status.json'} cannot be read: ")
    assert "delete the job" in jobs["done"].message
    assert jobs["done"].created == CREATED and jobs["done"].spec["job_name"] == "done"
    assert jobs["done"].to_dict()["phase"] == "Unknown"  # the REST body builds
    assert (job_dir / "status.json").read_bytes() == before  # no guess was written over it
    assert jobs["fine"].phase == "Succeeded"
    assert jobs["other"].phase == "Failed" and "master stopped" in jobs["other"].message


def test_the_damage_is_said_in_words(tmp_path: Path) -> None:
    make_job(tmp_path, "empty", "")
    make_job(tmp_path, "cut", FULL[:40])
    jobs = restarted(tmp_path, watch_for=0)
    assert "cannot be read: it is empty." in jobs["empty"].message
    assert "cannot be read: it is not complete JSON (" in jobs["cut"].message


def test_a_fifo_as_status_is_damage_not_a_hang(tmp_path: Path) -> None:
    job_dir = make_job(tmp_path, "fifo", None)
    os.mkfifo(job_dir / "status.json")
    jobs = restarted(tmp_path, watch_for=0)
    assert jobs["fifo"].phase == "Unknown" and "is not a regular file" in jobs["fifo"].message


def test_a_newer_status_keeps_its_recorded_phase_across_a_restart(tmp_path: Path) -> None:
    job_dir = make_job(tmp_path, "done", json.dumps({**SUCCEEDED, "version": 2}))
    before = (job_dir / "status.json").read_text()
    jobs = restarted(tmp_path)
    assert jobs["done"].phase == "Succeeded"
    assert "written by a newer paddle-nbext (record version 2)" in jobs["done"].message
    assert (job_dir / "status.json").read_text() == before


@pytest.mark.parametrize("job_text", ['{"version": 1, "owner": "alice", "spec": {"job_na', "", '{"owner": 7}'])
def test_a_damaged_job_record_is_listed_and_can_be_deleted_then_its_name_reused(tmp_path: Path, job_text: str) -> None:
    job_dir = make_job(tmp_path, "done", FULL, job=job_text)

    async def scenario() -> tuple[JobStatus, bool]:
        local = backend(tmp_path)
        await local.start()
        try:
            listed = {s.name: s for s in await local.list_jobs(OWNER)}["done"]
            assert await local.list_jobs("mallory") == []
            await local.delete("done", OWNER)
            return listed, (tmp_path / "done").exists()
        finally:
            await local.stop()

    status, still_there = asyncio.run(scenario())
    assert status.phase == "Unknown" and status.owner == OWNER  # the owner status.json names
    assert f"{job_dir / 'job.json'} cannot be read" in status.message
    assert not still_there


def test_a_damaged_job_record_without_a_status_still_reaches_the_owner_it_names(tmp_path: Path) -> None:
    make_job(tmp_path, "cut", None, job='{\n "owner": "alice",\n "spec": {\n  "job_name": "cu')
    jobs = restarted(tmp_path, watch_for=0)
    assert jobs["cut"].phase == "Unknown" and "job.json cannot be read" in jobs["cut"].message


@pytest.mark.parametrize("damage", ["truncated", "process group as pid", "spec count as text"])
def test_a_damaged_status_can_be_deleted_through_the_api(tmp_path: Path, damage: str) -> None:
    make_job(tmp_path, "done", DAMAGES[damage])

    async def scenario() -> list[str]:
        local = backend(tmp_path)
        await local.start()
        try:
            await local.delete("done", OWNER)
            return [s.name for s in await local.list_jobs(OWNER)]
        finally:
            await local.stop()

    assert asyncio.run(scenario()) == []
    assert not (tmp_path / "done").exists()


def test_a_job_dir_that_cannot_be_scanned_is_logged_once_and_spares_the_others(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    make_job(tmp_path, "broken", FULL.replace('"done"', '"broken"'))
    make_job(tmp_path, "fine", FULL.replace('"done"', '"fine"'))
    load = JobStore.load

    def failing_load(self: JobStore, job_dir: Path) -> JobFiles:
        if job_dir.name == "broken":
            raise RuntimeError("disk on fire")
        return load(self, job_dir)

    monkeypatch.setattr(JobStore, "load", failing_load)
    with caplog.at_level(logging.WARNING):
        jobs = restarted(tmp_path, watch_for=0.5)
    assert set(jobs) == {"fine"} and jobs["fine"].phase == "Succeeded"
    warnings = [r for r in caplog.records if "broken" in r.getMessage()]
    assert len(warnings) == 1 and "disk on fire" in warnings[0].getMessage()
    assert warnings[0].exc_info is None  # one line, not a traceback


def test_records_are_written_durably_and_leave_no_temp_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    synced: list[int] = []
    real_fsync = os.fsync

    def counted_fsync(fd: int) -> None:
        synced.append(fd)
        real_fsync(fd)

    monkeypatch.setattr(RECORDS_FSYNC, counted_fsync)
    write_atomic(tmp_path / "status.json", FULL)
    assert len(synced) == 2  # the file, then the dir holding the rename
    assert StatusRecord.from_json((tmp_path / "status.json").read_text()).status.phase == "Succeeded"
    assert os.listdir(tmp_path) == ["status.json"]


def test_a_failed_write_keeps_the_old_record_and_no_temp_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_atomic(tmp_path / "status.json", FULL)

    def no_space(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(RECORDS_FSYNC, no_space)
    with pytest.raises(OSError):
        write_atomic(tmp_path / "status.json", "{}")
    assert (tmp_path / "status.json").read_text() == FULL
    assert os.listdir(tmp_path) == ["status.json"]


def test_a_master_that_cannot_write_its_status_goes_on_and_retries(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    from paddle_nbext_server.backends.local.master.lifecycle import Master
    from paddle_nbext_server.backends.local.record_files import write_record
    from paddle_nbext_server.backends.local.records import Capacity, JobRecord, Plan, ResourceRequest

    job_dir = tmp_path / "stuck"
    (job_dir / "logs").mkdir(parents=True)
    write_record(job_dir, JobRecord(owner=OWNER, spec=SPEC, created=CREATED))
    resources = ResourceRequest(cpu=1.0, memory=1 << 20)
    write_record(
        job_dir, Plan("stuck", "collective", "true", str(tmp_path), str(job_dir), "python", "l.py", Capacity(1.0, 1 << 30), resources)
    )
    (job_dir / "status.json" / "blocker").mkdir(parents=True)  # a rename over it fails like a read-only dir
    master = Master(job_dir)
    assert master.write_status() is False
    master.message = "changed"
    assert master.write_status() is False
    assert capfd.readouterr().err.count("cannot write") == 1  # said once, not on every try
    (job_dir / "status.json" / "blocker").rmdir()
    (job_dir / "status.json").rmdir()
    assert master.write_status() is True
    assert StatusRecord.from_json((job_dir / "status.json").read_text()).status.message == "changed"
