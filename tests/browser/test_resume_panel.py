"""Resume from the panel, in a real JupyterLab driven by headless Chromium (issue 26): a job that
saves checkpoints is cancelled from its view, which then shows its checkpoints and a Resume
button; Resume (confirmed) starts a new job from the latest checkpoint, opens its view, and the
new job continues from that step and succeeds, its view naming the job it resumed."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from .lab_server import LabServer, open_lab

pytestmark = [pytest.mark.browser, pytest.mark.timeout(600)]

PANEL = "#paddle-nbext-panel"
NAME = "browser-ck"

#: Saves a checkpoint every 5 steps; without one to resume from it waits after step 10 (to be
#: cancelled); resumed, it checks the checkpoint's content and goes on to step 15.
TRAIN = """
import os, time
import paddle_nbext_job as job

resume = job.resume_from()
start = 0
if resume is not None:
    start = int(open(resume.file("state.txt")).read())
    print(f"resumed from {start}", flush=True)
for step in range(start + 1, 16):
    job.report(step, total=15, loss=1.0 / step)
    if step % 5 == 0:
        with job.save_checkpoint(step, ranks=1) as directory:
            open(os.path.join(directory, "state.txt"), "w").write(str(step))
    if step == 10 and resume is None:
        print("waiting to be cancelled", flush=True)
        time.sleep(600)
    time.sleep(0.05)
