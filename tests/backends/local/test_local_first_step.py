"""The timeline's "First progress reported: step N" names the first step the attempt's training
reported, whenever the local master first looks (issue 47: it named the step the master saw at
its first look, 3 for a first step of 1, and 6 after a resume whose first step was 4)."""

from __future__ import annotations

import time
from pathlib import Path

from paddle_nbext_server.backends.local.master import stall_watch
from paddle_nbext_server.runtime import health_rules
from paddle_nbext_server.runtime.paddle_nbext_report import Reporter


def _report(path: Path, steps: range, total: int) -> None:
    """What one trainer process writes through `report()` (a Reporter of its own, closed at exit)."""
    reporter = Reporter(str(path))
    for step in steps:
        reporter.add(step, total, {"loss": 1.0 / step})
    reporter.close()


def test_the_first_step_is_the_first_reported_not_the_latest(tmp_path: Path) -> None:
    started = time.time() - 1
    _report(tmp_path / "trainer-0.metrics.jsonl", range(1, 4), 10)  # steps 1-3 before the master looks
    watch = stall_watch.StallWatch(tmp_path, timeout=600)
    assert watch.first_step([0], started) == 1


def test_after_a_resume_the_first_step_is_the_resumed_attempts_first(tmp_path: Path) -> None:
    metrics = tmp_path / "trainer-0.metrics.jsonl"
    _report(metrics, range(1, 6), 10)  # the first attempt: steps 1-5, then a restart
    resumed = time.time()
    time.sleep(0.01)  # points carry their time to the millisecond: the resumed ones come after
    _report(metrics, range(4, 7), 10)  # resumed from the checkpoint of step 3: steps 4-6
    watch = stall_watch.StallWatch(tmp_path, timeout=600)
    assert watch.first_step([0], resumed) == 4
    assert health_rules.last_step(str(metrics)) == 6  # what the timeline used to say


def test_no_first_step_before_the_attempt_reported(tmp_path: Path) -> None:
    _report(tmp_path / "trainer-0.metrics.jsonl", range(1, 3), 10)
    later = time.time() + 60
    assert stall_watch.StallWatch(tmp_path, timeout=600).first_step([0], later) is None
