"""Jobs across real nodes (issue 35): with ``c.KubernetesBackend.replica_spread = "spread"`` a
job's replicas of each role go to different real nodes, and real Paddle trains to the end across
the node boundary: a parameter-server job whose trainers reach a pserver on the other node over
pod DNS, and a collective job whose two trainer pods all-reduce over gloo between nodes.

Needs at least two real nodes (the suite's default; ``PADDLE_NBEXT_TEST_REAL_NODES``).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from cluster.k8s_objects import name_of, present
from cluster.test_real_node_jobs import Notebook, describe, losses, open_notebook

if TYPE_CHECKING:
    from cluster.conftest import RealCluster

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(900)]


@pytest.fixture(scope="module")
def notebook(real_cluster: RealCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Notebook]:
    if len(real_cluster.node.node_names) < 2:
        pytest.skip("the cross-node tests need two real nodes (PADDLE_NBEXT_TEST_REAL_NODES=2 or more)")

    def spread(_home: Path, settings: dict[str, Any]) -> None:
        settings["KubernetesBackend"]["replica_spread"] = "spread"

    yield from open_notebook(real_cluster, tmp_path_factory.mktemp("across-nodes-logs"), spread)


def nodes_of(notebook: Notebook, name: str, role: str) -> list[str]:
    """The node of each replica pod of ``role``, in index order."""
    pods = sorted((p for p in notebook.job_pods(name) if f"-{role}-" in name_of(p)), key=name_of)
    return [str(present(p.spec, "spec").node_name) for p in pods]


def test_the_dry_run_shows_how_each_roles_replicas_spread(notebook: Notebook) -> None:
    body = {"job_name": "spread-dry", "trainer_package": "examples", "mode": "ps", "pservers": 2, "trainers": 2}
    answer = notebook.server.api("POST", "jobs", body={**body, "entry_point": "python ps_train.py"}, params={"dry_run": "true"})
    assert answer.status_code == 200, answer.text
    for manifest in answer.json()["plan"]["manifests"]:
        name = manifest["metadata"]["name"]
        if manifest["kind"] == "Job" and name.endswith(("-trainer", "-pserver")):
            (constraint,) = manifest["spec"]["template"]["spec"]["topologySpreadConstraints"]
            assert constraint["topologyKey"] == "kubernetes.io/hostname" and constraint["whenUnsatisfiable"] == "DoNotSchedule", constraint


def test_a_parameter_server_job_trains_with_its_pservers_and_trainers_on_two_nodes(notebook: Notebook) -> None:
    notebook.submit("ps-across", mode="ps", pservers=2, trainers=2, entry_point="python ps_train.py --steps 200 --print-every 20")
    running = notebook.wait(
        "ps-across", lambda s: len(s["replicas"]) == 4 and all(r["phase"] == "Running" for r in s["replicas"]), "every replica Running"
    )
    pservers, trainers = nodes_of(notebook, "ps-across", "pserver"), nodes_of(notebook, "ps-across", "trainer")
    assert len(set(pservers)) == 2 and len(set(trainers)) == 2, (pservers, trainers, describe(running))
    final = notebook.ended("ps-across")
    assert final["phase"] == "Succeeded", describe(final)
    for index in (0, 1):
        trained = losses(notebook.log("ps-across", "trainer", index))
        assert len(trained) >= 2 and trained[-1] < trained[0], f"trainer {index} losses {trained}"
    notebook.delete("ps-across")


def test_a_collective_job_all_reduces_over_gloo_between_two_nodes(notebook: Notebook) -> None:
    notebook.submit("gloo-across", mode="collective", trainers=2, entry_point="python collective_train.py --steps 60 --print-every 10")
    notebook.wait(
        "gloo-across", lambda s: len(s["replicas"]) == 2 and all(r["phase"] != "Pending" for r in s["replicas"]), "both trainers started"
    )
    trainers = nodes_of(notebook, "gloo-across", "trainer")
    assert len(set(trainers)) == 2, trainers
    final = notebook.ended("gloo-across")
    assert final["phase"] == "Succeeded", describe(final)
    for index in (0, 1):
        log = notebook.log("gloo-across", "trainer", index)
        assert f"trainer {index} of 2 training for 60 steps" in log and f"trainer {index} done" in log, log[-2000:]
    notebook.delete("gloo-across")
