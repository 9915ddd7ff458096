"""Notifications against real parts: a real `jupyter server` process, a real Paddle job on the
local backend that fails the way user code does, a real HTTP receiver and a real SMTP server
(aiosmtpd) on 127.0.0.1.

The receivers are down while the job fails, so its notifications wait in the outbox; the server is
stopped with them undelivered and started again once the receivers are up: each arrives exactly
once, in the job's own words, with the link to the job view."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
import requests
from support.jupyter_process import free_port

from paddle_nbext import api
from paddle_nbext.client import Client

from .notify_receivers import SmtpReceiver, WebhookReceiver, body_text
from .real_server import RealServer, server_env, start_server

TRAIN = """\
import paddle

# A data loader's bug, as user code meets it: an index one past the end.
samples = [paddle.to_tensor([float(i)]) for i in range(4)]
total = paddle.zeros([1])
for step in range(5):
    total = total + samples[step]
    print(f"step {step} total {total.item():.1f}", flush=True)
"""


def write_config(home: Path, smtp_port: int) -> None:
    (home / ".jupyter" / "jupyter_server_config.py").write_text(
        "c.PaddleNbextNotifications.channels = ['webhook', 'email']\n"
        "c.PaddleNbextNotifications.webhook_http_hosts = ['127.0.0.1']\n"
        "c.PaddleNbextNotifications.smtp_host = '127.0.0.1'\n"
        f"c.PaddleNbextNotifications.smtp_port = {smtp_port}\n"
        "c.PaddleNbextNotifications.smtp_tls = 'none'\n"
        "c.PaddleNbextNotifications.smtp_from = 'paddle-nbext@example.org'\n"
        "c.PaddleNbextNotifications.retry_seconds = 0.5\n"
        "c.PaddleNbextNotifications.max_retry_seconds = 2.0\n"
        "c.PaddleNbextNotifications.max_attempts = 1000\n"
        "c.PaddleNbextNotifications.public_url = 'https://hub.example.org/user/{username}/'\n"
    )


def notifications(server: RealServer) -> dict[str, Any]:
    response = requests.get(f"{server.api}/notifications", headers=server.headers(), timeout=30)
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    return answer


def wait_for(what: str, check: Any) -> Any:
    while True:  # bounded by the pytest timeout
        found = check()
        if found:
            return found
        time.sleep(0.1)


def job_phase(server: RealServer, name: str) -> str:
    phase: str = requests.get(f"{server.api}/jobs/{name}", headers=server.headers(), timeout=30).json()["phase"]
    return phase


@pytest.mark.timeout(600)
def test_a_failed_jobs_webhook_and_email_arrive_once_across_a_restart(tmp_path: Path) -> None:
    (tmp_path / "work").mkdir()
    (tmp_path / "work" / "train.py").write_text(TRAIN)
    hook, smtp = WebhookReceiver(free_port()), SmtpReceiver(free_port())
    server_env(tmp_path)  # makes ~/.jupyter
    write_config(tmp_path, smtp.port)  # the receivers are not up yet

    first = start_server(tmp_path)
    try:
        # Set once, through the Python API (what leaves nothing out keeps its value).
        client = Client(first.api, first.token)
        api.set_notifications(webhook_url=hook.url, events=["failed", "succeeded"], client=client)
        saved = api.set_notifications(email="ada@example.org", client=client)
        assert saved["settings"]["webhook_url"] == hook.url and saved["settings"]["email"] == "ada@example.org"
        assert saved["settings"]["events"] == ["failed", "succeeded"] and saved["enabled"] is True

        body = {"job_name": "idx", "mode": "collective", "trainer_package": "work", "entry_point": "python train.py"}
        assert requests.post(f"{first.api}/jobs", json=body, headers=first.headers(), timeout=60).status_code == 201
        wait_for("the job's end", lambda: job_phase(first, "idx") == "Failed")
        # Both channels fail while their receivers are down, and the API says so in words.
        answer = wait_for(
            "both channels failing",
            lambda: (a := notifications(first))["channels"]["webhook"]["last_error"] and a["channels"]["email"]["last_error"] and a,
        )
        assert "cannot reach 127.0.0.1" in answer["channels"]["webhook"]["last_error"], answer
        assert "cannot send through 127.0.0.1" in answer["channels"]["email"]["last_error"], answer
        assert answer["channels"]["webhook"]["ok"] is False and answer["channels"]["webhook"]["pending"] == 1
        assert answer["channels"]["email"]["pending"] == 1
    finally:
        first.stop()
    outbox = list((tmp_path / ".local/share/jupyter/paddle-nbext/outbox/pending").glob("*.json"))
    assert len(outbox) == 2, outbox  # stopped with both undelivered

    hook.start()
    smtp.start()
    second = start_server(tmp_path)
    try:
        wait_for("the webhook", lambda: hook.accepted())
        wait_for("the e-mail", lambda: smtp.messages)
        failed_message = requests.get(f"{second.api}/jobs/idx", headers=second.headers(), timeout=30).json()["message"]
        assert "IndexError" in failed_message, failed_message

        [webhook] = hook.accepted()
        assert webhook.body["event"] == "failed" and webhook.body["job"] == "idx" and webhook.body["phase"] == "Failed"
        assert webhook.body["message"] == failed_message  # the job's own words
        assert "IndexError" in webhook.body["text"]
        assert webhook.body["link"].startswith("https://hub.example.org/user/") and webhook.body["link"].endswith("/lab?paddle-job=idx")
        assert webhook.path == "/hooks/paddle?token=t0ken"

        [mail] = smtp.messages
        assert mail["Subject"] == "[paddle-nbext] idx failed" and mail["To"] == "ada@example.org"
        assert "IndexError" in body_text(mail) and webhook.body["link"] in body_text(mail)

        # A later job's notification is a barrier: every earlier one has been delivered by then.
        (tmp_path / "work" / "ok.py").write_text("import paddle\nprint(float(paddle.ones([2]).sum()), flush=True)\n")
        body = {"job_name": "ok", "mode": "collective", "trainer_package": "work", "entry_point": "python ok.py"}
        assert requests.post(f"{second.api}/jobs", json=body, headers=second.headers(), timeout=60).status_code == 201
        wait_for("the second job's webhook", lambda: len(hook.accepted()) == 2 and len(smtp.messages) == 2)
        assert [h.body["job"] for h in hook.accepted()] == ["idx", "ok"]  # the failure exactly once
        assert hook.accepted()[1].body["event"] == "succeeded"
        assert [m["Subject"] for m in smtp.messages] == ["[paddle-nbext] idx failed", "[paddle-nbext] ok succeeded"]
        answer = wait_for("the channels healthy", lambda: (a := notifications(second))["channels"]["email"]["ok"] and a)
        assert answer["channels"]["webhook"] | {"last_attempt": None, "last_delivered": None} == {
            "available": True,
            "set": True,
            "ok": True,
            "last_error": None,
            "failing_since": None,
            "gave_up": False,
            "last_attempt": None,
            "last_delivered": None,
            "pending": 0,
        }
    finally:
        for name in ("idx", "ok"):
            requests.delete(f"{second.api}/jobs/{name}", headers=second.headers(), timeout=120)
        second.stop()
        hook.stop()
        smtp.stop()
