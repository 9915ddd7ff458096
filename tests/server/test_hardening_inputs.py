"""Issue 16, the input half: no request body and no state of the package's files makes the API
answer 500; every refusal is a 4xx naming the field, with a bounded error body; names are per
user; streams are bounded per user.  Against a real Jupyter server with the real local backend."""

from __future__ import annotations

import asyncio
import json
import os
import socket
from pathlib import Path
from typing import Any

import pytest

from .conftest import Api, OpenStream, python_cmd
from .test_api import assert_error, wait_for

SLEEP = "sleep.py"


def spec(package: Path, **fields: Any) -> dict[str, Any]:
    return {"entry_point": python_cmd(SLEEP, "0"), "trainer_package": str(package), "mode": "collective", **fields}


# ---------------------------------------------------------------- bodies that used to be 500s


async def test_a_body_nested_100k_levels_is_a_400(api: Api, package: Path) -> None:
    assert_error(await api("POST", "jobs", raw=b"[" * 100_000 + b"]" * 100_000), 400, "bad_request", None)
    deep = {"entry_point": "python t.py", "env": {"A": json.loads("[" * 40 + "]" * 40)}}
    body = assert_error(await api("POST", "jobs", body=deep), 400, "bad_request", None)
    assert "deeper than 32" in body["message"]


async def test_a_body_over_the_limit_is_a_413(api: Api, package: Path) -> None:
    raw = json.dumps({**spec(package), "entry_script": "x" * (5 * 1024 * 1024)}).encode()
    assert_error(await api("POST", "jobs", raw=raw), 413, "too_large", None)


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"job_name": "x\n"}, "job_name"),
        ({"trainer_mem": "9" * 400}, "trainer_mem"),
        ({"trainer_mem": "9" * 30 + "Ei"}, "trainer_mem"),
        ({"trainers": "1" * 5000}, "trainers"),
        ({"timeout": "9" * 5000}, "timeout"),
        ({"timeout": 1e300}, "timeout"),
        ({"trainer_package": "work\ud800"}, "trainer_package"),
        ({"entry_point": "python t.py \udc80"}, "entry_point"),
        ({"entry_point": "python t.py " + "x" * 200 * 1024}, "entry_point"),
        ({"env": {"A": "x\x00y"}}, "env"),
        ({"env": {"A\n": "1"}}, "env"),
        ({"env": {"A": "\ud83d"}}, "env"),
        ({"env": {f"V{i}": "x" * 1024 for i in range(3 * 1024)}}, "env"),
        ({"env": {f"V{i}": "x" * 1024 for i in range(100)}}, "env"),
        ({"entry_script": "print(1)\ud800"}, "entry_script"),
        ({"entry_script": "print(1)\x00"}, "entry_script"),
    ],
    ids=lambda value: str(value)[:40],
)
async def test_inputs_that_could_never_run_are_422_naming_the_field(api: Api, package: Path, fields: dict[str, Any], field: str) -> None:
    for dry_run in ("true", "false"):
        body = assert_error(await api("POST", "jobs", body=spec(package, **fields), params={"dry_run": dry_run}), 422, "invalid", field)
        assert len(json.dumps(body)) < 4000, "an error body repeats at most a clipped part of the value"
    assert (await api("GET", "jobs"))[1]["jobs"] == []


async def test_a_10_mb_job_name_is_not_echoed_back(api: Api, package: Path) -> None:
    status, body = await api("POST", "jobs", body=spec(package, job_name="a" * 10_000_000))
    assert status in (413, 422), body
    assert len(json.dumps(body)) < 4000
    status, body = await api("GET", "jobs/" + "a" * 5000)
    assert status == 404 and len(json.dumps(body)) < 4000


async def test_a_cell_body_without_a_snapshot_fails_the_dry_run_too(api: Api, package: Path) -> None:
    body = spec(package, snapshot=False, entry_script="print(1)")
    assert_error(await api("POST", "jobs", body=body, params={"dry_run": "true"}), 422, "invalid", "snapshot")


