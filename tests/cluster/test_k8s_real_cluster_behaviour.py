"""Contract tests only a real control plane can judge: what the Job controller, the garbage
collector, admission, the TTL controller and RBAC's escalation check do to the backend's jobs.

Where the backend is wrong today the test says what users should see and is marked
``xfail(strict=True)`` with the defect named; the fix lands with the Kubernetes-correctness issue
("Kubernetes backend correct on real clusters") and flips the mark.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import yaml
from kubernetes import client
from support.controlplane import IGNORES_SIGTERM
from support.waiting import eventually as eventually_sync

from cluster.k8s_objects import meta, present
from cluster.test_k8s_backend import (
    MASTER,
    NOTEBOOK_ROLE,
    _async,
    _where,
    backend_for,
    deploy_docs,
    eventually,
    master_env,
    master_running,
    obj,
    objects_of,
    pod_of,
    replica,
    run,
    running,
    spec,
    workspace,
)
from paddle_nbext.model.spec import SpecError
from paddle_nbext.model.status import JobStatus
from paddle_nbext_server.backends.base import SubmitRequest
from paddle_nbext_server.errors import BackendUnavailable, InvalidRequest, InvalidState, JobExists, JobNotFound
from paddle_nbext_server.runtime import cluster_master

if TYPE_CHECKING:
    from cluster.conftest import Cluster

pytestmark = pytest.mark.cluster

CORRECTNESS = "Kubernetes-correctness issue"


def _patch_annotation(admin: client.ApiClient, namespace: str, pod: str, key: str) -> None:
    client.CoreV1Api(admin).patch_namespaced_pod(pod, namespace, {"metadata": {"annotations": {key: "true"}}})


def test_a_trainer_pod_deleted_mid_run_fails_the_job_naming_it(cluster: Cluster, tmp_path: Path) -> None:
    namespace, kubeconfig, admin, home = workspace(cluster, tmp_path)

    async def scenario() -> None:
        async with running(kubeconfig, namespace, home) as backend:
            await backend.submit(SubmitRequest(spec("gone", pservers=1, trainers=1), "alice", home))
            cluster.await_job_pods(namespace)
            for role in ("pserver", "trainer"):
                cluster.set_pod_status(namespace, pod_of(admin, namespace, "gone", role, 0), "Running")
            await eventually(lambda: _where(backend, "gone", lambda s: s.phase == "Running"), "Running")
            client.CoreV1Api(admin).delete_namespaced_pod(pod_of(admin, namespace, "gone", "trainer", 0), namespace)
            failed = await eventually(lambda: _where(backend, "gone", lambda s: s.phase == "Failed"), "Failed")
            assert failed.message.startswith("trainer 0")

    run(scenario())


def test_an_evicted_trainer_restarts_the_whole_job_without_using_the_retry_budget(cluster: Cluster, tmp_path: Path) -> None:
    """The Eviction API (a drain) on the only trainer of a job with max_restarts=0: its Job fails
    by the DisruptionTarget rule, the master restarts the job as attempt 1, and the eviction
    is counted apart, so the job is not failed for it."""
    namespace, kubeconfig, admin, home = workspace(cluster, tmp_path)

    async def scenario() -> None:
        async with running(kubeconfig, namespace, home) as backend:
            await backend.submit(SubmitRequest(spec("moved", mode="collective", pservers=0, trainers=1), "alice", home))
            stack.enter_context(master_running(cluster, namespace, tmp_path, "moved"))
            cluster.await_job_pods(namespace)
            first = pod_of(admin, namespace, "moved", "trainer", 0)
            cluster.set_pod_status(namespace, first, "Running")
            await eventually(lambda: _where(backend, "moved", lambda s: s.phase == "Running"), "Running")
            cluster.evict(namespace, first)

            def restarted() -> bool:
                selector = f"paddle-nbext/job={obj('moved')},paddle-nbext/attempt=1"
                return bool(client.CoreV1Api(admin).list_namespaced_pod(namespace, label_selector=selector).items)

            await eventually(lambda: _async(restarted), "the job made again as attempt 1")
            status = await eventually(
                lambda: _where(backend, "moved", lambda s: replica(s, "trainer", 0).restarts == 1), "the restart counted"
            )
            assert status.phase in ("Pending", "Running"), status.message

    with contextlib.ExitStack() as stack:
        run(scenario())


def test_a_quota_that_refuses_the_trainer_pods_says_so(cluster: Cluster, tmp_path: Path) -> None:
    """A `pods` quota other pods already hold most of: the job (4 pods) is within its limit, so it
    is submitted and waits ("waits", not "never"), and the pods the Job controller cannot create
    say why in the quota's own words."""
    namespace, kubeconfig, admin, home = workspace(cluster, tmp_path)
    core = client.CoreV1Api(admin)
    # 4 pods at most, 2 held: of the job's 4 (master, pserver, 2 trainers) two are refused, so at
    # least one replica, whichever the Job controller creates first.
    core.create_namespaced_resource_quota(
        namespace, client.V1ResourceQuota.model_validate({"metadata": {"name": "team"}, "spec": {"hard": {"pods": "4"}}})
    )
    # Once the quota controller has taken the quota up (its status has `hard`), admission charges
    # each pod to it as the pod is made; before that a pod may go uncounted until a resync.
    eventually_sync(
        lambda: (present(core.read_namespaced_resource_quota("team", namespace).status, "status").hard or {}).get("pods") == "4",
        "the quota in force",
    )
    for index in range(2):  # pods of someone else's, never placed (no node has the label), counted all the same
        core.create_namespaced_pod(
            namespace,
            client.V1Pod.model_validate(
                {
                    "metadata": {"name": f"filler-{index}"},
                    "spec": {"nodeSelector": {"nowhere": "true"}, "containers": [{"name": "main", "image": "registry.local/none:1"}]},
                }
            ),
        )

    def counted() -> bool:
        used = (present(core.read_namespaced_resource_quota("team", namespace).status, "status").used or {}).get("pods")
        return used == "2"

    eventually_sync(counted, "the quota controller to count the two pods")

    async def scenario() -> None:
        async with running(kubeconfig, namespace, home) as backend:
            await backend.submit(SubmitRequest(spec("squeezed", pservers=1, trainers=2), "alice", home))

            def refused_in_words(status: JobStatus) -> bool:
                refused = [r for r in status.replicas if (r.reason or "").startswith("FailedCreate: ")]
                return (
                    "exceeded quota" in status.message
                    and bool(refused)
                    and all("exceeded quota: team" in present(r.reason, "reason") for r in refused)
                )

            status = await eventually(lambda: _where(backend, "squeezed", refused_in_words), "the quota refusal in the job's words")
            assert status.phase == "Pending"

    run(scenario())


