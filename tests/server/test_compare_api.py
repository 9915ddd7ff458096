"""`GET /compare?jobs=a,b,c` against a real Jupyter server and real local jobs (plain Python that
calls `report()` from `paddle_nbext_job`): the spec fields and code files that differ, the final
and best metrics, the colours, a running job compared live, and the errors."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from .conftest import Api
from .test_api import assert_error, wait_for

TRAIN = """\
import os, sys, time
from paddle_nbext_job import report, flush
lr = float(os.environ.get("LR", "0.1"))
steps, gate = int(sys.argv[1]), (sys.argv[2] if len(sys.argv) > 2 else "")
for step in range(1, steps + 1):
    if gate and step == 4:
        while not os.path.exists(gate):
            time.sleep(0.05)
    # loss dips at step 3 then rises: best (3) and final (last) differ; accuracy peaks at step 2
    report(step, total=steps, loss=abs(step - 3) * lr + 0.5, acc=[0.2, 0.9, 0.5, 0.4, 0.3, 0.1][step - 1], lr=lr)
    flush()
print("trained", flush=True)
"""


def job_body(name: str, lr: str, *, trainers: int = 1, gate: str = "", snapshot: bool = True) -> dict[str, Any]:
    return {
        "job_name": name,
        "mode": "collective",
        "trainers": trainers,
        "entry_point": f"python train.py 6 {gate}".strip(),
        "trainer_package": "work",
        "env": {"LR": lr},
        "snapshot": snapshot,
    }


async def submit(api: Api, body: dict[str, Any]) -> None:
    status, answer = await api("POST", "jobs", body=body)
    assert status == 201, answer


async def compare(api: Api, jobs: str, user: str = "alice") -> dict[str, Any]:
    status, body = await api("GET", "compare", params={"jobs": jobs}, user=user)
    assert status == 200, body
    answer: dict[str, Any] = body
    return answer


async def test_differences_metrics_and_colours_of_ended_jobs(api: Api, package: Path) -> None:
    (package / "train.py").write_text(TRAIN)
    (package / "notes.txt").write_text("same in both\n")
    await submit(api, job_body("run-a", "0.1"))
    (package / "train.py").write_text(TRAIN + "# tuned\n")  # b's snapshot holds other code
    (package / "extra.py").write_text("x = 1\n")
    await submit(api, job_body("run-b", "0.2", trainers=2))
    await submit(api, job_body("run-live", "0.1", snapshot=False))
    try:
        for name in ("run-a", "run-b", "run-live"):
            assert (await wait_for(api, name, {"Succeeded", "Failed"}))["phase"] == "Succeeded"
        body = await compare(api, "run-a,run-b")
        assert body["jobs"] == ["run-a", "run-b"] and [run["name"] for run in body["runs"]] == ["run-a", "run-b"]
        # Spec: trainers and env.LR differ, nothing else (job_name names the columns).
        assert {row["field"]: row["values"] for row in body["spec"]} == {
            "trainers": {"run-a": 1, "run-b": 2},
            "env.LR": {"run-a": "0.1", "run-b": "0.2"},
        }
        assert body["spec"][0]["label"] and body["spec"][1]["label"] == "env LR"
        # Code: train.py changed and extra.py is only in b's snapshot; notes.txt (and the
        # fixture's sleep.py) the same.
        code = body["code"]
        files = {row["path"]: row["hashes"] for row in code["files"]}
        assert set(files) == {"train.py", "extra.py"}, files
        assert files["extra.py"]["run-a"] is None and len(files["extra.py"]["run-b"]) == 64
        assert files["train.py"]["run-a"] != files["train.py"]["run-b"]
        assert code["same"] == 2 and code["compared"] == ["run-a", "run-b"] and code["truncated"] is False
        assert [run["code"] for run in body["runs"]] == [{"files": 3, "reason": None}, {"files": 4, "reason": None}]
        # Metrics: loss goes down (best at step 3), acc up (best at step 2), lr has no best.
        assert body["metrics"] == ["loss", "acc", "lr"]
        b = body["runs"][1]["metrics"]
        assert b["loss"] == {
            "replica": "trainer-0",
            "goal": "min",
            "final": 0.2 * 3 + 0.5,
            "final_step": 6,
            "best": 0.5,
            "best_step": 3,
            "points": 6,
        }
        assert (b["acc"]["goal"], b["acc"]["best"], b["acc"]["best_step"], b["acc"]["final"]) == ("max", 0.9, 2, 0.1)
        assert (b["lr"]["goal"], b["lr"]["best"], b["lr"]["final"]) == (None, None, 0.2)
        assert body["runs"][0]["progress"]["fraction"] == 1.0 and body["runs"][0]["phase"] == "Succeeded"
        # Colours: distinct, the same for a job in every comparison and whatever the order asked.
        colours = {run["name"]: run["colour"] for run in body["runs"]}
        assert len(set(colours.values())) == 2
        again = await compare(api, "run-live, run-b,run-a,run-b")
        assert again["jobs"] == ["run-live", "run-b", "run-a"]
        assert {run["name"]: run["colour"] for run in again["runs"]}.items() >= colours.items()
        # A job without a snapshot: its code is not compared, in words.
        live = again["runs"][0]
        assert live["code"]["files"] is None and "snapshot: false" in live["code"]["reason"]
        assert again["code"]["compared"] == ["run-b", "run-a"]
        assert {row["field"] for row in again["spec"]} >= {"snapshot", "trainers", "env.LR"}
    finally:
        for name in ("run-a", "run-b", "run-live"):
            await api("DELETE", f"jobs/{name}")


async def test_a_running_job_is_compared_live_and_bad_requests_name_the_field(api: Api, package: Path, tmp_path: Path) -> None:
    (package / "train.py").write_text(TRAIN)
    gate = tmp_path / "go"
    await submit(api, job_body("done", "0.1"))
    await submit(api, job_body("going", "0.3", gate=str(gate)))
    try:
        assert (await wait_for(api, "done", {"Succeeded", "Failed"}))["phase"] == "Succeeded"
        # Running, held before step 4: three points so far.
        while True:
            body = await compare(api, "done,going")
            going = body["runs"][1]
            if going["metrics"].get("loss", {}).get("points") == 3:
                break
            assert going["phase"] in ("Pending", "Running"), going
            await asyncio.sleep(0.1)
        assert going["phase"] == "Running" and going["metrics"]["loss"]["final_step"] == 3
        assert going["progress"]["step"] == 3 and going["progress"]["total"] == 6
        assert [row["field"] for row in body["spec"]] == ["entry_point", "env.LR"]
        assert body["code"]["files"] == []  # the same code: nothing differs
        gate.write_text("go")
        assert (await wait_for(api, "going", {"Succeeded", "Failed"}))["phase"] == "Succeeded"
        body = await compare(api, "done,going")
        assert body["runs"][1]["metrics"]["loss"]["final_step"] == 6 and body["runs"][1]["phase"] == "Succeeded"

        # Errors: a 400 naming `jobs` for fewer than two, a 404 naming the unknown job.
        for params in ({}, {"jobs": ""}, {"jobs": "done"}, {"jobs": "done,done"}, {"jobs": ","}):
            error = assert_error(await api("GET", "compare", params=params), 400, "bad_request", "jobs")
            assert "at least two" in error["message"], error
        many = ",".join(f"job-{n}" for n in range(13))
        assert "at most 12" in assert_error(await api("GET", "compare", params={"jobs": many}), 400, "bad_request", "jobs")["message"]
        for jobs, unknown in (("done,nope", "'nope'"), ("done,../etc", "'../etc'"), ("Bad_Name,done", "'Bad_Name'")):
            error = assert_error(await api("GET", "compare", params={"jobs": jobs}), 404, "not_found", "jobs")
            assert unknown in error["message"], error
        # Another user's jobs are unknown to them; no credentials: 403.
        error = assert_error(await api("GET", "compare", params={"jobs": "done,going"}, user="bob"), 404, "not_found", "jobs")
        assert "'done'" in error["message"] or "'going'" in error["message"]
        assert_error(await api("GET", "compare", params={"jobs": "done,going"}, token=None), 403, "forbidden")
    finally:
        gate.write_text("go")
        for name in ("done", "going"):
            await api("DELETE", f"jobs/{name}")
