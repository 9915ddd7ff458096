"""Checkpoints through the REST API (issue 26), real server and local backend, plain Python jobs
that use `paddle_nbext_job`'s checkpoint API: list a job's checkpoints, resume a cancelled job
as a new job from its latest checkpoint (own jobs only, clear 409s), and delete keeping them."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from paddle_nbext_server.backends.local.store import JobStore

from .conftest import Api
from .test_api import assert_error, wait_for

#: Saves a checkpoint every 5 steps (a file holding the step); without one to resume from it
#: stops at step 10 and waits to be cancelled; resumed, it checks the file and goes on to 15.
TRAIN = """
import os, sys, time
import paddle_nbext_job as job

resume = job.resume_from()
start = 0
if resume is not None:
    with open(resume.file("state.txt")) as handle:
        start = int(handle.read())
    assert start == resume.step, (start, resume.step)
    print(f"resumed from {start}", flush=True)
for step in range(start + 1, 16):
    job.report(step, total=15, loss=1.0 / step)
    if step % 5 == 0:
        with job.save_checkpoint(step, ranks=1) as directory:
            with open(os.path.join(directory, "state.txt"), "w") as handle:
                handle.write(str(step))
        print(f"saved {step}", flush=True)
    if step == 10 and resume is None:
        print("waiting to be cancelled", flush=True)
        time.sleep(600)