def test_a_resubmit_while_the_deleted_jobs_pods_still_terminate(cluster: Cluster, tmp_path: Path) -> None:
    namespace, kubeconfig, admin, home = workspace(cluster, tmp_path)

    async def scenario() -> None:
        async with running(kubeconfig, namespace, home, resubmit_wait=2) as backend:
            await backend.submit(SubmitRequest(spec("again", mode="collective", pservers=0, trainers=1), "alice", home))
            cluster.await_job_pods(namespace)
            old = pod_of(admin, namespace, "again", "trainer", 0)
            _patch_annotation(admin, namespace, old, IGNORES_SIGTERM)  # stays Terminating for its grace period
            cluster.set_pod_status(namespace, old, "Running")
            await eventually(lambda: _where(backend, "again", lambda s: s.phase == "Running"), "Running")
            await backend.delete("again", "alice")
            with pytest.raises(JobExists, match=r"was just deleted and 1 of its pods are still stopping") as busy:
                await backend.submit(SubmitRequest(spec("again", mode="collective", pservers=0, trainers=1), "alice", home))
            assert busy.value.field == "job_name"
            await eventually(
                lambda: _async(lambda: meta(client.CoreV1Api(admin).read_namespaced_pod(old, namespace)).deletion_timestamp),
                "the garbage collector deleting the old pod",
            )
            # the old pod is killed at last (its grace period cut short, as `kubectl delete --force` does)
            client.CoreV1Api(admin).delete_namespaced_pod(old, namespace, grace_period_seconds=0)
            await eventually(
                lambda: _async(lambda: old not in backend.view.pods_by_job.get(obj("again"), {})), "the old pod out of the cache"
            )
            created = await backend.submit(SubmitRequest(spec("again", mode="collective", pservers=0, trainers=1), "alice", home))
            assert created["phase"] == "Pending"
            cluster.await_job_pods(namespace)
            fresh = pod_of(admin, namespace, "again", "trainer", 0)
            assert fresh != old
            cluster.set_pod_status(namespace, fresh, "Running")
            status = await eventually(lambda: _where(backend, "again", lambda s: s.phase == "Running"), "the new job Running")
            assert replica(status, "trainer", 0).restarts == 0

    run(scenario())


