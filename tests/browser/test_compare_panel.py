"""Runs side by side in the panel, in headless Chromium against a real JupyterLab and real local
jobs (plain Python calling `report()`, no Paddle: they start in about a second): three jobs
chosen in the Compare runs tab show their loss curves overlaid in their colours with a legend,
a metric picker and a wall-time axis, final and best values, and the spec fields and code files
that differ; the running one goes on live.  Also a job view's replica table at 320 px (Notebook
7's right area): every replica's Logs button and Use cell in view (issue 47, part 5).

The comparison's screenshot goes to docs/images/compare-runs.png (the user guide shows it)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from .lab_server import APP_START_TIMEOUT_MS, PANEL_TAB, REPO, LabServer, start_lab, stop_lab
from .test_workspace import axe_violations

pytestmark = [pytest.mark.browser, pytest.mark.timeout(600)]

PANEL = "#paddle-nbext-panel"
VIEW = '[data-testid="paddle-compare-view"]'
DOC_IMAGES = REPO / "docs" / "images"
TRAIN = """\
import os, sys, time
from paddle_nbext_job import report, flush
lr, steps = float(os.environ["LR"]), int(sys.argv[1])
gate = os.path.expanduser(sys.argv[2]) if len(sys.argv) > 2 else ""
for step in range(1, steps + 1):
    if gate and step > 20:
        while not os.path.exists(gate):
            time.sleep(0.1)
    report(step, total=steps, loss=2.0 / (1 + lr * step) + 0.05 * (step % 3), accuracy=1 - 1 / (1 + lr * step))
    flush()
    time.sleep(0.02)
