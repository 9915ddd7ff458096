"""The server's reading of metrics files (paddle_nbext_server.jobfiles.metrics): incremental, tolerant of
garbage, downsampled keeping first/last/extremes, and a `since` cursor."""

from __future__ import annotations

import json
import math
import os
from array import array
from pathlib import Path

import pytest

from paddle_nbext_server.jobfiles import metrics
from paddle_nbext_server.jobfiles.metrics import MetricsCache, MetricsCursorError, MetricsFile, keep_indices


def point(step: int, total: int | None = None, /, **values: float) -> str:
    return json.dumps({"t": 1000.0 + step, "step": step, "total": total, "m": values}) + "\n"


def write(path: Path, text: str) -> None:
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(text)


def files_of(tmp_path: Path, count: int = 2) -> list[MetricsFile]:
    return [MetricsFile("trainer", index, tmp_path / f"trainer-{index}.metrics.jsonl") for index in range(count)]


def test_series_per_replica_in_order_and_only_new_points_after_a_cursor(tmp_path: Path) -> None:
    files = files_of(tmp_path)
    for index, file in enumerate(files):
        write(file.path, "".join(point(step, 10, loss=step * (index + 1)) for step in range(5)))
    cache = MetricsCache()
    body = cache.read("job", files)
    assert [r["series"]["loss"]["step"] for r in body["replicas"]] == [[0, 1, 2, 3, 4]] * 2
    assert body["replicas"][1]["series"]["loss"]["value"] == [0.0, 2.0, 4.0, 6.0, 8.0]
    assert body["cursor"] == "trainer-0:5,trainer-1:5"
    assert body["progress"] == {"step": 4, "total": 10, "fraction": 0.4, "eta_seconds": 6.0}
    write(files[0].path, point(5, 10, loss=5.0, acc=0.5))
    later = cache.read("job", files, since=body["cursor"])
    assert later["replicas"][0]["series"] == {
        "loss": {"step": [5], "time": [1005.0], "value": [5.0]},
        "acc": {"step": [5], "time": [1005.0], "value": [0.5]},
    }
    assert later["replicas"][1]["series"] == {}
    assert later["cursor"] == "trainer-0:6,trainer-1:5"


def test_garbage_is_counted_and_never_fails_the_answer(tmp_path: Path) -> None:
    [file] = files_of(tmp_path, 1)
    write(file.path, point(0, loss=1.0) + "not json\n" + '{"step": "3", "t": 1, "m": {}}\n' + "[1, 2]\n")
    write(file.path, '{"t": 1, "step": 1, "total": null, "m": {"loss": "x", "ok": 2, "": 3}}\n' + "\x00\xff" * 10 + "\n")
    write(file.path, point(2, loss=3.0) + '{"t": 5, "step": 3')  # the last line is not complete yet
    body = MetricsCache().read("job", [file])
    [replica] = body["replicas"]
    assert replica["series"]["loss"]["step"] == [0, 2]
    assert replica["series"]["ok"]["value"] == [2.0]
    assert replica["invalid"] == 6 and replica["count"] == 3


def test_a_partial_line_is_taken_once_complete(tmp_path: Path) -> None:
    [file] = files_of(tmp_path, 1)
    text = point(0, loss=1.0)
    cache = MetricsCache()
    write(file.path, text[:10])
    assert cache.read("job", [file])["replicas"][0]["count"] == 0
    write(file.path, text[10:])
    assert cache.read("job", [file])["replicas"][0]["series"]["loss"]["value"] == [1.0]


def test_a_replaced_file_is_read_from_the_start(tmp_path: Path) -> None:
    [file] = files_of(tmp_path, 1)
    cache = MetricsCache()
    write(file.path, point(0, loss=1.0) + point(1, loss=2.0))
    assert cache.read("job", [file])["cursor"] == "trainer-0:2"
    os.unlink(file.path)
    write(file.path, point(0, loss=9.0))
    body = cache.read("job", [file], since="trainer-0:2")
    assert body["replicas"][0]["series"]["loss"]["value"] == [9.0] and body["cursor"] == "trainer-0:1"


