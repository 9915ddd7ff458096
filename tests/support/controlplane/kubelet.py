"""What the suite reports as the kubelet of a KWOK node: pod status and container logs.

No container runs here, so a test says how a replica is doing and the suite writes it where a
kubelet would: ``pods/status`` (phases, container states, exit codes, ``OOMKilled``), and the
container's log file in the container runtime's format, named by a KWOK ``Logs`` object so that
``pods/log`` through the real API server returns it (``tail``, ``previous`` after a restart).
Only statuses the API server's validation accepts are produced.
"""

from __future__ import annotations

import datetime
import secrets
from pathlib import Path
from typing import Any

UNSCHEDULED_PHASES = ("Pending",)


def now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def pod_status(
    pod: dict[str, Any],
    phase: str,
    *,
    exit_code: int | None = None,
    reason: str | None = None,
    message: str | None = None,
    waiting_reason: str | None = None,
    restart_count: int = 0,
) -> dict[str, Any]:
    """The ``.status`` a kubelet reports for the (scheduled) ``pod`` in ``phase``:

    - ``Running``: every container running and ready;
    - ``Succeeded``/``Failed``: every container terminated with ``exit_code`` (0 / 1 by default)
      and ``reason`` (``Completed`` / ``Error`` by default, e.g. ``OOMKilled``);
    - ``Pending``: containers waiting with ``waiting_reason`` (``ImagePullBackOff``,
      ``CreateContainerConfigError``...) and ``message``.
    The scheduler's own conditions (``PodScheduled``) are kept as the scheduler wrote them.
    """
    if phase not in ("Pending", "Running", "Succeeded", "Failed"):
        raise ValueError(f"phase must be Pending, Running, Succeeded or Failed, not {phase!r}")
    stamp = now()
    old = pod.get("status") or {}
    containers = [c["name"] for c in (pod.get("spec") or {}).get("containers") or []]
    ready = "True" if phase == "Running" else "False"
    scheduled = [c for c in old.get("conditions") or [] if c.get("type") == "PodScheduled"]
    status: dict[str, Any] = {
        "phase": phase,
        "qosClass": old.get("qosClass", "BestEffort"),
        "startTime": old.get("startTime") or stamp,
        "hostIP": "127.0.0.1",
        "hostIPs": [{"ip": "127.0.0.1"}],
        "podIP": old.get("podIP") or f"10.244.{secrets.randbelow(250)}.{secrets.randbelow(250) + 2}",
        "conditions": scheduled
        + [
            {"type": t, "status": s, "lastProbeTime": None, "lastTransitionTime": stamp}
            for t, s in (("Initialized", "True"), ("ContainersReady", ready), ("Ready", ready))
        ],
    }
    status["podIPs"] = [{"ip": status["podIP"]}]
    if phase == "Failed" and message:
        status["message"] = message
    previous = {c.get("name"): c for c in old.get("containerStatuses") or []}
    statuses = []
    for name in containers:
        container_id = (previous.get(name) or {}).get("containerID") or "containerd://" + secrets.token_hex(16)
        if restart_count > int((previous.get(name) or {}).get("restartCount") or 0):
            container_id = "containerd://" + secrets.token_hex(16)
        cs: dict[str, Any] = {
            "name": name,
            "image": _image(pod, name),
            "imageID": "",
            "restartCount": restart_count,
            "ready": phase == "Running",
            "started": phase == "Running",
            "containerID": container_id,
        }
        if phase == "Running":
            cs["state"] = {"running": {"startedAt": stamp}}
        elif phase == "Pending":
            cs["state"] = {"waiting": {"reason": waiting_reason or "ContainerCreating", "message": message or waiting_reason or ""}}
            cs.pop("containerID")
        else:
            code = exit_code if exit_code is not None else (0 if phase == "Succeeded" else 1)
            terminated = {
                "exitCode": code,
                "reason": reason or ("Completed" if code == 0 else "Error"),
                "startedAt": status["startTime"],
                "finishedAt": stamp,
                "containerID": container_id,
            }
            if message:
                terminated["message"] = message
            cs["state"] = {"terminated": terminated}
        if restart_count > 0:
            cs["lastState"] = {
                "terminated": {
                    "exitCode": exit_code if exit_code not in (None, 0) else 1,
                    "reason": "Error",
                    "startedAt": status["startTime"],
                    "finishedAt": stamp,
                }
            }
        statuses.append(cs)
    status["containerStatuses"] = statuses
    return status


def _image(pod: dict[str, Any], container: str) -> str:
    for c in (pod.get("spec") or {}).get("containers") or []:
        if c["name"] == container:
            return str(c.get("image", ""))
    return ""


def cri_log(text: str) -> str:
    """``text`` in the container runtime's log format (what kubelets read ``pods/log`` from)."""
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    lines = text.splitlines(keepends=True)
    out = []
    for line in lines:
        tag = "F" if line.endswith("\n") else "P"
        out.append(f"{stamp} stdout {tag} {line.rstrip(chr(10))}\n")
    return "".join(out)


def logs_object(namespace: str, pod: str, current: Path, previous: Path | None) -> dict[str, Any]:
    """The KWOK ``Logs`` object that points ``pods/log`` of ``pod`` at the files."""
    log: dict[str, Any] = {"logsFile": str(current), "follow": True}
    if previous is not None:
        log["previousLogsFile"] = str(previous)
    return {
        "apiVersion": "kwok.x-k8s.io/v1alpha1",
        "kind": "Logs",
        "metadata": {"name": pod, "namespace": namespace},
        "spec": {"logs": [log]},
    }
