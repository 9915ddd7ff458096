"""The Paddle jobs panel in a real JupyterLab and Notebook 7, driven in headless Chromium.

One PS job (1 pserver + 2 trainers, `python ps_train.py`) is submitted from the New job form
and watched to Succeeded; its trainer log shows the loss lines; a second job is cancelled and
deleted; an invalid value blocks submit with the spec's message.  Notebook 7 lists jobs too,
including one submitted through the REST API while the panel is open."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from playwright.sync_api import Locator, Page, expect

from .lab_server import APP_START_TIMEOUT_MS, LabServer, open_lab

pytestmark = [pytest.mark.browser, pytest.mark.timeout(600)]

PANEL = "#paddle-nbext-panel"


def job_view(page: Page, name: str) -> Locator:
    """The main-area view of one job."""
    return page.locator(f'[data-testid="paddle-detail"][data-job="{name}"]')


def open_lab_panel(page: Page, lab: LabServer) -> None:
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    tab = open_lab(page, lab)
    expect(page.locator(PANEL)).to_be_hidden()
    tab.click()
    expect(page.locator(PANEL)).to_be_visible()
    widen_left_area(page)
    page.errors = errors  # type: ignore[attr-defined]


def widen_left_area(page: Page, pixels: int = 220) -> None:
    """Drag the sidebar's edge so the panel (and the screenshots) get room."""
    handle = page.locator("#jp-main-split-panel > .lm-SplitPanel-handle").first
    box = handle.bounding_box()
    if box is None:
        return
    x, y = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
    page.mouse.move(x, y)
    page.mouse.down()
    page.mouse.move(x + pixels, y, steps=5)
    page.mouse.up()


def fill_form(page: Page, **values: str) -> None:
    for field, value in values.items():
        page.locator(f'{PANEL} [data-testid="paddle-field-{field}"]').fill(value)


def test_lab_submit_watch_logs_cancel_delete(page: Page, lab: LabServer, screenshots: Path) -> None:
    open_lab_panel(page, lab)
    panel = page.locator(PANEL)
    expect(panel.locator('[data-testid="paddle-empty"]')).to_be_visible()
    expect(panel.locator('[data-testid="paddle-connection"]')).to_have_text("live")
    # The version of the running server extension, in the panel's footer.
    version = lab.api("GET", "version").json()["version"]
    assert re.fullmatch(r"\d+\.\d+\.\d+\S*", version), version
    expect(panel.locator('[data-testid="paddle-version"]')).to_have_text(f"paddle-nbext {version}")
    page.screenshot(path=str(screenshots / "panel-empty.png"))

    # An invalid value shows the spec's message on its field and blocks submit.
    panel.locator('[data-testid="paddle-new-job"]').click()
    submit = panel.locator('[data-testid="paddle-submit"]')
    # The form is the served job schema: sections from the field table, the image hidden on the local backend.
    expect(panel.locator(".pn-form-group legend")).to_have_text(["Code", "Replicas", "Resources", "Run"])
    expect(panel.locator('[data-testid="paddle-field-image"]')).to_be_hidden()
    # The form says what this server's Paddle runs (the pinned wheel: both modes).
    expect(panel.locator('[data-testid="paddle-form-paddle"]')).to_have_text(
        "PaddlePaddle 3.0.0 runs parameter-server and collective jobs."
    )
    panel.locator('[data-testid="paddle-field-mode"]').select_option("ps")
    fill_form(page, job_name="browser-ps", entry_point="python ps_train.py", trainer_package="ps_pkg", pservers="1", trainers="2")
    expect(submit).to_be_enabled()
    fill_form(page, trainer_cpu="2 cores")
    expect(panel.locator('[data-testid="paddle-error-trainer_cpu"]')).to_contain_text("'2 cores' is not a quantity")
    expect(submit).to_be_disabled()
    expect(panel.locator('[data-testid="paddle-form-totals"]')).to_contain_text("fix the fields")
    page.screenshot(path=str(screenshots / "form-invalid.png"))
    fill_form(page, trainer_cpu="1", trainer_mem="1Gi", pserver_cpu="1", pserver_mem="1Gi")
    expect(panel.locator('[data-testid="paddle-error-trainer_cpu"]')).to_have_text("")
    expect(panel.locator('[data-testid="paddle-form-totals"]')).to_have_text("Total: 1 pserver × 1 CPU + 2 trainers × 1 CPU = 3 CPU, 3Gi")
    page.screenshot(path=str(screenshots / "form-new-job.png"))
    submit.click()

    # The job opens in the main area and follows the job live from the event stream: Running,
    # then Succeeded; the sidebar stays the list.
    view = job_view(page, "browser-ps")
    phase = view.locator('[data-testid="paddle-detail-phase"]')
    expect(view.locator('[data-testid="paddle-detail-name"]')).to_have_text("browser-ps")
    expect(page.locator(PANEL)).to_have_attribute("data-view", "list")
    expect(phase).to_have_text("Running", timeout=120_000)
    expect(view.locator('[data-testid="paddle-replica-row"]')).to_have_count(3)
    counts = view.locator('[data-testid="paddle-detail-counts"]')
    expect(phase).to_have_text("Succeeded", timeout=240_000)
    # Once ended, the counts say what happened, not what is running (no "0/2").
    expect(counts).to_have_text("pserver 1/1 finished · trainers 2/2 succeeded")
    # The end of the job is announced with a JupyterLab notification.
    expect(page.get_by_text("Paddle job browser-ps succeeded").first).to_be_visible()
    expect(view.locator('[data-testid="paddle-replica-row"][data-replica="trainer-1"]')).to_contain_text("Succeeded")
    expect(view.locator('[data-testid="paddle-replica-row"][data-replica="pserver-0"]')).to_contain_text(
        "Stopped by the job runner once the trainers finished"
    )
    page.screenshot(path=str(screenshots / "job-succeeded.png"))

    # A trainer's log shows the loss lines.
    view.locator('[data-testid="paddle-replica-row"][data-replica="trainer-0"] [data-testid="paddle-replica-logs"]').click()
    log = view.locator('[data-testid="paddle-log"]')
    expect(log).to_contain_text(re.compile(r"step \d+ loss \d"), timeout=30_000)
    expect(view.locator('[data-testid="paddle-log-status"]')).to_have_text(
        # The view opened while the job ran, so it follows (per view) until the replica ends.
        re.compile(r"^trainer 0(: replica ended)?( · \d+ Paddle noise lines hidden)?$")
    )
    page.screenshot(path=str(screenshots / "job-logs.png"))

    # Copy spec puts the spec on the clipboard and says so.
    view.locator('[data-testid="paddle-copy-spec"]').click()
    expect(page.get_by_text("Spec of browser-ps copied to the clipboard.").first).to_be_visible()
    view.locator(".pn-spec-section > summary").click()
    expect(view.locator('[data-testid="paddle-spec"]')).to_contain_text('"entry_point": "python ps_train.py"')

    # Back in the list the job is shown as Succeeded with the same words for its replicas.
    view.locator('[data-testid="paddle-back"]').click()
    row = panel.locator('[data-testid="paddle-job-row"][data-job="browser-ps"]')
    expect(row).to_have_attribute("data-phase", "Succeeded")
    expect(row.locator('.pn-count[data-role="pserver"]')).to_have_text("pserver 1/1 finished")
    expect(row.locator('.pn-count[data-role="trainer"]')).to_have_text("trainers 2/2 succeeded")

    # A second, long job: cancel it (with confirmation), then delete it.
    panel.locator('[data-testid="paddle-new-job"]').click()
    panel.locator('[data-testid="paddle-field-mode"]').select_option("ps")
    fill_form(page, job_name="browser-long", entry_point="python ps_train.py --steps 1000000", trainer_package="ps_pkg", trainers="1")
    submit.click()
    view = job_view(page, "browser-long")
    phase = view.locator('[data-testid="paddle-detail-phase"]')
    expect(phase).to_have_text(re.compile("Pending|Running"))
    expect(phase).to_have_text("Running", timeout=120_000)
    view.locator('[data-testid="paddle-cancel"]').click()
    dialog = page.locator(".jp-Dialog")
    expect(dialog).to_contain_text("Cancel job browser-long?")
    page.screenshot(path=str(screenshots / "cancel-confirm.png"))
    dialog.locator("button.jp-mod-warn").click()
    expect(phase).to_have_text("Cancelled", timeout=60_000)
    expect(view.locator('[data-testid="paddle-cancel"]')).to_be_disabled()

    view.locator('[data-testid="paddle-delete"]').click()
    expect(dialog).to_contain_text("Delete job browser-long?")
    dialog.locator("button.jp-mod-warn").click()
    expect(page.locator(PANEL)).to_have_attribute("data-view", "list")
    expect(view).to_have_count(0)
    expect(panel.locator('[data-testid="paddle-job-row"][data-job="browser-long"]')).to_have_count(0)
    expect(panel.locator('[data-testid="paddle-job-row"][data-job="browser-ps"]')).to_have_count(1)
    assert lab.api("GET", "jobs/browser-long").status_code == 404
    page.screenshot(path=str(screenshots / "panel-list.png"))
    assert page.errors == []  # type: ignore[attr-defined]


