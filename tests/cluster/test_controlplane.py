"""The suite's own control plane, checked through the official client: what the contract tests
rely on really happens (controllers, scheduler, kubelet reports, logs, faults), and the command
that provides it starts, fails and stops cleanly.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import pytest
import urllib3
from kubernetes import client
from kubernetes.client.exceptions import ApiException
from support.controlplane import IGNORES_SIGTERM, ControlPlane, ControlPlaneError, find_binaries, port_open
from support.waiting import eventually

from cluster.k8s_objects import meta, name_of, present

if TYPE_CHECKING:
    from cluster.conftest import Cluster

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(180)]

T = TypeVar("T")


def status_of(exc: ApiException) -> dict[str, Any]:
    body: dict[str, Any] = json.loads(present(exc.body, "body"))
    return body


def indexed_job(name: str, completions: int, **spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "spec": {
            "completionMode": "Indexed",
            "completions": completions,
            "parallelism": completions,
            "backoffLimit": 1,
            **spec,
            "template": {
                "metadata": {"labels": {"job": name}},
                "spec": {"restartPolicy": "Never", "subdomain": "svc", "containers": [{"name": "main", "image": "paddle:3.0.0"}]},
            },
        },
    }


def live_pods(v1: client.CoreV1Api, ns: str, selector: str) -> list[client.V1Pod]:
    return sorted(
        (p for p in v1.list_namespaced_pod(ns, label_selector=selector).items if not meta(p).deletion_timestamp),
        key=lambda p: name_of(p),
    )


def container_state(pod: client.V1Pod) -> client.V1ContainerState:
    """The state of the pod's (first) container, as its kubelet reported it."""
    return present(present(present(pod.status, "status").container_statuses, "containerStatuses")[0].state, "state")


# --------------------------------------------------------------------------- the command itself


def test_start_and_stop_leave_no_process_and_free_every_port(tmp_path: Path) -> None:
    plane = ControlPlane(tmp_path / "plane").start()
    try:
        pids = {name: process.pid for name, process in plane.processes.items()}
        assert set(pids) == {"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok"}
        api = client.CoreV1Api(client.ApiClient(_config(plane)))
        nodes = {name_of(n): n for n in api.list_node().items}
        assert set(nodes) == {"kwok-cpu-0", "kwok-cpu-1", "kwok-gpu-0"}
        assert present(present(nodes["kwok-gpu-0"].status, "status").allocatable, "allocatable")["nvidia.com/gpu"] == "8"
        assert all(
            c.status == "True"
            for n in nodes.values()
            for c in present(present(n.status, "status").conditions, "conditions")
            if c.type == "Ready"
        )
        assert json.loads((plane.state_dir / "state.json").read_text())["server"] == plane.server
        ports = [plane.ports.etcd, plane.ports.apiserver, plane.ports.controller_manager, plane.ports.scheduler, plane.ports.kwok]
        assert all(port_open(p) for p in ports)
    finally:
        plane.stop()
    assert not [p for p in ports if port_open(p)]
    assert not [
        name
        for name, pid in pids.items()
        if pid and Path(f"/proc/{pid}").exists() and "Z" not in Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    ]


def test_a_component_that_cannot_start_is_named_with_its_log_and_nothing_is_left(tmp_path: Path) -> None:
    binaries = find_binaries()
    assert binaries is not None, "the control plane is not built: bash scripts/controlplane.sh build"
    broken = tmp_path / "kube-apiserver"
    broken.write_text('#!/bin/sh\necho \'E1201 run.go:72] "command failed" err="no such flag"\' >&2\nexit 1\n')
    broken.chmod(broken.stat().st_mode | stat.S_IXUSR)
    plane = ControlPlane(tmp_path / "plane", binaries={**binaries, "kube-apiserver": broken})
    with pytest.raises(ControlPlaneError) as error:
        plane.start()
    message = str(error.value)
    assert "kube-apiserver exited with code 1" in message and "no such flag" in message
    assert str(tmp_path / "plane" / "logs" / "kube-apiserver.log") in message
    assert plane.processes == {} and not port_open(plane.ports.etcd)  # etcd, already up, was stopped


