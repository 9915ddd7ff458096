"""The substrate's Kubernetes semantics, checked through the official client only.

These pass against the in-memory API and against a real apiserver (PADDLE_NBEXT_TEST_KUBECONFIG),
which is what makes the backend's contract tests on the emulator trustworthy.
"""

from __future__ import annotations

import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable

import pytest
import urllib3
from kubernetes import client, watch
from kubernetes.client.rest import ApiException

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(60)]


def eventually(check: Callable[[], Any], what: str, seconds: float = 20.0) -> Any:
    """Poll ``check`` until truthy: controllers (GC, Job controller) are asynchronous on real clusters too."""
    deadline = time.monotonic() + seconds
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def status_of(exc: ApiException) -> dict[str, Any]:
    body: dict[str, Any] = json.loads(exc.body)
    return body


def gone(read: Callable[[], Any]) -> bool:
    try:
        read()
    except ApiException as exc:
        return exc.status == 404
    return False


def test_crud_conflicts_and_patches(cluster):
    ns = cluster.new_namespace()
    v1 = client.CoreV1Api(cluster.api_client())
    cm = v1.create_namespaced_config_map(ns, {"metadata": {"name": "rec", "labels": {"a": "1"}}, "data": {"k": "v"}})
    assert cm.metadata.uid and cm.metadata.creation_timestamp and int(cm.metadata.resource_version) > 0

    with pytest.raises(ApiException) as exc:
        v1.create_namespaced_config_map(ns, {"metadata": {"name": "rec"}})
    assert exc.value.status == 409 and status_of(exc.value)["reason"] == "AlreadyExists"
    assert status_of(exc.value)["message"] == 'configmaps "rec" already exists'

    generated = v1.create_namespaced_config_map(ns, {"metadata": {"generateName": "rec-"}})
    assert generated.metadata.name.startswith("rec-") and len(generated.metadata.name) > len("rec-")

    patched = v1.patch_namespaced_config_map("rec", ns, {"data": {"k2": "v2"}})
    assert patched.data == {"k": "v", "k2": "v2"}
    assert int(patched.metadata.resource_version) > int(cm.metadata.resource_version)
    patched = v1.patch_namespaced_config_map("rec", ns, [{"op": "remove", "path": "/data/k"}])
    assert patched.data == {"k2": "v2"}

    stale = client.V1ConfigMap(metadata=client.V1ObjectMeta(name="rec", resource_version=cm.metadata.resource_version),
                               data={"x": "y"})
    with pytest.raises(ApiException) as exc:
        v1.replace_namespaced_config_map("rec", ns, stale)
    assert exc.value.status == 409 and status_of(exc.value)["reason"] == "Conflict"
    fresh = v1.read_namespaced_config_map("rec", ns)
    fresh.data = {"x": "y"}
    assert v1.replace_namespaced_config_map("rec", ns, fresh).data == {"x": "y"}

    with pytest.raises(ApiException) as exc:
        v1.create_namespaced_config_map("no-such-namespace-here", {"metadata": {"name": "x"}})
    assert exc.value.status == 404

    v1.delete_namespaced_config_map("rec", ns)
    with pytest.raises(ApiException) as exc:
        v1.read_namespaced_config_map("rec", ns)
    assert exc.value.status == 404 and status_of(exc.value)["reason"] == "NotFound"


