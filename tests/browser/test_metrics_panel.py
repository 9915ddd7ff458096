"""Live training metrics in the panel, in a real JupyterLab driven by headless Chromium: a PS
job (1 pserver + 2 trainers, `python ps_train.py`, which `report()`s every step) opened in the
main area shows a loss chart with both trainers overlaid that grows while the job runs, values
on hover, a log scale, and a progress bar (also in the sidebar row) that reaches 100 % on
success.  The screenshot is the user guide's."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from playwright.sync_api import Locator, Page, expect

from .lab_server import LabServer, open_lab

pytestmark = [pytest.mark.browser, pytest.mark.timeout(600)]

PANEL = "#paddle-nbext-panel"
NAME = "browser-curve"


def drawn_points(chart: Locator) -> int:
    """Points of the chart's first line (what the SVG draws, not what was fetched)."""
    points = chart.locator("polyline").first.get_attribute("points") or ""
    return len(points.split())


def test_the_chart_grows_while_the_job_runs_and_progress_reaches_100(page: Page, lab: LabServer, screenshots: Path) -> None:
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    tab = open_lab(page, lab)
    tab.click()
    # Submitted once the panel is up: a cold Lab load must not eat the job's running time.
    response = lab.api(
        "POST",
        "jobs",
        json={
            "job_name": NAME,
            "entry_point": "python ps_train.py --steps 300 --step-delay 0.05",
            "trainer_package": "ps_pkg",
            "pservers": 1,
            "trainers": 2,
            "pserver_cpu": "500m",
            "trainer_cpu": "500m",
        },
    )
    assert response.status_code == 201, response.text
    row = page.locator(f'{PANEL} [data-testid="paddle-job-row"][data-job="{NAME}"]')
    row.click()
    view = page.locator(f'[data-testid="paddle-detail"][data-job="{NAME}"]')
    metrics = view.locator('[data-testid="paddle-metrics-view"]')
    chart = metrics.locator('[data-testid="paddle-chart"][data-metric="loss"]')

    # The chart appears with one line per trainer and a legend, and grows as points arrive.
    expect(chart.locator("polyline")).to_have_count(2, timeout=240_000)
    expect(chart.locator('[data-testid="paddle-chart-legend"] li')).to_have_text([re.compile(r"^trainer 0 "), re.compile(r"^trainer 1 ")])
    first = drawn_points(chart)
    phase = view.locator('[data-testid="paddle-detail-phase"]')
    # Grown while the job still runs, both seen at the same moment.
    page.wait_for_function(
        """([selector, phaseSelector, before]) => {
            const line = document.querySelector(selector);
            const phase = document.querySelector(phaseSelector);
            return line && phase && phase.textContent === 'Running' && line.getAttribute('points').split(' ').length > before;
        }""",
        arg=[f'[data-job="{NAME}"] [data-metric="loss"] polyline', f'[data-job="{NAME}"] [data-testid="paddle-detail-phase"]', first],
        timeout=120_000,
    )
    progress = metrics.locator('[data-testid="paddle-progress"]')
    expect(metrics.locator('[data-testid="paddle-progress-label"]')).to_have_text(re.compile(r"^\d+/300 · \d+%$"))
    expect(row.locator('[data-testid="paddle-row-progress"]')).to_contain_text(re.compile(r"\d+/300"))

    # Hover: every trainer's value at the step under the pointer.
    box = chart.locator("svg").bounding_box()
    assert box is not None
    page.mouse.move(box["x"] + box["width"] * 0.6, box["y"] + box["height"] / 2)
    tooltip = chart.locator('[data-testid="paddle-chart-tooltip"]')
    expect(tooltip).to_be_visible()
    # The step once, then a row per trainer with its colour, named as the replica table names it.
    expect(tooltip.locator(".pn-chart-tooltip-step")).to_have_text(re.compile(r"^step \d+$"))
    expect(tooltip.locator(".pn-chart-tooltip-row")).to_have_text(
        [re.compile(r"^trainer 0: [0-9.e-]+$"), re.compile(r"^trainer 1: [0-9.e-]+$")]
    )
    assert tooltip.locator(".pn-chart-tooltip-row .pn-chart-swatch").count() == 2

    # Log scale and back.
    toggle = metrics.locator('[data-testid="paddle-log-scale"]')
    toggle.click()
    expect(toggle).to_have_attribute("aria-pressed", "true")
    page.mouse.move(box["x"] + box["width"] * 0.6, box["y"] + box["height"] / 2)

    # Success: the bar is full, in the view and in the sidebar row.
    expect(phase).to_have_text("Succeeded", timeout=240_000)
    expect(progress).to_have_attribute("aria-valuenow", "100", timeout=30_000)
    expect(metrics.locator('[data-testid="paddle-progress-label"]')).to_have_text("300/300 · 100%")
    expect(metrics.locator('[data-testid="paddle-progress-eta"]')).to_have_text("")
    expect(row.locator('[data-testid="paddle-row-progress"]')).to_have_attribute("data-percent", "100", timeout=30_000)
    # Both bars take the success colour of the theme, no longer the running blue.
    success = page.evaluate("() => getComputedStyle(document.body).getPropertyValue('--jp-success-color1').trim()")
    as_rgb = page.evaluate(
        "colour => { const el = document.createElement('i'); el.style.color = colour; document.body.append(el);"
        " const rgb = getComputedStyle(el).color; el.remove(); return rgb; }",
        success,
    )
    for fill in (progress.locator(".pn-progress-fill"), row.locator('[data-testid="paddle-row-progress"] .pn-progress-fill')):
        assert fill.evaluate("el => getComputedStyle(el).backgroundColor") == as_rgb
    page.screenshot(path=str(screenshots / "job-metrics.png"))
    toggle.click()
    expect(toggle).to_have_attribute("aria-pressed", "false")
    assert not errors, errors

    # After a reload no `metrics` event comes for the ended job: its row keeps its bar all the same.
    open_lab(page, lab).click()
    reloaded = page.locator(f'{PANEL} [data-testid="paddle-job-row"][data-job="{NAME}"] [data-testid="paddle-row-progress"]')
    expect(reloaded).to_have_attribute("data-percent", "100")
    expect(reloaded).to_contain_text("300/300")