def test_a_job_name_a_service_cannot_carry_is_refused_before_anything_is_written(cluster: Cluster, tmp_path: Path) -> None:
    """A leading digit is a valid Job name but not a DNS-1035 Service name (clusters without
    relaxed Service name validation refuse it; this one, 1.37, has it): refused up front."""
    namespace, _, admin, _ = workspace(cluster, tmp_path)
    with pytest.raises(SpecError) as error:
        spec("1mnist")
    assert error.value.field == "job_name" and "starting with a letter" in error.value.message
    assert objects_of(admin, namespace, "1mnist") == set()


def test_a_service_the_api_server_refuses_mid_submit_is_a_4xx_and_nothing_is_left(cluster: Cluster, tmp_path: Path) -> None:
    """The API server's own admission (a ValidatingAdmissionPolicy, as a platform team's naming
    rules are) refuses the Service after the record exists: the backend answers with Kubernetes'
    words and rolls the record back."""
    namespace, kubeconfig, admin, home = workspace(cluster, tmp_path)
    registration = client.AdmissionregistrationV1Api(admin)
    policy = f"pnb-service-names-{namespace}"
    registration.create_validating_admission_policy(
        client.V1ValidatingAdmissionPolicy.model_validate(
            {
                "metadata": {"name": policy},
                "spec": {
                    "failurePolicy": "Fail",
                    "matchConstraints": {
                        "resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["services"]}]
                    },
                    "validations": [
                        {
                            "expression": "!object.metadata.name.startsWith('legacy-')",
                            "reason": "Invalid",
                            "message": "Service names starting with legacy- are reserved",
                        }
                    ],
                },
            }
        )
    )
    registration.create_validating_admission_policy_binding(
        client.V1ValidatingAdmissionPolicyBinding.model_validate(
            {
                "metadata": {"name": policy},
                "spec": {
                    "policyName": policy,
                    "validationActions": ["Deny"],
                    "matchResources": {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}}},
                },
            }
        )
    )
    try:

        async def scenario() -> None:
            async with running(kubeconfig, namespace, home) as backend:
                await eventually(lambda: _async(lambda: _refused(admin, namespace)), "the policy to be in force")
                with pytest.raises(InvalidRequest) as error:
                    await backend.submit(SubmitRequest(spec("legacy-mnist"), "alice", home))
                assert f"creating Service {obj('legacy-mnist')} failed" in error.value.message
                assert "Service names starting with legacy- are reserved" in error.value.message

        run(scenario())
        assert objects_of(admin, namespace, "legacy-mnist") == set()
        assert not (home / ".paddle-jobs" / "legacy-mnist").exists()
    finally:
        registration.delete_validating_admission_policy_binding(policy)
        registration.delete_validating_admission_policy(policy)


def _refused(admin: client.ApiClient, namespace: str) -> bool:
    """The policy is enforced once a dry-run create of a `legacy-` Service is refused."""
    try:
        client.CoreV1Api(admin).create_namespaced_service(
            namespace, client.V1Service.model_validate({"metadata": {"name": "legacy-probe"}, "spec": {"clusterIP": "None"}}), dry_run="All"
        )
    except client.ApiException as error:
        return bool(error.status == 422)
    return False


def test_ttl_after_finished_removes_the_jobs_and_the_record_keeps_the_outcome(cluster: Cluster, tmp_path: Path) -> None:
    namespace, kubeconfig, admin, home = workspace(cluster, tmp_path)
    batch = client.BatchV1Api(admin)

    async def scenario() -> None:
        async with running(kubeconfig, namespace, home, ttl_seconds_after_finished=1) as backend:
            await backend.submit(SubmitRequest(spec("brief", pservers=1, trainers=1), "alice", home))
            cluster.await_job_pods(namespace)
            cluster.set_pod_status(namespace, pod_of(admin, namespace, "brief", "pserver", 0), "Running")
            cluster.set_pod_status(namespace, pod_of(admin, namespace, "brief", "trainer", 0), "Succeeded")
            await eventually(lambda: _where(backend, "brief", lambda s: s.phase == "Succeeded"), "Succeeded")
            await eventually(
                lambda: _async(lambda: not batch.list_namespaced_job(namespace, label_selector=f"paddle-nbext/job={obj('brief')}").items),
                "the TTL controller to delete every Job of the job (trainers, pservers, master)",
            )
            status = await backend.get_job("brief", "alice")
            assert status.phase == "Succeeded" and status.message == "All 1 trainer finished successfully."

    run(scenario())


