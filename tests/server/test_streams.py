"""The event stream and log following: content, per-user filtering, and that both end cleanly
when the client hangs up and when the server shuts down (no stream, queue or task left)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from jupyter_server.serverapp import ServerApp
from tornado.simple_httpclient import HTTPStreamClosedError

from paddle_nbext_server.events import EventHub
from paddle_nbext_server.state import STATE_KEY, ExtensionState

from .conftest import Api, OpenStream, StreamAborted


@pytest.fixture
def paddle_config() -> dict[str, Any]:
    return {"stream_ping_interval": 0.2}


def hub(jp_serverapp: ServerApp) -> EventHub:
    state: ExtensionState = jp_serverapp.web_app.settings[STATE_KEY]
    return state.hub


async def until(predicate: Callable[[], object]) -> None:
    while not predicate():
        await asyncio.sleep(0.05)


async def test_events_snapshot_changes_and_isolation(api: Api, open_stream: OpenStream, package: Path, jp_serverapp: ServerApp) -> None:
    alice, bob = open_stream("events"), open_stream("events", user="bob")
    assert await alice.next_event() == ("snapshot", {"jobs": []})
    assert await bob.next_event() == ("snapshot", {"jobs": []})

    body = {"job_name": "quick", "mode": "collective", "entry_point": "python sleep.py 0.2", "trainer_package": "work"}
    assert (await api("POST", "jobs", body=body))[0] == 201
    phases = []
    while "Succeeded" not in phases:
        kind, job = await alice.next_event()
        assert kind == "job" and job["name"] == "quick" and job["owner"] == "alice"
        phases.append(job["phase"])
    assert phases[0] in ("Pending", "Running")

    assert (await api("DELETE", "jobs/quick"))[0] == 204
    while (event := await alice.next_event()) != ("deleted", {"name": "quick"}):
        assert event[0] == "job"

    # Bob's stream stayed open (pings) but never carried Alice's job.
    await until(lambda: "ping" in bob.text)
    assert bob.events.empty() or all(kind == "comment" for kind, _ in list(bob.events._queue))  # type: ignore[attr-defined]
    assert "quick" not in bob.text

    # A client that hangs up is noticed: its subscription is released.
    assert hub(jp_serverapp).subscriber_count == 2
    bob.hang_up()
    with pytest.raises((StreamAborted, HTTPStreamClosedError)):
        await bob.task
    await until(lambda: hub(jp_serverapp).subscriber_count == 1)
    # ...and nothing of it keeps waiting: only Alice's stream still watches for shutdown.
    shutting_down = jp_serverapp.web_app.settings[STATE_KEY].shutting_down
    await until(lambda: len(shutting_down._waiters) == 1)


async def test_streams_end_when_the_server_shuts_down(api: Api, open_stream: OpenStream, package: Path, jp_serverapp: ServerApp) -> None:
    body = {"job_name": "long", "mode": "collective", "entry_point": "python sleep.py 120", "trainer_package": "work"}
    assert (await api("POST", "jobs", body=body))[0] == 201
    try:
        while "started" not in (await api("GET", "jobs/long/logs"))[1]:
            await asyncio.sleep(0.1)
        events = open_stream("events")
        logs = open_stream("jobs/long/logs", params={"follow": "true"})
        await events.next_event()
        await until(lambda: "started" in logs.text)

        await jp_serverapp.extension_manager.stop_all_extensions()
        events_response, logs_response = await asyncio.gather(events.task, logs.task)
        assert events_response.code == 200 and logs_response.code == 200
        assert hub(jp_serverapp).subscriber_count == 0
        assert (await api("GET", "jobs"))[0] == 503
    finally:
        # The job itself survives a server stop; remove it with a fresh backend on the same dir.
        from paddle_nbext_server.backends.local import LocalBackend
        from paddle_nbext_server.events import EventHub

        backend = LocalBackend(events=EventHub(), jobs_dir=str(package.parent / ".paddle-jobs"))
        await backend.delete("long", "alice")


async def test_log_follow_streams_until_the_replica_ends(api: Api, open_stream: OpenStream, package: Path) -> None:
    script = "import time\nfor i in range(5):\n    print('line', i, flush=True)\n    time.sleep(0.2)\n"
    (package / "count.py").write_text(script)
    body = {"job_name": "counter", "mode": "collective", "entry_point": "python count.py", "trainer_package": "work"}
    assert (await api("POST", "jobs", body=body))[0] == 201
    try:
        logs = open_stream("jobs/counter/logs", params={"follow": "true"})
        response = await logs.task  # ends by itself once the replica has ended
        assert response.code == 200
        assert [line for line in logs.text.splitlines() if line.startswith("line")] == [f"line {i}" for i in range(5)]
        status, job = await api("GET", "jobs/counter")
        assert job["replicas"][0]["phase"] in ("Succeeded",) or job["phase"] == "Succeeded"

        # Hanging up mid-stream on a finished log is harmless; previous logs of a never-restarted replica are empty.
        status, text = await api("GET", "jobs/counter/logs", params={"previous": "true"})
        assert status == 200 and text == ""
    finally:
        assert (await api("DELETE", "jobs/counter"))[0] == 204