def test_without_built_binaries_it_says_how_to_build(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PADDLE_NBEXT_CONTROLPLANE_CACHE", str(tmp_path / "empty-cache"))
    with pytest.raises(ControlPlaneError, match=r"no control plane: .*bash scripts/controlplane.sh build"):
        ControlPlane(tmp_path / "plane")


def _config(plane: ControlPlane) -> client.Configuration:
    from kubernetes import config

    configuration = client.Configuration()
    config.load_kube_config(config_file=str(plane.admin_kubeconfig), client_configuration=configuration)
    return configuration


# --------------------------------------------------------------------------- what the suite relies on


def test_job_controller_scheduler_and_kubelet_reports(cluster: Cluster) -> None:
    ns = cluster.new_namespace()
    api = cluster.api_client()
    v1, batch = client.CoreV1Api(api), client.BatchV1Api(api)
    job = batch.create_namespaced_job(ns, client.V1Job.model_validate(indexed_job("trainer", 2)))
    cluster.await_job_pods(ns)
    pods = eventually(lambda: _exactly(2, live_pods(v1, ns, "job=trainer")), "two pods")
    assert pods is not None  # eventually returns a truthy value
    for index, pod in enumerate(pods):
        assert name_of(pod).startswith(f"trainer-{index}-")
        assert present(meta(pod).labels, "labels")["batch.kubernetes.io/controller-uid"] == meta(job).uid
        assert present(meta(pod).annotations, "annotations")["batch.kubernetes.io/job-completion-index"] == str(index)
        spec = present(pod.spec, "spec")
        assert spec.hostname == f"trainer-{index}" and spec.subdomain == "svc"
        assert present(spec.node_name, "nodeName").startswith("kwok-")  # bound by kube-scheduler
        assert "JOB_COMPLETION_INDEX" in [e.name for e in present(spec.containers[0].env, "env")]

    cluster.set_pod_status(ns, name_of(pods[0]), "Running")
    assert container_state(v1.read_namespaced_pod(name_of(pods[0]), ns)).running
    cluster.set_pod_status(ns, name_of(pods[1]), "Failed", exit_code=137, reason="OOMKilled")
    terminated = present(container_state(v1.read_namespaced_pod(name_of(pods[1]), ns)).terminated, "terminated")
    assert (terminated.exit_code, terminated.reason) == (137, "OOMKilled")
    replacement = eventually(
        lambda: [p for p in live_pods(v1, ns, "batch.kubernetes.io/job-completion-index=1") if name_of(p) != name_of(pods[1])],
        "a replacement pod",
    )[0]
    cluster.set_pod_status(ns, name_of(pods[0]), "Succeeded")
    cluster.set_pod_status(ns, name_of(replacement), "Succeeded")
    done = eventually(lambda: _complete(batch.read_namespaced_job_status("trainer", ns)), "the Job to complete")
    assert done is not None  # eventually returns a truthy value
    assert (present(done.status, "status").succeeded, present(done.status, "status").failed) == (2, 1)


def _exactly(count: int, items: list[T]) -> list[T] | None:
    return items if len(items) == count else None


def _complete(job: client.V1Job) -> client.V1Job | None:
    return job if any(c.type == "Complete" and c.status == "True" for c in present(job.status, "status").conditions or []) else None


def test_container_logs_tail_and_previous_through_the_api_server(cluster: Cluster) -> None:
    cluster.plane  # noqa: B018 - KWOK of the suite's own control plane serves the files
    ns = cluster.new_namespace()
    v1 = client.CoreV1Api(cluster.api_client())
    v1.create_namespaced_pod(
        ns, client.V1Pod.model_validate({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "main", "image": "paddle:3.0.0"}]}})
    )
    cluster.set_pod_status(ns, "p", "Running", log="first run\n")
    cluster.set_pod_status(ns, "p", "Running", restart_count=1, log="one\ntwo\n")
    assert v1.read_namespaced_pod_log("p", ns, previous=True) == "first run\n"
    assert v1.read_namespaced_pod_log("p", ns, tail_lines=1) == "two\n"


