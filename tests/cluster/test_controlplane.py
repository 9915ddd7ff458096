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
from typing import Any

import pytest
import urllib3
from kubernetes import client
from kubernetes.client.rest import ApiException
from support.controlplane import IGNORES_SIGTERM, ControlPlane, ControlPlaneError, find_binaries, port_open
from support.waiting import eventually

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(180)]


def status_of(exc: ApiException) -> dict[str, Any]:
    body: dict[str, Any] = json.loads(exc.body)
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


def live_pods(v1: client.CoreV1Api, ns: str, selector: str) -> list[Any]:
    return sorted(
        (p for p in v1.list_namespaced_pod(ns, label_selector=selector).items if not p.metadata.deletion_timestamp),
        key=lambda p: p.metadata.name,
    )


# --------------------------------------------------------------------------- the command itself


def test_start_and_stop_leave_no_process_and_free_every_port(tmp_path: Path) -> None:
    plane = ControlPlane(tmp_path / "plane").start()
    try:
        pids = {name: process.pid for name, process in plane.processes.items()}
        assert set(pids) == {"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok"}
        api = client.CoreV1Api(client.ApiClient(_config(plane)))
        nodes = {n.metadata.name: n for n in api.list_node().items}
        assert set(nodes) == {"kwok-cpu-0", "kwok-cpu-1", "kwok-gpu-0"}
        assert nodes["kwok-gpu-0"].status.allocatable["nvidia.com/gpu"] == "8"
        assert all(c.status == "True" for n in nodes.values() for c in n.status.conditions if c.type == "Ready")
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


def test_job_controller_scheduler_and_kubelet_reports(cluster: Any) -> None:
    ns = cluster.new_namespace()
    api = cluster.api_client()
    v1, batch = client.CoreV1Api(api), client.BatchV1Api(api)
    job = batch.create_namespaced_job(ns, indexed_job("trainer", 2))
    cluster.await_job_pods(ns)
    pods = eventually(lambda: _exactly(2, live_pods(v1, ns, "job=trainer")), "two pods")
    for index, pod in enumerate(pods):
        assert pod.metadata.name.startswith(f"trainer-{index}-")
        assert pod.metadata.labels["batch.kubernetes.io/controller-uid"] == job.metadata.uid
        assert pod.metadata.annotations["batch.kubernetes.io/job-completion-index"] == str(index)
        assert pod.spec.hostname == f"trainer-{index}" and pod.spec.subdomain == "svc"
        assert pod.spec.node_name.startswith("kwok-")  # bound by kube-scheduler
        assert "JOB_COMPLETION_INDEX" in [e.name for e in pod.spec.containers[0].env]

    cluster.set_pod_status(ns, pods[0].metadata.name, "Running")
    assert v1.read_namespaced_pod(pods[0].metadata.name, ns).status.container_statuses[0].state.running
    cluster.set_pod_status(ns, pods[1].metadata.name, "Failed", exit_code=137, reason="OOMKilled")
    terminated = v1.read_namespaced_pod(pods[1].metadata.name, ns).status.container_statuses[0].state.terminated
    assert (terminated.exit_code, terminated.reason) == (137, "OOMKilled")
    replacement = eventually(
        lambda: [p for p in live_pods(v1, ns, "batch.kubernetes.io/job-completion-index=1") if p.metadata.name != pods[1].metadata.name],
        "a replacement pod",
    )[0]
    cluster.set_pod_status(ns, pods[0].metadata.name, "Succeeded")
    cluster.set_pod_status(ns, replacement.metadata.name, "Succeeded")
    done = eventually(lambda: _complete(batch.read_namespaced_job_status("trainer", ns)), "the Job to complete")
    assert (done.status.succeeded, done.status.failed) == (2, 1)


def _exactly(count: int, items: list[Any]) -> list[Any] | None:
    return items if len(items) == count else None


def _complete(job: Any) -> Any:
    return job if any(c.type == "Complete" and c.status == "True" for c in job.status.conditions or []) else None


def test_container_logs_tail_and_previous_through_the_api_server(cluster: Any) -> None:
    cluster.plane  # noqa: B018 - KWOK of the suite's own control plane serves the files
    ns = cluster.new_namespace()
    v1 = client.CoreV1Api(cluster.api_client())
    v1.create_namespaced_pod(ns, {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "main", "image": "paddle:3.0.0"}]}})
    cluster.set_pod_status(ns, "p", "Running", log="first run\n")
    cluster.set_pod_status(ns, "p", "Running", restart_count=1, log="one\ntwo\n")
    assert v1.read_namespaced_pod_log("p", ns, previous=True) == "first run\n"
    assert v1.read_namespaced_pod_log("p", ns, tail_lines=1) == "two\n"


