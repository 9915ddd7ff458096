"""Volcano as the gang scheduler (`gang_scheduler='volcano'`) on the real control plane.

Volcano's PodGroup CRD is generated from the pinned Volcano API module (volcano.sh/apis, by
controller-gen at the release Volcano's own Makefile uses: support.controlplane.build's
GANG_COMPONENTS) and installed for the test; the API server then judges every PodGroup we send
against Volcano's schema.  No Volcano scheduler runs here, so the replica pods must stay
Pending and unbound (the default scheduler leaves pods that name another scheduler alone) while
the master, which keeps the default scheduler, is bound; the words Volcano's scheduler would
write on the PodGroup are written by the test, as the suite plays the kubelet for pods.  The
backend runs under the shipped Roles (deploy/rbac/notebook-role.yaml plus
notebook-role-volcano.yaml).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import pytest
import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException
from support.controlplane.build import ASSETS, GANG_COMPONENTS, binary_dir, build

from cluster.k8s_objects import meta, present
from cluster.test_k8s_backend import (
    NOTEBOOK_ROLE,
    _async,
    _where,
    deploy_docs,
    eventually,
    obj,
    replica,
    run,
    running,
    spec,
    without_verb,
)
from cluster.test_k8s_queued import queued_workspace
from paddle_nbext_server.backends.base import SubmitRequest
from paddle_nbext_server.errors import BackendUnavailable

if TYPE_CHECKING:
    from cluster.conftest import Cluster

pytestmark = pytest.mark.cluster

PODGROUPS = ("scheduling.volcano.sh", "v1beta1")
VOLCANO_ROLE = next(d for d in deploy_docs("notebook-role-volcano.yaml") if d["kind"] == "Role")
ROLE = {**NOTEBOOK_ROLE, "rules": NOTEBOOK_ROLE["rules"] + VOLCANO_ROLE["rules"]}
PRIORITY = "paddle-nbext-test-batch"
TRAITS: dict[str, Any] = {"gang_scheduler": "volcano", "default_queue": "research", "priority_class_name": PRIORITY}


def podgroup_crd() -> dict[str, Any]:
    """Volcano's PodGroup CRD, generated (once, into the control plane's build cache) from the pinned module."""
    build(components=GANG_COMPONENTS, log=False)
    path = binary_dir(GANG_COMPONENTS[0]) / ASSETS / "bases" / "scheduling.volcano.sh_podgroups.yaml"
    crd: dict[str, Any] = yaml.safe_load(path.read_text())
    return crd


def _crd_gone(extensions: client.ApiextensionsV1Api, name: str) -> bool:
    try:
        extensions.read_custom_resource_definition(name)
    except ApiException as error:
        if error.status == 404:
            return True
        raise
    return False


def _wait(check: Callable[[], bool], what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


@pytest.fixture
def podgroup_api(cluster: Cluster) -> Iterator[None]:
    """Volcano's PodGroup API served for the test (established), and the priority class the
    jobs name; both removed after it."""
    crd = podgroup_crd()
    extensions = client.ApiextensionsV1Api(cluster.api_client())
    name = crd["metadata"]["name"]
    extensions.create_custom_resource_definition(client.V1CustomResourceDefinition.model_validate(crd))

    def established() -> bool:
        conditions = present(extensions.read_custom_resource_definition(name).status, "status").conditions or []
        return any(c.type == "Established" and c.status == "True" for c in conditions)

    _wait(established, f"CRD {name} to be established")
    # The pods' priority class (the Priority admission plugin refuses pods naming a missing one).
    scheduling = client.SchedulingV1Api(cluster.api_client())
    scheduling.create_priority_class(client.V1PriorityClass(metadata=client.V1ObjectMeta(name=PRIORITY), value=100))
    try:
        yield
    finally:
        scheduling.delete_priority_class(PRIORITY)
        extensions.delete_custom_resource_definition(name)
        _wait(lambda: _crd_gone(extensions, name), f"CRD {name} to be removed")


def volcano_workspace(cluster: Cluster, tmp_path: Path, role: dict[str, Any] = ROLE) -> tuple[str, str, client.ApiClient, Path]:
    return queued_workspace(cluster, tmp_path, role)


def pod_group(admin: client.ApiClient, namespace: str, name: str) -> dict[str, Any] | None:
    try:
        found = cast(dict[str, Any], client.CustomObjectsApi(admin).get_namespaced_custom_object(*PODGROUPS, namespace, "podgroups", name))
    except ApiException as error:
        if error.status == 404:
            return None
        raise
    return found


def pods_by_role(admin: client.ApiClient, namespace: str, job: str) -> dict[str, list[client.V1Pod]]:
    found: dict[str, list[client.V1Pod]] = {}
    for pod in client.CoreV1Api(admin).list_namespaced_pod(namespace, label_selector=f"paddle-nbext/job={obj(job)}").items:
        found.setdefault(present(meta(pod).labels, "labels")["paddle-nbext/role"], []).append(pod)
    return found


def test_without_volcano_installed_config_and_submit_name_the_fix(cluster: Cluster, tmp_path: Path) -> None:
    namespace, kubeconfig, admin, home = volcano_workspace(cluster, tmp_path)

    async def scenario() -> None:
        async with running(kubeconfig, namespace, home, **TRAITS) as backend:
            described = backend.describe()
            assert described["gang_scheduler"] == "volcano" and described["volcano"]["podgroup_api"] is False, described
            assert described["ok"] is False and "install Volcano" in described["error"]
            with pytest.raises(BackendUnavailable) as refused:  # 503
                await backend.submit(SubmitRequest(spec("gang", pservers=1, trainers=2), "alice", home))
            assert "serves no PodGroup API (scheduling.volcano.sh/v1beta1)" in refused.value.message
            assert "c.KubernetesBackend.gang_scheduler" in refused.value.message
            assert not client.CoreV1Api(admin).list_namespaced_config_map(namespace, label_selector="paddle-nbext/job").items

    run(scenario())


def test_a_volcano_job_has_a_schema_valid_pod_group_and_waits_unscheduled_for_volcano(
    cluster: Cluster, tmp_path: Path, podgroup_api: None
) -> None:
    namespace, kubeconfig, admin, home = volcano_workspace(cluster, tmp_path)
    custom = client.CustomObjectsApi(admin)
    name = obj("gang")

    async def scenario() -> None:
        async with running(kubeconfig, namespace, home, **TRAITS) as backend:
            described = backend.describe()
            assert described["volcano"]["podgroup_api"] is True and described["ok"] is True, described

            # Volcano's schema, strictly: an unknown field is refused, so ours has none.
            dry = await backend.submit(SubmitRequest(spec("dry", pservers=1, trainers=2), "alice", home), dry_run=True)
            manifest = next(m for m in dry["plan"]["manifests"] if m["kind"] == "PodGroup")
            manifest["metadata"] = {k: v for k, v in manifest["metadata"].items() if k != "ownerReferences"}
            custom.create_namespaced_custom_object(*PODGROUPS, namespace, "podgroups", manifest, dry_run="All", field_validation="Strict")
            misspelled = {**manifest, "spec": {**manifest["spec"], "minMembers": 3}}
            with pytest.raises(ApiException) as strict:
                custom.create_namespaced_custom_object(
                    *PODGROUPS, namespace, "podgroups", misspelled, dry_run="All", field_validation="Strict"
                )
            assert strict.value.status in (400, 422) and "minMembers" in present(strict.value.body, "body")

            await backend.submit(
                SubmitRequest(spec("gang", pservers=1, trainers=2, pserver_cpu="500m", trainer_cpu="2", trainer_mem="2Gi"), "alice", home)
            )
            made = pod_group(admin, namespace, name)
            assert made is not None
            record = client.CoreV1Api(admin).read_namespaced_config_map(name, namespace)
            assert [(o["kind"], o["uid"]) for o in made["metadata"]["ownerReferences"]] == [("ConfigMap", meta(record).uid)]
            # What the API server stored is what we sent (nothing pruned), plus Volcano's defaults.
            assert made["spec"]["minMember"] == 3
            assert made["spec"]["minResources"] == {"cpu": "4500m", "memory": "5Gi"}  # 500m + 1Gi, 2 x (2, 2Gi)
            assert made["spec"]["queue"] == "research" and made["spec"]["priorityClassName"] == PRIORITY
            assert not backend.describe().get("api_warnings"), backend.describe()

            def all_pods() -> dict[str, list[client.V1Pod]]:
                found = pods_by_role(admin, namespace, "gang")
                masters = found.get("master", [])
                ready = len(found.get("pserver", [])) == 1 and len(found.get("trainer", [])) == 2
                return found if ready and masters and present(masters[0].spec, "spec").node_name else {}

            # The master keeps the default scheduler and is bound: the scheduler ran and left the gang alone.
            found = await eventually(lambda: _async(all_pods), "the gang's pods and the bound master")
            assert present(found["master"][0].spec, "spec").scheduler_name == "default-scheduler"
            for pod in found["pserver"] + found["trainer"]:
                assert present(pod.spec, "spec").scheduler_name == "volcano", meta(pod).name
                assert present(meta(pod).annotations, "annotations")["scheduling.k8s.io/group-name"] == name
                assert present(pod.spec, "spec").node_name is None and present(pod.status, "status").phase == "Pending", meta(pod).name
                assert not [c for c in present(pod.status, "status").conditions or [] if c.type == "PodScheduled"], meta(pod).name

            waiting = await eventually(
                lambda: _where(
                    backend,
                    "gang",
                    # the replica's words need its pod in the server's cache, a watch event behind the API
                    lambda s: (
                        s.message.startswith("Waiting for the volcano scheduler")
                        and (replica(s, "trainer", 1).reason or "").startswith("Waiting for the volcano scheduler")
                    ),
                ),
                "the gang's words",
            )
            assert waiting.phase == "Pending"
            assert waiting.message == (
                f"Waiting for the volcano scheduler to place all 3 replicas together (PodGroup {name}): "
                "no Volcano scheduler has looked at it yet (is Volcano running in the cluster?)."
            )
            assert present(replica(waiting, "trainer", 1).reason, "reason").startswith(
                "Waiting for the volcano scheduler: no Volcano scheduler"
            )

            # Volcano's scheduler writes where the gang stands on the PodGroup (no status subresource).
            message = "3/3 tasks in gang unschedulable: pod group is not ready, 3 Pending, 3 minAvailable; Pending: 3 Unschedulable"
            condition = {"type": "Unschedulable", "status": "True", "reason": "NotEnoughResources", "message": message}
            condition["lastTransitionTime"] = "2026-01-01T00:00:00Z"
            custom.patch_namespaced_custom_object(
                *PODGROUPS, namespace, "podgroups", name, {"status": {"phase": "Inqueue", "conditions": [condition]}}
            )
            words = await eventually(lambda: _where(backend, "gang", lambda s: message in s.message), "Volcano's words")
            assert replica(words, "pserver", 0).reason == f"Waiting for the volcano scheduler: {message}"

            cancelled = await backend.cancel("gang", "alice")
            assert cancelled.phase == "Cancelled"
            await eventually(lambda: _async(lambda: pod_group(admin, namespace, name) is None), "the cancelled job's PodGroup gone")
            assert (await backend.get_job("gang", "alice")).phase == "Cancelled"  # the record stays

            await backend.submit(SubmitRequest(spec("other", mode="collective", pservers=0, trainers=2), "alice", home))
            assert pod_group(admin, namespace, obj("other")) is not None
            await backend.delete("other", "alice")
            assert pod_group(admin, namespace, obj("other")) is None  # deleted with the job, not later by the collector

    run(scenario())


def test_a_submit_that_fails_half_way_removes_the_pod_group(cluster: Cluster, tmp_path: Path, podgroup_api: None) -> None:
    """The Role may create the PodGroup but no Job: the submit is refused and rolled back whole."""
    namespace, kubeconfig, admin, home = volcano_workspace(cluster, tmp_path, without_verb(ROLE, "jobs", "create"))

    async def scenario() -> None:
        async with running(kubeconfig, namespace, home, **TRAITS) as backend:
            with pytest.raises(BackendUnavailable) as refused:
                await backend.submit(SubmitRequest(spec("half", pservers=1, trainers=1), "alice", home))
            assert "forbidden by RBAC" in refused.value.message
            left = cast(dict[str, Any], client.CustomObjectsApi(admin).list_namespaced_custom_object(*PODGROUPS, namespace, "podgroups"))[
                "items"
            ]
            assert left == []
            assert not client.CoreV1Api(admin).list_namespaced_config_map(namespace, label_selector="paddle-nbext/job").items

    run(scenario())
