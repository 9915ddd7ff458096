"""The kernel side of `report()`: `Job.metrics()` (a list of dicts, `.to_pandas()`), the status
widget's progress bar and sparkline, and `paddle-nbext metrics NAME`, against the live server."""

from __future__ import annotations

import subprocess
import sys
import types
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from paddle_nbext import metrics as job_metrics

from .conftest import LiveServer, wait_until

if TYPE_CHECKING:
    from paddle_nbext.api import Job
    from paddle_nbext.client import Client

CLI = str(Path(sys.executable).with_name("paddle-nbext"))
REPORTER = """\
from paddle_nbext_job import report
for step in range(1, 21):
    report(step, total=20, loss=1.0 / step, acc=step / 20)
"""


@pytest.fixture(scope="module")
def reported(server: LiveServer, workdir: Path) -> Iterator[Job]:
    """One finished 2-trainer job whose script reported 20 steps."""
    from paddle_nbext import api
    from paddle_nbext.client import Client

    (workdir / "report_twenty.py").write_text(REPORTER)
    client = Client(server.api, server.token)
    job = api.submit(
        entry_point="python report_twenty.py",
        job_name="kernel-metrics",
        mode="collective",
        trainers=2,
        trainer_package=str(workdir),
        client=client,
    )
    job.wait(timeout=180)
    assert job.phase == "Succeeded", job.last.message
    yield job
    job.delete()


def test_job_metrics_is_a_list_of_dicts_per_point(reported: Job) -> None:
    table = reported.metrics()
    assert len(table) == 40
    trainer_1 = [row for row in table if row["replica"] == "trainer-1"]
    assert [row["step"] for row in trainer_1] == list(range(1, 21))
    assert trainer_1[-1]["loss"] == 1.0 / 20 and trainer_1[-1]["acc"] == 1.0
    assert set(trainer_1[0]) == {"replica", "role", "index", "step", "time", "loss", "acc"}
    assert len(reported.metrics(points=4)) <= 8  # at most 4 per replica and metric


def test_to_pandas_builds_a_frame_or_says_how_to_get_pandas(reported: Job, monkeypatch: pytest.MonkeyPatch) -> None:
    table = reported.metrics()
    frames: list[list[dict[str, Any]]] = []

    def data_frame(rows: list[dict[str, Any]]) -> str:
        frames.append(rows)
        return "frame"

    fake = types.ModuleType("pandas")
    fake.DataFrame = data_frame  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "pandas", fake)
    assert table.to_pandas() == "frame" and frames == [list(table)]
    monkeypatch.setitem(sys.modules, "pandas", None)  # not installed
    with pytest.raises(ImportError, match="pip install pandas"):
        table.to_pandas()


def test_the_status_widget_shows_progress_and_a_sparkline(reported: Job) -> None:
    view = reported.widget()
    assert "step 20/20" in view.metrics.value and "100%" in view.metrics.value
    assert view.metrics.value.count("<polyline") == 2  # one line per trainer
    assert "loss 0.05" in view.metrics.value
    view.close()


def test_a_running_job_widget_fills_its_progress(client: Client, workdir: Path) -> None:
    from paddle_nbext import api

    (workdir / "report_slowly.py").write_text(
        "import time\nfrom paddle_nbext_job import report\nfor s in range(1, 31):\n    report(s, total=30, loss=1.0 / s)\n    time.sleep(0.1)\n"
    )
    job = api.submit(entry_point="python report_slowly.py", job_name="kernel-live", mode="collective", trainers=1, client=client)
    try:
        view = job.widget(interval=0.3)
        wait_until(lambda: "paddle-progress" in view.metrics.value, what="the progress bar to appear")
        wait_until(lambda: view.phase == "Succeeded", what="the job to succeed")
        wait_until(lambda: "step 30/30" in view.metrics.value, what="the bar to reach the last step")
        assert "100%" in view.metrics.value
        view.close()
    finally:
        job.delete()


def test_cli_metrics_prints_latest_values_and_a_sparkline(reported: Job, server: LiveServer, workdir: Path) -> None:
    result = subprocess.run([CLI, "metrics", "kernel-metrics"], cwd=workdir, env=server.env(), capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "progress 100%  step 20/20"
    assert "trainer-0  step 20/20" in lines and "trainer-1  step 20/20" in lines
    loss = next(line for line in lines if line.strip().startswith("loss"))
    assert "0.05" in loss and loss.rstrip().endswith(job_metrics.sparkline([1.0 / s for s in range(1, 21)], 30))
    missing = subprocess.run([CLI, "metrics", "no-such-job"], cwd=workdir, env=server.env(), capture_output=True, text=True, timeout=120)
    assert missing.returncode == 1 and "no-such-job" in missing.stderr


def test_sparkline_text() -> None:
    assert job_metrics.sparkline([0, 1, 2, 3, 4, 5, 6, 7]) == "▁▂▃▄▅▆▇█"
    assert job_metrics.sparkline([3, 3, 3]) == "▁▁▁"
    assert len(job_metrics.sparkline(list(range(1000)), 25)) == 25
    assert job_metrics.sparkline([]) == ""


def test_each_rank_of_a_trainer_is_labelled_in_the_table_the_sparkline_and_the_cli_text() -> None:
    """The server's answer for a trainer of several processes has one entry per rank."""
    series = {"loss": {"step": [1, 2], "time": [10.0, 11.0], "value": [2.0, 1.0]}}
    body = {
        "progress": None,
        "replicas": [{"role": "trainer", "index": 1, "rank": rank, "step": 2, "total": None, "series": series} for rank in range(2)],
    }
    table = job_metrics.table_from(body)
    assert [(row["replica"], row["rank"], row["step"]) for row in table] == [
        ("trainer-1", 0, 1),
        ("trainer-1", 0, 2),
        ("trainer-1.rank-1", 1, 1),
        ("trainer-1.rank-1", 1, 2),
    ]
    assert "<title>trainer-1.rank-1</title>" in job_metrics.sparkline_svg(body, "loss")
    assert [line.split()[0] for line in job_metrics.metrics_text(body).splitlines() if not line.startswith(" ")] == [
        "trainer-1",
        "trainer-1.rank-1",
    ]
