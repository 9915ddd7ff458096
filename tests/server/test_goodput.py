"""Goodput (issue 46): the share of a job's wall time spent training, from the points its
trainers reported — first step to last, less each recovery (the last point before a restart to the
first one the resumed process reported) — over the time since the job started."""

from __future__ import annotations

import json
from pathlib import Path

from paddle_nbext_server.jobfiles.goodput import job_goodput
from paddle_nbext_server.jobfiles.metrics import MetricsFile, ReplicaMetrics


def replica(path: Path, points: list[tuple[float, int, bool]], role: str = "trainer", index: int = 0) -> tuple[MetricsFile, ReplicaMetrics]:
    """A replica's metrics file as `report()` writes it: (time, step, first point of a process)."""
    lines = [
        json.dumps({"t": t, "step": step, "total": None, "m": {"loss": 1.0 / (step + 1)}, **({"start": True} if start else {})})
        for t, step, start in points
    ]
    path.write_text("\n".join(lines) + "\n")
    state = ReplicaMetrics(path)
    state.refresh()
    return MetricsFile(role, index, path), state


def test_a_restart_costs_the_time_from_the_last_step_before_it_to_the_first_after_it(tmp_path: Path) -> None:
    # Started at 100; steps from 110 to 150; failed after the step at 150, resumed from step 40
    # whose first step came at 180; trained on to 230; ended at 240.
    points = [(110.0 + s, s, s == 0) for s in range(0, 41, 10)]  # steps 0..40 at 110..150
    points += [(180.0, 41, True), (230.0, 90, False)]
    trainer = replica(tmp_path / "trainer-0.metrics.jsonl", points)
    figure = job_goodput([trainer], started=100.0, ended=240.0, now=999.0)
    assert figure == {"fraction": 90 / 140, "training_seconds": 90.0, "lost_seconds": 30.0, "wall_seconds": 140.0, "recoveries": 1}


def test_the_slowest_trainer_is_the_jobs_figure_and_unknown_is_not_zero(tmp_path: Path) -> None:
    fast = replica(tmp_path / "a.jsonl", [(10.0, 1, True), (50.0, 5, False)], index=0)
    slow = replica(tmp_path / "b.jsonl", [(10.0, 1, True), (20.0, 2, False), (40.0, 3, True), (50.0, 4, False)], index=1)
    pserver = replica(tmp_path / "c.jsonl", [(1.0, 1, True), (60.0, 9, False)], role="pserver")
    figure = job_goodput([fast, slow, pserver], started=0.0, ended=None, now=80.0)
    assert figure is not None and figure["training_seconds"] == 20.0 and figure["wall_seconds"] == 80.0 and figure["recoveries"] == 1
    assert job_goodput([fast], started=None, ended=None, now=80.0) is None  # not started: unknown
    assert job_goodput([], started=0.0, ended=None, now=80.0) is None  # nothing reported: unknown
    assert job_goodput([replica(tmp_path / "d.jsonl", [(10.0, 1, True)])], started=0.0, ended=None, now=80.0) is None


def test_job_usage_says_the_goodput_in_words() -> None:
    from paddle_nbext.health import Usage

    body = {"available": False, "reason": "the job has ended", "replicas": []}
    figure = {"fraction": 90 / 140, "training_seconds": 90.0, "lost_seconds": 30.0, "wall_seconds": 140.0, "recoveries": 1}
    said = Usage({**body, "goodput": figure}).text()
    assert said.endswith("\nGoodput 64 %: trained 1m 30s of 2m 20s; 1 recovery lost 30s.")
    assert "Goodput 64 %" in Usage({**body, "goodput": figure})._repr_html_()
    assert "Goodput" not in Usage({**body, "goodput": None}).text()  # unknown: nothing said, never 0 %