"""
JOBS = ("cmp-baseline", "cmp-higher-lr", "cmp-running")


def _wait_phase(lab: LabServer, name: str, phases: set[str], timeout: float = 180) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    job: dict[str, Any] = {}
    while time.monotonic() < deadline:
        response = lab.api("GET", f"jobs/{name}")
        job = response.json() if response.ok else {}
        if job.get("phase") in phases:
            return job
        time.sleep(0.5)
    raise AssertionError(f"{name} did not reach {phases}: {job}")


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabServer]:
    """Two ended runs of one script (learning rates 0.1 and 0.4, 1 and 2 trainers, the second's
    code edited) and a third that runs until the test lets it go on past step 20."""
    server = start_lab(tmp_path_factory.mktemp("lab"))
    package = server.home / "sweep"
    package.mkdir()
    (package / "train.py").write_text(TRAIN)
    gate = server.home / "go"

    def submit(name: str, lr: str, trainers: int, entry: str) -> None:
        body = {
            "job_name": name,
            "mode": "collective",
            "trainers": trainers,
            "entry_point": entry,
            "trainer_package": "sweep",
            "env": {"LR": lr},
        }
        response = server.api("POST", "jobs", json=body)
        assert response.status_code == 201, response.text

    try:
        submit(JOBS[0], "0.1", 1, "python train.py 60")
        (package / "train.py").write_text(TRAIN + "# warm-up tuned\n")
        submit(JOBS[1], "0.4", 2, "python train.py 60")
        submit(JOBS[2], "0.2", 1, "python train.py 60 ~/go")
        for name in JOBS[:2]:
            assert _wait_phase(server, name, {"Succeeded", "Failed"})["phase"] == "Succeeded"
        _wait_phase(server, JOBS[2], {"Running"})
        yield server
    finally:
        gate.write_text("go")
        try:
            for name in JOBS:
                server.api("DELETE", f"jobs/{name}")
        finally:
            stop_lab(server)


def open_lab(page: Page, lab: LabServer) -> None:
    page.goto(lab.page_url("lab") + "&reset", timeout=APP_START_TIMEOUT_MS)
    page.locator(PANEL_TAB).wait_for(timeout=APP_START_TIMEOUT_MS)
    page.locator(PANEL_TAB).click()
    expect(page.locator(f'{PANEL} [data-testid="paddle-job-row"]')).to_have_count(3)


def test_three_jobs_side_by_side_live(page: Page, lab: LabServer) -> None:
    open_lab(page, lab)
    page.locator(f'{PANEL} [data-testid="paddle-compare-jobs"]').click()
    view = page.locator(VIEW)
    expect(view.locator('[data-testid="paddle-compare-status"]')).to_have_text("Choose two or more jobs to compare.")
    for name in JOBS:
        view.locator(f'[data-testid="paddle-compare-choice"][data-job="{name}"]').check()
    expected = lab.api("GET", "compare", params={"jobs": ",".join(JOBS)}).json()
    colours = {run["name"]: run["colour"] for run in expected["runs"]}
    assert len(set(colours.values())) == 3

    # The loss curves overlaid, each job in its colour, with a legend naming them.
    chart = view.locator('[data-testid="paddle-compare-chart"]')
    for name, colour in colours.items():
        expect(chart.locator(f'polyline[data-line="{name}"]')).to_have_attribute("stroke", colour)
    expect(chart.locator('[data-testid="paddle-chart-legend"] li')).to_have_count(3)
    expect(chart.locator('[data-testid="paddle-chart-legend"]')).to_contain_text("cmp-higher-lr")
    assert (chart.locator('polyline[data-line="cmp-baseline"]').get_attribute("points") or "").count(",") == 60

    # Final and best; what differs in the specs (trainers, env LR, the running one's entry) and code.
    results = view.locator('[data-testid="paddle-compare-results"]')
    expect(results).to_contain_text("loss final")
    expect(results).to_contain_text("(step 60)")
    spec = view.locator('[data-testid="paddle-compare-spec"]')
    expect(spec.locator('tr[data-field="env.LR"]')).to_contain_text("0.4")
    expect(spec.locator('tr[data-field="trainers"]')).to_contain_text("2")
    code = view.locator('[data-testid="paddle-compare-code"]')
    expect(code).to_contain_text("1 file differs (0 the same)")
    expect(code.locator('tr[data-path="train.py"]')).to_be_visible()
    assert axe_violations(page, VIEW) == []
    DOC_IMAGES.mkdir(parents=True, exist_ok=True)
    view.screenshot(path=str(DOC_IMAGES / "compare-runs.png"))

    # Another metric and the wall-time axis.
    view.locator('[data-testid="paddle-compare-metric"]').select_option("accuracy")
    expect(chart).to_have_attribute("data-metric", "accuracy")
    view.locator('[data-testid="paddle-compare-axis"]').select_option("time")
    assert "by wall time" in (chart.locator("svg").get_attribute("aria-label") or "")
    expect(chart.locator("polyline")).to_have_count(3)

    # Live: the running job is let go on; its curve grows and it ends, without a reload.
    running = chart.locator(f'polyline[data-line="{JOBS[2]}"]')
    held = (running.get_attribute("points") or "").count(",")
    assert held <= 21
    (lab.home / "go").write_text("go")
    page.wait_for_function(
        "([selector, held]) => (document.querySelector(selector)?.getAttribute('points') ?? '').split(',').length - 1 > held",
        arg=[f'{VIEW} polyline[data-line="{JOBS[2]}"]', held],
    )
    expect(results.locator("tbody tr").first.locator("td").nth(2)).to_have_text("Succeeded", timeout=60_000)


def test_a_replica_table_fits_320_px(page: Page, lab: LabServer) -> None:
    """Notebook 7's right area is 320 px wide: each replica's row keeps its Logs button and its
    Use cell in view, with nothing to scroll sideways (issue 47, part 5)."""
    open_lab(page, lab)
    page.locator(f'{PANEL} [data-testid="paddle-job-row"][data-job="{JOBS[1]}"]').click()
    selector = f'[data-testid="paddle-detail"][data-job="{JOBS[1]}"]'
    view = page.locator(selector)
    expect(view.locator('[data-testid="paddle-replica-row"]')).to_have_count(2)
    page.locator(PANEL_TAB).click()
    expect(page.locator(PANEL)).to_be_hidden()
    dock = page.locator("#jp-main-dock-panel").bounding_box()
    assert dock
    page.set_viewport_size({"width": int(1400 - dock["width"] + 320), "height": 1000})
    page.wait_for_function(
        "selector => Math.abs(document.querySelector(selector).getBoundingClientRect().width - 320) < 24",
        arg=selector,
    )
    cut = page.evaluate(
        """selector => {
            const view = document.querySelector(selector);
            const edge = view.getBoundingClientRect().right;
            const out = [];
            for (const scroller of view.querySelectorAll('.pn-table-scroll')) {
                if (scroller.scrollWidth > scroller.clientWidth + 1) out.push(`the replica table scrolls sideways: ${scroller.scrollWidth} > ${scroller.clientWidth}`);
            }
            for (const row of view.querySelectorAll('[data-testid="paddle-replica-row"]')) {
                const name = row.getAttribute('data-replica');
                const logs = row.querySelector('[data-testid="paddle-replica-logs"]').getBoundingClientRect();
                if (!logs.width || logs.right > edge + 1) out.push(`${name}: Logs ends at ${Math.round(logs.right)}, the view at ${Math.round(edge)}`);
                const use = row.querySelector('.pn-usage').getBoundingClientRect();
                if (!use.width || use.right > edge + 1) out.push(`${name}: Use ends at ${Math.round(use.right)}, the view at ${Math.round(edge)}`);
            }
            return out;
        }""",
        selector,
    )
    assert cut == [], "\n".join(cut)
    # The second replica's Logs button, now in reach, shows its log.
    view.locator('[data-testid="paddle-replica-logs"]').nth(1).click()
    expect(view.locator('[data-testid="paddle-log-replica"]')).to_have_value("trainer-1")
    page.screenshot(path=str(REPO / "test-artifacts" / "job-view-replicas-320.png"))
