"""Progress read from printed lines (`runtime/log_progress.py`): the built-in styles (Paddle's
`Model.fit` progress lines, PaddleNLP/PaddleClas keyed lines), a job's own pattern, feeding
bytes as a pipe delivers them, and yielding to the code's own reports."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from paddle_nbext.model import progress_pattern
from paddle_nbext_server.runtime import log_progress, paddle_nbext_report
from paddle_nbext_server.runtime.log_progress import BuiltInStyles, CustomPattern, LineProgress

#: What `paddle.Model.fit(..., epochs=2, verbose=2, log_freq=5)` with an eval set prints
#: (Paddle 3.0, the steps padded to the width of the total).
HAPI_VERBOSE_2 = """\
The loss value printed in the log is the current step, and the metric is the average value of previous steps.
Epoch 1/2
step  5/10 - loss: 0.6666 - acc: 0.5125 - 17ms/step
step 10/10 - loss: 0.5323 - acc: 0.5750 - 9ms/step
Eval begin...
step 2/2 - loss: 0.5570 - acc: 0.6719 - 2ms/step
Eval samples: 64
Epoch 2/2
step  5/10 - loss: 0.4576 - acc: 0.8063 - 2ms/step
step 10/10 - loss: 0.3925 - acc: 1.2e-05 - 2ms/step
Eval begin...
step 2/2 - loss: 0.4117 - acc: 0.8594 - 2ms/step
Eval samples: 64
"""


def read_all(reader: BuiltInStyles | CustomPattern, text: str) -> list[tuple[int, int | None, dict[str, float]]]:
    return [point for line in text.splitlines() if (point := reader.read(line)) is not None]


def test_model_fit_lines_become_global_steps_with_evaluations() -> None:
    assert read_all(BuiltInStyles(), HAPI_VERBOSE_2) == [
        (5, 20, {"loss": 0.6666, "acc": 0.5125, "epoch": 1.0}),
        (10, 20, {"loss": 0.5323, "acc": 0.575, "epoch": 1.0}),
        (10, 20, {"eval_loss": 0.557, "eval_acc": 0.6719}),
        (15, 20, {"loss": 0.4576, "acc": 0.8063, "epoch": 2.0}),
        (20, 20, {"loss": 0.3925, "acc": 1.2e-05, "epoch": 2.0}),
        (20, 20, {"eval_loss": 0.4117, "eval_acc": 0.8594}),
    ]


def test_the_progress_bar_of_verbose_1_is_read_between_its_carriage_returns(tmp_path: Path) -> None:
    bar = (
        b"Epoch 1/1\n"
        b"step  3/10 [======>.............] - loss: 0.7000 - acc: 0.5000 - ETA: 1s - 9ms/step"
        b"\x08\x08\x08\rstep 10/10 [====================] - loss: 0.5000 - acc: 0.6000 - 9ms/step\n"
    )
    progress = LineProgress(str(tmp_path / "trainer-0.metrics.jsonl"))
    for byte in range(0, len(bar), 7):  # as a pipe may cut it
        progress.feed(bar[byte : byte + 7])
    progress.close()
    points = [json.loads(line) for line in (tmp_path / "trainer-0.metrics.jsonl").read_text().splitlines()]
    assert [(p["step"], p["total"], p["m"]) for p in points] == [
        (3, 10, {"loss": 0.7, "acc": 0.5, "epoch": 1.0}),
        (10, 10, {"loss": 0.5, "acc": 0.6, "epoch": 1.0}),
    ]
    assert points[0]["start"] is True  # a process's first point, as report() marks it


@pytest.mark.parametrize(
    ("line", "point"),
    [
        # PaddleNLP: a global step, the epoch without a total of epochs
        (
            "global step 20, epoch: 1, batch: 20, loss: 0.31052, speed: 3.21 step/s",
            (20, None, {"loss": 0.31052, "speed": 3.21, "epoch": 1.0}),
        ),
        # PaddleClas: an iteration within an epoch of ten
        (
            "[2026/12/07 10:00:00] ppcls INFO: [Train][Epoch 2/10][Iter: 20/100]lr(LinearWarmup): 0.00010000, "
            "top1: 0.12500, CELoss: 2.30251, loss: 2.30251, batch_cost: 0.10s, reader_cost: 0.01000, ips: 320.0 samples/s, eta: 0:10:00",
            (120, 1000, {"lr": 0.0001, "top1": 0.125, "CELoss": 2.30251, "loss": 2.30251, "reader_cost": 0.01, "ips": 320.0, "epoch": 2.0}),
        ),
        # A hand-written loop
        ("Epoch: 3, Step: 40/50, loss=0.25 acc=0.9", (40, 50, {"loss": 0.25, "acc": 0.9, "epoch": 3.0})),
        ("step 7 loss 0.5", (7, None, {})),
    ],
)
def test_keyed_lines(line: str, point: tuple[int, int | None, dict[str, float]]) -> None:
    assert BuiltInStyles().read(line) == point


@pytest.mark.parametrize(
    "line",
    [
        "Downloading data... 45%",
        "W1207 10:00:00.000 init.cc:123] step size is 0.1",  # "step" without a number after it
        "timestep: 5",
        "epoch 1 finished",
        "",
    ],
)
def test_lines_that_are_not_progress(line: str) -> None:
    assert BuiltInStyles().read(line) is None


def test_a_jobs_own_pattern_names_its_groups() -> None:
    reader = CustomPattern(r"it=(?P<step>\d+)/(?P<total>\d+) cost=(?P<loss>\S+) top1=(?<top1>[0-9.]+)")
    assert reader.read("[worker] it=30/300 cost=1.5e-01 top1=0.42") == (30, 300, {"loss": 0.15, "top1": 0.42})
    assert reader.read("it=30/300 cost=nan top1=0.42") == (30, 300, {"top1": 0.42})  # a value that is no number is left out
    assert reader.read("validation top1=0.5") is None
    epochs = CustomPattern(r"E(?P<epoch>\d+)/(?P<epochs>\d+) B(?P<step>\d+)/(?P<total>\d+)")
    assert epochs.read("E2/5 B10/40") == (50, 200, {"epoch": 2.0})


def test_a_jobs_pattern_replaces_the_built_in_styles(tmp_path: Path) -> None:
    progress = LineProgress(str(tmp_path / "m.jsonl"), r"iteration (?P<step>\d+)")
    progress.feed(b"step 5/10 - loss: 0.5\niteration 6\n")
    progress.close()
    assert [json.loads(line)["step"] for line in (tmp_path / "m.jsonl").read_text().splitlines()] == [6]


def test_it_stops_once_the_code_reports_itself(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "trainer-0.metrics.jsonl"
    progress = LineProgress(str(path))
    progress.feed(b"step 1/4 - loss: 1.0\n")
    progress.reporter.flush()
    code = paddle_nbext_report.Reporter(str(path))  # the trainer's own process: report() or Model.fit
    code.add(1, 4, {"loss": 1.0})
    code.flush()
    progress.feed(b"step 2/4 - loss: 0.9\n")
    progress.close()
    code.add(2, 4, {"loss": 0.9})
    code.close()
    points = [json.loads(line) for line in path.read_text().splitlines()]
    # The reader kept its point back while the code could still claim the file, and the code did:
    # only the code's points, one start (no restart for the server to read).
    assert [(p["step"], p.get("start", False)) for p in points] == [(1, True), (2, False)]
    assert progress.reporter.yielded
    assert "the training code reports its progress itself" in capsys.readouterr().err


def test_a_claim_of_an_earlier_attempt_holds_for_the_next(tmp_path: Path) -> None:
    """The same job's code reports itself again after a restart: read meanwhile, its line
    "trainer 0 resumed from step 20" replaced the checkpoint step's point with one without the loss."""
    path = tmp_path / "trainer-0.metrics.jsonl"
    (tmp_path / ("trainer-0.metrics.jsonl" + paddle_nbext_report.CLAIM_SUFFIX)).write_text("")
    progress = LineProgress(str(path))
    progress.feed(b"trainer 0 resumed from step 20\nstep 3/4 - loss: 0.5\n")
    progress.close()
    assert not path.exists()


