"""A real node dying under a job (issue 35): a collective job of two trainers spread over two real
nodes saves checkpoints into its CephFS home; one node loses power (kubelet, containerd and every
process of its pods killed at once, nothing told to the API), or is cut off the network with its
processes left running (a partition).  Kubernetes marks the node
unreachable; after ``node_lost_seconds`` its pods are evicted (the power loss takes the job's
master with it: Kubernetes starts it again on the survivor), the job restarts whole on the
surviving node without waiting for the dead node's pods (they stay Terminating until it returns),
resumes from its latest checkpoint and finishes; its message says in words what happened.  When the
node boots again (or its link comes back) its old pods are finished and the job still shows its
one outcome.  A partitioned node's old pods run on beside the new attempt: what they write after
the restart began is no checkpoint of the job and no point of its curves (the attempt fence).

Needs at least two real nodes (the suite's default; ``PADDLE_NBEXT_TEST_REAL_NODES``) and the real
Ceph of the CephFS tests.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from kubernetes import client

from cluster.k8s_objects import meta, name_of, present
from cluster.test_real_node_cephfs import cephfs_home_for
from cluster.test_real_node_jobs import Notebook, describe, open_notebook

if TYPE_CHECKING:
    from support.ceph.site import CephSite
    from support.controlplane.realnode import RealNode

    from cluster.conftest import RealCluster

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(1500)]

STEPS = 400
NODE_BACK_WAIT = 300.0


@pytest.fixture(scope="module")
def notebook(real_cluster: RealCluster, ceph_site: CephSite, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Notebook]:
    if len(real_cluster.node.nodes) < 2:
        pytest.skip("a node loss needs two real nodes (PADDLE_NBEXT_TEST_REAL_NODES=2 or more)")
    home_for = cephfs_home_for(real_cluster, ceph_site, "/volumes/node-loss", "node-loss-")

    def spread(_home: Path, settings: dict[str, Any]) -> None:
        settings["KubernetesBackend"]["replica_spread"] = "spread"

    yield from open_notebook(real_cluster, tmp_path_factory.mktemp("node-loss-logs"), spread, home_for)


def latest_step(book: Notebook, name: str) -> int | None:
    answer = book.server.api("GET", f"jobs/{name}/checkpoints")
    assert answer.status_code == 200, f"GET jobs/{name}/checkpoints: {answer.status_code} {answer.text}"
    latest = answer.json()["latest"]
    return None if latest is None else int(latest["step"])


def trainer_pods(book: Notebook, name: str) -> list[client.V1Pod]:
    return sorted((p for p in book.job_pods(name) if "-trainer-" in name_of(p)), key=name_of)


def node_of(book: Notebook, pod: client.V1Pod) -> str:
    return str(present(pod.spec, "spec").node_name)


def real_node(book: Notebook, name: str) -> RealNode:
    return next(node for node in book.cluster.node.nodes if node.name == name)


def lost_trainer(book: Notebook, name: str, index: int | None = None) -> tuple[int, RealNode]:
    """A trainer on a node other than the first (the one the test powers off), or trainer `index`,
    and its node."""
    first = book.cluster.node.nodes[0].name
    for pod in trainer_pods(book, name):
        own = int(name_of(pod).split("-")[-2])
        if (index is None and node_of(book, pod) != first) or own == index:
            return own, real_node(book, node_of(book, pod))
    raise AssertionError(f"no trainer of {name} to lose: {[(name_of(p), node_of(book, p)) for p in trainer_pods(book, name)]}")


def snapshot(book: Notebook, name: str) -> str:
    """Pods and nodes as the user's admin would list them (for failure messages)."""
    rows = []
    for pod in book.job_pods(name):
        status = present(pod.status, "status")
        deleting = " Terminating" if meta(pod).deletion_timestamp else ""
        attempt = (meta(pod).labels or {}).get("paddle-nbext/attempt", "-")
        rows.append(f"{name_of(pod)} attempt {attempt} {status.phase}{deleting} on {node_of(book, pod)}")
    for node in client.CoreV1Api(book.admin).list_node().items:
        taints = [t.key for t in (present(node.spec, "spec").taints or []) if t.effect == "NoExecute"]
        ready = next((c.status for c in (present(node.status, "status").conditions or []) if c.type == "Ready"), "?")
        rows.append(f"node {name_of(node)} Ready={ready} {taints}")
    return "; ".join(rows)


