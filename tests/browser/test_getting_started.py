"""The user guide's "Getting started" as a user sees it, in a real JupyterLab driven by headless
Chromium: the first hour's path (examples/first-hour.ipynb) with its own code, and the guide's
screenshots of each step, written to docs/images/getting-started-*.png on every run.

1. The first job (the notebook's `%%paddle_submit --job-name first-job` cell: a collective job of
   2 trainers that `report()` their loss) succeeds; its view shows the full progress bar and
   one loss curve per trainer.
2. `train.py` of the notebook, run for 40 steps, fails on its 26th; the failed job's view opens
   on the error in the code's own words (`IndexError`) and on the failing trainer's traceback.
3. With the notebook's fix applied, the failed job resumed as `longer-run-fixed` succeeds from
   its latest checkpoint, and its view says "resumed from step 20".

The guide shows the notebook's cells as they are (checked here too, without a browser), so the
screenshots show what its code does.  The jobs are submitted through the REST API, as the
notebook's magics do it (the cell's body as `entry_script`), so the test spends its time on what
the panel shows, not on typing cells.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Locator, Page, expect

from .lab_server import REPO, LabServer, open_lab

PANEL = "#paddle-nbext-panel"
NOTEBOOK = REPO / "examples" / "first-hour.ipynb"
DOC_IMAGES = REPO / "docs" / "images"
USER_GUIDE = REPO / "docs" / "user-guide.md"
#: The folder the notebook works in (`~/first-hour`), here inside the server's home.
WORK = "first-hour"
#: The resources of every job of the notebook (`--trainers 2 --trainer-cpu 1 --trainer-mem 1Gi`).
RESOURCES = {"mode": "collective", "trainers": 2, "trainer_cpu": "1", "trainer_mem": "1Gi"}
#: The notebook's cells the test runs, by their first line; the user guide shows each whole.
FIRST_JOB = "%%paddle_submit --job-name first-job --trainers 2 --trainer-cpu 1 --trainer-mem 1Gi --wait"
TRAIN_PY = "%%writefile train.py"
#: How long a tiny Paddle job may take from submit to its end on a busy 2-core machine.
JOB_END_MS = 300_000


def notebook_cell(first_line: str) -> str:
    """The source of the notebook's code cell that starts with `first_line` (without that line):
    the test runs the code the reader runs."""
    cells = json.loads(NOTEBOOK.read_text(encoding="utf-8"))["cells"]
    for cell in cells:
        source = "".join(cell["source"])
        head, _, body = source.partition("\n")
        if cell["cell_type"] == "code" and head.startswith(first_line):
            return body
    raise AssertionError(f"{NOTEBOOK.name} has no code cell starting {first_line!r}")


def submit(lab: LabServer, spec: dict[str, Any]) -> None:
    response = lab.api("POST", "jobs", json={"trainer_package": WORK, **RESOURCES, **spec})
    assert response.status_code == 201, response.text


def open_job(page: Page, name: str) -> Locator:
    """Click the job's row in the sidebar panel; its view in the main area."""
    page.locator(f'{PANEL} [data-testid="paddle-job-row"][data-job="{name}"]').click()
    view = page.locator(f'[data-testid="paddle-detail"][data-job="{name}"]')
    expect(view).to_be_visible()
    return view


def screenshot(page: Page, name: str) -> None:
    """The whole window, without the pop-ups that say a job ended (they would cover the log)."""
    page.add_style_tag(content=".Toastify { display: none !important; }")
    page.screenshot(path=str(DOC_IMAGES / f"getting-started-{name}.png"))


def expect_curves(view: Locator, last_step: int) -> None:
    """Full progress bar and one loss curve per trainer, named in the legend."""
    metrics = view.locator('[data-testid="paddle-metrics-view"]')
    expect(metrics.locator('[data-testid="paddle-progress-label"]')).to_have_text(f"{last_step}/{last_step} · 100%", timeout=30_000)
    chart = metrics.locator('[data-testid="paddle-chart"][data-metric="loss"]')
    expect(chart.locator("polyline")).to_have_count(2)
    expect(chart.locator('[data-testid="paddle-chart-legend"] li')).to_have_text([re.compile(r"^trainer 0 "), re.compile(r"^trainer 1 ")])


