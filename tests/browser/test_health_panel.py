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

from .lab_server import LabServer, open_lab

pytestmark = [pytest.mark.browser, pytest.mark.timeout(600)]

PANEL = "#paddle-nbext-panel"
NAME = "browser-health"
#: Grows the replica's tree (itself and its launcher) to 93 % of LIMIT_MIB, reports, holds until GO_FILE.
GROWER = """\
import os, time
from paddle_nbext_job import flush, report
limit = int(os.environ["LIMIT_MIB"]) << 20
def resident(pid):
    with open(f"/proc/{pid}/statm") as handle:
        return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
held = []
while resident(os.getpid()) + resident(os.getppid()) < 0.93 * limit:
    held.append(b"x" * (1 << 20))
report(1, loss=1.0)
flush()
while not os.path.exists(os.environ["GO_FILE"]):
    time.sleep(0.05)
while True:
    held.append(b"x" * (4 << 20))
"""


def test_the_job_view_shows_timeline_resource_use_and_the_memory_warning(page: Page, lab: LabServer, screenshots: Path) -> None:
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    package = lab.home / "health_pkg"
    package.mkdir(exist_ok=True)
    (package / "grow.py").write_text(GROWER)
    go = lab.home / "health.go"
    tab = open_lab(page, lab)
    tab.click()
    response = lab.api(
        "POST",
        "jobs",
        json={
            "job_name": NAME,
            "mode": "collective",
            "entry_point": "python grow.py",
            "trainer_package": "health_pkg",
            "trainer_mem": "256Mi",
            "env": {"LIMIT_MIB": "256", "GO_FILE": str(go)},
        },
    )
    assert response.status_code == 201, response.text
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
    go.write_text("")
    expect(view.locator('[data-testid="paddle-detail-phase"]')).to_have_text("Failed", timeout=120_000)
    expect(entries.last).to_have_attribute("data-kind", "ended", timeout=30_000)
    expect(entries.last).to_contain_text("Failed: ")
    expect(view.locator('[data-testid="paddle-usage-replica"][data-replica="trainer-0"]')).to_contain_text("peak", timeout=30_000)
    assert not errors, errors
