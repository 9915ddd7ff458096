"""`GET /jobs/{name}/metrics` and the `metrics` events, against a real Jupyter server and the
local backend: a job (plain Python, no Paddle) that calls `report()` from `paddle_nbext_job`,
which the launcher puts on its PYTHONPATH."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from .conftest import Api, OpenStream
from .test_api import assert_error, wait_for

REPORTER = """\
import sys, time
from paddle_nbext_job import report, flush
steps = int(sys.argv[1])
for step in range(1, steps + 1):
    report(step, total=steps, loss=1.0 / step)
    flush()
    time.sleep(float(sys.argv[2]))
print('trained', flush=True)
"""


def write_reporter(package: Path) -> None:
    (package / "reporter.py").write_text(REPORTER)


async def test_series_ownership_and_bad_queries(api: Api, package: Path) -> None:
    write_reporter(package)
    body = {"job_name": "curve", "mode": "collective", "trainers": 2, "entry_point": "python reporter.py 40 0", "trainer_package": "work"}
    assert (await api("POST", "jobs", body=body))[0] == 201
    try:
        assert (await wait_for(api, "curve", {"Succeeded", "Failed"}))["phase"] == "Succeeded"
        status, metrics = await api("GET", "jobs/curve/metrics")
        assert status == 200, metrics
        assert [(r["role"], r["index"], r["count"]) for r in metrics["replicas"]] == [("trainer", 0, 40), ("trainer", 1, 40)]
        for replica in metrics["replicas"]:
            assert replica["series"]["loss"]["step"] == list(range(1, 41))
            assert replica["series"]["loss"]["value"][-1] == 1.0 / 40
        assert metrics["progress"]["fraction"] == 1.0 and metrics["cursor"] == "trainer-0:40,trainer-1:40"
        # Downsampled: first, last and the extremes stay.
        status, small = await api("GET", "jobs/curve/metrics", params={"points": "6"})
        steps = small["replicas"][0]["series"]["loss"]["step"]
        assert status == 200 and len(steps) <= 6 and steps[0] == 1 and steps[-1] == 40
        # Nothing new after the cursor.
        status, later = await api("GET", "jobs/curve/metrics", params={"since": metrics["cursor"]})
        assert status == 200 and [r["series"] for r in later["replicas"]] == [{}, {}]
        # Another user: no such job, as for logs.
        assert_error(await api("GET", "jobs/curve/metrics", user="bob"), 404, "not_found")
        assert_error(await api("GET", "jobs/curve/metrics", params={"points": "0"}), 400, "bad_request", "points")
        assert_error(await api("GET", "jobs/curve/metrics", params={"points": "many"}), 400, "bad_request", "points")
        assert_error(await api("GET", "jobs/curve/metrics", params={"points": "100001"}), 400, "bad_request", "points")
        assert_error(await api("GET", "jobs/curve/metrics", params={"since": "yesterday"}), 400, "bad_request", "since")
    finally:
        assert (await api("DELETE", "jobs/curve"))[0] == 204
    assert_error(await api("GET", "jobs/curve/metrics"), 404, "not_found")


RANK_REPORTER = """\
import os
from paddle_nbext_job import report
rank = int(os.environ["PADDLE_LOCAL_RANK"])
for step in range(1, 6 + rank):
    report(step, total=5 + rank, loss=100.0 * rank + step)
"""


async def test_each_rank_of_a_trainer_is_a_series_of_its_own(api: Api, package: Path) -> None:
    """2 trainers x 3 ranks (procs_per_trainer, no Paddle needed): six series, each with its
    trainer and rank; the cursor keys rank 0 as the trainer, as before ranks existed."""
    (package / "ranks.py").write_text(RANK_REPORTER)
    body = {
        "job_name": "ranked",
        "mode": "collective",
        "trainers": 2,
        "procs_per_trainer": 3,
        "entry_point": "python ranks.py",
        "trainer_package": "work",
    }
    assert (await api("POST", "jobs", body=body))[0] == 201
    try:
        assert (await wait_for(api, "ranked", {"Succeeded", "Failed"}))["phase"] == "Succeeded"
        status, metrics = await api("GET", "jobs/ranked/metrics")
        assert status == 200, metrics
        got = [(r["role"], r["index"], r["rank"], r["count"], r["series"]["loss"]["value"][-1]) for r in metrics["replicas"]]
        assert got == [("trainer", i, r, 5 + r, 100.0 * r + 5 + r) for i in range(2) for r in range(3)]
        assert metrics["cursor"] == ",".join(f"trainer-{i}{f'.rank-{r}' if r else ''}:{5 + r}" for i in range(2) for r in range(3))
        status, later = await api("GET", "jobs/ranked/metrics", params={"since": metrics["cursor"]})
        assert status == 200 and [r["series"] for r in later["replicas"]] == [{}] * 6
    finally:
        assert (await api("DELETE", "jobs/ranked"))[0] == 204


async def test_garbage_in_a_metrics_file_breaks_neither_job_nor_api(api: Api, package: Path) -> None:
    (package / "garbage.py").write_text(
        "import os\nfrom paddle_nbext_job import report, flush\n"
        "report(1, loss=2.0); flush()\n"
        "with open(os.environ['PADDLE_NBEXT_METRICS_FILE'], 'ab') as f:\n"
        "    f.write(b'\\x00garbage\\n{\"t\": 1}\\n' + b'x' * 100000 + b'\\n')\n"
        "report(2, loss=1.0)\nprint('done', flush=True)\n"
    )
    body = {"job_name": "garbage", "mode": "collective", "entry_point": "python garbage.py", "trainer_package": "work"}
    assert (await api("POST", "jobs", body=body))[0] == 201
    try:
        assert (await wait_for(api, "garbage", {"Succeeded", "Failed"}))["phase"] == "Succeeded"
        status, metrics = await api("GET", "jobs/garbage/metrics", params={"points": "500"})
        assert status == 200, metrics
        [replica] = metrics["replicas"]
        assert replica["series"]["loss"]["step"] == [1, 2] and replica["invalid"] == 3
    finally:
        await api("DELETE", "jobs/garbage")


async def test_running_jobs_send_throttled_metric_events(api: Api, open_stream: OpenStream, package: Path) -> None:
    write_reporter(package)
    events = open_stream("events")
    assert (await events.next_event())[0] == "snapshot"
    bob = open_stream("events", user="bob")
    body = {"job_name": "live", "mode": "collective", "entry_point": "python reporter.py 30 0.1", "trainer_package": "work"}
    assert (await api("POST", "jobs", body=body))[0] == 201
    try:
        seen: list[dict[str, Any]] = []
        while not seen or seen[-1]["progress"]["fraction"] < 1.0:
            kind, data = await events.next_event(("metrics",))
            assert data["name"] == "live"
            seen.append(data)
        assert seen[-1]["latest"]["trainer-0"] == {"step": 30, "total": 30, "values": {"loss": 1.0 / 30}}
        # Throttled: one event per look (two a second), not one per report() call.
        assert 1 <= len(seen) < 30
        cursors = [event["cursor"] for event in seen]
        assert len(set(cursors)) == len(cursors)  # an event only when there is something new
        await wait_for(api, "live", {"Succeeded"})
        await asyncio.sleep(1.0)
        assert '"live"' not in bob.text  # Bob's stream never carries Alice's metrics
    finally:
        await api("DELETE", "jobs/live")
