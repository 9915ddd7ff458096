"""Training health on real nodes (issue 36): what `GET /jobs/{name}/usage` reads from
metrics-server (built here, registered through the API server's aggregation layer, scraping the
real nodes' kubelets) while real replicas hold a known amount of memory, under the notebook's
shipped Role.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest

from cluster.test_real_node_jobs import Notebook, describe, open_notebook

if TYPE_CHECKING:
    from cluster.conftest import RealCluster

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(900)]

MIB = 1 << 20
HELD_MIB = 200

#: A trainer that holds HELD_MIB of touched memory until the test lets it go (a file in its home).
HOLD = f"""
import os, pathlib, time
held = bytearray(b"\\x01" * ({HELD_MIB} << 20))
rank = os.environ.get("PADDLE_TRAINER_ID", "0")
home = pathlib.Path.home()
(home / f"holding-{{rank}}").write_text("yes")
print("holding", len(held), flush=True)
while not (home / "release").exists():
    time.sleep(0.2)
print("released", flush=True)
"""


@pytest.fixture(scope="module")
def notebook(real_cluster: RealCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Notebook]:
    if real_cluster.node.metrics is None:
        pytest.skip("another cluster: whether it runs metrics-server is its own business")
    yield from open_notebook(real_cluster, tmp_path_factory.mktemp("health-logs"))


def usage(notebook: Notebook, name: str) -> dict[str, Any]:
    answer = notebook.server.api("GET", f"jobs/{name}/usage")
    assert answer.status_code == 200, answer.text
    return dict(answer.json())


def wait_usage(notebook: Notebook, name: str, check: Any, what: str) -> dict[str, Any]:
    last: dict[str, Any] = {}

    def seen(_status: dict[str, Any]) -> bool:
        nonlocal last
        last = usage(notebook, name)
        return bool(check(last))

    try:
        notebook.wait(name, seen, what)
    except AssertionError as error:
        raise AssertionError(f"{error}; last usage: {last}") from None
    return last


def test_resource_use_of_real_replicas_is_read_from_metrics_server_beside_their_limits(notebook: Notebook) -> None:
    notebook.write("examples/hold.py", HOLD)
    notebook.submit("held", mode="collective", trainers=2, entry_point="python hold.py")

    def both_measured(answer: dict[str, Any]) -> bool:
        figures = [r for r in answer["replicas"] if r["role"] == "trainer" and r["memory"] is not None]
        return bool(answer["available"]) and len(figures) == 2 and all(r["memory"] >= HELD_MIB * MIB for r in figures)

    notebook.wait("held", lambda s: all((notebook.home / f"holding-{i}").exists() for i in (0, 1)), "both trainers holding")
    answer = wait_usage(notebook, "held", both_measured, f"metrics-server's figures with both trainers at {HELD_MIB} MiB or more")
    for replica in answer["replicas"]:
        # the working set the kubelet reports, under the limit the job asked for (1536Mi)
        assert replica["memory_limit"] == 1536 * MIB and replica["memory"] < replica["memory_limit"], replica
        assert replica["cpu_request"] == 0.25 and replica["cpu"] is not None and replica["cpu"] >= 0, replica
        assert replica["peak_memory"] >= replica["memory"], replica
    assert answer["sampled"], answer

    notebook.write("release", "go")
    final = notebook.ended("held")
    assert final["phase"] == "Succeeded", describe(final)
    ended = usage(notebook, "held")
    assert ended["available"], ended
    assert all(r["peak_memory"] >= HELD_MIB * MIB for r in ended["replicas"] if r["role"] == "trainer"), ended


#: A trainer that reports a few steps, then touches memory until its container's working set (as
#: its cgroup counts it, v2 or v1) is 93 % of its limit, and goes quiet (no report, no output) until
#: the test lets it go; it then frees the memory, writes a line and waits to be told to end.
QUIET = """
import pathlib, time
from paddle_nbext_job import report

home = pathlib.Path.home()
for step in range(1, 4):
    report(step, total=3, loss=1.0 / step)
    print(f"step {step} loss {1.0 / step:.3f}", flush=True)


def number(path, key=None):
    text = pathlib.Path(path).read_text()
    if key is None:
        return int(text.split()[0]) if text.split()[0].isdigit() else 0
    return next(int(v) for k, v in (line.split() for line in text.splitlines()) if k == key)