async def test_the_field_named_is_the_one_asking_too_much(api: Api, package: Path) -> None:
    """`pserver_mem 100Ti` is a `pserver_mem` error, not a `trainer_mem` one (likewise CPU)."""
    ps = {**spec(package), "mode": "ps", "pservers": 1}
    body = assert_error(await api("POST", "jobs", body={**ps, "pserver_mem": "100Ti"}, params={"dry_run": "true"}), 422, "invalid")
    # The message names the field as the forms label it; `field` is the API's name.
    assert body["field"] == "pserver_mem" and 'lower "Memory per pserver" or the replica counts' in body["message"]
    body = assert_error(await api("POST", "jobs", body={**ps, "pserver_cpu": "100000"}, params={"dry_run": "true"}), 422, "invalid")
    assert body["field"] == "pserver_cpu"
    body = assert_error(await api("POST", "jobs", body={**ps, "trainer_mem": "100Ti"}, params={"dry_run": "true"}), 422, "invalid")
    assert body["field"] == "trainer_mem"


# ---------------------------------------------------------------- the package's files


async def test_special_files_are_skipped_and_the_jobs_dir_never_copied(api: Api, jp_home_dir: Path, package: Path) -> None:
    """The default package is the whole home, which holds the jobs dir: a FIFO, a socket and the
    jobs dir itself made every default submit fail."""
    os.mkfifo(package / "pipe")
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(package / "sock"))
    try:
        first = spec(package, job_name="first", entry_point=python_cmd("work/sleep.py", "30"), trainer_package="")
        status, job = await api("POST", "jobs", body=first)
        assert status == 201, job
        second = {**first, "job_name": "second", "entry_point": python_cmd("work/sleep.py", "0")}
        status, job = await api("POST", "jobs", body=second)
        assert status == 201, job
        snapshot = jp_home_dir / ".paddle-jobs" / "second" / "package"
        assert (snapshot / "work" / SLEEP).is_file()
        assert not (snapshot / ".paddle-jobs").exists()
        assert not (snapshot / "work" / "pipe").exists() and not (snapshot / "work" / "sock").exists()
        await wait_for(api, "second", {"Succeeded"})
    finally:
        listener.close()
        await api("DELETE", "jobs/first")


async def test_a_jobs_dir_under_another_name_is_never_copied(api: Api, jp_home_dir: Path, package: Path) -> None:
    """A job's dir is left out of a snapshot by what it holds, wherever it is in the home."""
    other = package / "old-jobs" / "train"
    other.mkdir(parents=True)
    for name in ("job.json", "plan.json", "status.json"):
        (other / name).write_text("{}")
    status, job = await api("POST", "jobs", body=spec(package, job_name="copy"))
    assert status == 201, job
    assert not (jp_home_dir / ".paddle-jobs" / "copy" / "package" / "old-jobs" / "train").exists()
    await wait_for(api, "copy", {"Succeeded"})


@pytest.mark.parametrize("what", ["file", "dir"])
async def test_an_unreadable_file_is_a_422_naming_the_package_and_the_path(
    api: Api, package: Path, monkeypatch: pytest.MonkeyPatch, what: str
) -> None:
    """A file or dir of the package that cannot be read (the suite may run as root, who reads
    everything: the refusal is made by the file system calls the snapshot uses)."""
    blocked = package / ("secret.txt" if what == "file" else "private")
    if what == "file":
        blocked.write_text("x")
    else:
        blocked.mkdir()
    real_open, real_scandir = os.open, os.scandir

    def is_blocked(path: Any) -> bool:
        return isinstance(path, (str, os.PathLike)) and os.fspath(path) == str(blocked)

    def refusing_open(path: Any, *args: Any, **kwargs: Any) -> int:
        if is_blocked(path):
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(path, *args, **kwargs)

    def refusing_scandir(path: Any = ".") -> Any:
        if is_blocked(path):
            raise PermissionError(13, "Permission denied", str(path))
        return real_scandir(path)

    monkeypatch.setattr(os, "open", refusing_open)
    monkeypatch.setattr(os, "scandir", refusing_scandir)
    body = assert_error(await api("POST", "jobs", body=spec(package, job_name="blocked")), 422, "invalid", "trainer_package")
    assert str(blocked) in body["message"] and "Permission denied" in body["message"]
    monkeypatch.undo()
    assert_error(await api("GET", "jobs/blocked"), 404)