def test_server_rejection_is_shown_on_its_field(page: Page, lab: LabServer) -> None:
    """The server is authoritative: a package outside HOME passes the form but the 422 names
    trainer_package, and the message appears on that field."""
    open_lab_panel(page, lab)
    panel = page.locator(PANEL)
    panel.locator('[data-testid="paddle-new-job"]').click()
    fill_form(page, entry_point="python ps_train.py", trainer_package="no-such-dir")
    panel.locator('[data-testid="paddle-submit"]').click()
    error = panel.locator('[data-testid="paddle-error-trainer_package"]')
    expect(error).to_contain_text("does not exist")
    expect(panel.locator('[data-testid="paddle-submit"]')).to_be_disabled()
    fill_form(page, trainer_package="ps_pkg")
    expect(error).to_have_text("")
    expect(panel.locator('[data-testid="paddle-submit"]')).to_be_enabled()


def test_notebook7_panel_lists_jobs_live(page: Page, lab: LabServer, screenshots: Path) -> None:
    page.goto(lab.page_url("tree"), timeout=APP_START_TIMEOUT_MS)
    # On Notebook 7's /tree page the list is a tab beside Files and Running.
    page.get_by_role("tab", name="Paddle jobs").click(timeout=APP_START_TIMEOUT_MS)
    panel = page.locator(PANEL)
    expect(panel).to_be_visible()
    expect(panel.locator('[data-testid="paddle-job-row"][data-job="browser-ps"]')).to_have_attribute("data-phase", "Succeeded")

    # A job submitted through the API (as the magic does) appears without a reload.
    response = lab.api(
        "POST",
        "jobs",
        json={"job_name": "api-job", "entry_point": "python ps_train.py --steps 1000000", "trainer_package": "ps_pkg", "trainers": 1},
    )
    assert response.status_code == 201, response.text
    row = panel.locator('[data-testid="paddle-job-row"][data-job="api-job"]')
    expect(row).to_have_count(1, timeout=30_000)
    page.screenshot(path=str(screenshots / "notebook7-panel.png"))
    assert lab.api("DELETE", "jobs/api-job").status_code == 204
    expect(row).to_have_count(0, timeout=30_000)