def _combined(*roles: dict[str, Any]) -> dict[str, Any]:
    return {"rules": [rule for role in roles for rule in role["rules"]]}


PER_JOB_MASTER_ROLE = next(d for d in deploy_docs("per-job-master-role.yaml") if d["kind"] == "Role")


def test_a_per_job_master_role_passes_the_escalation_check_under_the_shipped_roles(cluster: Cluster, tmp_path: Path) -> None:
    """The notebook creates `<job>-master` Role itself: RBAC lets it only grant what it holds."""
    namespace, kubeconfig, admin, home = workspace(cluster, tmp_path, _combined(NOTEBOOK_ROLE, PER_JOB_MASTER_ROLE))

    async def scenario() -> None:
        async with running(kubeconfig, namespace, home, master_service_account_name="") as backend:
            await backend.submit(SubmitRequest(spec("owned"), "alice", home))

    run(scenario())
    role = client.RbacAuthorizationV1Api(admin).read_namespaced_role(obj("owned") + "-master", namespace)
    assert {obj("owned")} == {
        name
        for rule in present(role.rules, "rules")
        if "configmaps" in present(rule.resources, "resources")
        for name in present(rule.resource_names, "resourceNames")
    }
    master = client.BatchV1Api(admin).read_namespaced_job(obj("owned") + "-master", namespace)
    assert present(present(master.spec, "spec").template.spec, "template.spec").service_account_name == obj("owned") + "-master"


def test_a_per_job_master_role_granting_more_than_the_notebook_holds_is_refused(cluster: Cluster, tmp_path: Path) -> None:
    without_get = _combined(NOTEBOOK_ROLE, {"rules": [r for r in PER_JOB_MASTER_ROLE["rules"] if "configmaps" not in r["resources"]]})
    namespace, kubeconfig, admin, home = workspace(cluster, tmp_path, without_get)

    async def scenario() -> None:
        async with running(kubeconfig, namespace, home, master_service_account_name="") as backend:
            with pytest.raises(BackendUnavailable, match=f"creating Role {obj('escalated')}-master was forbidden by RBAC") as error:
                await backend.submit(SubmitRequest(spec("escalated"), "alice", home))
            assert "escalat" in error.value.message  # the API server's own words: "attempting to grant RBAC permissions not currently held"

    run(scenario())
    assert objects_of(admin, namespace, "escalated") == set()
    assert not (home / ".paddle-jobs" / "escalated").exists()


def test_a_role_deployed_before_events_were_read_still_works_without_their_reasons(cluster: Cluster, tmp_path: Path) -> None:
    older = {"rules": [r for r in NOTEBOOK_ROLE["rules"] if "events" not in r["resources"]]}
    namespace, kubeconfig, admin, home = workspace(cluster, tmp_path, older)

    async def scenario() -> None:
        async with running(kubeconfig, namespace, home) as backend:
            await backend.submit(SubmitRequest(spec("plain", mode="collective", pservers=0, trainers=1), "alice", home))
            cluster.await_job_pods(namespace)
            cluster.set_pod_status(namespace, pod_of(admin, namespace, "plain", "trainer", 0), "Running")
            await eventually(lambda: _where(backend, "plain", lambda s: s.phase == "Running"), "Running")
            assert [j.name for j in await backend.list_jobs("alice")] == ["plain"]

    run(scenario())


