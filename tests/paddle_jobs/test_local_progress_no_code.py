"""Progress with no code changes (issue 47), through a real Jupyter server, the local backend and
the notebook's client: real Paddle `Model.fit` reports its steps, total, loss and eval metrics by
itself; the same code calling `report()` is not reported twice; printed lines are read with a
job's own pattern and with the built-in styles; a bad pattern is refused with a 422 naming the field."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from server.real_server import RealServer, start_server

from paddle_nbext import api
from paddle_nbext.client import ApiError, Client

pytestmark = pytest.mark.paddle

#: A small MLP on random data with `paddle.Model.fit`: 2 epochs of 10 batches, accuracy, an
#: eval set after each epoch; `--report` adds a callback of the user's that calls `report()`.
FIT = """\
import sys
import numpy as np
import paddle
from paddle.io import Dataset


class Random(Dataset):
    def __init__(self, count, seed):
        rng = np.random.default_rng(seed)
        self.x = rng.standard_normal((count, 8)).astype("float32")
        self.y = (self.x[:, :1] > 0).astype("int64")

    def __getitem__(self, i):
        return self.x[i], self.y[i]

    def __len__(self):
        return len(self.x)


class Mine(paddle.callbacks.Callback):
    def __init__(self):
        super().__init__()
        self.step = 0

    def on_train_batch_end(self, step, logs=None):
        import paddle_nbext_job

        self.step += 1
        paddle_nbext_job.report(self.step, total=20, mine=float(logs["loss"][0]))


paddle.seed(1)
net = paddle.nn.Sequential(paddle.nn.Linear(8, 16), paddle.nn.ReLU(), paddle.nn.Linear(16, 2))
model = paddle.Model(net)
model.prepare(paddle.optimizer.Adam(learning_rate=0.01, parameters=net.parameters()), paddle.nn.CrossEntropyLoss(), paddle.metric.Accuracy())
callbacks = [Mine()] if "--report" in sys.argv else []
model.fit(Random(320, 0), Random(64, 1), batch_size=32, epochs=2, verbose=2, log_freq=5, callbacks=callbacks)
print("fitted", flush=True)
"""

#: Plain Python printing its own progress lines, slowly enough to be seen running.
CUSTOM_LINES = """\
import time
for it in range(1, 13):
    print(f"[worker] it={it}/12 cost={1.0 / it:.4f} top1={it / 12:.3f}", flush=True)
    time.sleep(0.25)
"""

#: PaddleClas-style lines: an iteration within each of two epochs.
CLAS_LINES = """\
for epoch in (1, 2):
    for it in range(1, 6):
        print(f"ppcls INFO: [Train][Epoch {epoch}/2][Iter: {it}/5]lr: 0.10000, top1: {0.1 * it:.5f}, loss: {2.0 / it:.5f}, ips: 320.0 samples/s", flush=True)
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealServer]:
    home = tmp_path_factory.mktemp("progress-home")
    code = home / "work"
    code.mkdir()
    (code / "fit.py").write_text(FIT)
    (code / "custom_lines.py").write_text(CUSTOM_LINES)
    (code / "clas_lines.py").write_text(CLAS_LINES)
    running = start_server(home)
    try:
        yield running
    finally:
        running.stop()


@pytest.fixture(scope="module")
def client(server: RealServer) -> Client:
    return Client(server.url, server.token)


def submit(client: Client, name: str, entry: str, **fields: Any) -> api.Job:
    client.submit({"job_name": name, "entry_point": entry, "trainer_package": "work", "trainer_cpu": "1", **fields})
    return api.Job(name, client)


def ended(job: api.Job) -> str:
    while True:  # bounded by the test timeout
        status = job.status()
        if status.phase in ("Succeeded", "Failed", "Cancelled"):
            assert status.phase == "Succeeded", status.message
            return status.phase
        time.sleep(0.2)


def series(raw: dict[str, Any]) -> dict[str, dict[str, list[Any]]]:
    """Trainer 0's series that hold points."""
    (trainer,) = [replica for replica in raw["replicas"] if replica["role"] == "trainer"]
    return {name: values for name, values in trainer["series"].items() if values["step"]}


