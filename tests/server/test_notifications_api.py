"""`GET/PUT /notifications` on a live server: settings the admin's rules refuse are a 400 naming
the field (and nothing is kept); a receiver that answers 500 is retried, and the API says why the
channel fails, in words, until it takes the message; a stalled job and a job that waited in the
queue are told in their timeline's words.  The machine offers local jobs one CPU, so a second job
waits for the first."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.jupyter_process import free_port
from traitlets.config import Config

from .conftest import Api, _server_config
from .notify_receivers import WebhookReceiver

#: Reports step 1, then is quiet (no report, no output) until GO_FILE exists: a stuck data loader.
STUCK = """\
import os, time
from paddle_nbext_job import flush, report
report(1, total=10, loss=0.5)
flush()
print("step 1", flush=True)
while not os.path.exists(os.environ["GO_FILE"]):
    time.sleep(0.05)
"""
SILENT = "import os, time\nwhile not os.path.exists(os.environ['GO_FILE']):\n    time.sleep(0.05)\n"


@pytest.fixture
def local_config() -> dict[str, Any]:
    return {"max_cpu": 1.0, "cpu_overcommit": 1.0}


@pytest.fixture
def receiver() -> Iterator[WebhookReceiver]:
    hook = WebhookReceiver(free_port()).start()
    yield hook
    hook.stop()


@pytest.fixture
def jp_server_config(jp_home_dir: Path, paddle_config: dict[str, Any], local_config: dict[str, Any]) -> Config:
    """The suite's server, with webhooks allowed to 127.0.0.1 only (plain HTTP), and no e-mail."""
    config = _server_config(jp_home_dir, paddle_config, local_config)
    config.PaddleNbextNotifications = Config(
        channels=["webhook"],
        webhook_hosts=["hooks.example.org"],
        webhook_http_hosts=["127.0.0.1"],
        state_dir=str(jp_home_dir / "notify-state"),
        retry_seconds=0.2,
        max_retry_seconds=0.5,
        max_attempts=1000,
    )
    return config


async def wait_for(api: Api, check: Any) -> dict[str, Any]:
    while True:  # bounded by the pytest timeout
        status, answer = await api("GET", "notifications")
        assert status == 200, answer
        if check(answer):
            return dict(answer)
        await asyncio.sleep(0.1)


@pytest.mark.parametrize(
    ("settings", "field", "words"),
    [
        ({"webhook_url": "https://internal.example.org/hook"}, "webhook_url", "webhooks to internal.example.org are not allowed"),
        ({"webhook_url": "http://hooks.example.org/x"}, "webhook_url", "plain http is not allowed for hooks.example.org"),
        ({"webhook_url": "https://user:pw@hooks.example.org/x"}, "webhook_url", "may not hold a user name or password"),
        ({"webhook_url": "ftp://hooks.example.org/x"}, "webhook_url", "is not an https:// URL"),
        ({"email": "ada@example.org"}, "email", "e-mail notifications are not enabled"),
        ({"events": ["failed", "exploded"]}, "events", "unknown event 'exploded'"),
        ({"webhook_format": "teams"}, "webhook_format", "webhook_format must be 'json'"),
        ({"webhook": "https://hooks.example.org/x"}, "webhook", "unknown setting 'webhook'"),
    ],
)
async def test_settings_the_admin_does_not_allow_are_refused_naming_the_field(
    api: Api, settings: dict[str, Any], field: str, words: str
) -> None:
    status, error = await api("PUT", "notifications", body=settings)
    assert status == 400, error
    assert error["field"] == field and words in error["message"], error
    status, answer = await api("GET", "notifications")
    assert status == 200 and answer["settings"]["webhook_url"] is None  # nothing was kept
    assert answer["channels"]["webhook"]["available"] is True and answer["channels"]["email"]["available"] is False