def test_deleted_pods_stop_on_sigterm_or_linger_for_their_grace_period(cluster: Cluster) -> None:
    ns = cluster.new_namespace()
    v1 = client.CoreV1Api(cluster.api_client())
    for name, marks in (("quick", {}), ("stubborn", {IGNORES_SIGTERM: "true"})):
        v1.create_namespaced_pod(
            ns,
            client.V1Pod.model_validate(
                {
                    "metadata": {"name": name, "annotations": marks},
                    "spec": {"terminationGracePeriodSeconds": 30, "containers": [{"name": "main", "image": "paddle:3.0.0"}]},
                }
            ),
        )
        cluster.set_pod_status(ns, name, "Running")
    v1.delete_namespaced_pod("quick", ns)
    v1.delete_namespaced_pod("stubborn", ns)
    # Read at once: the stubborn pod lingers only for its 30 s grace period.
    stubborn = v1.read_namespaced_pod("stubborn", ns)
    assert meta(stubborn).deletion_timestamp is not None and present(stubborn.status, "status").phase == "Running"
    eventually(lambda: "quick" not in [meta(p).name for p in v1.list_namespaced_pod(ns).items], "quick removed")


def test_a_stopped_container_that_ran_says_when_it_started(cluster: Cluster) -> None:
    """As a kubelet writes it: the terminated state of a container that ran has `startedAt`
    (what tells a replica's log file exists), one that never ran has none.  A finalizer keeps
    the stopped pods to be read."""
    ns = cluster.new_namespace()
    v1 = client.CoreV1Api(cluster.api_client())
    for name in ("ran", "never"):
        v1.create_namespaced_pod(
            ns,
            client.V1Pod.model_validate(
                {
                    "metadata": {"name": name, "finalizers": ["paddle-nbext.test/keep"]},
                    "spec": {"containers": [{"name": "main", "image": "paddle:3.0.0"}]},
                }
            ),
        )
    cluster.set_pod_status(ns, "ran", "Running")
    for name in ("ran", "never"):
        v1.delete_namespaced_pod(name, ns)

    def stopped(name: str) -> client.V1Pod | None:
        pod = v1.read_namespaced_pod(name, ns)
        return pod if present(pod.status, "status").phase == "Failed" else None

    ran = eventually(lambda: stopped("ran"), "ran stopped")
    assert ran is not None  # eventually returns a truthy value
    terminated = present(container_state(ran).terminated, "terminated")
    assert terminated.exit_code == 143 and terminated.started_at is not None
    never = eventually(lambda: stopped("never"), "never stopped")
    assert never is not None  # eventually returns a truthy value
    assert present(container_state(never).terminated, "terminated").started_at is None
    for name in ("ran", "never"):
        v1.patch_namespaced_pod(name, ns, {"metadata": {"finalizers": None}})


def test_an_eviction_marks_the_pod_as_disrupted(cluster: Cluster) -> None:
    ns = cluster.new_namespace()
    v1 = client.CoreV1Api(cluster.api_client())
    v1.create_namespaced_pod(
        ns,
        client.V1Pod.model_validate(
            {
                "metadata": {"name": "p", "annotations": {IGNORES_SIGTERM: "true"}},
                "spec": {"containers": [{"name": "main", "image": "paddle:3.0.0"}]},
            }
        ),
    )
    cluster.set_pod_status(ns, "p", "Running")
    cluster.evict(ns, "p")
    conditions = {c.type: c for c in present(present(v1.read_namespaced_pod("p", ns).status, "status").conditions, "conditions")}
    assert conditions["DisruptionTarget"].status == "True"
    assert conditions["DisruptionTarget"].reason == "EvictionByEvictionAPI"