print("done", flush=True)
"""


def test_a_cancelled_job_resumes_from_the_panel_and_continues_from_its_checkpoint(page: Page, lab: LabServer) -> None:
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    package = Path(lab.home) / "ck_pkg"
    package.mkdir(exist_ok=True)
    (package / "train.py").write_text(TRAIN)
    tab = open_lab(page, lab)
    tab.click()
    response = lab.api("POST", "jobs", json={"job_name": NAME, "entry_point": "python train.py", "trainer_package": "ck_pkg"})
    assert response.status_code == 201, response.text
    page.locator(f'{PANEL} [data-testid="paddle-job-row"][data-job="{NAME}"]').click()
    view = page.locator(f'[data-testid="paddle-detail"][data-job="{NAME}"]')
    resume = view.locator('[data-testid="paddle-resume"]')
    expect(view.locator('[data-testid="paddle-detail-phase"]')).to_have_text("Running", timeout=120_000)
    expect(resume).to_be_hidden()  # a running job is not resumed
    trainer = view.locator('[data-testid="paddle-replica-row"][data-replica="trainer-0"]')
    expect(trainer.locator(".pn-reason")).to_have_text("Training")  # not "Running" twice

    # Wait for the state: the checkpoint of step 10 is there (its log says it waits).
    deadline = time.monotonic() + 120
    while "waiting to be cancelled" not in lab.api("GET", f"jobs/{NAME}/logs").text:
        assert time.monotonic() < deadline, lab.api("GET", f"jobs/{NAME}").json()
        page.wait_for_timeout(200)
    # The count is live while the job runs: the moment to decide whether cancelling is safe.
    expect(view.locator('[data-testid="paddle-detail-phase"]')).to_have_text("Running")
    # (fetched again on the view's 5 s tick)
    live = view.locator('[data-testid="paddle-detail-checkpoints"]')
    expect(live).to_have_text(re.compile(r"^2 checkpoints, latest step 10 \("), timeout=20_000)
    view.locator('[data-testid="paddle-cancel"]').click()
    dialog = page.locator(".jp-Dialog")
    dialog.locator("button.jp-mod-warn").click()
    expect(view.locator('[data-testid="paddle-detail-phase"]')).to_have_text("Cancelled", timeout=60_000)
    expect(trainer.locator(".pn-reason")).to_have_text("Stopped: the job was cancelled")
    expect(view.locator('[data-testid="paddle-detail-checkpoints"]')).to_have_text(re.compile(r"^2 checkpoints, latest step 10 \("))
    # The checkpoints themselves: step, time and size, newest first.
    listing = view.locator('[data-testid="paddle-checkpoints"]')
    listing.locator("summary").click()
    expect(listing.locator("tbody tr")).to_have_count(2)
    expect(listing.locator("tbody tr td:first-child")).to_have_text(["10", "5"])

    # Resume, confirmed: the new job's view opens and it goes on from step 10.
    expect(resume).to_be_visible()
    expect(resume).to_be_enabled()
    resume.click()
    expect(dialog).to_contain_text(f"Resume job {NAME}?")
    dialog.locator("button.jp-mod-accept").click()
    resumed = page.locator(f'[data-testid="paddle-detail"][data-job^="{NAME}-"]')
    expect(resumed).to_have_count(1, timeout=30_000)
    expect(resumed.locator('[data-testid="paddle-detail-phase"]')).to_have_text("Succeeded", timeout=180_000)
    expect(resumed.locator('[data-testid="paddle-detail-message"]')).to_have_text(
        f"All 1 trainer finished successfully (resumed from step 10 of job {NAME})."
    )
    # The origin is said by the message and by the "Resumed from" line (with its link), not a
    # third time on the checkpoint line.
    expect(resumed.locator('[data-testid="paddle-detail-resumed-from"]')).to_have_text(f"Resumed from {NAME} at step 10")
    expect(resumed.locator('[data-testid="paddle-detail-checkpoints"]')).not_to_contain_text("resumed from")
    new = resumed.get_attribute("data-job")
    assert new and new != NAME
    # Both tabs stay open (the resumed job's is its own, not the preview), and its title is told
    # apart from its origin's however short the tabs are cut.
    label = page.locator(f'.lm-TabBar-tab[data-id="paddle-nbext-job-{new}"] .lm-TabBar-tabLabel')
    expect(label).to_have_text(f"↻ {new}")
    expect(page.locator(f'.lm-TabBar-tab[data-id="paddle-nbext-job-{NAME}"] .lm-TabBar-tabLabel')).to_have_text(NAME)
    metrics = lab.api("GET", f"jobs/{new}/metrics").json()
    assert metrics["replicas"][0]["series"]["loss"]["step"] == [11, 12, 13, 14, 15], metrics
    assert "resumed from 10" in lab.api("GET", f"jobs/{new}/logs").text
    # The ended job is as it was.
    assert lab.api("GET", f"jobs/{NAME}").json()["phase"] == "Cancelled"
    assert errors == []


def test_resume_is_disabled_with_its_reason_for_a_job_without_checkpoints(page: Page, lab: LabServer) -> None:
    """Resume of a job that saved no checkpoint could only fail (409): it is disabled and says
    why on hover, instead of a toast cut off mid-word (issue 37, item 6)."""
    name = "browser-no-ck"
    package = Path(lab.home) / "nock_pkg"
    package.mkdir(exist_ok=True)
    (package / "train.py").write_text("import time\nprint('no checkpoints here', flush=True)\ntime.sleep(600)\n")
    assert (
        lab.api("POST", "jobs", json={"job_name": name, "entry_point": "python train.py", "trainer_package": "nock_pkg"}).status_code == 201
    )
    deadline = time.monotonic() + 120
    while "no checkpoints here" not in lab.api("GET", f"jobs/{name}/logs").text:
        assert time.monotonic() < deadline, lab.api("GET", f"jobs/{name}").json()
        time.sleep(0.2)
    assert lab.api("POST", f"jobs/{name}/cancel").ok
    open_lab(page, lab).click()
    page.locator(f'{PANEL} [data-testid="paddle-job-row"][data-job="{name}"]').click()
    view = page.locator(f'[data-testid="paddle-detail"][data-job="{name}"]')
    expect(view.locator('[data-testid="paddle-detail-phase"]')).to_have_text("Cancelled", timeout=60_000)
    resume = view.locator('[data-testid="paddle-resume"]')
    expect(resume).to_be_visible()
    expect(resume).to_be_disabled()
    expect(resume).to_have_attribute("title", re.compile(r"^Nothing to resume from: this job saved no checkpoint"))
    expect(view.locator('[data-testid="paddle-detail-checkpoints"]')).to_be_hidden()
