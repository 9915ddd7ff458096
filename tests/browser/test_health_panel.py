"""Training health in the panel, in a real JupyterLab driven by headless Chromium: a job whose
trainer grows to 93 % of its 256 MiB limit shows, in its view, the timeline under the header
(newest last, the memory warning marked), its resource use with a bar against the limit and a
sparkline, the figures in the replica table's Use column, and a notification of the warning;
going over the limit then fails it, and the timeline ends with the end."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from .health_job import submit_health_job
from .lab_server import LabServer, open_lab

pytestmark = [pytest.mark.browser, pytest.mark.timeout(600)]

PANEL = "#paddle-nbext-panel"
NAME = "browser-health"


def test_the_job_view_shows_timeline_resource_use_and_the_memory_warning(page: Page, lab: LabServer, screenshots: Path) -> None:
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    tab = open_lab(page, lab)
    tab.click()
    job = submit_health_job(lab, NAME)
    page.locator(f'{PANEL} [data-testid="paddle-job-row"][data-job="{NAME}"]').click()
    view = page.locator(f'[data-testid="paddle-detail"][data-job="{NAME}"]')
    timeline = view.locator('[data-testid="paddle-timeline"]')
    entries = timeline.locator('[data-testid="paddle-timeline-entry"]')

    # The warning: marked in the timeline (newest last), in a notification, in the job's message.
    warning = entries.filter(has_text="trainer 0 uses")
    expect(warning).to_have_attribute("data-kind", "warning", timeout=240_000)
    expect(warning).to_contain_text("of its 256 MiB limit")
    expect(entries.first).to_contain_text("Submitted.")
    expect(
        page.locator(".jp-Notification-Toast, .Toastify__toast").filter(has_text=f"Paddle job {NAME}: Memory: trainer 0 uses")
    ).to_have_count(1, timeout=30_000)
    expect(view.locator('[data-testid="paddle-detail-message"]')).to_contain_text("Warning: trainer 0 uses")

    # Resource use: a line per replica with a bar against the limit and a sparkline; the table's Use cell.
    line = view.locator('[data-testid="paddle-usage-replica"][data-replica="trainer-0"]')
    expect(line).to_contain_text(re.compile(r"of 256 MiB"), timeout=30_000)
    expect(line.locator(".pn-usage-bar.pn-usage-high")).to_have_count(1)
    expect(line.locator("polyline")).to_have_attribute("points", re.compile(r"\d+\.\d,\d+\.\d \d"), timeout=30_000)
    cell = view.locator('[data-testid="paddle-replica-row"][data-replica="trainer-0"] td.pn-usage')
    expect(cell).to_contain_text(re.compile(r"cores · \d+(\.\d)? MiB of 256 MiB"))
    page.screenshot(path=str(screenshots / "job-health.png"))

    # Over the limit: Failed, and the timeline ends with the end.
    job.release()
    expect(view.locator('[data-testid="paddle-detail-phase"]')).to_have_text("Failed", timeout=120_000)
    expect(entries.last).to_have_attribute("data-kind", "ended", timeout=30_000)
    expect(entries.last).to_contain_text("Failed: ")
    expect(view.locator('[data-testid="paddle-usage-replica"][data-replica="trainer-0"]')).to_contain_text("peak", timeout=30_000)
    assert not errors, errors