def test_the_first_points_wait_for_the_codes_own_reports(tmp_path: Path) -> None:
    """While the code's own reports may still claim the file, the reader keeps its points back: a
    start marker of its own would read as a restart once the code's first point came."""
    path = tmp_path / "trainer-0.metrics.jsonl"
    progress = LineProgress(str(path))
    progress.feed(b"step 1/4 - loss: 0.9\n")
    progress.reporter.flush()  # what the writer thread does every half second
    assert not path.exists()
    (tmp_path / ("trainer-0.metrics.jsonl" + paddle_nbext_report.CLAIM_SUFFIX)).write_text("")  # the code wrote
    progress.feed(b"step 2/4 - loss: 0.8\n")
    progress.close()
    assert not path.exists()
    quiet = LineProgress(str(tmp_path / "trainer-1.metrics.jsonl"))  # code that never reports: written at the end
    quiet.feed(b"step 3/4 - loss: 0.5\n")
    quiet.close()
    assert json.loads((tmp_path / "trainer-1.metrics.jsonl").read_text())["step"] == 3


def test_only_a_single_process_trainer_with_a_metrics_file_is_read(tmp_path: Path) -> None:
    env = {"PADDLE_NBEXT_ROLE": "trainer", paddle_nbext_report.FILE_VAR: str(tmp_path / "trainer-0.metrics.jsonl")}
    assert log_progress.from_env(env, 1) is not None
    assert log_progress.from_env(env, 2) is None  # ranks interleave their lines; each reports on its own
    assert log_progress.from_env({**env, "PADDLE_NBEXT_ROLE": "pserver"}, 1) is None
    assert log_progress.from_env({"PADDLE_NBEXT_ROLE": "trainer"}, 1) is None
    said: list[str] = []
    assert log_progress.from_env({**env, log_progress.PATTERN_VAR: "(oops"}, 1, said.append) is None
    assert said and log_progress.PATTERN_VAR in said[0]


@pytest.mark.parametrize(
    ("pattern", "words"),
    [
        (r"step (?P<step>\d+", "is not a valid regular expression"),
        (r"loss: (?P<loss>\S+)", "needs a named group 'step'"),
        (r"(?P<step>\d+)(\w+)+", "repeats inside"),
        (r"(?P<step>\d+)(?:a*b)*", "repeats inside"),
        (r"(?P<step>\d+)(x+){3,}", "repeats inside"),
        ("(?P<step>\\d+)\nx", "must be one line"),
    ],
)
def test_patterns_that_are_refused(pattern: str, words: str) -> None:
    wrong = progress_pattern.problem(pattern)
    assert wrong is not None and words in wrong


@pytest.mark.parametrize("pattern", [r"(?P<step>\d+)(\d{2})+", r"(?P<step>[+*]+)", r"(?P<step>\d+)\(x+\)+", r"(?P<step>\d+) (ab)+ (c+)"])
def test_patterns_that_are_fine(pattern: str) -> None:
    assert progress_pattern.problem(pattern) is None
