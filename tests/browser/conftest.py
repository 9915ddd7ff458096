"""Fixtures of the browser suite: one real JupyterLab with paddle-nbext and the local backend
(shared by the module), and a headless Chromium page per test.

Kept apart from pytest-jupyter's fixtures: Playwright's sync API runs its own event loop."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page

from .lab_server import REPO, LabServer, chromium, copy_ps_package, fresh_page, start_lab, stop_lab

SCREENSHOTS = REPO / "test-artifacts" / "screenshots"


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabServer]:
    server = start_lab(tmp_path_factory.mktemp("lab"))
    copy_ps_package(server.home)
    try:
        yield server
    finally:
        # Jobs run under detached masters: delete them so no process outlives the test.
        try:
            response = server.api("GET", "jobs")
            for job in response.json().get("jobs", []) if response.ok else []:
                server.api("DELETE", f"jobs/{job['name']}")
        finally:
            stop_lab(server)


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with chromium() as launched:
        yield launched


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    with fresh_page(browser) as opened:
        yield opened


@pytest.fixture(scope="session")
def screenshots() -> Path:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    return SCREENSHOTS