def test_reading_stops_at_the_limit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    [file] = files_of(tmp_path, 1)
    monkeypatch.setattr(metrics, "READ_LIMIT", len(point(0, loss=1.0)) * 3)
    write(file.path, "".join(point(step, loss=1.0) for step in range(10)))
    [replica] = MetricsCache().read("job", [file])["replicas"]
    assert replica["count"] == 3 and replica["truncated"] is True


def test_a_replica_cannot_make_unbounded_metric_names(tmp_path: Path) -> None:
    [file] = files_of(tmp_path, 1)
    write(file.path, point(0, **{f"m{i}": 1.0 for i in range(metrics.MAX_METRICS + 10)}))
    [replica] = MetricsCache().read("job", [file])["replicas"]
    assert len(replica["series"]) == metrics.MAX_METRICS and replica["invalid"] == 10


def test_downsampling_keeps_first_last_and_extremes(tmp_path: Path) -> None:
    [file] = files_of(tmp_path, 1)
    values = [math.sin(step / 50.0) for step in range(10_000)]
    values[1234], values[8765] = 50.0, -50.0  # a spike and a dip
    write(file.path, "".join(point(step, loss=value) for step, value in enumerate(values)))
    [replica] = MetricsCache().read("job", [file], points=100)["replicas"]
    loss = replica["series"]["loss"]
    assert len(loss["step"]) <= 100
    assert loss["step"][0] == 0 and loss["step"][-1] == 9_999
    assert 1234 in loss["step"] and 8765 in loss["step"]
    assert max(loss["value"]) == 50.0 and min(loss["value"]) == -50.0
    assert loss["step"] == sorted(loss["step"])


def test_keep_indices_fits_the_budget() -> None:
    values = array("d", [float(i % 7) for i in range(1000)])
    for budget in (1, 2, 3, 10, 999, 1000, 5000):
        kept = keep_indices(values, 0, 1000, budget)
        assert len(kept) <= budget and kept == sorted(set(kept))
    assert keep_indices(values, 10, 20, 50) == list(range(10, 20))


@pytest.mark.parametrize("cursor", ["trainer-0", "trainer-0:x", ":3", "trainer-0:-1"])
def test_a_bad_cursor_is_refused(cursor: str) -> None:
    with pytest.raises(MetricsCursorError):
        metrics.parse_cursor(cursor)


def test_a_summary_has_each_replicas_latest_values(tmp_path: Path) -> None:
    files = files_of(tmp_path)
    write(files[0].path, point(0, 4, loss=2.0) + point(4, 4, loss=1.0))
    summary = MetricsCache().summary("job", files)
    assert summary["latest"] == {"trainer-0": {"step": 4, "total": 4, "values": {"loss": 1.0}}}
    assert summary["progress"]["fraction"] == 1.0 and summary["progress"]["eta_seconds"] == 0.0
    assert summary["cursor"] == "trainer-0:2,trainer-1:0"


@pytest.mark.parametrize("start", [0, 1, 63, 64, 1000, 99_000])
def test_block_extremes_downsample_long_series_from_any_start(start: int) -> None:
    import random

    rng = random.Random(start)
    series = metrics.Series()
    for i in range(100_037):  # not a whole number of blocks: the tail is scanned point by point
        series.append(i, i, float(i), rng.gauss(0.0, 1.0))
    end = len(series.value)
    values = series.value
    kept = keep_indices(series, start, end, 500)
    assert len(kept) <= 500 and kept == sorted(set(kept))
    assert kept[0] == start and kept[-1] == end - 1
    window = values[start:end]
    assert start + window.index(min(window)) in kept and start + window.index(max(window)) in kept
    # Every bucket's own extremes: no stretch of the series is left unrepresented.
    assert max(b - a for a, b in zip(kept, kept[1:], strict=False)) < 4 * (end - start) / 249 + 2 * metrics.BLOCK