def working_set_and_limit():
    v2 = pathlib.Path("/sys/fs/cgroup/memory.current")
    if v2.exists():
        return number(v2) - number("/sys/fs/cgroup/memory.stat", "inactive_file"), number("/sys/fs/cgroup/memory.max")
    v1 = "/sys/fs/cgroup/memory/"
    return number(v1 + "memory.usage_in_bytes") - number(v1 + "memory.stat", "total_inactive_file"), number(v1 + "memory.limit_in_bytes")


held = []
used, limit = working_set_and_limit()
while used < 0.93 * limit:
    held.append(bytearray(b"\\x01" * (2 << 20)))
    used, limit = working_set_and_limit()
(home / "quiet").write_text(str(used))
while not (home / "release-quiet").exists():
    time.sleep(0.2)
held.clear()
print("released", flush=True)
while not (home / "finish-quiet").exists():
    time.sleep(0.2)
"""


def timeline(notebook: Notebook, name: str) -> list[dict[str, Any]]:
    answer = notebook.server.api("GET", f"jobs/{name}/timeline")
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["available"], body
    return list(body["entries"])


def test_a_replica_near_its_memory_limit_is_warned_about_and_a_quiet_trainer_is_marked_stalled(notebook: Notebook) -> None:
    notebook.write("examples/quiet.py", QUIET)
    notebook.submit("quiet", mode="collective", trainers=1, trainer_mem="400Mi", stall_timeout=20, entry_point="python quiet.py")
    warned = notebook.wait(
        "quiet",
        lambda s: "Training is stalled: no progress for" in s.get("message", "") and "of its 400 MiB limit" in s.get("message", ""),
        "the stall and the memory warning in the job's message",
    )
    assert warned["phase"] == "Running", describe(warned)
    assert re.search(r"since step 3; trainer 0 last wrote at \d\d:\d\d:\d\d", warned["message"]), describe(warned)
    assert re.search(r"trainer 0 uses 3\d\d(\.\d)? MiB of its 400 MiB limit", warned["message"]), describe(warned)
    kinds = [entry["kind"] for entry in timeline(notebook, "quiet")]
    assert kinds.count("warning") >= 2 and kinds.index("first_step") < kinds.index("warning"), kinds

    notebook.write("release-quiet", "go")
    recovered = notebook.wait(
        "quiet",
        lambda s: sum(e["kind"] == "recovered" for e in timeline(notebook, "quiet")) >= 2,
        "the memory and the progress back in the timeline",
    )
    assert recovered["phase"] == "Running" and "stalled" not in recovered["message"], describe(recovered)
    assert "of its 400 MiB limit" not in recovered["message"], describe(recovered)
    notebook.write("finish-quiet", "go")
    final = notebook.ended("quiet")
    assert final["phase"] == "Succeeded", describe(final)
    entries = timeline(notebook, "quiet")
    texts = " | ".join(f"{e['t']} {e['kind']}: {e['text']}" for e in entries)
    ordered = [e["kind"] for e in entries]
    for kind in ("submitted", "started", "first_step", "warning", "recovered", "ended"):
        assert kind in ordered, texts
    assert ordered.index("submitted") < ordered.index("started") < ordered.index("first_step") < ordered.index("ended"), texts
    assert any(re.search(r"trainer 0 scheduled on node pnb-real-node", e["text"]) for e in entries), texts
    assert [e["t"] for e in entries] == sorted(e["t"] for e in entries), texts


#: A trainer that reports a few steps and then waits for ever without a word.
SILENT = """
import time
from paddle_nbext_job import report

for step in range(1, 4):
    report(step, total=100, loss=1.0 / step)
    print(f"step {step} loss {1.0 / step:.3f}", flush=True)
while True:
    time.sleep(1)
"""


def test_a_stalled_trainer_with_on_stall_fail_ends_the_job_failed_with_the_stall_in_words(notebook: Notebook) -> None:
    notebook.write("examples/silent.py", SILENT)
    notebook.submit("silent", mode="collective", trainers=1, stall_timeout=15, on_stall="fail", entry_point="python silent.py")
    final = notebook.ended("silent")
    assert final["phase"] == "Failed", describe(final)
    assert re.match(
        r"The job stalled: no progress for 1\d s since step 3; trainer 0 last wrote at \d\d:\d\d:\d\d\.?; on_stall is 'fail'\.",
        final["message"],
    ), describe(final)
    (trainer,) = final["replicas"]
    assert trainer["reason"].startswith("Stalled: no progress for"), describe(final)
    kinds = [entry["kind"] for entry in timeline(notebook, "silent")]
    assert kinds[-1] == "ended" and "warning" in kinds, kinds