async def test_an_allowed_host_is_kept_per_user(api: Api) -> None:
    url = "https://hooks.example.org/services/T0/B0/secret"
    status, answer = await api(
        "PUT", "notifications", body={"webhook_url": url, "webhook_format": "slack", "events": ["stalled", "failed"]}
    )
    assert status == 200, answer
    assert answer["settings"] | {"updated": None} == {
        "events": ["failed", "stalled"],
        "webhook_url": url,
        "webhook_format": "slack",
        "email": None,
        "updated": None,
    }
    assert answer["channels"]["webhook"]["set"] is True
    status, bobs = await api("GET", "notifications", user="bob")
    assert status == 200 and bobs["settings"]["webhook_url"] is None  # Alice's settings are hers


async def test_a_receiver_answering_500_is_retried_and_its_error_shown(api: Api, package: Path, receiver: WebhookReceiver) -> None:
    receiver.answer = 500
    status, answer = await api("PUT", "notifications", body={"webhook_url": receiver.url, "events": ["failed"]})
    assert status == 200, answer
    (package / "boom.py").write_text("raise RuntimeError('the learning rate schedule is empty')\n")
    body = {"job_name": "boom", "mode": "collective", "trainer_package": "work", "entry_point": "python boom.py"}
    assert (await api("POST", "jobs", body=body))[0] == 201
    try:
        failing = await wait_for(api, lambda a: len(receiver.received) >= 2 and a["channels"]["webhook"]["last_error"])
        channel = failing["channels"]["webhook"]
        assert channel["ok"] is False and channel["pending"] == 1 and channel["failing_since"], channel
        assert "the receiver answered 500 Internal Server Error: the receiver is down for maintenance" in channel["last_error"]
        assert len({hook.body["id"] for hook in receiver.received}) == 1  # one message, tried again

        receiver.answer = 200
        healthy = await wait_for(api, lambda a: a["channels"]["webhook"]["ok"])
        assert healthy["channels"]["webhook"]["last_error"] is None and healthy["channels"]["webhook"]["pending"] == 0
        [delivered] = receiver.accepted()
        assert delivered.body["event"] == "failed" and "the learning rate schedule is empty" in delivered.body["message"]
    finally:
        assert (await api("DELETE", "jobs/boom"))[0] == 204


async def test_a_stall_and_a_start_after_the_queue_are_told_in_the_timelines_words(
    api: Api, package: Path, receiver: WebhookReceiver, jp_home_dir: Path
) -> None:
    status, answer = await api("PUT", "notifications", body={"webhook_url": receiver.url, "events": ["stalled", "started"]})
    assert status == 200, answer
    (package / "stuck.py").write_text(STUCK)
    (package / "silent.py").write_text(SILENT)
    go, go_too = jp_home_dir / "go", jp_home_dir / "go-too"
    common = {"mode": "collective", "trainer_package": "work", "trainer_cpu": "1"}
    holder = {**common, "job_name": "holder", "entry_point": "python stuck.py", "stall_timeout": 1, "env": {"GO_FILE": str(go)}}
    waiter = {**common, "job_name": "waiter", "entry_point": "python silent.py", "env": {"GO_FILE": str(go_too)}}
    assert (await api("POST", "jobs", body=holder))[0] == 201
    assert (await api("POST", "jobs", body=waiter))[0] == 201
    try:
        while not receiver.accepted():  # bounded by the pytest timeout
            await asyncio.sleep(0.1)
        [stalled] = receiver.accepted()
        assert stalled.body["event"] == "stalled" and stalled.body["job"] == "holder"
        assert stalled.body["message"].startswith("no progress for ") and "since step 1; trainer 0 last wrote at" in stalled.body["message"]
        assert stalled.body["title"] == "holder stalled"

        go.write_text("")  # the holder ends; the waiter is admitted
        while len(receiver.accepted()) < 2:
            await asyncio.sleep(0.1)
        started = receiver.accepted()[1]
        assert started.body["event"] == "started" and started.body["job"] == "waiter", started.body
        assert started.body["message"].startswith("Admitted: "), started.body
        assert started.body["title"] == "waiter started after waiting in the queue"
    finally:
        go.write_text("")
        go_too.write_text("")
        for name in ("holder", "waiter"):
            await api("DELETE", f"jobs/{name}")
    assert [hook.body["event"] for hook in receiver.accepted()] == ["stalled", "started"]  # each once