def test_service_account_tokens_and_rbac(cluster: Cluster) -> None:
    ns, other = cluster.new_namespace(), cluster.new_namespace()
    admin = client.CoreV1Api(cluster.api_client())
    admin.create_namespaced_config_map(other, client.V1ConfigMap.model_validate({"metadata": {"name": "theirs"}}))
    role = {"rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "watch"]}]}
    reader = client.CoreV1Api(cluster.api_client(cluster.kubeconfig_for(ns, "reader", role)))
    assert reader.list_namespaced_config_map(ns).items is not None
    with pytest.raises(ApiException) as exc:
        reader.create_namespaced_config_map(ns, client.V1ConfigMap.model_validate({"metadata": {"name": "new"}}))
    assert exc.value.status == 403 and status_of(exc.value)["message"] == (
        f'configmaps is forbidden: User "system:serviceaccount:{ns}:reader" cannot create resource "configmaps" '
        f'in API group "" in the namespace "{ns}"'
    )
    with pytest.raises(ApiException) as exc:
        reader.read_namespaced_config_map("theirs", other)
    assert exc.value.status == 403
    admin.delete_namespaced_service_account("reader", ns)
    eventually(lambda: _status(lambda: reader.list_namespaced_config_map(ns)) == 401, "the token to stop working with its ServiceAccount")


def _status(call: Callable[[], Any]) -> int:
    try:
        call()
    except ApiException as exc:
        return int(exc.status)
    return 200


def test_api_server_down_and_back(cluster: Cluster) -> None:
    ns = cluster.new_namespace()
    api = cluster.api_client()
    api.configuration.retries = False
    v1 = client.CoreV1Api(api)
    v1.create_namespaced_config_map(ns, client.V1ConfigMap.model_validate({"metadata": {"name": "survives"}}))
    with cluster.api_down(), pytest.raises(urllib3.exceptions.HTTPError):
        v1.read_namespaced_config_map("survives", ns, _request_timeout=2)
    assert name_of(v1.read_namespaced_config_map("survives", ns)) == "survives"


def test_expired_watch_history_answers_410(cluster: Cluster) -> None:
    ns = cluster.new_namespace()
    v1 = client.CoreV1Api(cluster.api_client())
    old = present(v1.list_namespaced_config_map(ns).metadata, "metadata").resource_version
    v1.create_namespaced_config_map(ns, client.V1ConfigMap.model_validate({"metadata": {"name": "later"}}))
    cluster.expire_watch_history()
    try:
        stream = v1.list_namespaced_config_map(ns, watch=True, resource_version=old, timeout_seconds=5, _preload_content=False)
        # With _preload_content=False the client returns the raw urllib3 response, though it annotates V1ConfigMapList.
        first = json.loads(stream.read().decode().splitlines()[0])  # type: ignore[attr-defined]
        assert first["type"] == "ERROR" and first["object"]["code"] == 410
    except ApiException as exc:
        assert exc.status == 410


def test_namespace_deletion_is_finished_by_the_namespace_controller(cluster: Cluster) -> None:
    ns = cluster.new_namespace()
    v1 = client.CoreV1Api(cluster.api_client())
    v1.create_namespaced_config_map(ns, client.V1ConfigMap.model_validate({"metadata": {"name": "inside"}}))
    v1.delete_namespace(ns)
    eventually(lambda: _status(lambda: v1.read_namespace(ns)) == 404, "the namespace to be gone")


def test_the_suite_without_a_control_plane_errors_and_never_passes(tmp_path: Path) -> None:
    """A machine where the control plane is not built: every cluster test is an ERROR naming it."""
    repo = Path(__file__).resolve().parents[2]
    env = {k: v for k, v in os.environ.items() if k != "PADDLE_NBEXT_TEST_KUBECONFIG"}
    env["PADDLE_NBEXT_CONTROLPLANE_CACHE"] = str(tmp_path / "empty-cache")
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "-q",
            "--no-header",
            "tests/cluster/test_k8s_backend.py",
            "-k",
            "unschedulable",
        ],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert result.returncode == 1, result.stdout[-2000:]
    assert "1 error" in result.stdout and "passed" not in result.stdout and "skipped" not in result.stdout
    assert "no control plane" in result.stdout and "bash scripts/controlplane.sh build" in result.stdout