def wait_for_restart(book: Notebook, name: str, lost: str) -> None:
    """Until the job's message says it restarts whole for the lost node (`lost`, a pattern);
    every status and the pods and nodes seen on the way in the failure message otherwise."""
    seen: list[str] = []

    def restarted(status: dict[str, Any]) -> bool:
        seen.append(f"{status.get('phase')}: {status.get('message')} | {snapshot(book, name)}")
        return re.search(rf"restart 1: {lost}", status.get("message", "")) is not None

    try:
        book.wait(name, restarted, "the whole restart after the node loss", timeout=300)
    except AssertionError as error:
        raise AssertionError(f"{error}\nseen:\n" + "\n".join(dict.fromkeys(seen))) from None


def masters(book: Notebook, name: str) -> str:
    """The job master pods' last log lines (for failure messages)."""
    core = client.CoreV1Api(book.admin)
    found = []
    for pod in book.job_pods(name):
        if "-master-" in name_of(pod):
            try:
                text = core.read_namespaced_pod_log(name_of(pod), book.namespace, tail_lines=20, _request_timeout=10)
            except Exception as error:  # noqa: BLE001 - a diagnostic only
                text = f"({error})"
            found.append(f"{name_of(pod)} on {node_of(book, pod)}: {text}")
    return "\n".join(found)


def test_a_node_losing_power_restarts_the_job_whole_on_the_survivor_from_its_checkpoint(notebook: Notebook) -> None:
    name = "node-loss"
    entry = f"python collective_train.py --steps {STEPS} --step-delay 0.1 --checkpoint-every 20 --print-every 10"
    notebook.submit(name, mode="collective", trainers=2, entry_point=entry, keep_checkpoints=2)
    lost_trainer_after_start(notebook, name)
    # The node that dies is the one the job's master runs on (with one of the trainers: they are
    # spread over both): the restart is then the work of the master Kubernetes starts again on the
    # survivor, which picks the job up from the API where the dead one left it.
    old_master = running_master(notebook, name)
    index, node = trainer_on(notebook, name, node_of(notebook, old_master))
    powered_off = False
    try:
        notebook.wait(name, lambda s: (latest_step(notebook, name) or 0) >= 40, "the checkpoint of step 40")
        saved = latest_step(notebook, name) or 0
        node.power_off()
        powered_off = True
        lost = rf"node {re.escape(node.name)} stopped responding; trainer {index} lost"
        wait_for_restart(notebook, name, lost)
        # Both trainers of the new attempt run on the survivor while the dead node's pod is still
        # there, Terminating: nothing waited for it.
        first = notebook.wait_log(name, r"trainer 0 resumed from step \d+", index=0, timeout=240)
        resumed = re.search(r"trainer 0 resumed from step (\d+)", first)
        assert resumed is not None, first[-2000:]
        step = int(resumed.group(1))
        assert step >= saved and step % 20 == 0, (step, saved)
        notebook.wait_log(name, rf"trainer 1 resumed from step {step}\b", index=1)
        stuck = [p for p in notebook.job_pods(name) if node_of(notebook, p) == node.name]
        assert stuck and all(meta(p).deletion_timestamp for p in stuck), snapshot(notebook, name)
        # Peers' names resolve to the new attempt's pods only, not to the dead node's (issue 46: a
        # new pserver resolved its own name to its predecessor's address and could not listen).
        dead = {present(p.status, "status").pod_ip for p in stuck} - {None}
        assert dead and not dead & published_addresses(notebook, stuck[0]), snapshot(notebook, name)
        new_master = running_master(notebook, name)
        assert name_of(new_master) != name_of(old_master) and node_of(notebook, new_master) != node.name, snapshot(notebook, name)
        ended = notebook.ended(name)
        assert ended["phase"] == "Succeeded", describe(ended)
        assert re.search(rf"\(restart 1 \({lost}\); resumed from step {step}\)", ended["message"]), describe(ended)
        survivors = {node_of(notebook, p) for p in trainer_pods(notebook, name) if not meta(p).deletion_timestamp}
        assert node.name not in survivors, snapshot(notebook, name)
    finally:
        if powered_off:
            node.power_on()
    # Back: its kubelet finishes the pods still bound to it; the job keeps its one outcome.
    deadline = time.monotonic() + NODE_BACK_WAIT
    while any(node_of(notebook, p) == node.name for p in notebook.job_pods(name)) and time.monotonic() < deadline:
        time.sleep(1)
    assert not any(node_of(notebook, p) == node.name for p in notebook.job_pods(name)), snapshot(notebook, name)
    after = notebook.server.api("GET", f"jobs/{name}").json()
    assert after["phase"] == "Succeeded", describe(after)
    notebook.delete(name)