def test_the_guide_shows_the_code_its_screenshots_ran() -> None:
    """The guide's Getting started shows the notebook's first job and train.py as they are, so
    its screenshots (taken running the notebook's cells) show what its code does."""
    guide = USER_GUIDE.read_text(encoding="utf-8").split("\n## Getting started\n", 1)[1].split("\n## ", 1)[0]
    for first_line in (FIRST_JOB, TRAIN_PY):
        cell = f"```python\n{first_line}\n{notebook_cell(first_line).rstrip()}\n```"
        assert cell in guide, f"the user guide's Getting started does not show the notebook's cell {first_line!r} as it is"
    for image in ("first-job", "failure", "resumed"):
        assert f"(images/getting-started-{image}.png)" in guide, image


@pytest.mark.browser
@pytest.mark.paddle
@pytest.mark.timeout(900)
def test_the_first_hour_in_the_panel(page: Page, lab: LabServer) -> None:
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    work = Path(lab.home) / WORK
    work.mkdir()
    # The notebook's `%%writefile train.py` cell.
    (work / "train.py").write_text(notebook_cell(TRAIN_PY))
    open_lab(page, lab).click()

    # 1. The first job: both trainers train and report; the view has the progress and the curves.
    submit(lab, {"job_name": "first-job", "entry_point": "python paddle_entry.py", "entry_script": notebook_cell(FIRST_JOB)})
    view = open_job(page, "first-job")
    expect(view.locator('[data-testid="paddle-detail-phase"]')).to_have_text("Succeeded", timeout=JOB_END_MS)
    expect(view.locator('[data-testid="paddle-detail-message"]')).to_have_text("All 2 trainers finished successfully.")
    expect_curves(view, 30)
    expect(view.locator('[data-testid="paddle-timeline"]')).to_contain_text(
        "Succeeded: All 2 trainers finished successfully.", timeout=30_000
    )
    row = page.locator(f'{PANEL} [data-testid="paddle-job-row"][data-job="first-job"]')
    expect(row.locator('[data-testid="paddle-row-progress"]')).to_contain_text("30/30")
    screenshot(page, "first-job")

    # 2. 40 steps over 25 batches: the job fails, in the code's own words, on the failing trainer's log.
    submit(lab, {"job_name": "longer-run", "entry_point": "python train.py 40"})
    view = open_job(page, "longer-run")
    expect(view.locator('[data-testid="paddle-detail-phase"]')).to_have_text("Failed", timeout=JOB_END_MS)
    expect(view.locator('[data-testid="paddle-detail-message"]')).to_contain_text("IndexError: list index out of range")
    expect(view.locator('[data-testid="paddle-log-replica"]')).to_have_value(re.compile(r"^trainer-[01]$"))
    traceback = view.locator('[data-testid="paddle-log-traceback"]')
    expect(traceback).to_contain_text("x = batches[step]")
    expect(traceback).to_contain_text("IndexError: list index out of range")
    expect(view.locator('[data-testid="paddle-detail-checkpoints"]')).to_contain_text("latest step 20")
    traceback.scroll_into_view_if_needed()
    screenshot(page, "failure")

    # 3. The notebook's fix, then resume: the new job starts from step 20 and ends at step 40.
    source = (work / "train.py").read_text()
    (work / "train.py").write_text(source.replace("x = batches[step]", "x = batches[step % len(batches)]"))
    response = lab.api("POST", "jobs/longer-run/resume", json={"job_name": "longer-run-fixed"})
    assert response.status_code == 201, response.text
    view = open_job(page, "longer-run-fixed")
    expect(view.locator('[data-testid="paddle-detail-phase"]')).to_have_text("Succeeded", timeout=JOB_END_MS)
    expect(view.locator('[data-testid="paddle-detail-message"]')).to_have_text(
        "All 2 trainers finished successfully (resumed from step 20 of job longer-run)."
    )
    expect(view.locator('[data-testid="paddle-detail-resumed-from"]')).to_have_text("Resumed from longer-run at step 20")
    expect_curves(view, 40)
    expect(view.locator('[data-testid="paddle-timeline"]')).to_contain_text(
        "Succeeded: All 2 trainers finished successfully", timeout=30_000
    )
    screenshot(page, "resumed")
    assert "trainer 0: resumed from step 20" in lab.api("GET", "jobs/longer-run-fixed/logs").text
    assert errors == []
