"""Shared clusters: `jobset` workload mode and Kueue, on a control plane of their own with the
JobSet and Kueue controllers built from source at pinned versions (``queued_cluster``).

The backend runs under the shipped Roles (deploy/rbac/notebook-role.yaml plus
notebook-role-queues.yaml).  No pod ever runs (KWOK), so admission is judged by what exists:
a JobSet Kueue has not admitted stays suspended and has no pod at all; an admitted one has its
Jobs and every pod.
"""

from __future__ import annotations

import asyncio
import re
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import pytest
import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from cluster.k8s_objects import meta, name_of, present
from cluster.test_k8s_backend import (
    MASTER_ROLE,
    NOTEBOOK_ROLE,
    _async,
    _where,
    deploy_docs,
    eventually,
    home_dir,
    obj,
    pod_of,
    run,
    running,
    spec,
)
from paddle_nbext_server.backends.base import SubmitRequest

if TYPE_CHECKING:
    from cluster.conftest import Cluster, QueuedCluster

pytestmark = pytest.mark.cluster

KUEUE = ("kueue.x-k8s.io", "v1beta2")
QUEUES_ROLE = next(d for d in deploy_docs("notebook-role-queues.yaml") if d["kind"] == "Role")
ROLE = {**NOTEBOOK_ROLE, "rules": NOTEBOOK_ROLE["rules"] + QUEUES_ROLE["rules"]}


def queued_workspace(cluster: Cluster, tmp_path: Path, role: dict[str, Any] = ROLE) -> tuple[str, str, client.ApiClient, Path]:
    """A fresh namespace with alice's home claim, the shared master account and the notebook's
    kubeconfig under `role` (the notebook Role plus the queue rules unless told)."""
    namespace = cluster.new_namespace()
    cluster.home_claim(namespace, "claim-alice")
    cluster.kubeconfig_for(namespace, "paddle-nbext-master", MASTER_ROLE)  # the master's account (deploy/rbac/master-role.yaml)
    return namespace, cluster.kubeconfig_for(namespace, "paddle-notebook", role), cluster.api_client(), home_dir(tmp_path)


def jobset(admin: client.ApiClient, namespace: str, name: str) -> dict[str, Any] | None:
    try:
        found = cast(
            dict[str, Any],
            client.CustomObjectsApi(admin).get_namespaced_custom_object("jobset.x-k8s.io", "v1alpha2", namespace, "jobsets", obj(name)),
        )
    except ApiException as error:
        if error.status == 404:
            return None
        raise
    return found


def pods(admin: client.ApiClient, namespace: str, job: str) -> list[client.V1Pod]:
    return list(client.CoreV1Api(admin).list_namespaced_pod(namespace, label_selector=f"paddle-nbext/job={obj(job)}").items)


def create_once(custom: client.CustomObjectsApi, plural: str, body: dict[str, Any]) -> None:
    """A cluster-scoped Kueue object the tests of a module share: made by the first, kept after."""
    try:
        custom.create_cluster_custom_object(*KUEUE, plural, body)
    except ApiException as error:
        if error.status != 409:
            raise


def quota(admin: client.ApiClient, namespace: str, name: str, cpu: str, memory: str = "64Gi") -> None:
    """A ResourceFlavor, a ClusterQueue `name` with that much quota and a LocalQueue `name` in
    `namespace` pointing at it: the admin guide's recipe."""
    custom = client.CustomObjectsApi(admin)
    flavor = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "default-flavor"}}
    create_once(custom, "resourceflavors", flavor)
    cluster_queue = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ClusterQueue",
        "metadata": {"name": name},
        "spec": {
            "namespaceSelector": {},
            "resourceGroups": [
                {
                    "coveredResources": ["cpu", "memory"],
                    "flavors": [
                        {
                            "name": "default-flavor",
                            "resources": [{"name": "cpu", "nominalQuota": cpu}, {"name": "memory", "nominalQuota": memory}],
                        }
                    ],
                }
            ],
        },
    }
    custom.create_cluster_custom_object(*KUEUE, "clusterqueues", cluster_queue)
    local = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue", "metadata": {"name": name}, "spec": {"clusterQueue": name}}
    custom.create_namespaced_custom_object(*KUEUE, namespace, "localqueues", local)


def workloads_of(admin: client.ApiClient, namespace: str) -> list[dict[str, Any]]:
    listed = cast(dict[str, Any], client.CustomObjectsApi(admin).list_namespaced_custom_object(*KUEUE, namespace, "workloads"))
    return list(listed["items"])


