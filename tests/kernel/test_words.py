"""One vocabulary: the replica words of `paddle_nbext.words` (used by the reprs, widgets, magics
and CLI) are the ones in tests/vectors/replica_words.json, which the panel's vitest suite checks
its own words against."""

from __future__ import annotations

import json
from pathlib import Path

from paddle_nbext import display, words
from paddle_nbext.model.status import JobStatus

VECTORS = Path(__file__).parent.parent / "vectors" / "replica_words.json"


def test_the_shared_vectors_are_what_the_module_says(tmp_path: Path) -> None:
    fresh = tmp_path / "words.json"
    words.write_vectors(fresh)
    assert json.loads(fresh.read_text()) == json.loads(VECTORS.read_text()), "run `python -m paddle_nbext.words`"


def _status(phase: str, message: str, replicas: list[dict[str, object]]) -> JobStatus:
    return JobStatus.from_dict(
        {"name": "j", "phase": phase, "message": message, "spec": {"pservers": 1, "trainers": 2}, "replicas": replicas}
    )


def test_a_finished_ps_job_reads_as_the_panel_reads_it() -> None:
    status = _status(
        "Succeeded",
        "",
        [
            {"role": "pserver", "index": 0, "phase": "Stopped"},
            {"role": "trainer", "index": 0, "phase": "Succeeded"},
            {"role": "trainer", "index": 1, "phase": "Succeeded"},
        ],
    )
    assert display.replica_counts(status) == "pserver 1/1 finished · trainers 2/2 succeeded"
    assert "pserver 0: Stopped" in display.status_text(status)
    assert "<td>trainer 1</td>" in display.status_html(status)


def test_a_failed_job_opens_on_the_replica_its_message_names() -> None:
    status = _status(
        "Failed",
        "trainer 1 failed with exit code 1: ValueError: bad batch",
        [
            {"role": "pserver", "index": 0, "phase": "Stopped"},
            {"role": "trainer", "index": 0, "phase": "Stopped"},
            {"role": "trainer", "index": 1, "phase": "Failed", "reason": "ValueError: bad batch"},
        ],
    )
    assert words.replica_to_open(status) == ("trainer", 1)
    running = _status(
        "Running", "", [{"role": "pserver", "index": 0, "phase": "Running"}, {"role": "trainer", "index": 0, "phase": "Running"}]
    )
    assert words.replica_to_open(running) == ("trainer", 0)


def test_a_job_building_its_environment_reads_preparing_not_running() -> None:
    """The API reports it Running with "Preparing environment: …"; job_list(), the status view and
    %paddle_jobs say Preparing, as the panel does (issue 37, item 4)."""
    replicas: list[dict[str, object]] = [{"role": "trainer", "index": i, "phase": "Running"} for i in range(2)]
    status = JobStatus.from_dict(
        {
            "name": "j",
            "phase": "Running",
            "message": "Preparing environment: 12 packages (uv)",
            "spec": {"trainers": 2},
            "replicas": replicas,
        }
    )
    assert words.shown_phase(status) == "Preparing"
    assert display.replica_counts(status) == "trainers 2/2 preparing"
    card = display.status_html(status)
    assert ">Preparing</span>" in card and ">Running</span>" not in card
    assert "<td>Preparing environment: 12 packages (uv)</td>" in card
    assert ">Preparing</span>" in display.jobs_html([status])
    training = JobStatus.from_dict({**status.to_dict(), "message": "trainers 2/2 running."})
    assert words.shown_phase(training) == "Running" and display.replica_counts(training) == "trainers 2/2 running"