def published_addresses(book: Notebook, pod: client.V1Pod) -> set[str]:
    """The addresses the job's headless Service publishes (its EndpointSlices), ready or not:
    what the pods' hostnames resolve to."""
    service = (meta(pod).labels or {})["paddle-nbext/job"]
    slices = client.DiscoveryV1Api(book.admin).list_namespaced_endpoint_slice(
        book.namespace, label_selector=f"kubernetes.io/service-name={service}"
    )
    return {address for item in slices.items for endpoint in item.endpoints or [] for address in endpoint.addresses}


def running_master(book: Notebook, name: str) -> client.V1Pod:
    """The job's master pod that runs now (not one left Terminating on a dead node)."""
    found = [
        p
        for p in book.job_pods(name)
        if "-master-" in name_of(p) and not meta(p).deletion_timestamp and present(p.status, "status").phase == "Running"
    ]
    assert len(found) == 1, snapshot(book, name)
    return found[0]


def trainer_on(book: Notebook, name: str, node_name: str) -> tuple[int, RealNode]:
    """The trainer running on `node_name`, and that node."""
    for pod in trainer_pods(book, name):
        if node_of(book, pod) == node_name:
            return int(name_of(pod).split("-")[-2]), real_node(book, node_name)
    raise AssertionError(f"no trainer of {name} on {node_name}: {snapshot(book, name)}")


def lost_trainer_after_start(book: Notebook, name: str, index: int | None = None) -> tuple[int, RealNode]:
    book.wait(name, lambda s: len(s["replicas"]) == 2 and all(r["phase"] == "Running" for r in s["replicas"]), "both trainers Running")
    return lost_trainer(book, name, index)


def wait_gone_from(book: Notebook, name: str, node: RealNode) -> None:
    deadline = time.monotonic() + NODE_BACK_WAIT
    while any(node_of(book, p) == node.name for p in book.job_pods(name)) and time.monotonic() < deadline:
        time.sleep(1)
    assert not any(node_of(book, p) == node.name for p in book.job_pods(name)), snapshot(book, name)