def test_jobset_mode_submits_runs_and_deletes_a_job_like_jobs_mode(queued_cluster: QueuedCluster, tmp_path: Path) -> None:
    cluster = queued_cluster
    namespace, kubeconfig, admin, home = queued_workspace(cluster, tmp_path)

    async def scenario() -> None:
        async with running(kubeconfig, namespace, home, workload_mode="jobset") as backend:
            described = backend.describe()
            assert described["workload_mode"] == "jobset" and described["jobset_api"] is True, described
            dry = await backend.submit(SubmitRequest(spec("dry", pservers=1, trainers=2), "alice", home), dry_run=True)
            # Server-side validation against JobSet's CRD schema and its validating webhook.
            jobset_manifest = dict(dry["plan"]["manifests"][-1])
            jobset_manifest["metadata"] = {k: v for k, v in jobset_manifest["metadata"].items() if k != "ownerReferences"}
            client.CustomObjectsApi(admin).create_namespaced_custom_object(
                "jobset.x-k8s.io", "v1alpha2", namespace, "jobsets", jobset_manifest, dry_run="All"
            )

            created = await backend.submit(SubmitRequest(spec("mnist", pservers=1, trainers=2), "alice", home))
            assert created["phase"] == "Pending"
            made = await eventually(lambda: _async(lambda: jobset(admin, namespace, "mnist")), "the JobSet")
            assert made is not None  # eventually returns a truthy value
            record = client.CoreV1Api(admin).read_namespaced_config_map(obj("mnist"), namespace)
            assert [(o["kind"], o["uid"]) for o in made["metadata"]["ownerReferences"]] == [("ConfigMap", meta(record).uid)]
            batch = client.BatchV1Api(admin)

            def children() -> set[str]:
                return {name_of(j) for j in batch.list_namespaced_job(namespace, label_selector=f"paddle-nbext/job={obj('mnist')}").items}

            await eventually(
                lambda: _async(lambda: children() == {f"{obj('mnist')}-{role}-0" for role in ("master", "pserver", "trainer")}),
                "JobSet's child Jobs",
            )
            cluster.await_job_pods(namespace)
            trainer = client.CoreV1Api(admin).read_namespaced_pod(pod_of(admin, namespace, "mnist", "trainer", 1), namespace)
            # The hostnames the launcher's endpoints name, under JobSet's headless Service.
            trainer_spec = present(trainer.spec, "spec")
            assert (trainer_spec.hostname, trainer_spec.subdomain) == (f"{obj('mnist')}-trainer-0-1", obj("mnist"))
            env = {e.name: e.value for e in present(trainer_spec.containers[0].env, "env")}
            assert f"{obj('mnist')}-trainer-0-1.{obj('mnist')}:6175" in present(env["PADDLE_NBEXT_TRAINER_ENDPOINTS"], "value")
            service_spec = present(client.CoreV1Api(admin).read_namespaced_service(obj("mnist"), namespace).spec, "spec")
            assert service_spec.cluster_ip == "None" and service_spec.publish_not_ready_addresses is True

            for role, index in (("pserver", 0), ("trainer", 0), ("trainer", 1)):
                cluster.set_pod_status(namespace, pod_of(admin, namespace, "mnist", role, index), "Running")
            await eventually(lambda: _where(backend, "mnist", lambda s: s.phase == "Running"), "Running")
            for index in (0, 1):
                cluster.set_pod_status(namespace, pod_of(admin, namespace, "mnist", "trainer", index), "Succeeded")
            final = await eventually(lambda: _where(backend, "mnist", lambda s: s.phase == "Succeeded" and s.finished), "Succeeded")
            assert final.message == "All 2 trainers finished successfully."

            await backend.delete("mnist", "alice")
            await eventually(
                lambda: _async(lambda: jobset(admin, namespace, "mnist") is None and not children()), "the JobSet and its Jobs gone"
            )

    run(scenario())