print("done", flush=True)
"""


@pytest.fixture
def trainer(package: Path) -> Path:
    (package / "train.py").write_text(TRAIN)
    (package / "idle.py").write_text("import time\nprint('idle', flush=True)\ntime.sleep(600)\n")
    return package


async def wait_for_log(api: Api, name: str, text: str) -> None:
    while True:
        status, body = await api("GET", f"jobs/{name}/logs")
        assert status == 200, body
        if text in body:
            return
        job = (await api("GET", f"jobs/{name}"))[1]
        assert job["phase"] in ("Pending", "Running"), f"{name} ended before its log said {text!r}: {job}"
        await asyncio.sleep(0.1)


async def test_a_cancelled_job_resumes_as_a_new_job_from_its_latest_checkpoint(api: Api, trainer: Path, jp_home_dir: Path) -> None:
    body = {"job_name": "ck", "entry_point": "python train.py", "trainer_package": str(trainer), "keep_checkpoints": 3}
    status, job = await api("POST", "jobs", body=body)
    assert status == 201, job
    await wait_for_log(api, "ck", "waiting to be cancelled")
    status, listed = await api("GET", "jobs/ck/checkpoints")
    assert status == 200, listed
    assert [c["step"] for c in listed["checkpoints"]] == [5, 10] and listed["latest"]["step"] == 10
    assert all(c["size"] > len(str(c["step"])) and c["time"].endswith("Z") for c in listed["checkpoints"]), listed
    assert listed["size"] > 0 and listed["job_size"] > listed["size"] and listed["resumed_from"] is None
    # A running job is not resumed (it is still going), and another user has no such job.
    refused = assert_error(await api("POST", "jobs/ck/resume"), 409, "conflict")
    assert "only a Cancelled or Failed job can be resumed" in refused["message"], refused
    assert_error(await api("POST", "jobs/ck/resume", user="bob"), 404, "not_found")
    assert_error(await api("GET", "jobs/ck/checkpoints", user="bob"), 404, "not_found")

    assert (await api("POST", "jobs/ck/cancel"))[1]["phase"] == "Cancelled"
    status, resumed = await api("POST", "jobs/ck/resume")
    assert status == 201, resumed
    new = resumed["name"]
    assert new.startswith("ck-") and resumed["resumed_from"] == {"job": "ck", "step": 10}
    assert resumed["spec"]["entry_point"] == "python train.py" and resumed["spec"]["keep_checkpoints"] == 3
    done = await wait_for(api, new, {"Succeeded", "Failed"})
    assert done["phase"] == "Succeeded", done
    assert done["message"] == "All 1 trainer finished successfully (resumed from step 10 of job ck).", done
    # The new job links to the one it resumed, in its status (GET, the list) to the end, and a
    # server started again reads it from the job's record; a job submitted as new has no link.
    assert done["resumed_from"] == {"job": "ck", "step": 10}, done
    listed_jobs = {each["name"]: each for each in (await api("GET", "jobs"))[1]["jobs"]}
    assert listed_jobs[new]["resumed_from"] == {"job": "ck", "step": 10} and "resumed_from" not in listed_jobs["ck"]
    restarted = JobStore(jp_home_dir / ".paddle-jobs").load(jp_home_dir / ".paddle-jobs" / new).record.status
    assert restarted.resumed_from == {"job": "ck", "step": 10} and restarted.phase == "Succeeded", restarted
    log = (await api("GET", f"jobs/{new}/logs"))[1]
    assert "resumed from 10" in log and "saved 15" in log and "done" in log, log
    status, chain = await api("GET", f"jobs/{new}/checkpoints")
    assert status == 200 and [c["step"] for c in chain["checkpoints"]] == [10, 15], chain
    assert chain["resumed_from"]["job"] == "ck" and chain["resumed_from"]["step"] == 10
    # Its curve goes on from the checkpoint: steps 11 to 15 only.
    metrics = (await api("GET", f"jobs/{new}/metrics"))[1]
    assert metrics["replicas"][0]["series"]["loss"]["step"] == [11, 12, 13, 14, 15], metrics
    # The ended job is untouched by its resumption: resumed again, it starts from step 10 again.
    again = await api("POST", "jobs/ck/resume", body={"job_name": "ck-again", "trainers": 1})
    assert again[0] == 201 and again[1]["name"] == "ck-again", again
    await wait_for(api, "ck-again", {"Succeeded", "Failed"})
    # A name that is taken is refused like any submit.
    assert_error(await api("POST", "jobs/ck/resume", body={"job_name": "ck-again"}), 409, "name_taken")
    # A changed field that is invalid is refused naming it.
    assert_error(await api("POST", "jobs/ck/resume", body={"trainers": 0}), 422, field="trainers")

    # Delete keeping the checkpoints moves them into the home; the job is gone.
    status, kept = await api("DELETE", "jobs/ck", params={"keep_checkpoints": "true"})
    assert status == 200, kept
    kept_dir = Path(kept["kept"])
    assert kept_dir.parent == jp_home_dir / "paddle-checkpoints" and kept["size"] > 0
    assert sorted(p.name for p in kept_dir.iterdir()) == ["step-000000000005", "step-000000000010"]
    assert_error(await api("GET", "jobs/ck"), 404)
    # The default delete takes the checkpoints with the job.
    job_dir = jp_home_dir / ".paddle-jobs" / new
    assert (job_dir / "checkpoints").is_dir()
    assert (await api("DELETE", f"jobs/{new}"))[0] == 204
    assert not job_dir.exists()
    assert (await api("DELETE", "jobs/ck-again"))[0] == 204


async def test_a_job_without_checkpoints_cannot_be_resumed(api: Api, trainer: Path) -> None:
    body = {"job_name": "idle", "entry_point": "python idle.py", "trainer_package": str(trainer)}
    assert (await api("POST", "jobs", body=body))[0] == 201
    await wait_for_log(api, "idle", "idle")
    assert (await api("POST", "jobs/idle/cancel"))[1]["phase"] == "Cancelled"
    refused = assert_error(await api("POST", "jobs/idle/resume"), 409, "conflict")
    assert refused["message"].startswith("no checkpoint to resume from: job 'idle' saved none"), refused
    listed = (await api("GET", "jobs/idle/checkpoints"))[1]
    assert listed["checkpoints"] == [] and listed["latest"] is None and listed["size"] == 0
    assert_error(await api("POST", "jobs/missing/resume"), 404, "not_found")
    assert (await api("DELETE", "jobs/idle", params={"keep_checkpoints": "true"}))[0] == 204  # nothing to keep