def test_model_fit_reports_its_progress_and_eval_metrics_by_itself(client: Client) -> None:
    job = submit(client, "fit-auto", "python fit.py")
    ended(job)
    raw = job.metrics_raw()
    found = series(raw)
    assert found["loss"]["step"] == list(range(1, 21))  # every batch of both epochs, counted across them, once
    assert found["acc"]["step"] == list(range(1, 21)) and 0.0 <= found["acc"]["value"][-1] <= 1.0
    assert found["epoch"]["value"][0] == 1.0 and found["epoch"]["value"][-1] == 2.0
    assert found["eval_acc"]["step"] == [10, 20] and found["eval_loss"]["step"] == [10, 20]
    assert raw["progress"]["step"] == 20 and raw["progress"]["total"] == 20 and raw["progress"]["fraction"] == 1.0
    rows = job.metrics()
    assert [row["step"] for row in rows if "loss" in row] == list(range(1, 21))
    assert any("eval_acc" in row for row in rows)
    assert "fitted" in (job.logs() or "")


def test_the_same_code_calling_report_is_not_reported_twice(client: Client) -> None:
    job = submit(client, "fit-report", "python fit.py --report")
    ended(job)
    found = series(job.metrics_raw())
    # The user's report() from the first batch on: Model.fit's own reports never start, and the
    # printed lines stop being read once the code wrote.
    assert set(found) == {"mine"}
    assert found["mine"]["step"] == list(range(1, 21))


def test_printed_lines_with_the_jobs_own_pattern_show_progress_and_an_eta(client: Client) -> None:
    pattern = r"it=(?P<step>\d+)/(?P<total>\d+) cost=(?P<loss>\S+) top1=(?P<top1>[0-9.]+)"
    job = submit(client, "lines-custom", "python custom_lines.py", progress_pattern=pattern)
    while True:  # while it runs: progress with its total and an ETA, as report(step, total=...) gives
        raw = job.metrics_raw()
        progress = raw.get("progress") or {}
        if progress.get("step", 0) >= 3 and job.status().phase == "Running":
            assert progress["total"] == 12 and progress["eta_seconds"] is not None and progress["eta_seconds"] > 0
            break
        assert job.status().phase in ("Pending", "Running"), job.status().message
        time.sleep(0.1)
    ended(job)
    found = series(job.metrics_raw())
    assert found["loss"]["step"] == list(range(1, 13)) and found["loss"]["value"][-1] == pytest.approx(1 / 12, abs=1e-4)
    assert found["top1"]["value"][-1] == 1.0


def test_printed_lines_in_a_built_in_style_need_no_pattern(client: Client) -> None:
    job = submit(client, "lines-clas", "python clas_lines.py")
    ended(job)
    raw = job.metrics_raw()
    found = series(raw)
    assert found["loss"]["step"] == list(range(1, 11))  # Iter n of epoch 2 is step 5 + n
    assert found["top1"]["value"][-1] == 0.5 and found["epoch"]["value"][-1] == 2.0
    assert raw["progress"]["total"] == 10


def test_a_bad_pattern_is_refused_naming_the_field_before_anything_is_written(client: Client, server: RealServer) -> None:
    for pattern, words in (
        (r"it=(\d+)", "named group 'step'"),
        (r"(?P<step>\d+", "not a valid regular expression"),
        (r"(?P<step>(\d+)+)", "repeats"),
    ):
        with pytest.raises(ApiError) as refused:
            client.submit(
                {"job_name": "bad-pattern", "entry_point": "python custom_lines.py", "trainer_package": "work", "progress_pattern": pattern}
            )
        assert (refused.value.status, refused.value.field) == (422, "progress_pattern") and words in refused.value.message
    assert "bad-pattern" not in [job.name for job in client.list_jobs()]
    home = server.log.parent  # the server's home, where the local backend keeps its jobs
    assert not list(home.rglob("*bad-pattern*"))
