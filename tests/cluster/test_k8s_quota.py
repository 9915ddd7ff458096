"""Quota before submit (issue 17) on the real control plane: a dry run says what the namespace's
ResourceQuota and the job's ClusterQueue have free; a submit that can never fit is refused with
a 422 naming the field before anything is created; one that only has to wait goes ahead.

The backend runs under the shipped Roles (deploy/rbac/notebook-role.yaml, plus
notebook-role-queues.yaml and the queue-reader ClusterRole on the queued plane).  The quota
controller of kube-controller-manager and Kueue's ClusterQueue status are what the figures come
from, so the checks wait for them to be written, never for a duration.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from cluster.k8s_objects import name_of, present
from cluster.test_k8s_backend import NOTEBOOK_ROLE, SELECTOR, _async, deploy_docs, eventually, run, running, spec, workspace
from cluster.test_k8s_queued import jobset, queued_workspace
from cluster.test_k8s_queued import quota as kueue_queue
from paddle_nbext_server.backends.base import SubmitRequest
from paddle_nbext_server.backends.kubernetes.build import manifests
from paddle_nbext_server.errors import InvalidRequest

if TYPE_CHECKING:
    from cluster.conftest import Cluster, QueuedCluster

pytestmark = pytest.mark.cluster

OWNER = "alice"


def compute_quota(admin: client.ApiClient, namespace: str) -> None:
    """ResourceQuota `compute` (4 CPU, 16Gi requests) with 2 CPU and 1Gi of it taken by a pod of
    someone else; returns once the quota controller has counted that pod."""
    core = client.CoreV1Api(admin)
    core.create_namespaced_resource_quota(
        namespace,
        client.V1ResourceQuota.model_validate(
            {"metadata": {"name": "compute"}, "spec": {"hard": {"requests.cpu": "4", "requests.memory": "16Gi"}}}
        ),
    )
    container = {"name": "main", "image": "busybox", "resources": {"requests": {"cpu": "2", "memory": "1Gi"}, "limits": {"memory": "1Gi"}}}

    def other_pod() -> bool:
        try:
            core.create_namespaced_pod(
                namespace, client.V1Pod.model_validate({"metadata": {"name": "someone-else"}, "spec": {"containers": [container]}})
            )
        except ApiException as error:
            if error.status == 403:  # the quota's status is not computed yet: admission waits for it
                return False
            if error.status != 409:
                raise
        return True

    def counted() -> bool:
        used = (present(core.read_namespaced_resource_quota("compute", namespace).status, "status").used or {}) if other_pod() else {}
        return used.get("requests.cpu") == "2"

    run(eventually(lambda: _async(counted), "the quota controller counting the other pod"))


def managed_objects(admin: client.ApiClient, namespace: str) -> set[tuple[str, str]]:
    """(kind, name) of every paddle-nbext object in the namespace (by the managed-by label, so the
    check does not depend on how the job label is spelled)."""
    core, batch = client.CoreV1Api(admin), client.BatchV1Api(admin)
    found = {("ConfigMap", name_of(o)) for o in core.list_namespaced_config_map(namespace, label_selector=SELECTOR).items}
    found |= {("Service", name_of(o)) for o in core.list_namespaced_service(namespace, label_selector=SELECTOR).items}
    found |= {("Job", name_of(o)) for o in batch.list_namespaced_job(namespace, label_selector=SELECTOR).items}
    return found


def of_job(objects: set[tuple[str, str]], job: str) -> set[tuple[str, str]]:
    name = manifests.object_name(job, OWNER)
    return {(kind, obj) for kind, obj in objects if obj == name or obj.startswith(f"{name}-")}


def role_without(role: dict[str, Any], resource: str) -> dict[str, Any]:
    trimmed = copy.deepcopy(role)
    trimmed["rules"] = [rule for rule in trimmed["rules"] if resource not in rule["resources"]]
    return trimmed


def test_the_dry_run_shows_the_resource_quota_and_a_submit_that_never_fits_is_refused_before_anything_exists(
    cluster: Cluster, tmp_path: Path
) -> None:
    namespace, kubeconfig, admin, home = workspace(cluster, tmp_path)
    compute_quota(admin, namespace)

    def job(name: str, trainers: int) -> SubmitRequest:
        return SubmitRequest(spec(name, mode="collective", pservers=0, trainers=trainers, trainer_cpu="1", trainer_mem="1Gi"), OWNER, home)

    async def scenario() -> None:
        async with running(kubeconfig, namespace, home) as backend:
            assert backend.describe()["quota_check"] is True
            fits = (await backend.submit(job("small", 1), dry_run=True))["quota"]
            assert fits["verdict"] == "fits", fits
            assert fits["words"] == "This job needs 1.01 CPU, 1.12Gi; free now: 2 CPU, 15Gi — it fits."
            assert {(b["resource"], b["limit"], b["free"]) for b in fits["bounds"]} == {("cpu", "4", "2"), ("memory", "16Gi", "15Gi")}

            # 5 trainers x 1 CPU and the master: more than the quota's 4 CPU, ever.
            never = (await backend.submit(job("huge", 5), dry_run=True))["quota"]
            assert (never["verdict"], never["field"]) == ("never", "trainers"), never
            with pytest.raises(InvalidRequest) as refused:
                await backend.submit(job("huge", 5))
            assert refused.value.status == 422 and refused.value.field == "trainers"
            assert "it can never run: it needs 5.01 CPU, but ResourceQuota compute has at most 4 CPU" in refused.value.message
            assert of_job(managed_objects(admin, namespace), "huge") == set()

            # 2 trainers: within the 4 CPU, more than the 2 free now: it waits, and is submitted.
            waits = (await backend.submit(job("later", 2), dry_run=True))["quota"]
            assert waits["verdict"] == "waits", waits
            assert waits["words"].endswith("free now: 2 CPU, 15Gi — it will wait (short of 10m CPU in ResourceQuota compute).")
            created = await backend.submit(job("later", 2))
            assert created["phase"] == "Pending"
            assert ("ConfigMap", manifests.object_name("later", OWNER)) in of_job(managed_objects(admin, namespace), "later")

    run(scenario())


def test_a_role_that_may_not_read_quotas_says_quota_unknown_and_still_submits(cluster: Cluster, tmp_path: Path) -> None:
    namespace, kubeconfig, admin, home = workspace(cluster, tmp_path, role_without(NOTEBOOK_ROLE, "resourcequotas"))
    client.CoreV1Api(admin).create_namespaced_resource_quota(
        namespace, client.V1ResourceQuota.model_validate({"metadata": {"name": "tiny"}, "spec": {"hard": {"requests.cpu": "1"}}})
    )

    async def scenario() -> None:
        async with running(kubeconfig, namespace, home) as backend:
            request = SubmitRequest(spec("blind", mode="collective", pservers=0, trainers=2), OWNER, home)
            check = (await backend.submit(request, dry_run=True))["quota"]
            assert check["verdict"] == "unknown", check
            assert f"quota unknown (the ResourceQuotas of {namespace}: forbidden (the Role needs 'list resourcequotas'))" in check["words"]
            assert (await backend.submit(request))["phase"] == "Pending"  # not refused: the API's quota admission has the last word

    run(scenario())


def bind_queue_reader(admin: client.ApiClient, namespace: str) -> None:
    """deploy/rbac/queue-reader-clusterrole.yaml as an admin applies it, the subject's namespace edited."""
    rbac = client.RbacAuthorizationV1Api(admin)
    role, binding = (d for d in deploy_docs("queue-reader-clusterrole.yaml") if d["kind"] in ("ClusterRole", "ClusterRoleBinding"))
    try:
        rbac.create_cluster_role(client.V1ClusterRole.model_validate(role))
    except ApiException as error:
        if error.status != 409:  # another test of the session applied it
            raise
    binding = copy.deepcopy(binding)
    binding["metadata"]["name"] = f"queue-reader-{namespace}"
    binding["subjects"][0]["namespace"] = namespace
    rbac.create_cluster_role_binding(client.V1ClusterRoleBinding.model_validate(binding))


