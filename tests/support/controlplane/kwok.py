"""What KWOK does on our fake nodes: the node lifecycle, graceful pod shutdown, and pod logs.

KWOK plays the kubelet of every node labelled ``type=kwok``.  Its behaviour is a list of
*stages*, each a selector over an object and the status change (or deletion) it applies; these
are ours, written for what the backend must live with:

- nodes become Ready with the capacity they were registered with (CPU, memory, ``nvidia.com/gpu``),
  at 127.0.0.1 with KWOK's server as their kubelet endpoint, and keep their lease;
- a pod being deleted first terminates the way a kubelet ends it: its containers exit with 143
  (SIGTERM) and the pod turns ``Failed``, then it is removed.  A pod annotated
  ``IGNORES_SIGTERM`` stands for a process that ignores SIGTERM: it stays Terminating for its whole
  grace period and then ends with 137 (SIGKILL), so the suite can see old pods linger;
- pods are otherwise not moved through phases by KWOK: the suite sets Running, Succeeded, Failed
  (exit codes, ``OOMKilled``) and evictions through ``pods/status``, as a kubelet reports them,
  so each test decides when a replica starts and how it ends;
- ``pods/log`` goes from the real API server to KWOK's kubelet server, which reads the files a
  ``Logs`` object names for the pod (written by the suite in the container runtime's log format).
"""

from __future__ import annotations

from typing import Any

NODE_LABEL = ("type", "kwok")
IGNORES_SIGTERM = "paddle-nbext.test/ignores-sigterm"
STAGE_API = "kwok.x-k8s.io/v1alpha1"