def test_label_and_field_selectors(cluster):
    ns = cluster.new_namespace()
    v1 = client.CoreV1Api(cluster.api_client())
    for name, labels in (("a", {"app": "pnb", "role": "trainer"}), ("b", {"app": "pnb", "role": "pserver"}),
                         ("c", {"app": "other"})):
        v1.create_namespaced_config_map(ns, {"metadata": {"name": name, "labels": labels}})

    def names(**kwargs: str) -> list[str]:
        return sorted(i.metadata.name for i in v1.list_namespaced_config_map(ns, **kwargs).items
                      if i.metadata.name in ("a", "b", "c"))

    assert names(label_selector="app=pnb") == ["a", "b"]
    assert names(label_selector="app==pnb,role!=trainer") == ["b"]
    assert names(label_selector="role in (trainer, pserver)") == ["a", "b"]
    assert names(label_selector="role notin (trainer)") == ["b", "c"]
    assert names(label_selector="role") == ["a", "b"]
    assert names(label_selector="!role") == ["c"]
    assert names(field_selector="metadata.name=c") == ["c"]

    v1.delete_collection_namespaced_config_map(ns, label_selector="app=pnb")
    eventually(lambda: names() == ["c"], "deletecollection by label")


def test_watch_resume_and_expired_history(cluster):
    ns = cluster.new_namespace()
    v1 = client.CoreV1Api(cluster.api_client())
    first = v1.create_namespaced_config_map(ns, {"metadata": {"name": "w1", "labels": {"w": "1"}}})
    v1.patch_namespaced_config_map("w1", ns, {"data": {"k": "v"}})
    v1.create_namespaced_config_map(ns, {"metadata": {"name": "w2", "labels": {"w": "1"}}})
    v1.delete_namespaced_config_map("w2", ns)

    seen = []
    for event in watch.Watch().stream(v1.list_namespaced_config_map, ns, label_selector="w=1",
                                      resource_version=first.metadata.resource_version, timeout_seconds=1):
        seen.append((event["type"], event["object"].metadata.name))
    assert seen == [("MODIFIED", "w1"), ("ADDED", "w2"), ("DELETED", "w2")]

    # Leaving the selector is a DELETED event for that watcher, as on kube-apiserver.
    rv = v1.list_namespaced_config_map(ns).metadata.resource_version
    v1.patch_namespaced_config_map("w1", ns, {"metadata": {"labels": {"w": "2"}}})
    seen = [(e["type"], e["object"].metadata.name) for e in watch.Watch().stream(
        v1.list_namespaced_config_map, ns, label_selector="w=1", resource_version=rv, timeout_seconds=1)]
    assert seen == [("DELETED", "w1")]

    cluster.compact_history()
    response = v1.list_namespaced_config_map(ns, watch=True, resource_version=first.metadata.resource_version,
                                             timeout_seconds=2, _preload_content=False)
    lines = [json.loads(line) for line in response.read().decode().splitlines() if line.strip()]
    response.release_conn()
    assert lines[0]["type"] == "ERROR"
    assert lines[0]["object"]["code"] == 410 and lines[0]["object"]["kind"] == "Status"


def test_owner_references_cascade(cluster):
    ns = cluster.new_namespace()
    v1 = client.CoreV1Api(cluster.api_client())
    owner = v1.create_namespaced_config_map(ns, {"metadata": {"name": "owner"}})

    def ref(obj: Any, kind: str) -> dict[str, Any]:
        return {"apiVersion": "v1", "kind": kind, "name": obj.metadata.name, "uid": obj.metadata.uid}

    child = v1.create_namespaced_config_map(ns, {"metadata": {"name": "child",
                                                              "ownerReferences": [ref(owner, "ConfigMap")]}})
    v1.create_namespaced_secret(ns, {"metadata": {"name": "grandchild",
                                                  "ownerReferences": [ref(child, "ConfigMap")]}})
    kept = v1.create_namespaced_config_map(ns, {"metadata": {"name": "orphan-owner"}})
    v1.create_namespaced_config_map(ns, {"metadata": {"name": "kept", "ownerReferences": [ref(kept, "ConfigMap")]}})

    v1.delete_namespaced_config_map("owner", ns)
    eventually(lambda: gone(lambda: v1.read_namespaced_config_map("child", ns)), "child collected")
    eventually(lambda: gone(lambda: v1.read_namespaced_secret("grandchild", ns)), "grandchild collected")

    v1.delete_namespaced_config_map("orphan-owner", ns, propagation_policy="Orphan")
    eventually(lambda: gone(lambda: v1.read_namespaced_config_map("orphan-owner", ns)), "orphaning owner deleted")
    eventually(lambda: not v1.read_namespaced_config_map("kept", ns).metadata.owner_references, "ownerRef removed")