def test_a_trainer_of_several_ranks_has_one_series_per_rank_and_old_cursors_stay_valid(tmp_path: Path) -> None:
    """Rank 0 writes the trainer's file, rank r > 0 its own; each is a replica of the answer with
    its `rank`, keyed `trainer-1.rank-2` in cursors and events, and `trainer-1` for rank 0."""
    files = metrics.replica_files(tmp_path, "trainer", 1, 3)
    assert [(f.rank, f.path.name, f.key) for f in files] == [
        (0, "trainer-1.metrics.jsonl", "trainer-1"),
        (1, "trainer-1.rank-1.metrics.jsonl", "trainer-1.rank-1"),
        (2, "trainer-1.rank-2.metrics.jsonl", "trainer-1.rank-2"),
    ]
    for rank, file in enumerate(files):
        write(file.path, "".join(point(step, 10, loss=10.0 * rank + step) for step in range(1, 3 + rank)))
    cache = MetricsCache()
    body = cache.read("job", files)
    assert [(r["index"], r["rank"], r["count"]) for r in body["replicas"]] == [(1, 0, 2), (1, 1, 3), (1, 2, 4)]
    assert body["replicas"][2]["series"]["loss"]["value"] == [21.0, 22.0, 23.0, 24.0]
    assert body["cursor"] == "trainer-1:2,trainer-1.rank-1:3,trainer-1.rank-2:4"
    assert body["progress"]["step"] == 2  # the slowest rank is the job's progress
    # A cursor of before the ranks (the trainer's file only) still reads: the ranks come whole.
    later = cache.read("job", files, since="trainer-1:2")
    assert [len(r["series"].get("loss", {}).get("step", [])) for r in later["replicas"]] == [0, 3, 4]
    latest = cache.summary("job", files)["latest"]
    assert latest["trainer-1.rank-2"] == {"step": 4, "total": 10, "values": {"loss": 24.0}, "rank": 2}
    assert latest["trainer-1"]["rank"] == 0


def test_single_process_replicas_answer_as_before(tmp_path: Path) -> None:
    """No rank field in events, `rank` null in answers, pservers never ranked."""
    assert [(f.rank, f.key) for f in metrics.replica_files(tmp_path, "trainer", 0, 1)] == [(None, "trainer-0")]
    assert [(f.rank, f.key) for f in metrics.replica_files(tmp_path, "pserver", 1, 4)] == [(None, "pserver-1")]
    files = files_of(tmp_path, 1)
    write(files[0].path, point(1, 2, loss=1.0))
    cache = MetricsCache()
    assert cache.read("job", files)["replicas"][0]["rank"] is None
    assert cache.summary("job", files)["latest"] == {"trainer-0": {"step": 1, "total": 2, "values": {"loss": 1.0}}}


@pytest.mark.parametrize(
    ("spec", "ranks"),
    [
        ({}, 1),
        ({"procs_per_trainer": 3}, 3),
        ({"procs_per_trainer": 1, "trainer_gpu": 8}, 8),
        ({"trainer_gpu": 4, "entry_point": "python -m paddle.distributed.launch --nproc_per_node 4 train.py"}, 1),
        ({"procs_per_trainer": "3"}, 1),
    ],
)
def test_ranks_per_trainer_from_a_spec(spec: dict[str, object], ranks: int) -> None:
    assert metrics.ranks_per_trainer(spec) == ranks


def started(step: int, **values: float) -> str:
    """The first point a (restarted) process writes: `report()` marks it `"start": true`."""
    return json.dumps({"t": 1000.0 + step, "step": step, "total": None, "m": values, "start": True}) + "\n"