_NODE_CONDITIONS = (
    ("Ready", "True", "KubeletReady", "kubelet is posting ready status"),
    ("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
    ("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
    ("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
    ("NetworkUnavailable", "False", "RouteCreated", "the fake network is up"),
)

_NODE_STATUS = "\n".join(
    [
        "{{ $now := Now }}",
        "conditions:",
        *[
            f'- {{type: {t}, status: "{s}", reason: {r}, message: "{m}", '
            "lastHeartbeatTime: {{ $now | Quote }}, lastTransitionTime: {{ $now | Quote }}}"
            for t, s, r, m in _NODE_CONDITIONS
        ],
        "addresses:",
        "- {type: InternalIP, address: {{ NodeIP | Quote }}}",
        "- {type: Hostname, address: {{ NodeName | Quote }}}",
        "daemonEndpoints:",
        "  kubeletEndpoint:",
        "    Port: {{ NodePort }}",
        "capacity:",
        "{{ YAML .status.capacity 1 }}",
        "allocatable:",
        "{{ YAML .status.capacity 1 }}",
        "nodeInfo:",
        "  architecture: amd64",
        "  operatingSystem: linux",
        '  kubeletVersion: {{ printf "kwok-%s" Version | Quote }}',
        '  containerRuntimeVersion: {{ printf "kwok-%s" Version | Quote }}',
        '  kernelVersion: ""',
        '  kubeProxyVersion: ""',
        '  osImage: ""',
        '  machineID: ""',
        '  systemUUID: ""',
        '  bootID: ""',
        "phase: Running",
    ]
)


def _terminated(exit_code: int, reason: str) -> str:
    """The status a kubelet writes when it has stopped every container of a deleted pod."""
    return "\n".join(
        [
            "{{ $now := Now }}",
            "phase: Failed",
            "conditions:",
            '- {type: Ready, status: "False", reason: PodCompleted, lastTransitionTime: {{ $now | Quote }}}',
            '- {type: ContainersReady, status: "False", reason: PodCompleted, lastTransitionTime: {{ $now | Quote }}}',
            "containerStatuses:",
            "{{ range .spec.containers }}",
            "- name: {{ .name | Quote }}",
            "  image: {{ .image | Quote }}",
            '  imageID: ""',
            "  ready: false",
            "  started: false",
            "  restartCount: 0",
            "  state:",
            "    terminated:",
            f"      exitCode: {exit_code}",
            f"      reason: {reason}",
            # As a kubelet: a container that ran says when it started (its pod's start time here);
            # one that never ran has no startedAt.
            "{{ with $.status.startTime }}      startedAt: {{ . | Quote }}{{ end }}",
            "      finishedAt: {{ $now | Quote }}",
            "{{ end }}",
        ]
    )


def _stage(
    name: str, kind: str, expressions: list[dict[str, Any]], next_step: dict[str, Any], delay: dict[str, Any] | None = None
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "resourceRef": {"apiGroup": "v1", "kind": kind},
        "selector": {"matchExpressions": expressions},
        "next": next_step,
    }
    if delay is not None:
        spec["delay"] = delay
    return {"apiVersion": STAGE_API, "kind": "Stage", "metadata": {"name": name}, "spec": spec}


_DELETING = {"key": ".metadata.deletionTimestamp", "operator": "Exists"}
_LIVE = {"key": ".status.phase", "operator": "NotIn", "values": ["Succeeded", "Failed"]}
_ENDED = {"key": ".status.phase", "operator": "In", "values": ["Succeeded", "Failed"]}
_SLOW = f'.metadata.annotations["{IGNORES_SIGTERM}"]'


def stages() -> list[dict[str, Any]]:
    """Every stage KWOK runs here (see the module docstring)."""
    not_ready = {"key": '.status.conditions.[] | select( .type == "Ready" ) | .status', "operator": "NotIn", "values": ["True"]}
    ready = {"key": '.status.conditions.[] | select( .type == "Ready" ) | .status', "operator": "In", "values": ["True"]}
    return [
        _stage("node-ready", "Node", [not_ready], {"statusTemplate": _NODE_STATUS}),
        _stage(
            "node-heartbeat",
            "Node",
            [ready],
            {"statusTemplate": _NODE_STATUS},
            {"durationMilliseconds": 30000, "jitterDurationMilliseconds": 35000},
        ),
        _stage(
            "pod-stop-on-sigterm",
            "Pod",
            [_DELETING, _LIVE, {"key": _SLOW, "operator": "DoesNotExist"}],
            {"statusTemplate": _terminated(143, "Error")},
        ),
        _stage(
            "pod-killed-after-grace",
            "Pod",
            [_DELETING, _LIVE, {"key": _SLOW, "operator": "Exists"}],
            {"statusTemplate": _terminated(137, "Error")},
            {"durationMilliseconds": 0, "durationFrom": {"expressionFrom": ".metadata.deletionTimestamp"}},
        ),
        _stage("pod-remove", "Pod", [_DELETING, _ENDED], {"delete": True}),
    ]


def logs_crd() -> dict[str, Any]:
    """The ``Logs`` resource KWOK reads per pod (``--enable-crds=Logs``), with an open schema."""
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "logs.kwok.x-k8s.io"},
        "spec": {
            "group": "kwok.x-k8s.io",
            "scope": "Namespaced",
            "names": {"kind": "Logs", "listKind": "LogsList", "plural": "logs", "singular": "logs"},
            "versions": [
                {
                    "name": "v1alpha1",
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}},
                }
            ],
        },
    }


def node(name: str, *, cpu: str, memory: str, gpus: int = 0, pods: int = 110) -> dict[str, Any]:
    """A Node for KWOK to manage, with its capacity (KWOK's node-ready stage makes it Ready)."""
    capacity = {"cpu": cpu, "memory": memory, "pods": str(pods), "ephemeral-storage": "100Gi"}
    if gpus:
        capacity["nvidia.com/gpu"] = str(gpus)
    labels = {NODE_LABEL[0]: NODE_LABEL[1], "kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64"}
    if gpus:
        labels["nvidia.com/gpu.present"] = "true"
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels},
        "spec": {},
        "status": {"capacity": capacity, "allocatable": capacity},
    }
