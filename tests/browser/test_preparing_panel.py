"""A job whose requirements environment is being built, in the panel (issue 37, item 4): the row,
the job view's badge and the replica table say "Preparing" (the API reports the job Running with
the message "Preparing environment: …"), and the Training section says it waits for the
environment, not "Call report(…)"; once training runs it waits for the first report().

The packages come from an index of tiny wheels served here that holds their downloads until the
test has seen the preparing state (as tests/paddle_jobs/test_local_requirements.py does)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import Page, expect
from support.wheels import SimpleIndex, make_wheel

from .lab_server import LabServer, open_lab, start_lab, stop_lab

pytestmark = [pytest.mark.browser, pytest.mark.paddle, pytest.mark.timeout(600)]

PANEL = "#paddle-nbext-panel"
NAME = "browser-preparing"
#: Imports what only the job's requirements provide, then trains a while without report().
SCRIPT = """import time
import tinytok
print("tokens", tinytok.tokens("a b"), flush=True)
time.sleep(600)
"""


def _job(lab: LabServer) -> dict[str, Any]:
    answer: dict[str, Any] = lab.api("GET", f"jobs/{NAME}").json()
    return answer


def _wait_job(lab: LabServer, ready: Any, what: str, timeout: float = 300) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    job: dict[str, Any] = {}
    while time.monotonic() < deadline:
        job = _job(lab)
        if ready(job):
            return job
        time.sleep(0.5)
    raise AssertionError(f"{what}: {json.dumps(job)[:2000]}")


@pytest.fixture(scope="module")
def held_index(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimpleIndex]:
    wheels = tmp_path_factory.mktemp("wheels")
    make_wheel(wheels, "tinytok", "1.0", body="def tokens(text):\n    return text.split()\n")
    index = SimpleIndex(wheels)
    index.downloads = threading.Event()
    with index.serving():
        try:
            yield index
        finally:
            index.downloads.set()


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory, held_index: SimpleIndex) -> Iterator[LabServer]:
    server = start_lab(
        tmp_path_factory.mktemp("lab"),
        extra_args=[f"--PaddleNbext.pip_index_url={held_index.url}", "--PaddleNbext.pip_installer=uv"],
    )
    code = server.home / "code"
    code.mkdir()
    (code / "train.py").write_text(SCRIPT)
    (code / "requirements.txt").write_text("tinytok==1.0\n")
    try:
        yield server
    finally:
        try:
            server.api("DELETE", f"jobs/{NAME}")
        finally:
            stop_lab(server)


def test_a_preparing_job_says_so_and_then_waits_for_its_first_report(page: Page, lab: LabServer, held_index: SimpleIndex) -> None:
    assert held_index.downloads is not None
    spec = {"job_name": NAME, "entry_point": "python train.py", "trainer_package": "code", "trainers": 1, "mode": "collective"}
    assert lab.api("POST", "jobs", json=spec).status_code == 201
    job = _wait_job(
        lab, lambda j: j.get("message", "").startswith("Preparing environment") or j.get("phase") in ("Failed", "Succeeded"), "preparing"
    )
    assert job["phase"] == "Running", job

    open_lab(page, lab).click()
    row = page.locator(f'{PANEL} [data-testid="paddle-job-row"][data-job="{NAME}"]')
    expect(row.locator('[data-testid="paddle-job-phase"]')).to_have_text("Preparing")
    expect(row.locator('.pn-count[data-role="trainer"]')).to_have_text("trainer 1/1 preparing")
    expect(row).not_to_contain_text("running")
    row.click()
    view = page.locator(f'[data-testid="paddle-detail"][data-job="{NAME}"]')
    expect(view.locator('[data-testid="paddle-detail-phase"]')).to_have_text("Preparing")
    replica = view.locator('[data-testid="paddle-replica-row"][data-replica="trainer-0"]')
    expect(replica.locator(".pn-badge")).to_have_text("Preparing")
    expect(replica.locator(".pn-reason")).to_contain_text("Preparing environment")
    empty = view.locator('[data-testid="paddle-metrics-empty"]')
    expect(empty).to_have_text("No metrics yet: training starts once the environment is prepared.")

    held_index.downloads.set()  # the environment is built; training starts
    _wait_job(lab, lambda j: j.get("phase") == "Running" and not j.get("message", "").startswith("Preparing"), "training")
    expect(row.locator('[data-testid="paddle-job-phase"]')).to_have_text("Running")
    expect(row.locator('.pn-count[data-role="trainer"]')).to_have_text("trainer 1/1 running")
    expect(view.locator('[data-testid="paddle-detail-phase"]')).to_have_text("Running")
    expect(replica.locator(".pn-badge")).to_have_text("Running")
    expect(empty).to_have_text("Waiting for the first report()…")
    expect(empty).not_to_contain_text("Call report(")