async def test_a_package_inside_the_jobs_dir_is_refused(api: Api, jp_home_dir: Path, package: Path) -> None:
    """`trainer_package=~/.paddle-jobs/<another user's job>` let that user's job print the
    other's job.json and logs."""
    status, job = await api("POST", "jobs", body=spec(package, job_name="private"))
    assert status == 201, job
    await wait_for(api, "private", {"Succeeded"})
    for path in (str(jp_home_dir / ".paddle-jobs" / "private"), "~/.paddle-jobs", ".paddle-jobs/private/logs"):
        for user in ("alice", "bob"):
            body = spec(package, job_name="reader", trainer_package=path, entry_point="cat job.json")
            assert_error(await api("POST", "jobs", body=body, user=user), 422, "invalid", "trainer_package")


async def test_an_unwritable_jobs_dir_is_a_503_with_the_path(api: Api, jp_home_dir: Path, package: Path) -> None:
    """A jobs dir that cannot be made (a file is in its place; root could write a read-only dir)."""
    jobs = jp_home_dir / ".paddle-jobs"
    jobs.write_text("not a directory")
    try:
        body = assert_error(await api("POST", "jobs", body=spec(package, job_name="nowhere")), 503, "unavailable")
        assert str(jobs) in body["message"]
    finally:
        jobs.unlink()


# ---------------------------------------------------------------- names per user


async def test_two_users_may_each_have_a_job_named_train(api: Api, jp_home_dir: Path, package: Path) -> None:
    quick = spec(package, job_name="train", entry_point=python_cmd(SLEEP, "30"))
    status, job = await api("POST", "jobs", body=quick)
    assert status == 201 and job["owner"] == "alice", job
    await wait_for(api, "train", {"Running"})
    # Bob's dry run and submit say nothing of Alice's job
    status, preview = await api("POST", "jobs", body=quick, user="bob", params={"dry_run": "true"})
    assert status == 200, preview
    assert preview["plan"]["job_dir"] == str(jp_home_dir / ".paddle-jobs" / "train")
    status, job = await api("POST", "jobs", body=quick, user="bob")
    assert status == 201 and job["owner"] == "bob" and job["name"] == "train", job
    # each sees, cancels and deletes only their own
    assert [j["owner"] for j in (await api("GET", "jobs", user="bob"))[1]["jobs"]] == ["bob"]
    assert [j["owner"] for j in (await api("GET", "jobs"))[1]["jobs"]] == ["alice"]
    assert_error(await api("POST", "jobs", body=quick, user="bob"), 409, "name_taken", "job_name")
    assert_error(await api("POST", "jobs", body=quick, params={"dry_run": "true"}), 409, "name_taken", "job_name")
    assert (await api("POST", "jobs/train/cancel", user="bob"))[1]["phase"] == "Cancelled"
    assert (await api("GET", "jobs/train"))[1]["phase"] == "Running"
    assert (await api("DELETE", "jobs/train", user="bob"))[0] == 204
    assert_error(await api("GET", "jobs/train", user="bob"), 404, "not_found")
    assert (await api("GET", "jobs/train"))[1]["owner"] == "alice"
    # the freed name is Bob's again; Alice's job is untouched
    status, job = await api("POST", "jobs", body={**quick, "entry_point": python_cmd(SLEEP, "0")}, user="bob")
    assert status == 201, job
    await wait_for(api, "train", {"Succeeded"}, user="bob")
    assert (await api("DELETE", "jobs/train"))[0] == 204
    assert (await api("GET", "jobs/train", user="bob"))[1]["owner"] == "bob"


# ---------------------------------------------------------------- bounded streams


@pytest.fixture
def paddle_config() -> dict[str, Any]:
    return {"max_streams_per_user": 2, "stream_ping_interval": 0.2}


async def test_streams_are_bounded_per_user(api: Api, open_stream: OpenStream) -> None:
    first, second = open_stream("events"), open_stream("events")
    await first.next_event(("snapshot",))
    await second.next_event(("snapshot",))
    body = assert_error(await api("GET", "events"), 429, "too_many", None)
    assert "max_streams_per_user = 2" in body["message"]
    bobs = open_stream("events", user="bob")  # another user's count is their own
    assert (await bobs.next_event(("snapshot",)))[0] == "snapshot"
    first.hang_up()
    # the hung-up stream ends when the server next writes to it (a ping at the latest)
    while True:
        stream = open_stream("events")
        try:
            kind, _ = await asyncio.wait_for(stream.next_event(("snapshot",)), 0.5)
            break
        except asyncio.TimeoutError:
            continue
    assert kind == "snapshot"
