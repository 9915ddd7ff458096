"""Ranks in the panel, in a real JupyterLab driven by headless Chromium (issue 23): a collective
job of 2 trainers x 3 ranks (plain Python, `procs_per_trainer`) whose rank 1 of trainer 1 raises
opens on that rank's lines with its traceback marked; the replica table has one row per trainer
with a compact "3 ranks" toggle, the failed trainer's ranks open with rank 1 marked Failed; a
rank's Logs button shows only its lines; the charts draw one curve per rank."""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from .lab_server import LabServer, open_lab
from .test_workspace import axe_violations

pytestmark = [pytest.mark.browser, pytest.mark.timeout(600)]

PANEL = "#paddle-nbext-panel"
NAME = "browser-ranks"

#: Every rank reports 5 steps; rank 1 of trainer 1 then raises, once every other rank has
#: flushed its points and finished (a state: their marker files in DONE), so trainer 0's log is
#: whole and no rank's curve is cut short by the stop that follows the failure.
TRAIN = """
import os, time
from paddle_nbext_job import report, flush

DONE = DONE_DIR
rank = int(os.environ["PADDLE_LOCAL_RANK"])
trainer = int(os.environ["PADDLE_GLOBAL_RANK"]) // int(os.environ["PADDLE_LOCAL_SIZE"])
for step in range(1, 6):
    print(f"trainer {trainer} rank {rank} step {step}", flush=True)
    report(step, total=5, loss=(rank + 1.0) / step)
flush()
if (trainer, rank) != (1, 1):
    open(os.path.join(DONE, f"done-{trainer}-{rank}"), "w").close()
else:
    deadline = time.monotonic() + 120
    while len([n for n in os.listdir(DONE) if n.startswith("done-")]) < 5 and time.monotonic() < deadline:
        time.sleep(0.05)
    raise ValueError("bad batch on rank one")
"""


def test_ranks_are_grouped_under_their_trainer_and_the_failed_rank_opens(page: Page, lab: LabServer) -> None:
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    package = Path(lab.home) / "ranks_pkg"
    package.mkdir(exist_ok=True)
    done = package / "done"
    done.mkdir(exist_ok=True)
    (package / "train.py").write_text(TRAIN.replace("DONE_DIR", repr(str(done))))
    body = {
        "job_name": NAME,
        "mode": "collective",
        "trainers": 2,
        "procs_per_trainer": 3,
        "entry_point": "python train.py",
        "trainer_package": "ranks_pkg",
    }
    response = lab.api("POST", "jobs", json=body)
    assert response.status_code == 201, response.text
    open_lab(page, lab).click()
    row = page.locator(f'{PANEL} [data-testid="paddle-job-row"][data-job="{NAME}"]')
    expect(row).to_have_attribute("data-phase", "Failed", timeout=120_000)
    row.click()
    view = page.locator(f'[data-testid="paddle-detail"][data-job="{NAME}"]')
    expect(view.locator('[data-testid="paddle-detail-message"]')).to_have_text("trainer 1 rank 1 failed: ValueError: bad batch on rank one")

    # The failed rank's lines, its traceback marked, no other rank's lines and no prefixes.
    picker = view.locator('[data-testid="paddle-log-replica"]')
    expect(picker).to_have_value("trainer-1.rank-1")
    traceback = view.locator('[data-testid="paddle-log-traceback"]')
    expect(traceback).to_contain_text("Traceback (most recent call last):")
    expect(traceback).to_contain_text("ValueError: bad batch on rank one")
    log = view.locator('[data-testid="paddle-log"]')
    expect(log).to_have_attribute("aria-label", "Log of trainer 1 · rank 1")
    expect(log).to_contain_text("trainer 1 rank 1 step 5")
    assert "[rank " not in log.inner_text() and "rank 0 step" not in log.inner_text()
    expect(view.locator('[data-testid="paddle-log-status"]')).to_contain_text("lines of other ranks hidden")

    # One row per trainer with a compact toggle; the failed trainer's ranks are open.
    expect(view.locator('[data-testid="paddle-replica-row"]')).to_have_count(2)
    toggles = view.locator('[data-testid="paddle-replica-ranks"]')
    expect(toggles).to_have_text(["▸ 3 ranks", "▾ 3 ranks"])
    ranks = view.locator('[data-testid="paddle-rank-row"]')
    expect(ranks).to_have_count(3)
    expect(ranks.nth(1)).to_have_attribute("data-failed", "true")
    expect(ranks.nth(1).locator(".pn-reason")).to_have_text("ValueError: bad batch on rank one")
    # No empty cells: the other ranks were stopped with rank 1, and every rank shows its
    # trainer's restarts and run time.
    expect(ranks.nth(0).locator(".pn-badge")).to_have_text("Stopped")
    expect(ranks.nth(0).locator(".pn-reason")).to_have_text("Stopped when rank 1 failed")
    for cell in ranks.locator("td").all():
        assert cell.inner_text().strip(), ranks.first.inner_html()
    assert axe_violations(page, f'[data-testid="paddle-detail"][data-job="{NAME}"]') == []

    # Trainer 0's ranks, and rank 2's lines from its row.
    toggles.first.click()
    expect(ranks).to_have_count(6)
    ranks.nth(2).locator('[data-testid="paddle-replica-logs"]').click()
    expect(picker).to_have_value("trainer-0.rank-2")
    expect(log).to_contain_text("trainer 0 rank 2 step 5")
    assert "rank 1 step" not in log.inner_text()

    # One curve per rank.
    legend = view.locator('[data-testid="paddle-chart-legend"]').first
    for name in ("trainer 0 · rank 0", "trainer 1 · rank 2"):
        expect(legend.locator(f'[data-line="{name}"]')).to_have_count(1)
    assert errors == []
