"""Queue positions and preemption under Kueue, on the queued control plane (``queued_cluster``):
Kueue's visibility API reached through the API server's aggregator (an APIService whose
ExternalName Service names 127.0.0.1, support/controlplane/queueing.py), the backend under the
shipped Roles (deploy/rbac/notebook-role.yaml plus notebook-role-queues.yaml).

Every job here is a JobSet (``jobset`` mode: one Kueue Workload per job) of one pserver and one
trainer at 1 CPU each plus the master (10m), so a ClusterQueue of 2.5 CPU holds exactly one.
Object names are computed with ``manifests.object_name`` (``obj``), never written out.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from cluster.k8s_objects import meta
from cluster.test_k8s_backend import MASTER_ROLE, _async, _where, eventually, home_dir, obj, pod_of, run, running, spec
from cluster.test_k8s_queued import KUEUE, ROLE, create_once, pods, workloads_of
from paddle_nbext.model.contract import STATUS_ANNOTATION
from paddle_nbext.model.status import JobStatus
from paddle_nbext_server.backends.base import SubmitRequest
from paddle_nbext_server.backends.kubernetes.backend import KubernetesBackend

if TYPE_CHECKING:
    from cluster.conftest import Cluster, QueuedCluster

pytestmark = pytest.mark.cluster

JOB_CPU = {"pservers": 1, "trainers": 1, "trainer_cpu": "1", "pserver_cpu": "1"}
ONE_JOB_OF_QUOTA = "2.5"
HIGH_PRIORITY = "paddle-nbext-test-high"


def line_up(admin: client.ApiClient, namespace: str, name: str, *, preemption: dict[str, str] | None = None) -> None:
    """A ClusterQueue `name` (unique in the cluster) with room for one job, optionally with a
    preemption policy, and a LocalQueue `name` in `namespace` pointing at it."""
    custom = client.CustomObjectsApi(admin)
    flavor = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "default-flavor"}}
    try:
        custom.create_cluster_custom_object(*KUEUE, "resourceflavors", flavor)
    except ApiException as error:
        if error.status != 409:
            raise
    quota = [{"name": "cpu", "nominalQuota": ONE_JOB_OF_QUOTA}, {"name": "memory", "nominalQuota": "64Gi"}]
    cluster_spec: dict[str, Any] = {
        "namespaceSelector": {},
        "resourceGroups": [{"coveredResources": ["cpu", "memory"], "flavors": [{"name": "default-flavor", "resources": quota}]}],
    }
    if preemption:
        cluster_spec["preemption"] = preemption
    custom.create_cluster_custom_object(
        *KUEUE,
        "clusterqueues",
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": name}, "spec": cluster_spec},
    )
    local = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue", "metadata": {"name": name}, "spec": {"clusterQueue": name}}
    custom.create_namespaced_custom_object(*KUEUE, namespace, "localqueues", local)


def workspace(cluster: Cluster, tmp_path: Path, role: dict[str, Any] = ROLE) -> tuple[str, str, client.ApiClient, Path]:
    namespace = cluster.new_namespace()
    for user in ("alice", "bob"):
        cluster.home_claim(namespace, f"claim-{user}")
    cluster.kubeconfig_for(namespace, "paddle-nbext-master", MASTER_ROLE)
    return namespace, cluster.kubeconfig_for(namespace, "paddle-notebook", role), cluster.api_client(), home_dir(tmp_path)


def jobset(admin: client.ApiClient, namespace: str, job: str, owner: str = "alice") -> dict[str, Any] | None:
    try:
        found = cast(
            dict[str, Any],
            client.CustomObjectsApi(admin).get_namespaced_custom_object(
                "jobset.x-k8s.io", "v1alpha2", namespace, "jobsets", obj(job, owner)
            ),
        )
    except ApiException as error:
        if error.status == 404:
            return None
        raise
    return found


def admitted(admin: client.ApiClient, namespace: str, job: str, owner: str = "alice") -> bool:
    return (jobset(admin, namespace, job, owner) or {}).get("spec", {}).get("suspend") is False


def workload_of(admin: client.ApiClient, namespace: str, job: str, owner: str = "alice") -> dict[str, Any] | None:
    name = obj(job, owner)
    mine = [w for w in workloads_of(admin, namespace) if any(r["name"] == name for r in w["metadata"].get("ownerReferences") or [])]
    return mine[0] if mine else None


async def message_of(backend: KubernetesBackend, job: str, owner: str, expected: str) -> str:
    """The job's message once it starts with `expected` (an AssertionError naming what it is until then)."""
    status = await backend.get_job(job, owner)
    assert status.message.startswith(expected), f"{owner}'s {job}: {status.phase} {status.message!r}"
    return status.message


