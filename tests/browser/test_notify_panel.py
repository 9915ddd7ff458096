"""The Notifications settings in the panel, in headless Chromium against a real JupyterLab whose
admin enabled webhooks to 127.0.0.1 (plain HTTP) and no e-mail, with a real webhook receiver: a
host the admin did not allow is refused with the server's words on the field; the receiver's URL
is kept; a failed job's webhook answered with 500 shows as failing, in words, until the receiver
takes it; and the message's link (`lab?paddle-job=<name>`) opens the job's view."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import Page, expect
from server.notify_receivers import WebhookReceiver
from support.jupyter_process import free_port

from .lab_server import APP_START_TIMEOUT_MS, PANEL_TAB, LabServer, start_lab, stop_lab

pytestmark = [pytest.mark.browser, pytest.mark.timeout(600)]

VIEW = '[data-testid="paddle-notifications"]'


@pytest.fixture(scope="module")
def receiver() -> Iterator[WebhookReceiver]:
    hook = WebhookReceiver(free_port(), answer=500).start()
    yield hook
    hook.stop()


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabServer]:
    server = start_lab(
        tmp_path_factory.mktemp("lab"),
        extra_args=[
            "--PaddleNbextNotifications.channels=webhook",
            "--PaddleNbextNotifications.webhook_http_hosts=127.0.0.1",
            "--PaddleNbextNotifications.retry_seconds=0.5",
            "--PaddleNbextNotifications.max_retry_seconds=1",
            "--PaddleNbextNotifications.max_attempts=1000",
        ],
    )
    (server.home / "work").mkdir()
    (server.home / "work" / "boom.py").write_text("raise RuntimeError('the learning rate schedule is empty')\n")
    try:
        yield server
    finally:
        try:
            server.api("DELETE", "jobs/boom")
        finally:
            stop_lab(server)


def _wait_phase(lab: LabServer, name: str, phase: str) -> dict[str, Any]:
    while True:  # bounded by the pytest timeout
        job: dict[str, Any] = lab.api("GET", f"jobs/{name}").json()
        if job.get("phase") == phase:
            return job
        time.sleep(0.2)


def test_settings_refusal_a_failing_channel_in_words_and_the_link(page: Page, lab: LabServer, receiver: WebhookReceiver) -> None:
    page.goto(lab.page_url("lab") + "&reset", timeout=APP_START_TIMEOUT_MS)
    page.locator(PANEL_TAB).wait_for(timeout=APP_START_TIMEOUT_MS)
    page.locator(PANEL_TAB).click()
    page.locator('[data-testid="paddle-notifications-open"]').click()
    view = page.locator(VIEW)
    expect(view.locator('[data-testid="paddle-notify-email-status"]')).to_have_text("Not offered on this server (ask your admin).")
    expect(view.locator('[data-testid="paddle-notify-email"]')).to_be_disabled()
    expect(view.locator('[data-testid="paddle-notify-webhook-status"]')).to_have_text("Not set up.")

    # A host the admin did not allow: the server's sentence, on the field it names.
    webhook = view.locator('[data-testid="paddle-notify-webhook"]')
    webhook.fill("https://metadata.internal/hook")
    view.locator('[data-testid="paddle-notify-save"]').click()
    expect(view.locator('[data-testid="paddle-notify-error"]')).to_contain_text("webhooks to metadata.internal are not allowed")
    expect(webhook).to_have_attribute("aria-invalid", "true")

    # The receiver's URL is kept, with the events chosen.
    webhook.fill(receiver.url)
    view.locator("#pn-notify-event-succeeded").uncheck()
    view.locator('[data-testid="paddle-notify-save"]').click()
    expect(view.locator('[data-testid="paddle-notify-saved"]')).to_have_text("Saved.")
    expect(view.locator('[data-testid="paddle-notify-error"]')).to_have_text("")
    saved = lab.api("GET", "notifications").json()["settings"]
    assert saved["webhook_url"] == receiver.url and saved["events"] == ["failed", "stalled", "memory"]

    # A failed job's webhook meets a receiver answering 500: the view says so, in words.
    body = {"job_name": "boom", "mode": "collective", "trainer_package": "work", "entry_point": "python boom.py"}
    assert lab.api("POST", "jobs", json=body).status_code == 201
    _wait_phase(lab, "boom", "Failed")
    status = view.locator('[data-testid="paddle-notify-webhook-status"]')
    expect(status).to_have_attribute("data-state", "failing", timeout=60_000)
    expect(status).to_contain_text("the receiver answered 500 Internal Server Error")
    expect(status).to_contain_text("1 waiting.")
    receiver.answer = 200
    expect(status).to_have_attribute("data-state", "ok", timeout=60_000)
    expect(status).to_contain_text("Delivered ")
    [delivered] = receiver.accepted()
    assert "the learning rate schedule is empty" in delivered.body["message"]

    # The message's link opens the job's view.
    link = delivered.body["link"]
    assert link.endswith("lab?paddle-job=boom"), link
    page.goto(lab.page_url("lab") + "&paddle-job=boom", timeout=APP_START_TIMEOUT_MS)
    expect(page.locator('[data-testid="paddle-detail-name"]')).to_have_text("boom", timeout=APP_START_TIMEOUT_MS)
    expect(page.locator('[data-testid="paddle-detail-message"]')).to_contain_text("the learning rate schedule is empty")
