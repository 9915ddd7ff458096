"""End to end over HTTP with the local backend: a real Paddle parameter-server job (1 pserver +
2 trainers) followed through `/events` to Succeeded, its trainer log read and the job deleted;
and a failing job whose events carry the reason."""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from .conftest import Api, OpenStream

pytestmark = pytest.mark.paddle

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture
def examples(jp_home_dir: Path) -> Path:
    target = jp_home_dir / "examples"
    shutil.copytree(EXAMPLES, target)
    return target


async def follow_until_terminal(stream: Any, name: str) -> list[dict[str, Any]]:
    updates = []
    while True:
        kind, data = await stream.next_event()
        if kind == "job" and data["name"] == name:
            updates.append(data)
            if data["phase"] in ("Succeeded", "Failed", "Cancelled"):
                return updates


async def test_ps_job_runs_to_success_over_http(api: Api, open_stream: OpenStream, examples: Path) -> None:
    events = open_stream("events")
    assert (await events.next_event())[0] == "snapshot"
    body = {
        "job_name": "ps-e2e",
        "entry_point": "python ps_train.py --steps 120 --print-every 20",
        "trainer_package": "examples",
        "pservers": 1,
        "trainers": 2,
        "pserver_cpu": "500m",
        "trainer_cpu": "500m",
    }
    status, job = await api("POST", "jobs", body=body)
    assert status == 201, job
    try:
        updates = await follow_until_terminal(events, "ps-e2e")
        final = updates[-1]
        assert final["phase"] == "Succeeded", final
        assert "Running" in [u["phase"] for u in updates]
        assert final["roles"]["trainer"]["succeeded"] == 2 and final["roles"]["pserver"]["desired"] == 1

        status, log = await api("GET", "jobs/ps-e2e/logs", params={"role": "trainer", "index": "1"})
        assert status == 200
        losses = [float(v) for v in re.findall(r"loss ([0-9.eE+-]+)", log)]
        assert len(losses) >= 2 and losses[-1] < losses[0], log
    finally:
        status, _ = await api("DELETE", "jobs/ps-e2e")
    assert status == 204
    while (event := await events.next_event()) != ("deleted", {"name": "ps-e2e"}):
        assert event[0] == "job"
    assert (await api("GET", "jobs/ps-e2e"))[0] == 404


async def test_failing_job_events_carry_the_reason(api: Api, open_stream: OpenStream, examples: Path) -> None:
    (examples / "broken.py").write_text("import sys\nprint('cannot find the data set', flush=True)\nsys.exit(3)\n")
    events = open_stream("events")
    await events.next_event()
    body = {"job_name": "broken", "mode": "collective", "entry_point": "python broken.py", "trainer_package": "examples"}
    assert (await api("POST", "jobs", body=body))[0] == 201
    try:
        final = (await follow_until_terminal(events, "broken"))[-1]
        assert final["phase"] == "Failed"
        assert "exit code 3" in final["message"].lower() and "cannot find the data set" in final["message"], final["message"]
        replica = final["replicas"][0]
        assert replica["exit_code"] == 3 and replica["phase"] == "Failed" and replica["reason"]
    finally:
        assert (await api("DELETE", "jobs/broken"))[0] == 204