def _pod(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"restartPolicy": "Never",
                                                  "containers": [{"name": "main", "image": "busybox:1.36"}]}}


def test_status_subresource_is_separate(cluster):
    ns = cluster.new_namespace()
    v1 = client.CoreV1Api(cluster.api_client())
    v1.create_namespaced_pod(ns, _pod("p"))
    v1.patch_namespaced_pod("p", ns, {"metadata": {"labels": {"x": "1"}}, "status": {"phase": "Running"}})
    pod = v1.read_namespaced_pod("p", ns)
    assert pod.metadata.labels == {"x": "1"} and pod.status.phase == "Pending"

    v1.patch_namespaced_pod_status("p", ns, {"metadata": {"labels": {"y": "2"}},
                                             "status": {"conditions": [{"type": "Ready", "status": "False"}]}})
    pod = v1.read_namespaced_pod("p", ns)
    assert pod.metadata.labels == {"x": "1"}
    assert [c.type for c in pod.status.conditions] == ["Ready"]


def test_service_account_token_and_rbac(cluster):
    ns = cluster.new_namespace()
    other = cluster.new_namespace()
    admin = client.CoreV1Api(cluster.api_client())
    admin.create_namespaced_config_map(ns, {"metadata": {"name": "mine"}})
    admin.create_namespaced_config_map(other, {"metadata": {"name": "theirs"}})
    role = {"rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "watch"]},
                      {"apiGroups": [""], "resources": ["pods/log"], "verbs": ["get"]}]}
    reader = client.CoreV1Api(cluster.api_client(cluster.kubeconfig_for(ns, "reader", role)))

    assert "mine" in [c.metadata.name for c in reader.list_namespaced_config_map(ns).items]
    with pytest.raises(ApiException) as exc:
        reader.create_namespaced_config_map(ns, {"metadata": {"name": "new"}})
    assert exc.value.status == 403 and status_of(exc.value)["reason"] == "Forbidden"
    assert status_of(exc.value)["message"] == (
        f'configmaps is forbidden: User "system:serviceaccount:{ns}:reader" cannot create resource "configmaps" '
        f'in API group "" in the namespace "{ns}"')
    with pytest.raises(ApiException) as exc:
        reader.read_namespaced_config_map("theirs", other)
    assert exc.value.status == 403
    with pytest.raises(ApiException) as exc:
        reader.read_namespaced_pod_status("anything", ns)
    assert exc.value.status == 403 and 'resource "pods/status"' in status_of(exc.value)["message"]

    anonymous = client.Configuration()
    anonymous.host = cluster.api_client().configuration.host
    anonymous.ssl_ca_cert = cluster.api_client().configuration.ssl_ca_cert
    if not cluster.real:  # real clusters may map no token to system:anonymous (403) instead
        with pytest.raises(ApiException) as exc:
            client.CoreV1Api(client.ApiClient(anonymous)).list_namespaced_config_map(ns)
        assert exc.value.status == 401

    admin.delete_namespaced_service_account("reader", ns)
    eventually(lambda: _status(lambda: reader.list_namespaced_config_map(ns)) == 401,
               "the token to stop working with its ServiceAccount")


def _status(call: Callable[[], Any]) -> int:
    try:
        call()
    except ApiException as exc:
        return int(exc.status)
    return 200