def test_deleted_pods_stop_on_sigterm_or_linger_for_their_grace_period(cluster: Any) -> None:
    ns = cluster.new_namespace()
    v1 = client.CoreV1Api(cluster.api_client())
    for name, marks in (("quick", {}), ("stubborn", {IGNORES_SIGTERM: "true"})):
        v1.create_namespaced_pod(
            ns,
            {
                "metadata": {"name": name, "annotations": marks},
                "spec": {"terminationGracePeriodSeconds": 30, "containers": [{"name": "main", "image": "paddle:3.0.0"}]},
            },
        )
        cluster.set_pod_status(ns, name, "Running")
    v1.delete_namespaced_pod("quick", ns)
    v1.delete_namespaced_pod("stubborn", ns)
    # Read at once: the stubborn pod lingers only for its 30 s grace period.
    stubborn = v1.read_namespaced_pod("stubborn", ns)
    assert stubborn.metadata.deletion_timestamp is not None and stubborn.status.phase == "Running"
    eventually(lambda: "quick" not in [p.metadata.name for p in v1.list_namespaced_pod(ns).items], "quick removed")


def test_a_stopped_container_that_ran_says_when_it_started(cluster: Any) -> None:
    """As a kubelet writes it: the terminated state of a container that ran has `startedAt`
    (what tells a replica's log file exists), one that never ran has none.  A finalizer keeps
    the stopped pods to be read."""
    ns = cluster.new_namespace()
    v1 = client.CoreV1Api(cluster.api_client())
    for name in ("ran", "never"):
        v1.create_namespaced_pod(
            ns,
            {
                "metadata": {"name": name, "finalizers": ["paddle-nbext.test/keep"]},
                "spec": {"containers": [{"name": "main", "image": "paddle:3.0.0"}]},
            },
        )
    cluster.set_pod_status(ns, "ran", "Running")
    for name in ("ran", "never"):
        v1.delete_namespaced_pod(name, ns)

    def stopped(name: str) -> Any:
        pod = v1.read_namespaced_pod(name, ns)
        return pod if pod.status.phase == "Failed" else None

    ran = eventually(lambda: stopped("ran"), "ran stopped")
    terminated = ran.status.container_statuses[0].state.terminated
    assert terminated.exit_code == 143 and terminated.started_at is not None
    never = eventually(lambda: stopped("never"), "never stopped")
    assert never.status.container_statuses[0].state.terminated.started_at is None
    for name in ("ran", "never"):
        v1.patch_namespaced_pod(name, ns, {"metadata": {"finalizers": None}})


def test_an_eviction_marks_the_pod_as_disrupted(cluster: Any) -> None:
    ns = cluster.new_namespace()
    v1 = client.CoreV1Api(cluster.api_client())
    v1.create_namespaced_pod(
        ns,
        {
            "metadata": {"name": "p", "annotations": {IGNORES_SIGTERM: "true"}},
            "spec": {"containers": [{"name": "main", "image": "paddle:3.0.0"}]},
        },
    )
    cluster.set_pod_status(ns, "p", "Running")
    cluster.evict(ns, "p")
    conditions = {c.type: c for c in v1.read_namespaced_pod("p", ns).status.conditions}
    assert conditions["DisruptionTarget"].status == "True"
    assert conditions["DisruptionTarget"].reason == "EvictionByEvictionAPI"


def test_service_account_tokens_and_rbac(cluster: Any) -> None:
    ns, other = cluster.new_namespace(), cluster.new_namespace()
    admin = client.CoreV1Api(cluster.api_client())
    admin.create_namespaced_config_map(other, {"metadata": {"name": "theirs"}})
    role = {"rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "watch"]}]}
    reader = client.CoreV1Api(cluster.api_client(cluster.kubeconfig_for(ns, "reader", role)))
    assert reader.list_namespaced_config_map(ns).items is not None
    with pytest.raises(ApiException) as exc:
        reader.create_namespaced_config_map(ns, {"metadata": {"name": "new"}})
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


def test_api_server_down_and_back(cluster: Any) -> None:
    ns = cluster.new_namespace()
    api = cluster.api_client()
    api.configuration.retries = False
    v1 = client.CoreV1Api(api)
    v1.create_namespaced_config_map(ns, {"metadata": {"name": "survives"}})
    with cluster.api_down(), pytest.raises(urllib3.exceptions.HTTPError):
        v1.read_namespaced_config_map("survives", ns, _request_timeout=2)
    assert v1.read_namespaced_config_map("survives", ns).metadata.name == "survives"


def test_expired_watch_history_answers_410(cluster: Any) -> None:
    ns = cluster.new_namespace()
    v1 = client.CoreV1Api(cluster.api_client())
    old = v1.list_namespaced_config_map(ns).metadata.resource_version
    v1.create_namespaced_config_map(ns, {"metadata": {"name": "later"}})
    cluster.expire_watch_history()
    try:
        stream = v1.list_namespaced_config_map(ns, watch=True, resource_version=old, timeout_seconds=5, _preload_content=False)
        first = json.loads(stream.read().decode().splitlines()[0])
        assert first["type"] == "ERROR" and first["object"]["code"] == 410
    except ApiException as exc:
        assert exc.status == 410


def test_namespace_deletion_is_finished_by_the_namespace_controller(cluster: Any) -> None:
    ns = cluster.new_namespace()
    v1 = client.CoreV1Api(cluster.api_client())
    v1.create_namespaced_config_map(ns, {"metadata": {"name": "inside"}})
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