def test_a_partitioned_nodes_old_pods_write_nothing_the_new_attempt_reads(notebook: Notebook) -> None:
    """Trainer 0 (the rank that saves) is cut off with its node; the job restarts whole on the
    other node and resumes; the link comes back while the new attempt trains: the old pods stop,
    their late writes are no checkpoint and no curve point, and the job ends with one curve."""
    name = "node-cut"
    entry = f"python collective_train.py --steps {STEPS} --step-delay 0.1 --checkpoint-every 20 --print-every 10"
    notebook.submit(name, mode="collective", trainers=2, entry_point=entry, keep_checkpoints=3)
    index, node = lost_trainer_after_start(notebook, name, index=0)
    cut = False
    try:
        notebook.wait(name, lambda s: (latest_step(notebook, name) or 0) >= 40, "the checkpoint of step 40")
        node.partition(cut=True)
        cut = True
        lost = rf"node {re.escape(node.name)} stopped responding; trainer 0 lost"
        wait_for_restart(notebook, name, lost)
        try:
            first = notebook.wait_log(name, r"trainer 0 resumed from step \d+", index=0, timeout=300)
        except AssertionError as error:
            raise AssertionError(f"{error}\n{snapshot(notebook, name)}\n{masters(notebook, name)}") from None
        resumed = re.search(r"trainer 0 resumed from step (\d+)", first)
        assert resumed is not None, first[-2000:]
        step = int(resumed.group(1))
        # The old pods, still running, come back while the new attempt trains.
        node.partition(cut=False)
        cut = False
        ended = notebook.ended(name)
        assert ended["phase"] == "Succeeded", describe(ended)
        assert re.search(rf"\(restart 1 \({lost}\); resumed from step {step}\)", ended["message"]), describe(ended)
        wait_gone_from(notebook, name, node)
    finally:
        if cut:
            node.partition(cut=False)
    # One curve: every step once, in order, and the resumed attempt's steps follow the resume point;
    # the cut-off saving rank's points up to its checkpoint survived it (synced with the checkpoint).
    metrics = notebook.server.api("GET", f"jobs/{name}/metrics").json()
    for replica in metrics["replicas"]:
        steps = replica["series"]["loss"]["step"]
        assert steps == sorted(set(steps)) and steps[-(STEPS - step) :] == list(range(step + 1, STEPS + 1)), (replica["index"], steps)
        if replica["index"] == 0:
            assert steps == list(range(1, STEPS + 1)), steps
    # Every checkpoint listed is the new attempt's, or was saved before the restart began.
    listed = notebook.server.api("GET", f"jobs/{name}/checkpoints").json()
    assert listed["latest"] is not None and int(listed["latest"]["step"]) == STEPS - STEPS % 20, listed
    after = notebook.server.api("GET", f"jobs/{name}").json()
    assert after["phase"] == "Succeeded", describe(after)
    notebook.delete(name)


def test_a_gang_that_no_longer_fits_waits_with_the_schedulers_words_and_starts_when_the_node_returns(notebook: Notebook) -> None:
    """Each trainer asks for more than half a node's CPUs: after the node loss the restart's
    second trainer cannot be placed on the survivor, so the job waits Pending saying why in the
    scheduler's words; it resumes and finishes once the node is back."""
    name = "node-fit"
    entry = f"python collective_train.py --steps {STEPS // 2} --step-delay 0.1 --checkpoint-every 20 --print-every 10"
    notebook.submit(name, mode="collective", trainers=2, entry_point=entry, trainer_cpu="1100m")
    index, node = lost_trainer_after_start(notebook, name)
    powered_off = False
    try:
        notebook.wait(name, lambda s: (latest_step(notebook, name) or 0) >= 20, "the checkpoint of step 20")
        node.power_off()
        powered_off = True
        notebook.wait(name, lambda s: f"node {node.name} stopped responding" in s.get("message", ""), "the restart", timeout=240)
        waiting = notebook.wait(
            name,
            lambda s: re.search(r"trainer \d: Unschedulable: .*Insufficient cpu", s.get("message", "")) is not None,
            "the scheduler's words",
            timeout=240,
        )
        assert waiting["phase"] in ("Pending", "Running"), describe(waiting)
        node.power_on()
        powered_off = False
        notebook.wait_log(name, r"trainer 0 resumed from step \d+", index=0, timeout=300)
        ended = notebook.ended(name)
        assert ended["phase"] == "Succeeded", describe(ended)
    finally:
        if powered_off:
            node.power_on()
    notebook.delete(name)