async def submit_in_order(backend: KubernetesBackend, admin: client.ApiClient, namespace: str, job: str, owner: str, home: Path) -> None:
    """Submit, wait for Kueue's Workload, then let a second pass: Kueue orders a queue by
    priority and creation time, which the API server stamps in whole seconds."""
    await backend.submit(SubmitRequest(spec(job, **JOB_CPU), owner, home))
    await eventually(lambda: _async(lambda: workload_of(admin, namespace, job, owner)), f"the Workload of {owner}'s {job}")
    await asyncio.sleep(1.1)


def test_waiting_jobs_show_their_place_in_the_queue_and_it_moves_as_the_ones_ahead_go(
    queued_cluster: QueuedCluster, tmp_path: Path
) -> None:
    """Two users' jobs wait behind one holding all the quota: positions 1..3 in submit order,
    then 1..2 once the first waiting job is cancelled, then 1 of 1 once the next is admitted."""
    cluster = queued_cluster
    namespace, kubeconfig, admin, home = workspace(cluster, tmp_path)
    line_up(admin, namespace, "line")
    traits: dict[str, Any] = {"workload_mode": "jobset", "default_queue": "line", "queue_position_interval": 0.5}

    async def scenario() -> None:
        async with running(kubeconfig, namespace, home, **traits) as alice, running(kubeconfig, namespace, home, **traits) as bob:
            await alice.submit(SubmitRequest(spec("holder", **JOB_CPU), "alice", home))
            await eventually(lambda: _async(lambda: admitted(admin, namespace, "holder")), "the holder admitted")
            await submit_in_order(alice, admin, namespace, "first", "alice", home)
            await submit_in_order(bob, admin, namespace, "second", "bob", home)
            await submit_in_order(alice, admin, namespace, "third", "alice", home)

            first = await eventually(
                lambda: message_of(alice, "first", "alice", "Queued in line (position 1 of 3); waiting for quota:"), "1 of 3"
            )
            assert "insufficient unused quota for cpu" in first, first
            await eventually(lambda: message_of(bob, "second", "bob", "Queued in line (position 2 of 3); waiting for quota:"), "2 of 3")
            await eventually(lambda: message_of(alice, "third", "alice", "Queued in line (position 3 of 3); waiting for quota:"), "3 of 3")
            third = await alice.get_job("third", "alice")
            assert all((r.reason or "").startswith("Queued: queued in line (position 3 of 3)") for r in third.replicas), third.replicas
            holder = await alice.get_job("holder", "alice")
            assert "position" not in holder.message, holder.message
            assert alice.describe()["queues"]["positions"] == {"api": "visibility.kueue.x-k8s.io/v1beta2", "error": None}

            # The first waiting job is cancelled: Kueue deactivates its Workload, everyone behind moves up.
            await alice.cancel("first", "alice")
            await eventually(lambda: message_of(bob, "second", "bob", "Queued in line (position 1 of 2)"), "bob's job first in line")
            await eventually(lambda: message_of(alice, "third", "alice", "Queued in line (position 2 of 2)"), "2 of 2")
            assert (await alice.get_job("first", "alice")).phase == "Cancelled"

            # The holder goes: bob's job is admitted whole, the last one is next.
            await alice.delete("holder", "alice")
            await eventually(lambda: _async(lambda: admitted(admin, namespace, "second", "bob")), "bob's job admitted")
            await eventually(lambda: message_of(alice, "third", "alice", "Queued in line (position 1 of 1)"), "1 of 1")
            cluster.await_job_pods(namespace)
            # bob's server sees the admission through its Workload watch, a watch event behind the API
            await eventually(
                lambda: _where(bob, "second", lambda s: not s.message.startswith("Queued"), owner="bob"), "bob's job no longer queued"
            )

    run(scenario())


