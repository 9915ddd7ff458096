"""Notebook 7: the job list is a "Paddle jobs" tab beside Files and Running on `/tree`, a
selected job opens as one more tab there, and on a notebook page the panel is in the left
area (View → Left Sidebar) with the job view beside the notebook."""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from .lab_server import APP_START_TIMEOUT_MS, LabServer

pytestmark = [pytest.mark.browser, pytest.mark.timeout(600)]

PANEL = "#paddle-nbext-panel"
JOB = "nb7-tree-job"
TREE_TABS = ".jp-TreePanel > .lm-TabBar .lm-TabBar-tab"


@pytest.fixture(scope="module")
def submitted(lab: LabServer) -> str:
    """A long job submitted through the REST API (as `%paddle_submit` does)."""
    response = lab.api(
        "POST",
        "jobs",
        json={"job_name": JOB, "entry_point": "python ps_train.py --steps 1000000", "trainer_package": "ps_pkg", "trainers": 1},
    )
    assert response.status_code == 201, response.text
    return JOB


def test_tree_has_a_paddle_jobs_tab_beside_files_and_running(page: Page, lab: LabServer, submitted: str, screenshots: Path) -> None:
    # Only this extension's errors count: Notebook 7's own shortcut settings handler throws on
    # /tree when its settings loader reports a plugin it has no schema for.
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error.stack)) if "paddle" in str(error.stack) else None)
    page.goto(lab.page_url("tree"), timeout=APP_START_TIMEOUT_MS)
    tab = page.get_by_role("tab", name="Paddle jobs")
    tab.wait_for(timeout=APP_START_TIMEOUT_MS)
    # Notebook 7 adds its own tabs as it starts: each is waited for, in its place.
    for place, label in enumerate(("Files", "Running", "Paddle jobs")):
        expect(page.locator(TREE_TABS).nth(place)).to_have_text(label)
    panel = page.locator(PANEL)
    expect(panel).to_be_hidden()

    tab.click()
    expect(panel).to_be_visible()
    row = panel.locator(f'[data-testid="paddle-job-row"][data-job="{submitted}"]')
    expect(row).to_have_count(1, timeout=30_000)
    page.screenshot(path=str(screenshots / "notebook7-tree-tab.png"))

    # Selecting the job opens its view as a closable tab in front; closing it goes back.
    row.click()
    view = page.locator(f'[data-testid="paddle-detail"][data-job="{submitted}"]')
    expect(view).to_be_visible()
    expect(panel).to_be_hidden()
    view_tab = page.locator(TREE_TABS, has_text=submitted)
    expect(view_tab).to_have_count(1)
    view_tab.locator(".lm-TabBar-tabCloseIcon").click()
    expect(view).to_have_count(0)
    # The left sidebar no longer holds the list on /tree: it is in the tab.
    assert page.locator(f"#jp-left-stack {PANEL}").count() == 0
    assert errors == []


def test_notebook_page_has_the_panel_in_its_left_area(page: Page, lab: LabServer, submitted: str) -> None:
    notebook = lab.home / "nb7-left.ipynb"
    kernel = '{"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}}'
    notebook.write_text(f'{{"cells": [], "metadata": {kernel}, "nbformat": 4, "nbformat_minor": 5}}')
    page.goto(lab.page_url("notebooks/nb7-left.ipynb"), timeout=APP_START_TIMEOUT_MS)
    page.get_by_role("menuitem", name="View").click(timeout=APP_START_TIMEOUT_MS)
    page.locator('.lm-Menu-item:has-text("Left Sidebar")').hover()
    page.locator('.lm-Menu-item:has-text("Show Paddle jobs")').click()
    panel = page.locator(f"#jp-left-stack {PANEL}")
    expect(panel).to_be_visible()
    row = panel.locator(f'[data-testid="paddle-job-row"][data-job="{submitted}"]')
    expect(row).to_have_count(1, timeout=30_000)

    # The main area keeps the notebook: the job view opens in the right area beside it.
    row.click()
    view = page.locator(f'#jp-right-stack [data-testid="paddle-detail"][data-job="{submitted}"]')
    expect(view).to_be_visible()
    expect(page.locator("#main-panel .jp-NotebookPanel")).to_be_visible()
    assert lab.api("DELETE", f"jobs/{submitted}").status_code == 204
