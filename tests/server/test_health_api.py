"""Training health through the API, against a real Jupyter server and the local backend: a job
(plain Python, no Paddle) whose trainer grows its memory to 93 % of its limit, holds there until
the test lets it go on, then goes over.  The user sees the warning in the job's message, on the
event stream and in the timeline, resource use per replica beside its limit, and the end naming
the replica and its peak; and bad `stall_timeout` / `on_stall` values are refused naming the field."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from support.health_job import health_job_body, write_grower

from .conftest import Api, OpenStream
from .test_api import assert_error, wait_for


@pytest.fixture
def local_config() -> dict[str, Any]:
    return {"usage_interval": 0.5, "memory_warn_after": 1.0}


async def test_bad_stall_fields_are_refused_naming_the_field(api: Api, package: Path) -> None:
    base = {"entry_point": "python sleep.py 1", "trainer_package": "work"}
    body = assert_error(await api("POST", "jobs", body={**base, "stall_timeout": -5}), 422, field="stall_timeout")
    assert "must be positive" in body["message"]
    body = assert_error(await api("POST", "jobs", body={**base, "on_stall": "ignore"}), 422, field="on_stall")
    assert "'warn'" in body["message"] and "'restart'" in body["message"] and "'fail'" in body["message"]
    assert_error(await api("POST", "jobs", body={**base, "stall_timeout": "soon"}), 422, field="stall_timeout")
    assert (await api("GET", "jobs"))[1]["jobs"] == []  # nothing was created


async def test_memory_warning_usage_and_timeline_of_a_growing_trainer(
    api: Api, open_stream: OpenStream, package: Path, jp_home_dir: Path
) -> None:
    write_grower(package)
    go = jp_home_dir / "go"
    events = open_stream("events")
    assert (await events.next_event())[0] == "snapshot"
    bob = open_stream("events", user="bob")
    assert (await api("POST", "jobs", body=health_job_body("grows", package.name, go)))[0] == 201
    try:
        # The warning, on the stream: a timeline entry in words, and the job's message.
        while True:
            kind, data = await events.next_event(("timeline",))
            warnings = [entry for entry in data["entries"] if entry["kind"] == "warning"]
            if warnings:
                break
        assert data["name"] == "grows"
        assert warnings[0]["role"] == "trainer" and warnings[0]["index"] == 0
        assert "trainer 0 uses" in warnings[0]["text"] and "of its 256 MiB limit" in warnings[0]["text"]
        job = await wait_for_message(api, "grows", "Warning: trainer 0 uses")
        assert job["phase"] == "Running" and "of its 256 MiB limit" in job["message"]
        # Resource use beside the limit, live on the stream and through GET.
        kind, live = await events.next_event(("usage",))
        assert live["name"] == "grows" and "history" not in live["replicas"][0]
        status, usage = await api("GET", "jobs/grows/usage")
        assert status == 200 and usage["available"] is True and usage["reason"] is None
        (replica,) = usage["replicas"]
        assert (replica["role"], replica["index"], replica["phase"]) == ("trainer", 0, "Running")
        assert replica["memory_limit"] == 256 << 20 and replica["memory"] >= 0.9 * (256 << 20)
        assert replica["processes"] >= 2 and replica["history"] and replica["cpu_request"] == 1.0
        # Another user sees none of it; bad queries are named.
        assert_error(await api("GET", "jobs/grows/usage", user="bob"), 404, "not_found")
        assert_error(await api("GET", "jobs/grows/timeline", user="bob"), 404, "not_found")
        assert_error(await api("GET", "jobs/grows/timeline", params={"since": "later"}), 400, "bad_request", "since")
        # Over the limit: stopped, named with its peak.
        go.write_text("")
        job = await wait_for(api, "grows", {"Failed", "Succeeded"})
        assert job["phase"] == "Failed"
        (ended,) = job["replicas"]
        assert ended["reason"].startswith("MemoryLimitExceeded") and "peak" in ended["reason"]
        assert "trainer 0" in job["message"]
        status, timeline = await api("GET", "jobs/grows/timeline")
        assert status == 200 and timeline["available"] is True
        entries = timeline["entries"]
        kinds = [entry["kind"] for entry in entries]
        assert kinds[:3] == ["submitted", "admitted", "started"] and kinds[-1] == "ended"
        assert kinds.index("first_step") < kinds.index("warning") < kinds.index("replica_ended")
        assert [entry["seq"] for entry in entries] == list(range(1, len(entries) + 1))
        assert [entry["t"] for entry in entries] == sorted(entry["t"] for entry in entries)
        assert "peak memory" in entries[kinds.index("replica_ended")]["text"]
        assert entries[-1]["text"].startswith("Failed: ")
        status, later = await api("GET", "jobs/grows/timeline", params={"since": str(entries[-2]["seq"])})
        assert status == 200 and later["entries"] == entries[-1:] and later["last"] == entries[-1]["seq"]
        # After the end: the peak stays, the live figures go.
        status, usage = await api("GET", "jobs/grows/usage")
        (replica,) = usage["replicas"]
        assert replica["memory"] is None and replica["peak_memory"] >= 0.9 * (256 << 20)
        # Goodput: one reported step is no span of training, so the figure is unknown, never 0 %.
        assert usage["goodput"] is None
        assert '"grows"' not in bob.text  # Bob's stream never carries Alice's job
    finally:
        await api("DELETE", "jobs/grows")
    assert_error(await api("GET", "jobs/grows/timeline"), 404, "not_found")


async def wait_for_message(api: Api, name: str, words: str) -> dict[str, Any]:
    """Poll the job until its message holds `words`; fail naming the last message if it ends first."""
    import asyncio

    while True:
        status, job = await api("GET", f"jobs/{name}")
        assert status == 200, job
        if words in job["message"]:
            return job  # type: ignore[no-any-return]
        assert job["phase"] in ("Pending", "Running"), job
        await asyncio.sleep(0.1)
