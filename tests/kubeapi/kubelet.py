"""The pod status a kubelet would report, built for the suite that plays the kubelet.

Used both against the emulator and against a real cluster without nodes (written through
``pods/status``), so it only produces what the apiserver's validation accepts.
"""

from __future__ import annotations

import secrets
from typing import Any

from .store import now

UNSCHEDULABLE_MESSAGE = "0/1 nodes are available: 1 Insufficient cpu. preemption: 0/1 nodes are available."


def pod_status(pod: dict[str, Any], phase: str, *, exit_code: int | None = None, reason: str | None = None,
               message: str | None = None, waiting_reason: str | None = None,
               restart_count: int = 0) -> dict[str, Any]:
    """The ``.status`` for ``pod`` in ``phase``:

    - ``Running``: every container running and ready;
    - ``Succeeded``/``Failed``: every container terminated with ``exit_code`` (0 / 1 by default) and
      ``reason`` (``Completed`` / ``Error`` by default, e.g. ``OOMKilled``);
    - ``Pending`` with ``waiting_reason`` (``ImagePullBackOff``, ``CrashLoopBackOff``...): scheduled,
      containers waiting; ``Pending`` without it: ``PodScheduled=False`` with ``reason``
      (default ``Unschedulable``) and ``message`` (default: the scheduler's insufficient-cpu text).
    """
    if phase not in ("Pending", "Running", "Succeeded", "Failed"):
        raise ValueError(f"phase must be Pending, Running, Succeeded or Failed, not {phase!r}")
    stamp = now()
    old = pod.get("status") or {}
    containers = [c["name"] for c in (pod.get("spec") or {}).get("containers") or []]
    status: dict[str, Any] = {"phase": phase, "qosClass": old.get("qosClass", "BestEffort")}
    if phase == "Pending" and waiting_reason is None:
        status["conditions"] = [{"type": "PodScheduled", "status": "False", "lastProbeTime": None,
                                 "lastTransitionTime": stamp, "reason": reason or "Unschedulable",
                                 "message": message or UNSCHEDULABLE_MESSAGE}]
        return status
    started = old.get("startTime") or stamp
    ready = "True" if phase == "Running" else "False"
    status.update(startTime=started, hostIP="10.0.0.10", hostIPs=[{"ip": "10.0.0.10"}],
                  podIP=old.get("podIP") or f"10.244.{secrets.randbelow(250)}.{secrets.randbelow(250) + 2}")
    status["podIPs"] = [{"ip": status["podIP"]}]
    status["conditions"] = [
        {"type": t, "status": s, "lastProbeTime": None, "lastTransitionTime": stamp}
        for t, s in (("PodScheduled", "True"), ("Initialized", "True"), ("ContainersReady", ready), ("Ready", ready))]
    if phase in ("Succeeded", "Failed") and phase == "Failed" and message:
        status["message"] = message
    statuses = []
    for name in containers:
        cs: dict[str, Any] = {"name": name, "image": _image(pod, name), "imageID": "", "restartCount": restart_count,
                              "ready": phase == "Running", "started": phase == "Running",
                              "containerID": "containerd://" + secrets.token_hex(16)}
        if phase == "Running":
            cs["state"] = {"running": {"startedAt": stamp}}
        elif phase == "Pending":
            cs["state"] = {"waiting": {"reason": waiting_reason, "message": message or waiting_reason}}
            cs.pop("containerID")
        else:
            code = exit_code if exit_code is not None else (0 if phase == "Succeeded" else 1)
            cs["state"] = {"terminated": {"exitCode": code,
                                          "reason": reason or ("Completed" if code == 0 else "Error"),
                                          "startedAt": started, "finishedAt": stamp, "containerID": cs["containerID"]}}
            if message:
                cs["state"]["terminated"]["message"] = message
        if restart_count > 0:
            cs["lastState"] = {"terminated": {"exitCode": exit_code if exit_code not in (None, 0) else 1,
                                              "reason": "Error", "startedAt": started, "finishedAt": stamp}}
        statuses.append(cs)
    status["containerStatuses"] = statuses
    return status


def _image(pod: dict[str, Any], container: str) -> str:
    for c in (pod.get("spec") or {}).get("containers") or []:
        if c["name"] == container:
            return str(c.get("image", ""))
    return ""