def test_kueue_admits_a_jobset_whole_or_not_at_all_and_cancel_stops_it_through_kueue(queued_cluster: QueuedCluster, tmp_path: Path) -> None:
    cluster = queued_cluster
    namespace, kubeconfig, admin, home = queued_workspace(cluster, tmp_path)
    quota(admin, namespace, "team-a", cpu="4")

    async def scenario() -> None:
        async with running(kubeconfig, namespace, home, workload_mode="jobset", default_queue="team-a") as backend:
            # 1 + 2 trainers x 1 CPU + the master: fits in 4 CPU.
            await backend.submit(SubmitRequest(spec("fits", pservers=1, trainers=2, trainer_cpu="1", pserver_cpu="1"), "alice", home))
            made = await eventually(lambda: _async(lambda: jobset(admin, namespace, "fits")), "the JobSet")
            assert made is not None  # eventually returns a truthy value
            assert made["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "team-a"
            await eventually(
                lambda: _async(lambda: (jobset(admin, namespace, "fits") or {}).get("spec", {}).get("suspend") is False), "admitted"
            )
            cluster.await_job_pods(namespace)
            await eventually(lambda: _async(lambda: len(pods(admin, namespace, "fits")) == 4), "every pod of the admitted job")

            # The same again does not fit beside it (it fits the queue alone: one that never could is
            # refused at submit, tests/cluster/test_k8s_quota.py): the whole JobSet waits, nothing of it runs.
            await backend.submit(SubmitRequest(spec("waits", pservers=1, trainers=2, trainer_cpu="1", pserver_cpu="1"), "alice", home))
            status = await eventually(
                lambda: _where(
                    # The queue position joins the words once Kueue's visibility API has been read.
                    backend,
                    "waits",
                    lambda s: (
                        s.phase == "Pending" and re.match(r"Queued in team-a( \(position \d+ of \d+\))?; waiting for quota:", s.message)
                    ),
                ),
                "the queue's words",
            )
            assert "insufficient" in status.message and "cpu" in status.message, status.message
            assert all((r.reason or "").startswith("Queued: queued in team-a") for r in status.replicas), status.replicas
            assert (jobset(admin, namespace, "waits") or {})["spec"]["suspend"] is True
            assert pods(admin, namespace, "waits") == []
            await eventually(lambda: _where(backend, "fits", lambda s: not s.message.startswith("Queued")), "the admitted job's words")

            cancelled = await backend.cancel("waits", "alice")
            assert cancelled.phase == "Cancelled"

            def deactivated() -> bool:
                mine = [
                    w
                    for w in workloads_of(admin, namespace)
                    if any(r["name"] == obj("waits") for r in w["metadata"].get("ownerReferences") or [])
                ]
                return bool(mine) and all(w["spec"].get("active") is False for w in mine)

            await eventually(lambda: _async(deactivated), "Kueue's Workload of the cancelled job deactivated")
            assert pods(admin, namespace, "waits") == []

    run(scenario())


def test_a_queue_outside_the_allowed_ones_is_refused_naming_the_field(queued_cluster: QueuedCluster, tmp_path: Path) -> None:
    cluster = queued_cluster
    namespace, kubeconfig, admin, home = queued_workspace(cluster, tmp_path)

    async def scenario() -> None:
        from paddle_nbext_server.errors import InvalidRequest

        async with running(kubeconfig, namespace, home, default_queue="team-a", allowed_queues=["team-b"]) as backend:
            with pytest.raises(InvalidRequest) as refused:
                await backend.submit(SubmitRequest(spec("other", queue="team-z"), "alice", home), dry_run=True)
            assert refused.value.field == "queue" and "team-a, team-b" in refused.value.message
            dry = await backend.submit(SubmitRequest(spec("mine", queue="team-b"), "alice", home), dry_run=True)
            labels = {m["metadata"]["labels"].get("kueue.x-k8s.io/queue-name") for m in dry["plan"]["manifests"] if m["kind"] == "Job"}
            assert labels == {"team-b"}
            await asyncio.sleep(0)

    run(scenario())


def test_the_admin_guides_kueue_recipe_is_accepted_by_kueue(queued_cluster: QueuedCluster) -> None:
    """The ResourceFlavor, ClusterQueue and LocalQueue of docs/admin-guide.md ("Workload modes and
    queues"), created as written: valid for Kueue's CRD schemas and admission webhooks."""
    import re

    from cluster.test_k8s_backend import REPO

    namespace = queued_cluster.new_namespace()
    admin = queued_cluster.api_client()
    guide = (REPO / "docs" / "admin-guide.md").read_text()
    section = guide[guide.index("### Workload modes and queues") : guide.index("## Zero to JupyterHub")]
    docs = [yaml.safe_load(block.replace("<jobs namespace>", namespace)) for block in re.findall(r"```yaml\n(.*?)```", section, re.S)]
    assert [d["kind"] for d in docs] == ["ResourceFlavor", "ClusterQueue", "LocalQueue"]
    custom = client.CustomObjectsApi(admin)
    for doc in docs:
        doc["metadata"]["name"] = f"recipe-{doc['metadata']['name']}"
    docs[1]["spec"]["resourceGroups"][0]["flavors"][0]["name"] = docs[0]["metadata"]["name"]
    docs[2]["spec"]["clusterQueue"] = docs[1]["metadata"]["name"]
    custom.create_cluster_custom_object(*KUEUE, "resourceflavors", docs[0])
    custom.create_cluster_custom_object(*KUEUE, "clusterqueues", docs[1])
    custom.create_namespaced_custom_object(*KUEUE, namespace, "localqueues", docs[2])

    def active() -> bool:
        found = cast(dict[str, Any], custom.get_cluster_custom_object(*KUEUE, "clusterqueues", docs[1]["metadata"]["name"]))
        return any(c["type"] == "Active" and c["status"] == "True" for c in (found.get("status") or {}).get("conditions") or [])

    deadline = time.monotonic() + 30
    while not active():
        assert time.monotonic() < deadline, "the recipe's ClusterQueue never became Active"
        time.sleep(0.1)
