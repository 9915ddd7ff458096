"""The local backend's job-dir records (`backends/local/records.py`, `record_files.py`): they
round-trip, files of the release before versioning still read (users upgrade mid-job), files of a newer release are
refused with words the listing shows as the job's message, and damaged files are listed as
Unknown naming the file (more in test_local_damaged_records.py)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from paddle_nbext.model.status import JobStatus, ReplicaStatus
from paddle_nbext_server.backends.local import LocalBackend
from paddle_nbext_server.backends.local.record_json import NewerRecord, RecordDamaged
from paddle_nbext_server.backends.local.records import Admitted, Capacity, JobRecord, Plan, ReplicaPlan, ResourceRequest, StatusRecord
from paddle_nbext_server.errors import InvalidState, JobNotFound
from paddle_nbext_server.events import EventHub

OWNER = "alice"
NEWER = "written by a newer paddle-nbext (record version 2); upgrade the server"
SPEC = {"job_name": "old", "mode": "collective", "trainers": 1, "entry_point": "true", "max_restarts": 0}

#: Files exactly as the release before versioned records wrote them (no `version` anywhere).
OLD_JOB: dict[str, Any] = {
    "spec": SPEC,
    "owner": OWNER,
    "created": "2026-01-01T10:00:00.000Z",
    "created_epoch": 1767261600.0,
    "package": "/home/a/code",
}
OLD_PLAN: dict[str, Any] = {
    "job": "old",
    "mode": "collective",
    "entry_point": "true",
    "workdir": "/home/a/code",
    "job_dir": "/jobs/old",
    "env": {"A": "1"},
    "python": "/usr/bin/python3",
    "launcher": "/site/paddle_nbext_server/runtime/launcher.py",
    "max_restarts": 0,
    "timeout": None,
    "wait_timeout": 300.0,
    "grace_period": 5.0,
    "poll_interval": 0.1,
    "capacity": {"cpu": 8.0, "memory": 1 << 34, "gpus": []},
    "request": {"cpu": 1.0, "memory": 1 << 30, "gpus": 0},
    "replicas": [
        {"role": "trainer", "index": 0, "endpoint": "127.0.0.1:4100", "cpu": 1.0, "memory": 1 << 30, "memory_text": "1Gi", "gpus": 0}
    ],
}
OLD_STATUS: dict[str, Any] = {
    "name": "old",
    "owner": OWNER,
    "backend": "local",
    "phase": "Running",
    "message": "Training is running.",
    "spec": SPEC,
    "created": "2026-01-01T10:00:00.000Z",
    "started": "2026-01-01T10:00:01.000Z",
    "finished": None,
    "replicas": [
        {
            "role": "trainer",
            "index": 0,
            "phase": "Running",
            "reason": None,
            "exit_code": None,
            "restarts": 0,
            "started": "2026-01-01T10:00:01.000Z",
            "finished": None,
        }
    ],
    "master_pid": 999999999,
    "processes": {},
    "admitted": {"cpu": 1.0, "memory": 1 << 30, "gpus": []},
    "pids": [],
}


def write_job_dir(root: Path, name: str, **files: dict[str, Any] | str) -> Path:
    job_dir = root / name
    (job_dir / "logs").mkdir(parents=True)
    for file_name, content in files.items():
        text = content if isinstance(content, str) else json.dumps(content)
        (job_dir / f"{file_name}.json").write_text(text)
    return job_dir


def backend(root: Path) -> LocalBackend:
    return LocalBackend(events=EventHub(), jobs_dir=str(root))


def listed(root: Path) -> dict[str, JobStatus]:
    return {status.name: status for status in asyncio.run(backend(root).list_jobs(OWNER))}


# ---------------------------------------------------------------------------- round trips
def test_every_record_round_trips() -> None:
    job = JobRecord(owner=OWNER, spec=SPEC, created="2026-01-01T10:00:00.000Z", created_epoch=12.5, package="/p")
    plan = Plan(
        job="j",
        mode="ps",
        entry_point="python t.py",
        workdir="/w",
        job_dir="/jobs/j",
        python="/py",
        launcher="/jobs/j/runtime/launcher.py",
        capacity=Capacity(cpu=4.0, memory=1 << 33, gpus=[0, 1]),
        request=ResourceRequest(cpu=1.5, memory=1 << 31, gpus=1),
        replicas=[
            ReplicaPlan("pserver", 0, "127.0.0.1:4000", 0.5, 1 << 30, "1Gi", 0),
            ReplicaPlan("trainer", 0, "127.0.0.1:4001", 1.0, 1 << 30, "1Gi", 1),
        ],
        env={"X": "y"},
        max_restarts=2,
        timeout=60,
    )
    status = StatusRecord(
        JobStatus(
            "j",
            OWNER,
            "local",
            "Running",
            "Training is running.",
            SPEC,
            "2026-01-01T10:00:00.000Z",
            started="2026-01-01T10:00:01.000Z",
            replicas=[ReplicaStatus("trainer", 0, "Failed", "Exit code 3", 3, 1)],
        ),
        master_pid=42,
        processes={"trainer-0": 43},
        admitted=Admitted(1.5, 1 << 31, [1]),
        pids=[43, 44],
    )
    assert JobRecord.from_json(job.to_json()) == job
    assert Plan.from_json(plan.to_json()) == plan
    assert StatusRecord.from_json(status.to_json()) == status
    for record in (job, plan, status):
        assert json.loads(record.to_json())["version"] == 1


def test_records_of_the_release_before_versioning_read_as_version_1() -> None:
    job = JobRecord.from_json(json.dumps(OLD_JOB))
    plan = Plan.from_json(json.dumps(OLD_PLAN))
    status = StatusRecord.from_json(json.dumps(OLD_STATUS))
    assert (job.version, plan.version, status.version) == (1, 1, 1)
    assert job.owner == OWNER and job.created_epoch == OLD_JOB["created_epoch"]
    assert plan.launcher == OLD_PLAN["launcher"] and plan.replicas[0].memory_text == "1Gi" and plan.env == {"A": "1"}
    assert status.status.phase == "Running" and status.master_pid == 999999999
    assert status.admitted == Admitted(1.0, 1 << 30, [])
    assert status.status.replicas[0] == ReplicaStatus("trainer", 0, "Running", started="2026-01-01T10:00:01.000Z")
    # A plan that leaves out what has a default gets the dataclass's default, declared once.
    sparse = {key: value for key, value in OLD_PLAN.items() if key not in ("grace_period", "env", "max_restarts")}
    assert Plan.from_json(json.dumps(sparse)).grace_period == Plan.__dataclass_fields__["grace_period"].default


@pytest.mark.parametrize("kind", [JobRecord, Plan, StatusRecord])
def test_a_newer_record_is_refused_in_words(kind: type[JobRecord | Plan | StatusRecord]) -> None:
    data = {"job": OLD_JOB, "plan": OLD_PLAN, "status": OLD_STATUS}[kind.KIND.split(".")[0]]
    with pytest.raises(NewerRecord) as error:
        kind.from_json(json.dumps({**data, "version": 2}))
    assert NEWER in error.value.message and kind.KIND in error.value.message


@pytest.mark.parametrize(
    "text",
    [
        '{"name": "old", "owner": "al',
        "[]",
        json.dumps({**OLD_STATUS, "phase": 3}),
        json.dumps({**OLD_STATUS, "version": "x"}),
        json.dumps({k: v for k, v in OLD_STATUS.items() if k != "created"}),
        json.dumps({**OLD_STATUS, "replicas": [{"role": "trainer"}]}),
    ],
)
def test_a_damaged_status_is_a_value_error(text: str) -> None:
    with pytest.raises(ValueError):
        StatusRecord.from_json(text)
    assert issubclass(RecordDamaged, ValueError) and not issubclass(NewerRecord, ValueError)


# ---------------------------------------------------------------------------- through the backend
def test_a_newer_status_is_listed_with_the_reason_as_its_message(tmp_path: Path) -> None:
    write_job_dir(tmp_path, "newer", job=OLD_JOB, status={**OLD_STATUS, "name": "newer", "version": 2, "phase": "Running"})
    write_job_dir(tmp_path, "fine", job=OLD_JOB, status={**OLD_STATUS, "name": "fine", "phase": "Succeeded"})
    jobs = listed(tmp_path)
    assert set(jobs) == {"newer", "fine"}
    assert NEWER in jobs["newer"].message and jobs["newer"].phase == "Running"
    assert jobs["fine"].phase == "Succeeded"

    async def operations() -> tuple[JobStatus, str]:
        local = backend(tmp_path)
        status = await local.get_job("newer", OWNER)
        with pytest.raises(InvalidState) as refused:
            await local.cancel("newer", OWNER)
        with pytest.raises(InvalidState):
            await local.read_logs("newer", OWNER, "trainer", 0)
        return status, refused.value.message

    status, refusal = asyncio.run(operations())
    assert NEWER in status.message and NEWER in refusal


def test_a_newer_job_record_still_reaches_its_owner_only(tmp_path: Path) -> None:
    write_job_dir(tmp_path, "newjob", job={**OLD_JOB, "version": 2, "future": {"x": 1}})
    jobs = listed(tmp_path)
    assert NEWER in jobs["newjob"].message and "job.json" in jobs["newjob"].message
    assert asyncio.run(backend(tmp_path).list_jobs("mallory")) == []


def test_a_watching_backend_leaves_newer_jobs_alone_and_ends_lost_old_ones(tmp_path: Path) -> None:
    """With a watcher, jobs whose master is gone are recorded as Failed.  A job of the previous
    release (no versions) is, and its status is rewritten as version 1; a job of a newer release
    is never touched: this code cannot write its records."""
    newer = write_job_dir(tmp_path, "newer", job=OLD_JOB, status={**OLD_STATUS, "name": "newer", "version": 2})
    old = write_job_dir(tmp_path, "old", job=OLD_JOB, status=OLD_STATUS)
    before = (newer / "status.json").read_text()

    async def scenario() -> dict[str, JobStatus]:
        local = backend(tmp_path)
        await local.start()
        try:
            return {s.name: s for s in await local.list_jobs(OWNER)}
        finally:
            await local.stop()

    jobs = asyncio.run(scenario())
    assert jobs["old"].phase == "Failed" and "master stopped" in jobs["old"].message
    assert jobs["old"].replicas[0].phase == "Stopped"
    assert json.loads((old / "status.json").read_text())["version"] == 1
    assert NEWER in jobs["newer"].message
    assert (newer / "status.json").read_text() == before


def test_damaged_files_are_listed_as_unknown_naming_the_file(tmp_path: Path) -> None:
    write_job_dir(tmp_path, "half", job=OLD_JOB, status='{"name": "half", "phase": "Runn')
    write_job_dir(tmp_path, "typo", job=OLD_JOB, status=json.dumps({**OLD_STATUS, "replicas": "none"}))
    write_job_dir(tmp_path, "nojob", job='{"owner": "alice", "spec"', status=OLD_STATUS)
    write_job_dir(tmp_path, "nobody", job='{"spec": {"job_name"')
    jobs = listed(tmp_path)
    assert set(jobs) == {"half", "typo", "nojob"}
    for name, file_name in (("half", "status.json"), ("typo", "status.json"), ("nojob", "job.json")):
        assert jobs[name].phase == "Unknown"
        assert f"{tmp_path / name / file_name} cannot be read" in jobs[name].message
        assert jobs[name].created == OLD_JOB["created"]
    with pytest.raises(JobNotFound):  # nothing names an owner: nobody may be shown it
        asyncio.run(backend(tmp_path).get_job("nobody", OWNER))


def test_each_new_record_is_newer_on_disk_even_when_the_clock_is_not(tmp_path: Path) -> None:
    """The server tells a job's new status from the old by (mtime, size, inode) without reading
    it, and ext4 gives a file the inode of the version before last: with a coarse timestamp or a
    clock stepped back, an end of the same size as an earlier status would go unseen."""
    import os
    import time

    from paddle_nbext_server.backends.local.record_files import write_atomic
    from paddle_nbext_server.backends.local.store import signature

    path = tmp_path / "status.json"
    write_atomic(path, '{"phase": "Running"}')
    ahead = time.time_ns() + 3600 * 10**9  # the file's time is ahead of the clock
    os.utime(path, ns=(ahead, ahead))
    seen = [signature(path)]
    for text in ('{"phase": "Pending"}', '{"phase": "Running"}', '{"phase": "Unknown"}'):  # one size
        write_atomic(path, text)
        seen.append(signature(path))
    stamps = [each[0] for each in seen if each is not None]
    assert len(stamps) == 4 and stamps == sorted(set(stamps)), stamps
    assert path.read_text() == '{"phase": "Unknown"}'