def test_without_the_visibility_rule_jobs_keep_kueues_words_and_config_says_why(queued_cluster: QueuedCluster, tmp_path: Path) -> None:
    cluster = queued_cluster
    narrower = {**ROLE, "rules": [r for r in ROLE["rules"] if "visibility.kueue.x-k8s.io" not in r["apiGroups"]]}
    assert len(narrower["rules"]) == len(ROLE["rules"]) - 1  # the shipped Role has the rule
    namespace, kubeconfig, admin, home = workspace(cluster, tmp_path, narrower)
    line_up(admin, namespace, "no-view")
    traits: dict[str, Any] = {"workload_mode": "jobset", "default_queue": "no-view", "queue_position_interval": 0.5}

    async def scenario() -> None:
        async with running(kubeconfig, namespace, home, **traits) as backend:
            await backend.submit(SubmitRequest(spec("holder", **JOB_CPU), "alice", home))
            await eventually(lambda: _async(lambda: admitted(admin, namespace, "holder")), "the holder admitted")
            await backend.submit(SubmitRequest(spec("waits", **JOB_CPU), "alice", home))

            def explained() -> str:
                error = backend.describe()["queues"]["positions"]["error"] or ""
                assert "403" in error, backend.describe()["queues"]
                return str(error)

            error = await eventually(lambda: _async(explained), "the reason positions are not shown")
            assert "localqueues/pendingworkloads" in error and "deploy/rbac/notebook-role-queues.yaml" in error, error
            message = await eventually(
                lambda: message_of(backend, "waits", "alice", "Queued in no-view; waiting for quota:"), "Kueue's words"
            )
            assert "position" not in message, message
            listed = await backend.list_jobs("alice")
            assert {s.name for s in listed} == {"holder", "waits"}

    run(scenario())


def high_priority_job(admin: client.ApiClient, namespace: str, queue: str, cpu: str) -> str:
    """Someone else's plain batch/v1 Job in `queue` with Kueue's high WorkloadPriorityClass
    (created once per cluster), asking for all of the queue's CPU; returns its name."""
    custom = client.CustomObjectsApi(admin)
    priority = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "WorkloadPriorityClass", "metadata": {"name": HIGH_PRIORITY}, "value": 1000}
    create_once(custom, "workloadpriorityclasses", priority)
    container = {
        "name": "urgent",
        "image": "busybox",
        "command": ["sleep", "3600"],
        "resources": {"requests": {"cpu": cpu, "memory": "128Mi"}},
        "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}, "runAsNonRoot": True, "runAsUser": 1000},
    }
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": "urgent",
            "labels": {"kueue.x-k8s.io/queue-name": queue, "kueue.x-k8s.io/priority-class": HIGH_PRIORITY},
        },
        "spec": {
            "suspend": True,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [container],
                    "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}},
                }
            },
        },
    }
    client.BatchV1Api(admin).create_namespaced_job(namespace, client.V1Job.model_validate(job))
    return "urgent"