def test_the_dry_run_shows_the_cluster_queues_quota_and_refuses_what_it_can_never_admit(
    queued_cluster: QueuedCluster, tmp_path: Path
) -> None:
    namespace, kubeconfig, admin, home = queued_workspace(queued_cluster, tmp_path)
    kueue_queue(admin, namespace, "quota-q", cpu="4")

    def job(name: str, trainers: int) -> SubmitRequest:
        return SubmitRequest(spec(name, pservers=1, trainers=trainers, trainer_cpu="1", pserver_cpu="1"), OWNER, home)

    async def scenario() -> None:
        async with running(kubeconfig, namespace, home, workload_mode="jobset", default_queue="quota-q") as backend:
            # Without the ClusterRole the ClusterQueue cannot be read: said, not an error.
            blind = (await backend.submit(job("first", 2), dry_run=True))["quota"]
            assert blind["verdict"] == "unknown", blind
            assert blind["unknown"] == [
                "ClusterQueue quota-q (of LocalQueue quota-q): forbidden (bind the ClusterRole paddle-nbext-queue-reader, "
                "deploy/rbac/queue-reader-clusterrole.yaml)"
            ]
            bind_queue_reader(admin, namespace)

            async def readable() -> dict[str, Any] | None:
                check: dict[str, Any] = (await backend.submit(job("first", 2), dry_run=True))["quota"]
                return check if not check["unknown"] else None

            fits = await eventually(readable, "the ClusterQueue readable through the queue-reader ClusterRole")
            assert fits is not None  # eventually returns a truthy value
            assert fits["verdict"] == "fits", fits
            assert fits["words"] == "This job needs 3.01 CPU, 3.12Gi; free now: 4 CPU, 64Gi — it fits."

            # 1 pserver + 4 trainers x 1 CPU + the master: more than the queue's 4 CPU, ever.
            with pytest.raises(InvalidRequest) as refused:
                await backend.submit(job("huge", 4))
            assert refused.value.field == "trainers"
            assert "but ClusterQueue quota-q has at most 4 CPU; ask for fewer trainers" in refused.value.message
            assert jobset(admin, namespace, manifests.object_name("huge", OWNER)) is None
            assert of_job(managed_objects(admin, namespace), "huge") == set()

            # One job holds 3.01 CPU of the queue; the same again fits the queue but not what is free.
            await backend.submit(job("first", 2))

            async def waiting() -> dict[str, Any] | None:
                check: dict[str, Any] = (await backend.submit(job("second", 2), dry_run=True))["quota"]
                return check if check["verdict"] == "waits" else None

            waits = await eventually(waiting, "Kueue reserving the first job's quota")
            assert waits is not None  # eventually returns a truthy value
            assert waits["words"].endswith("free now: 990m CPU, 60.88Gi — it will wait (short of 2.02 CPU in ClusterQueue quota-q)."), waits
            created = await backend.submit(job("second", 2))
            assert created["phase"] == "Pending"

    run(scenario())