def test_job_controller_and_kubelet_play(cluster):
    ns = cluster.new_namespace()
    api = cluster.api_client()
    v1, batch = client.CoreV1Api(api), client.BatchV1Api(api)
    job = batch.create_namespaced_job(ns, {
        "metadata": {"name": "trainer"},
        "spec": {"completionMode": "Indexed", "completions": 2, "parallelism": 2, "backoffLimit": 1,
                 "template": {"metadata": {"labels": {"role": "trainer"}},
                              "spec": {"restartPolicy": "Never", "subdomain": "svc",
                                       "containers": [{"name": "main", "image": "busybox:1.36"}]}}}})
    cluster.play_job_controller(ns)
    pods = eventually(lambda: sorted(v1.list_namespaced_pod(ns, label_selector="role=trainer").items,
                                     key=lambda p: p.metadata.name) or None, "job pods")
    pods = eventually(lambda: (lambda ps: ps if len(ps) == 2 else None)(
        sorted(v1.list_namespaced_pod(ns, label_selector="role=trainer").items, key=lambda p: p.metadata.name)),
        "two job pods")
    for index, pod in enumerate(pods):
        assert pod.metadata.name.startswith(f"trainer-{index}-")
        assert pod.metadata.labels["batch.kubernetes.io/job-name"] == "trainer"
        assert pod.metadata.labels["batch.kubernetes.io/job-completion-index"] == str(index)
        assert pod.metadata.annotations["batch.kubernetes.io/job-completion-index"] == str(index)
        assert pod.spec.hostname == f"trainer-{index}" and pod.spec.subdomain == "svc"
        assert pod.metadata.owner_references[0].uid == job.metadata.uid
        assert "JOB_COMPLETION_INDEX" in [e.name for e in pod.spec.containers[0].env]

    cluster.set_pod_status(ns, pods[0].metadata.name, "Running", log="step 1\nstep 2\nstep 3\n")
    running = v1.read_namespaced_pod(pods[0].metadata.name, ns)
    assert running.status.phase == "Running" and running.status.container_statuses[0].state.running
    if not cluster.real:
        assert v1.read_namespaced_pod_log(pods[0].metadata.name, ns, tail_lines=2) == "step 2\nstep 3\n"

    cluster.set_pod_status(ns, pods[1].metadata.name, "Pending", waiting_reason="ImagePullBackOff")
    waiting = v1.read_namespaced_pod(pods[1].metadata.name, ns).status.container_statuses[0].state.waiting
    assert waiting.reason == "ImagePullBackOff"

    cluster.set_pod_status(ns, pods[1].metadata.name, "Failed", exit_code=137, reason="OOMKilled")
    terminated = v1.read_namespaced_pod(pods[1].metadata.name, ns).status.container_statuses[0].state.terminated
    assert (terminated.exit_code, terminated.reason) == (137, "OOMKilled")
    replacement = eventually(lambda: [p for p in v1.list_namespaced_pod(
        ns, label_selector="batch.kubernetes.io/job-completion-index=1").items
        if p.metadata.name != pods[1].metadata.name], "a replacement pod for the failed index")[0]

    cluster.set_pod_status(ns, pods[0].metadata.name, "Succeeded")
    cluster.set_pod_status(ns, replacement.metadata.name, "Succeeded")
    done = eventually(lambda: (lambda j: j if any(c.type == "Complete" and c.status == "True"
                                                  for c in j.status.conditions or []) else None)(
        batch.read_namespaced_job_status("trainer", ns)), "the Job to complete")
    assert (done.status.succeeded, done.status.failed) == (2, 1)

    batch.delete_namespaced_job("trainer", ns, propagation_policy="Background")
    eventually(lambda: not v1.list_namespaced_pod(ns, label_selector="role=trainer").items, "pods collected")


