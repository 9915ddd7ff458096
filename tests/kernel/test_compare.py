"""`paddle_nbext.compare("a", "b")` against the live server: in a real IPython kernel it shows the
comparison as HTML (the curves overlaid in each job's colour, final/best metrics, the spec fields
and code files that differ) and returns a pandas DataFrame; without pandas a `Comparison` with
the same rows; bad requests in the server's words."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from jupyter_client.manager import KernelManager

from .conftest import LiveServer

if TYPE_CHECKING:
    from paddle_nbext.api import Job

TRAIN = """\
import os
from paddle_nbext_job import report
lr = float(os.environ["LR"])
for step in range(1, 11):
    report(step, total=10, loss=abs(step - 6) * lr + 1.0, accuracy=step * lr)
"""
CELL = """\
import json, paddle_nbext
frame = paddle_nbext.compare("cmp-small", "cmp-large")
print(json.dumps({"type": type(frame).__name__, "index": list(frame.index), "columns": list(frame.columns),
                  "rows": json.loads(frame.reset_index().to_json(orient="records"))}))
"""


@pytest.fixture(scope="module")
def two_runs(server: LiveServer, workdir: Path) -> Iterator[dict[str, Any]]:
    """Two ended jobs of one script: other learning rates, and the second's code edited."""
    from paddle_nbext import api
    from paddle_nbext.client import Client

    package = workdir / "compare-pkg"
    package.mkdir(exist_ok=True)
    (package / "train.py").write_text(TRAIN)
    client = Client(server.api, server.token)

    def submit(name: str, lr: str) -> Job:
        return api.submit(
            "python train.py", job_name=name, mode="collective", trainers=1, trainer_package=str(package), env={"LR": lr}, client=client
        )

    small = submit("cmp-small", "0.1")
    (package / "train.py").write_text(TRAIN + "# tuned\n")
    large = submit("cmp-large", "0.5")
    try:
        for job in (small, large):
            job.wait(timeout=180)
            assert job.phase == "Succeeded", job.last.message
        yield client.compare(["cmp-small", "cmp-large"])
    finally:
        small.delete()
        large.delete()


def run_cell(server: LiveServer, code: str) -> tuple[list[str], str]:
    """Execute one cell in a real IPython kernel started with a kernel's environment; return the
    HTML it displayed and what it printed."""
    manager = KernelManager(kernel_name="python3")
    manager.start_kernel(env=server.env(), cwd=str(server.home))
    client = manager.client()
    client.start_channels()
    shown: list[str] = []
    printed: list[str] = []

    def collect(message: dict[str, Any]) -> None:
        kind, content = message["header"]["msg_type"], message["content"]
        if kind == "display_data" and "text/html" in content["data"]:
            shown.append(content["data"]["text/html"])
        elif kind == "stream":
            printed.append(content["text"])
        elif kind == "error":
            printed.append("\n".join(content["traceback"]))

    try:
        client.wait_for_ready(timeout=120)
        reply = client.execute_interactive(code, timeout=120, output_hook=collect)
        assert reply["content"]["status"] == "ok", "".join(printed)
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)
    return shown, "".join(printed)


def test_compare_in_a_kernel_shows_the_runs_and_returns_a_dataframe(server: LiveServer, two_runs: dict[str, Any]) -> None:
    shown, printed = run_cell(server, CELL)
    assert len(shown) == 1, shown
    markup = shown[0]
    colours = {run["name"]: run["colour"] for run in two_runs["runs"]}
    # The loss curves overlaid, each job's line in the colour the panel gives it, with a legend.
    for name, colour in colours.items():
        assert f"stroke='{colour}'" in markup and f"data-job='{name}'" in markup, markup
    assert markup.count("<polyline") == 2 and "loss by step" in markup
    # Final and best loss: small's best 1.0 at step 6, final 1.4 at step 10.
    assert "1.4 (step 10)" in markup and "1 (step 6)" in markup
    # Spec and code differences, in words.
    assert "env LR" in markup and "0.1" in markup and "0.5" in markup
    assert "1 file(s) differ" in markup and "train.py" in markup
    frame = json.loads(printed.strip().splitlines()[-1])
    assert frame["type"] == "DataFrame" and frame["index"] == ["cmp-small", "cmp-large"]
    assert frame["columns"] == ["phase", "env.LR", "loss final", "loss best", "accuracy final", "accuracy best", "code: train.py"]
    small, large = frame["rows"]
    assert (small["env.LR"], small["loss final"], small["loss best"], small["accuracy best"]) == ("0.1", 1.4, 1.0, 1.0)
    assert large["loss best"] == 1.0 and large["loss final"] == 3.0 and large["accuracy final"] == 5.0
    assert len(small["code: train.py"]) == 12 and small["code: train.py"] != large["code: train.py"]


def test_without_pandas_a_comparison_and_bad_requests_in_words(
    kernel_env: LiveServer, two_runs: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    import paddle_nbext
    from paddle_nbext.client import ApiError
    from paddle_nbext.comparison import Comparison

    monkeypatch.setitem(sys.modules, "pandas", None)  # not installed
    result = paddle_nbext.compare("cmp-small", "cmp-large", metric="accuracy", show=False)
    assert isinstance(result, Comparison) and result.metric == "accuracy"
    assert [row["job"] for row in result.rows] == ["cmp-small", "cmp-large"]
    assert result.rows[1]["accuracy final"] == 5.0 and result.rows[1]["accuracy best"] == 5.0
    assert [point[1] for point in result.curves["cmp-large"]][-1] == 5.0 and len(result.curves["cmp-large"]) == 10
    assert "accuracy by step" in result.html() and "1 spec field(s) and 1 code file(s) differ" in repr(result)
    with pytest.raises(ImportError, match="pip install pandas"):
        result.to_pandas()
    with pytest.raises(ValueError, match="they report: loss, accuracy"):
        paddle_nbext.compare("cmp-small", "cmp-large", metric="bleu", show=False)
    with pytest.raises(ApiError) as unknown:
        paddle_nbext.compare("cmp-small", "cmp-nope", show=False)
    assert unknown.value.status == 404 and "'cmp-nope'" in str(unknown.value)
    with pytest.raises(ApiError) as alone:
        paddle_nbext.compare("cmp-small", show=False)
    assert alone.value.status == 400 and alone.value.field == "jobs"