def test_a_restart_continues_the_curve_from_its_first_step_without_duplicates(tmp_path: Path) -> None:
    """Attempt 1 reports steps 0-7 and dies; attempt 2 resumes from the checkpoint of step 4
    and reports 5-9: one curve 0..9, each step once, and where it restarted."""
    [file] = files_of(tmp_path, 1)
    write(file.path, started(0, loss=100.0) + "".join(point(step, loss=100.0 - step) for step in range(1, 8)))
    cache = MetricsCache()
    before = cache.read("job", [file])
    assert before["replicas"][0]["series"]["loss"]["step"] == list(range(8)) and before["replicas"][0]["restarts"] == []
    write(file.path, started(5, loss=-5.0) + "".join(point(step, loss=-float(step)) for step in range(6, 10)))
    whole = cache.read("job", [file])["replicas"][0]
    assert whole["series"]["loss"]["step"] == list(range(10))
    assert whole["series"]["loss"]["value"][4:7] == [96.0, -5.0, -6.0]
    # `stopped`: the time of the last point before the restart (where its recovery began)
    assert whole["restarts"] == [{"step": 5, "time": 1005.0, "stopped": 1007.0}] and whole["replaced"] is False
    # Someone who had the first answer gets the whole series again, marked to replace theirs.
    again = cache.read("job", [file], since=before["cursor"])["replicas"][0]
    assert again["replaced"] is True and again["series"]["loss"]["step"] == list(range(10))
    # After that, a cursor of the new state gets only what is new.
    later = cache.read("job", [file], since=cache.read("job", [file])["cursor"])["replicas"][0]
    assert later["replaced"] is False and later["series"] == {}
    # A second restart from the beginning (no checkpoint) drops everything before it.
    write(file.path, started(0, loss=7.0))
    assert cache.read("job", [file])["replicas"][0]["series"]["loss"]["step"] == [0]


def test_the_first_start_and_a_steps_repeat_are_not_restarts(tmp_path: Path) -> None:
    [file] = files_of(tmp_path, 1)
    write(file.path, started(3, loss=1.0) + point(3, acc=0.5) + point(4, loss=0.5))
    body = MetricsCache().read("job", [file])["replicas"][0]
    assert body["restarts"] == [] and body["series"]["loss"]["step"] == [3, 4] and body["series"]["acc"]["step"] == [3]


def test_the_kubernetes_backend_lists_each_ranks_file_on_the_home_volume(tmp_path: Path) -> None:
    """Pservers first, one file each; every trainer's ranks from the spec (GPUs, else
    procs_per_trainer); a launch entry point's trainer has its one file."""
    from paddle_nbext.model.status import JobStatus
    from paddle_nbext_server.backends.kubernetes.usage.metrics import metrics_files

    def listed(spec: dict[str, object]) -> list[tuple[str, int, int | None, str]]:
        status = JobStatus.from_dict({"name": "job-a", "phase": "Running", "spec": spec})
        files = metrics_files(str(tmp_path), status)
        assert all(f.path.parent == tmp_path / ".paddle-jobs" / "job-a" / "logs" for f in files)
        return [(f.role, f.index, f.rank, f.path.name) for f in files]

    assert listed({"mode": "ps", "pservers": 1, "trainers": 1, "procs_per_trainer": 2}) == [
        ("pserver", 0, None, "pserver-0.metrics.jsonl"),
        ("trainer", 0, 0, "trainer-0.metrics.jsonl"),
        ("trainer", 0, 1, "trainer-0.rank-1.metrics.jsonl"),
    ]
    assert [row[:3] for row in listed({"mode": "collective", "trainers": 2, "trainer_gpu": 2})] == [
        ("trainer", 0, 0),
        ("trainer", 0, 1),
        ("trainer", 1, 0),
        ("trainer", 1, 1),
    ]
    launch = {"mode": "collective", "trainers": 1, "trainer_gpu": 8, "entry_point": "python -m paddle.distributed.launch train.py"}
    assert listed(launch) == [("trainer", 0, None, "trainer-0.metrics.jsonl")]
