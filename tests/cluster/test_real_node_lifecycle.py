"""The real node itself: it runs pods that reach cluster DNS and the API server, a run that crashed
leaves nothing a new start cannot sweep, and a stop leaves no process, mount, cgroup, network
namespace or veth behind."""

from __future__ import annotations

import os
import signal
import time
from typing import TYPE_CHECKING, Any

import pytest
from kubernetes import client
from support.controlplane import node_cleanup, node_network
from support.controlplane.processes import pid_alive
from support.controlplane.realnode import NODE_NAME

from cluster.k8s_objects import present

if TYPE_CHECKING:
    from support.realnode_site import RealNodeSite

    from cluster.conftest import RealCluster

pytestmark = pytest.mark.cluster

POD_WAIT = 180.0


def probe_pod(site: RealNodeSite, name: str, script: str, node: str | None = None) -> dict[str, Any]:
    """A small pod on the real nodes (on `node` alone when named)."""
    placement = site.placement()
    return {
        "metadata": {"name": name},
        "spec": {
            **({"nodeName": node} if node else {}),
            "restartPolicy": "Never",
            "nodeSelector": placement["node_selector"],
            "tolerations": placement["tolerations"],
            "securityContext": site.security_context(),
            "containers": [
                {
                    "name": "probe",
                    "image": site.image,
                    "imagePullPolicy": site.pull_policy,
                    "command": ["python3", "-c", script],
                    "resources": {"requests": {"cpu": "50m", "memory": "64Mi"}, "limits": {"memory": "256Mi"}},
                }
            ],
        },
    }


def namespace_with_account(real_cluster: RealCluster) -> tuple[str, client.CoreV1Api]:
    """A fresh namespace once its `default` ServiceAccount exists (pods need it to be admitted)."""
    namespace = real_cluster.new_namespace()
    core = client.CoreV1Api(real_cluster.api_client())
    deadline = time.monotonic() + 60
    while not core.list_namespaced_service_account(namespace).items:
        assert time.monotonic() < deadline, f"the ServiceAccount controller made no `default` account in {namespace}"
        time.sleep(0.1)
    return namespace, core


def run_pod(core: client.CoreV1Api, namespace: str, manifest: dict[str, Any]) -> tuple[str, str]:
    """Create the pod and wait until it ends; (phase, its log from the kubelet)."""
    name = manifest["metadata"]["name"]
    core.create_namespaced_pod(namespace, client.V1Pod.model_validate(manifest))
    deadline = time.monotonic() + POD_WAIT
    pod = core.read_namespaced_pod(name, namespace)
    while present(pod.status, "status").phase not in ("Succeeded", "Failed"):
        if time.monotonic() > deadline:
            raise AssertionError(f"pod {name} did not end: {pod.status}")
        time.sleep(0.2)
        pod = core.read_namespaced_pod(name, namespace)
    return present(present(pod.status, "status").phase, "phase"), core.read_namespaced_pod_log(name, namespace)


DNS_AND_API = """
import socket, ssl, urllib.request, os
print('api', socket.gethostbyname('kubernetes.default.svc'))
token = open('/var/run/secrets/kubernetes.io/serviceaccount/token').read()
context = ssl.create_default_context(cafile='/var/run/secrets/kubernetes.io/serviceaccount/ca.crt')
request = urllib.request.Request('https://kubernetes.default.svc/version', headers={'Authorization': 'Bearer ' + token})
print('version', urllib.request.urlopen(request, context=context, timeout=10).status)
print('uid', os.getuid())
"""


def test_a_pod_on_the_real_node_resolves_and_reaches_the_api_server_as_the_notebook_uid(real_cluster: RealCluster) -> None:
    site = real_cluster.node
    namespace, core = namespace_with_account(real_cluster)
    phase, log = run_pod(core, namespace, probe_pod(site, "probe", DNS_AND_API))
    assert phase == "Succeeded", log
    assert "api 10.96.0.1" in log and "version 200" in log and "uid 1000" in log, log
    pod = core.read_namespaced_pod("probe", namespace)
    if site.node_names:
        assert present(pod.spec, "spec").node_name in site.node_names


# Two starts of the node, each importing every image the session gave it (the job image, and the
# hub tests' notebook image: gigabytes), on two cores shared with the rest of the suite.
@pytest.mark.timeout(900)
def test_a_crashed_node_is_swept_by_the_next_start_and_a_stop_leaves_nothing(real_cluster: RealCluster) -> None:
    site = real_cluster.node
    if site.node is None:
        pytest.skip("the node's own processes are the suite's only on its own control plane")
    node = site.node
    namespace, core = namespace_with_account(real_cluster)
    core.create_namespaced_pod(
        namespace,
        client.V1Pod.model_validate(probe_pod(site, "sleeper", "import time; print('up', flush=True); time.sleep(3600)", node.name)),
    )
    deadline = time.monotonic() + POD_WAIT
    while present(core.read_namespaced_pod("sleeper", namespace).status, "status").phase != "Running":
        assert time.monotonic() < deadline, core.read_namespaced_pod("sleeper", namespace).status
        time.sleep(0.2)

    try:
        # A crash: every process of the node killed at once, nothing cleaned up.
        for process in node.processes.values():
            if process.pid:
                os.kill(process.pid, signal.SIGKILL)
        left = node_cleanup.leftovers(node.root)
        assert any(line.startswith("process") for line in left) and any(line.startswith("mount") for line in left), left
        assert any(line.startswith("cgroup") for line in left) and f"network namespace {node_network.NETNS}" in left, left
        node.processes.clear()

        # The next start sweeps it all first and comes up Ready; the old pod is gone with the crash.
        core.delete_namespaced_pod("sleeper", namespace, grace_period_seconds=0)
        node.start()
        ready = core.read_node(NODE_NAME)
        assert any(c.type == "Ready" and c.status == "True" for c in present(present(ready.status, "status").conditions, "conditions"))
        phase, log = run_pod(core, namespace, probe_pod(site, "after-crash", "print('alive again')", node.name))
        assert phase == "Succeeded" and "alive again" in log

        # An orderly stop leaves nothing behind; the node comes back for the tests after this one.
        node.stop()
        assert node_cleanup.leftovers(node.root) == []
    finally:
        # Whatever failed above, the node runs again: every real-node test after this one needs it.
        if not node.processes or not all(process.pid and pid_alive(process.pid) for process in node.processes.values()):
            node.processes.clear()
            node.start()  # sweeps what a half-done crash left first
