"""Training health on real nodes (issue 36): what `GET /jobs/{name}/usage` reads from
metrics-server (built here, registered through the API server's aggregation layer, scraping the
real nodes' kubelets) while real replicas hold a known amount of memory, under the notebook's
shipped Role.
"""

from __future__ import annotations

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