def test_job_controller_keeps_one_pod_per_index(cluster):
    """Reconciles racing each other (the suite's play calls and the controller's own pass) start one
    pod per index, as kube-controller-manager does; a duplicate that appears anyway is deleted and
    the running pod of the index kept.  (Duplicates made `pod_of` and the backend pick different
    pods of one index, so a status the suite played never reached the job.)"""
    ns = cluster.new_namespace()
    api = cluster.api_client()
    v1, batch = client.CoreV1Api(api), client.BatchV1Api(api)
    names = [f"job{i}" for i in range(3)]
    for name in names:
        created = batch.create_namespaced_job(ns, {
            "metadata": {"name": name},
            "spec": {"completionMode": "Indexed", "completions": 4, "parallelism": 4,
                     "template": {"metadata": {"labels": {"app": "dup"}},
                                  "spec": {"restartPolicy": "Never",
                                           "containers": [{"name": "main", "image": "busybox:1.36"}]}}}})
    since = created.metadata.resource_version
    switching = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # threads interleave at any bytecode, as on a loaded machine
    try:
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(lambda _: cluster.play_job_controller(ns), range(8)))
    finally:
        sys.setswitchinterval(switching)
    eventually(lambda: len(v1.list_namespaced_pod(ns, label_selector="app=dup").items) == 12, "12 job pods")
    stream = v1.list_namespaced_pod(ns, label_selector="app=dup", watch=True, resource_version=since,
                                    timeout_seconds=1, _preload_content=False)
    started = sorted(json.loads(line)["object"]["metadata"]["name"].rsplit("-", 1)[0]
                     for line in stream.read().decode().splitlines() if json.loads(line)["type"] == "ADDED")
    assert started == sorted(f"{name}-{index}" for name in names for index in range(4))

    def index_pods() -> list[Any]:
        return [p for p in v1.list_namespaced_pod(
            ns, label_selector="batch.kubernetes.io/job-name=job0,batch.kubernetes.io/job-completion-index=0").items
            if not p.metadata.deletion_timestamp]
    original = index_pods()[0]
    cluster.set_pod_status(ns, original.metadata.name, "Running")
    v1.create_namespaced_pod(ns, {"metadata": {"generateName": "job0-0-", "labels": original.metadata.labels,
                                               "annotations": original.metadata.annotations,
                                               "ownerReferences": [api.sanitize_for_serialization(r)
                                                                   for r in original.metadata.owner_references]},
                                  "spec": api.sanitize_for_serialization(original.spec)})
    kept = eventually(lambda: (lambda ps: ps if len(ps) == 1 else None)(index_pods()), "the duplicate removed")
    assert kept[0].metadata.name == original.metadata.name and kept[0].status.phase == "Running"


def test_api_down_and_back(cluster):
    ns = cluster.new_namespace()
    api = cluster.api_client()
    api.configuration.retries = False
    v1 = client.CoreV1Api(api)
    v1.create_namespaced_config_map(ns, {"metadata": {"name": "survives"}})
    with cluster.api_down():
        with pytest.raises(urllib3.exceptions.HTTPError):
            v1.read_namespaced_config_map("survives", ns, _request_timeout=2)
    assert v1.read_namespaced_config_map("survives", ns).metadata.name == "survives"


def test_pod_logs_tail_previous_and_follow(cluster):
    if cluster.real:
        pytest.skip("a cluster without kubelets has no container logs")
    ns = cluster.new_namespace()
    v1 = client.CoreV1Api(cluster.api_client())
    v1.create_namespaced_pod(ns, _pod("p"))
    with pytest.raises(ApiException) as exc:
        v1.read_namespaced_pod_log("p", ns)
    assert exc.value.status == 400 and "is waiting to start" in status_of(exc.value)["message"]

    cluster.set_pod_status(ns, "p", "Running", log="first run\n")
    cluster.set_pod_status(ns, "p", "Running", restart_count=1, log="one\ntwo\n")
    assert v1.read_namespaced_pod_log("p", ns, previous=True) == "first run\n"
    assert v1.read_namespaced_pod_log("p", ns, tail_lines=1) == "two\n"

    stream = v1.read_namespaced_pod_log("p", ns, follow=True, _preload_content=False)
    cluster.set_pod_status(ns, "p", "Running", restart_count=1, log="one\ntwo\nthree\n")
    cluster.set_pod_status(ns, "p", "Succeeded")
    assert stream.read().decode() == "one\ntwo\nthree\n"  # the stream ends when the container terminates
    stream.release_conn()
