"""The panel says what is wrong, in words, when it cannot work: the server extension is not
enabled (Jupyter answers 404 under paddle/api/v1), or the job backend is unreachable (503)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from .lab_server import LabServer, open_lab, start_lab, stop_lab

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300)]

CASES: dict[str, tuple[dict[str, Any], str, str]] = {
    "extension-missing": (
        {"with_extension": False},
        "missing",
        "server extension is not enabled",
    ),
    "backend-unreachable": (
        {"extra_args": ["--PaddleNbext.backend=kubernetes", "--KubernetesBackend.kubeconfig=/nonexistent/kubeconfig"]},
        "unreachable",
        "The job backend is unreachable: Kubernetes is not configured",
    ),
}


@pytest.fixture(params=list(CASES))
def broken_lab(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[LabServer, str, str]]:
    options, kind, message = CASES[request.param]
    server = start_lab(tmp_path, **options)
    try:
        yield server, kind, message
    finally:
        stop_lab(server)


def test_problem_is_shown_in_words(page: Page, broken_lab: tuple[LabServer, str, str], screenshots: Path) -> None:
    lab, kind, message = broken_lab
    # The tab is there whatever the API answers: the panel is what explains the problem.
    open_lab(page, lab).click()
    panel = page.locator("#paddle-nbext-panel")
    banner = panel.locator('[data-testid="paddle-banner"]')
    expect(banner).to_be_visible()
    expect(banner).to_have_attribute("data-kind", kind)
    expect(banner).to_contain_text(message)
    # Neither "loading" forever nor "no jobs yet": the list is unknown, and the banner says why.
    expect(panel.locator('[data-testid="paddle-loading"]')).to_be_hidden()
    expect(panel.locator('[data-testid="paddle-empty"]')).to_be_hidden()
    expect(panel.locator('[data-testid="paddle-connection"]')).to_have_text("reconnecting (polling)")
    version = panel.locator('[data-testid="paddle-version"]')
    if kind == "missing":
        # No server extension, no version to claim.
        expect(version).to_be_hidden()
    else:
        # The server extension answers /version even when the backend is down.
        expect(version).to_have_text(f"paddle-nbext {lab.api('GET', 'version').json()['version']}")
    page.screenshot(path=str(screenshots / f"panel-error-{kind}.png"))