def test_a_running_job_preempted_by_a_higher_priority_workload_says_so_and_waits_its_turn_again(
    queued_cluster: QueuedCluster, tmp_path: Path
) -> None:
    """ClusterQueue with `withinClusterQueue: LowerPriority`: a higher-priority Job takes the
    running paddle-nbext job's quota.  Kueue evicts the job's Workload (Evicted/Preempted,
    reason InClusterQueue) and suspends its JobSet, whose pods go; the job says it was preempted
    and is queued again (with its place), and runs again once the urgent Job is gone."""
    cluster = queued_cluster
    namespace, kubeconfig, admin, home = workspace(cluster, tmp_path)
    line_up(admin, namespace, "preempting", preemption={"withinClusterQueue": "LowerPriority"})
    traits: dict[str, Any] = {"workload_mode": "jobset", "default_queue": "preempting", "queue_position_interval": 0.5}

    async def scenario() -> None:
        async with running(kubeconfig, namespace, home, **traits) as backend:
            await backend.submit(SubmitRequest(spec("mnist", **JOB_CPU), "alice", home))
            await eventually(lambda: _async(lambda: admitted(admin, namespace, "mnist")), "admitted")
            cluster.await_job_pods(namespace)
            for role in ("pserver", "trainer"):
                cluster.set_pod_status(namespace, pod_of(admin, namespace, "mnist", role, 0), "Running")
            await eventually(lambda: _where_phase(backend, "Running"), "Running")

            urgent = high_priority_job(admin, namespace, "preempting", cpu="2")
            workload = await eventually(lambda: _async(lambda: _preempted(admin, namespace)), "Kueue's Preempted condition")
            assert workload is not None  # eventually returns a truthy value
            assert workload["reason"] == "InClusterQueue", workload
            # Kueue's words at once (while it stops the pods, then queued again), the place in the queue
            # once Kueue has requeued the Workload.
            preempted = "Preempted by a higher-priority workload; queued again in preempting (position 1 of 1)."
            await eventually(lambda: message_of(backend, "mnist", "alice", preempted), "the job's words")
            status = await backend.get_job("mnist", "alice")
            assert status.phase == "Pending", (status.phase, status.message)
            assert {r.reason for r in status.replicas} >= {
                "Preempted: preempted by a higher-priority workload; queued again in preempting (position 1 of 1)"
            }, status.replicas
            assert (jobset(admin, namespace, "mnist") or {})["spec"]["suspend"] is True
            await eventually(lambda: _async(lambda: pods(admin, namespace, "mnist") == []), "the preempted job's pods gone")

            # The urgent Job is done and deleted: the job is admitted again and runs anew.
            client.BatchV1Api(admin).delete_namespaced_job(urgent, namespace, propagation_policy="Background")
            await eventually(lambda: _async(lambda: admitted(admin, namespace, "mnist")), "admitted again")
            cluster.await_job_pods(namespace)
            for role in ("pserver", "trainer"):
                cluster.set_pod_status(namespace, pod_of(admin, namespace, "mnist", role, 0), "Running")
            running_again = await eventually(lambda: _where_phase(backend, "Running"), "Running again")
            assert not running_again.message.startswith(("Preempted", "Queued")), running_again.message
            # Never recorded as ended: the pods Kueue stopped (exit code 143) were not the job's failure.
            record = client.CoreV1Api(admin).read_namespaced_config_map(obj("mnist"), namespace)
            assert STATUS_ANNOTATION not in (meta(record).annotations or {}), meta(record).annotations

    run(scenario())


async def _where_phase(backend: KubernetesBackend, phase: str) -> JobStatus:
    status = await backend.get_job("mnist", "alice")
    assert status.phase == phase, (status.phase, status.message, [(r.role, r.phase, r.reason) for r in status.replicas])
    return status


def _preempted(admin: client.ApiClient, namespace: str) -> dict[str, Any] | None:
    workload = workload_of(admin, namespace, "mnist") or {}
    for condition in (workload.get("status") or {}).get("conditions") or []:
        if condition["type"] == "Preempted" and condition["status"] == "True":
            return dict(condition)
    return None
