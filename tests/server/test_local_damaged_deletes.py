"""Every damaged local job can be deleted through the API, and its name used again (issue 28).

A job dir is damaged by hand here the way a crash, a full disk or an admin's copy damages one:
job.json emptied to ``{}`` (it names no owner any more; the dir's owner file, written when the
name was claimed, still does), and a job dir copied in by hand whose status.json has the wrong
shape.  DELETE removes them and frees the name; another user is still told there is no such
job."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

from .conftest import Api

BODY = {"mode": "collective", "trainers": 1, "entry_point": "python sleep.py 0", "trainer_package": "work"}


async def finished_job(api: Api, name: str) -> None:
    status, job = await api("POST", "jobs", body={"job_name": name, **BODY})
    assert status == 201, job
    for _ in range(600):
        _, job = await api("GET", f"jobs/{name}")
        if job["phase"] in ("Succeeded", "Failed"):
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"{name} did not end: {job}")


async def test_a_job_whose_job_json_is_emptied_is_listed_deleted_and_its_name_free_again(
    api: Api, package: Path, jp_home_dir: Path
) -> None:
    await finished_job(api, "emptied")
    (jp_home_dir / ".paddle-jobs" / "emptied" / "job.json").write_text("{}")
    (jp_home_dir / ".paddle-jobs" / "emptied" / "status.json").write_text("{}")
    assert (await api("DELETE", "jobs/emptied", user="bob"))[0] == 404
    status, body = await api("DELETE", "jobs/emptied")
    assert status == 204, body
    assert not (jp_home_dir / ".paddle-jobs" / "emptied").exists()
    assert (await api("GET", "jobs/emptied"))[0] == 404
    await finished_job(api, "emptied")  # the name is free again


async def test_a_job_dir_copied_in_with_a_wrong_shape_status_is_deleted(api: Api, package: Path, jp_home_dir: Path) -> None:
    await finished_job(api, "original")
    jobs = jp_home_dir / ".paddle-jobs"
    shutil.copytree(jobs / "original", jobs / "copied")
    (jobs / "copied" / "status.json").write_text('{"version": 1, "status": ["not", "a", "status"]}')
    status, body = await api("DELETE", "jobs/copied")
    assert status == 204, body
    assert not (jobs / "copied").exists() and (jobs / "original").is_dir()
    assert (await api("GET", "jobs/original"))[1]["phase"] == "Succeeded"