def test_the_master_evicted_mid_job_exits_non_zero_so_kubernetes_runs_it_again(cluster: Cluster, tmp_path: Path) -> None:
    """SIGTERM (eviction, drain, preemption) must not complete the master's Job: exit 143."""
    namespace, kubeconfig, admin, home = workspace(cluster, tmp_path)
    env = master_env(cluster, namespace, tmp_path, "watched")

    async def submit() -> None:
        async with running(kubeconfig, namespace, home) as backend:
            await backend.submit(SubmitRequest(spec("watched", mode="collective", pservers=0, trainers=1), "alice", home))

    run(submit())
    master = subprocess.Popen([sys.executable, str(MASTER)], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        assert "watching job watched" in (master.stdout.readline() if master.stdout else "")
        master.send_signal(signal.SIGTERM)
        assert master.wait(timeout=30) == 143
    finally:
        master.kill()
        master.communicate(timeout=30)
    record = client.CoreV1Api(admin).read_namespaced_config_map(obj("watched"), namespace)
    assert "paddle-nbext/status" not in (meta(record).annotations or {})


def test_no_token_reaches_the_objects_the_responses_the_logs_or_the_replicas(
    cluster: Cluster, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    namespace, kubeconfig, admin, home = workspace(cluster, tmp_path)
    token = yaml.safe_load(Path(kubeconfig).read_text())["users"][0]["user"]["token"]
    seen: list[str] = []

    async def scenario() -> None:
        async with running(kubeconfig, namespace, home) as backend:
            seen.append(json.dumps(await backend.submit(SubmitRequest(spec("quiet"), "alice", home), dry_run=True)))
            seen.append(json.dumps(await backend.submit(SubmitRequest(spec("quiet"), "alice", home))))
            cluster.await_job_pods(namespace)
            seen.append(json.dumps((await backend.get_job("quiet", "alice")).to_dict()))

    with caplog.at_level("DEBUG"):
        run(scenario())
    core, batch = client.CoreV1Api(admin), client.BatchV1Api(admin)
    for listed in (
        core.list_namespaced_config_map(namespace),
        batch.list_namespaced_job(namespace),
        core.list_namespaced_pod(namespace),
        core.list_namespaced_service(namespace),
    ):
        seen.append(json.dumps(admin.sanitize_for_serialization(listed)))
    seen.append(caplog.text)
    assert all(token not in text for text in seen)
    assert all(text.count("eyJ") == 0 for text in seen[:3])  # no JWT of any kind in what users get back
    for pod in core.list_namespaced_pod(namespace, label_selector=f"paddle-nbext/job={obj('quiet')}").items:
        if present(meta(pod).labels, "labels")["paddle-nbext/role"] in ("pserver", "trainer"):
            pod_spec = present(pod.spec, "spec")
            assert pod_spec.automount_service_account_token is False  # user code gets no API credential
            assert not [
                v
                for v in present(pod_spec.volumes, "volumes")
                if v.projected and any(s.service_account_token for s in present(v.projected.sources, "sources"))
            ]


def test_a_late_succeeded_never_overwrites_cancelled(cluster: Cluster, tmp_path: Path) -> None:
    """The master (or the server) decided "Succeeded" on the record as it was before a cancel:
    its write carries that resourceVersion, so the API refuses it and the job stays Cancelled."""
    namespace, kubeconfig, admin, home = workspace(cluster, tmp_path)
    env = master_env(cluster, namespace, tmp_path, "raced")
    core = client.CoreV1Api(admin)

    async def scenario() -> None:
        async with running(kubeconfig, namespace, home) as backend:
            await backend.submit(SubmitRequest(spec("raced", mode="collective", pservers=0, trainers=1), "alice", home))
            cluster.await_job_pods(namespace)
            cluster.set_pod_status(namespace, pod_of(admin, namespace, "raced", "trainer", 0), "Running")
            await eventually(lambda: _where(backend, "raced", lambda s: s.phase == "Running"), "Running")
            before = admin.sanitize_for_serialization(core.read_namespaced_config_map(obj("raced"), namespace))
            assert (await backend.cancel("raced", "alice")).phase == "Cancelled"
            late = {"phase": "Succeeded", "message": "All 1 trainer finished successfully.", "replicas": []}
            assert await backend.reconciler.record_final(obj("raced"), late, before) is False  # the server's own late end
            api = cluster_master.Api(
                env["PADDLE_NBEXT_KUBE_API"], env["PADDLE_NBEXT_KUBE_TOKEN_FILE"], env.get("PADDLE_NBEXT_KUBE_CA_FILE"), False, namespace
            )
            with pytest.raises(cluster_master.ApiError) as refused:  # the master's late end
                api.record_final(obj("raced"), late, before["metadata"]["resourceVersion"])
            assert refused.value.status == 409
            assert (await backend.get_job("raced", "alice")).phase == "Cancelled"

    run(scenario())
    final = json.loads(
        present(meta(core.read_namespaced_config_map(obj("raced"), namespace)).annotations, "annotations")["paddle-nbext/status"]
    )
    assert final["phase"] == "Cancelled"


def test_a_read_write_once_home_pins_the_job_to_the_notebooks_node(cluster: Cluster, tmp_path: Path) -> None:
    """Zero to JupyterHub's default home is a ReadWriteOnce claim: only pods on the notebook's
    node can mount it, so the job's pods are scheduled there."""
    namespace, kubeconfig, admin, home = workspace(cluster, tmp_path)
    core = client.CoreV1Api(admin)
    core.create_namespaced_persistent_volume_claim(
        namespace,
        client.V1PersistentVolumeClaim.model_validate(
            {
                "metadata": {"name": "claim-rwo"},
                "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "", "resources": {"requests": {"storage": "1Gi"}}},
            }
        ),
    )
    core.create_namespaced_pod(
        namespace,
        client.V1Pod.model_validate(
            {
                "metadata": {"name": "jupyter-alice"},
                "spec": {
                    "nodeName": "kwok-cpu-1",
                    "containers": [{"name": "notebook", "image": "jupyter", "volumeMounts": [{"name": "home", "mountPath": str(home)}]}],
                    "volumes": [{"name": "home", "persistentVolumeClaim": {"claimName": "claim-rwo"}}],
                },
            }
        ),
    )

    async def scenario() -> None:
        async with running(kubeconfig, namespace, home, home_volume="auto", pod_name="jupyter-alice") as backend:
            await backend.submit(SubmitRequest(spec("pinned", mode="collective", pservers=0, trainers=2), "alice", home))

    run(scenario())
    cluster.await_job_pods(namespace)  # the Job controller makes the pods after the submit returns
    for index in (0, 1):
        pod = core.read_namespaced_pod(pod_of(admin, namespace, "pinned", "trainer", index), namespace)
        assert present(pod.spec, "spec").node_selector == {"kubernetes.io/hostname": "kwok-cpu-1"}


def test_api_warnings_are_logged_and_shown_to_the_admin(cluster: Cluster, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A deprecated field in what the admin configured (here a node selector on a beta node label,
    deprecated since 1.14): the API server says so in a Warning header, which the admin sees in
    the log and in GET /config."""
    namespace, kubeconfig, _, home = workspace(cluster, tmp_path)

    async def scenario() -> None:
        async with running(kubeconfig, namespace, home, node_selector={"beta.kubernetes.io/os": "linux"}) as backend:
            await backend.submit(SubmitRequest(spec("old-label"), "alice", home))
            warnings = backend.describe().get("api_warnings") or []
            assert any("beta.kubernetes.io/os" in w and w.startswith("Job old-label-") for w in warnings), warnings

    with caplog.at_level("WARNING"):
        run(scenario())
    assert "the Kubernetes API warns" in caplog.text and "beta.kubernetes.io/os" in caplog.text


def test_an_in_tree_cephfs_home_is_refused_on_a_cluster_that_cannot_mount_it(cluster: Cluster, tmp_path: Path) -> None:
    """home_volume 'cephfs' emits the in-tree cephfs volume, which Kubernetes removed in 1.31: on
    this 1.37 API server the backend says so at start (GET /config) and refuses the submit with
    the recipe that works, before anything is written."""
    namespace, kubeconfig, admin, home = workspace(cluster, tmp_path)
    cephfs = {"monitors": ["ceph-mon.invalid:6789"], "path": "/volumes/{username}", "user": "jupyter", "secret_ref": "ceph-secret"}

    async def scenario() -> None:
        async with running(kubeconfig, namespace, home, home_volume="cephfs", cephfs=cephfs) as backend:
            described = backend.describe()
            assert described["ok"] is False, described
            assert "removed in 1.31" in described["error"] and "ceph-csi" in described["error"], described
            with pytest.raises(BackendUnavailable) as refused:
                await backend.submit(SubmitRequest(spec("old-ceph"), "alice", home))
            message = refused.value.message
            assert message.startswith("home_volume 'cephfs' is the in-tree cephfs volume, which Kubernetes removed in 1.31;"), message
            assert "this cluster runs v1.37.2" in message and "home_volume = 'pvc'" in message, message
            assert objects_of(admin, namespace, "old-ceph") == set()
            assert not (home / ".paddle-jobs" / "old-ceph").exists()

    run(scenario())


def test_a_home_the_kubelet_cannot_mount_is_the_replicas_reason(cluster: Cluster, tmp_path: Path) -> None:
    namespace, kubeconfig, admin, home = workspace(cluster, tmp_path)

    async def scenario() -> None:
        async with running(kubeconfig, namespace, home) as backend:
            await backend.submit(SubmitRequest(spec("unmounted", mode="collective", pservers=0, trainers=1), "alice", home))
            cluster.await_job_pods(namespace)
            pod = pod_of(admin, namespace, "unmounted", "trainer", 0)
            cluster.set_pod_status(namespace, pod, "Pending")
            cluster.report_pod_event(
                namespace,
                pod,
                "FailedMount",
                'MountVolume.MountDevice failed for volume "home": rpc error: code = Internal desc = '
                "an error (exit status 32) occurred while running mount",
            )
            status = await eventually(
                lambda: _where(backend, "unmounted", lambda s: (replica(s, "trainer", 0).reason or "").startswith("FailedMount: ")),
                "FailedMount",
            )
            assert 'volume "home"' in present(replica(status, "trainer", 0).reason, "reason") and status.phase == "Pending"
            # The job says in words why it waits, quoting the kubelet (not a slow start).
            assert status.message == (
                'trainer 0 cannot start: the kubelet could not mount its volumes: MountVolume.MountDevice failed for volume "home": '
                "rpc error: code = Internal desc = an error (exit status 32) occurred while running mount"
            ), status.message

    run(scenario())


def test_a_failed_job_whose_pods_are_gone_fails_the_replica(cluster: Cluster, tmp_path: Path) -> None:
    """The server was away while a trainer's pod was deleted and removed: the Job controller
    failed the Job (no retries left), and that is what the replica shows, not a forever Pending."""
    namespace, kubeconfig, admin, home = workspace(cluster, tmp_path)
    batch, core = client.BatchV1Api(admin), client.CoreV1Api(admin)

    async def submit() -> None:
        async with running(kubeconfig, namespace, home) as backend:
            await backend.submit(SubmitRequest(spec("lost", mode="collective", pservers=0, trainers=1), "alice", home))

    run(submit())
    cluster.await_job_pods(namespace)
    pod = pod_of(admin, namespace, "lost", "trainer", 0)
    cluster.set_pod_status(namespace, pod, "Running")
    core.delete_namespaced_pod(pod, namespace)

    def failed_and_gone() -> bool:
        conditions = present(batch.read_namespaced_job_status(obj("lost") + "-trainer", namespace).status, "status").conditions or []
        pods = core.list_namespaced_pod(namespace, label_selector=f"paddle-nbext/job={obj('lost')},paddle-nbext/role=trainer").items
        return any(c.type == "Failed" and c.status == "True" for c in conditions) and not pods

    run(eventually(lambda: _async(failed_and_gone), "the Job to fail and its pod to be removed"))

    async def later() -> None:
        async with running(kubeconfig, namespace, home) as backend:
            status = await eventually(lambda: _where(backend, "lost", lambda s: s.phase == "Failed"), "Failed")
            assert status.message.startswith("trainer 0 failed with BackoffLimitExceeded")

    run(later())


def test_a_file_the_delete_cannot_remove_is_reported_not_ignored(cluster: Cluster, tmp_path: Path) -> None:
    """A job pod that ran as another user can leave files the notebook's user cannot remove
    (made immutable here, which stops even root): delete says so, with the path."""
    namespace, kubeconfig, _, home = workspace(cluster, tmp_path)
    stuck = home / ".paddle-jobs" / "sticky" / "package" / "checkpoint.pdparams"

    async def scenario() -> None:
        backend = backend_for(kubeconfig, namespace, home)
        await backend.start()
        try:
            await backend.submit(SubmitRequest(spec("sticky", mode="collective", pservers=0, trainers=1), "alice", home))
            stuck.write_bytes(b"weights")
            await asyncio.to_thread(subprocess.run, ["chattr", "+i", str(stuck)], check=True)
            with pytest.raises(InvalidState) as error:
                await backend.delete("sticky", "alice")
            assert "job 'sticky' is deleted, but 1 of its files" in error.value.message
            assert str(stuck) in error.value.message and "PermissionError" in error.value.message
            with pytest.raises(JobNotFound):
                await backend.get_job("sticky", "alice")
        finally:
            await asyncio.to_thread(subprocess.run, ["chattr", "-i", str(stuck)], check=False)
            await backend.stop()

    run(scenario())
