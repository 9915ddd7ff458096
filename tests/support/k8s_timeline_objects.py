"""Synthetic Kubernetes objects for the timeline tests: a job record, its pods, the pods' events
and Kueue Workloads, shaped as the API serves them (only the fields the backend reads)."""

from __future__ import annotations

import json
from typing import Any

from paddle_nbext.model.contract import (
    ATTEMPT_LABEL,
    JOB_LABEL,
    OWNER_ANNOTATION,
    RECORD_UID_LABEL,
    RESTART_ANNOTATION,
    RESUMED_FROM_ANNOTATION,
    ROLE_LABEL,
    SPEC_KEY,
    STATUS_ANNOTATION,
)
from paddle_nbext_server.backends.kubernetes.build import manifests
from paddle_nbext_server.runtime.replicas import INDEX_KEY

OWNER = "alice"
JOB = "mnist"
KEY = manifests.object_name(JOB, OWNER)
RECORD_UID = "rec-1"
CREATED = "2026-12-05T14:00:00Z"


def spec(trainers: int = 2) -> dict[str, Any]:
    return {"job_name": JOB, "mode": "collective", "trainers": trainers, "pservers": 0, "entry_point": "python train.py"}


def record(
    *,
    restart: dict[str, Any] | None = None,
    final: dict[str, Any] | None = None,
    resumed_from: dict[str, Any] | None = None,
    owner: str = OWNER,
    trainers: int = 2,
) -> dict[str, Any]:
    annotations = {OWNER_ANNOTATION: owner}
    if restart is not None:
        annotations[RESTART_ANNOTATION] = json.dumps(restart)
    if final is not None:
        annotations[STATUS_ANNOTATION] = json.dumps(final)
    if resumed_from is not None:
        annotations[RESUMED_FROM_ANNOTATION] = json.dumps(resumed_from)
    return {
        "metadata": {
            "name": KEY,
            "uid": RECORD_UID,
            "resourceVersion": "1",
            "creationTimestamp": CREATED,
            "labels": {JOB_LABEL: KEY},
            "annotations": annotations,
        },
        "data": {SPEC_KEY: json.dumps(spec(trainers))},
    }


def pod(
    role: str,
    index: int,
    *,
    uid: str,
    node: str | None = "node-a",
    scheduled: str | None = "2026-12-05T14:00:05Z",
    unschedulable: str | None = None,
    started: str | None = None,
    terminated: dict[str, Any] | None = None,
    phase: str = "Running",
    conditions: list[dict[str, Any]] | None = None,
    reason: str | None = None,
    message: str | None = None,
    attempt: int = 0,
    limit: str = "2Gi",
) -> dict[str, Any]:
    state: dict[str, Any] = {}
    if terminated is not None:
        state["terminated"] = terminated
    elif started is not None:
        state["running"] = {"startedAt": started}
    every = list(conditions or [])
    if scheduled is not None:
        every.append({"type": "PodScheduled", "status": "True", "lastTransitionTime": scheduled})
    if unschedulable is not None:
        every.append(
            {
                "type": "PodScheduled",
                "status": "False",
                "reason": "Unschedulable",
                "message": "0/3 nodes are available: 3 Insufficient nvidia.com/gpu.",
                "lastTransitionTime": unschedulable,
            }
        )
    status: dict[str, Any] = {
        "phase": phase,
        "conditions": every,
        "containerStatuses": [{"name": "main", "state": state, "restartCount": 0}],
    }
    if reason:
        status["reason"] = reason
    if message:
        status["message"] = message
    return {
        "metadata": {
            "name": f"{KEY}-{role}-{index}-{uid[-5:]:0>5}",
            "uid": uid,
            "creationTimestamp": "2026-12-05T14:00:01Z",
            "labels": {JOB_LABEL: KEY, ROLE_LABEL: role, INDEX_KEY: str(index), RECORD_UID_LABEL: RECORD_UID, ATTEMPT_LABEL: str(attempt)},
        },
        "spec": {
            "nodeName": node if scheduled else None,
            "containers": [{"name": "main", "resources": {"limits": {"memory": limit}}}],
        },
        "status": status,
    }


def event(reason: str, about: dict[str, Any], message: str, *, first: str, uid: str | None = None, kind: str = "Warning") -> dict[str, Any]:
    meta = about.get("metadata") or {}
    return {
        "metadata": {"name": f"{meta.get('name')}.{reason.lower()}", "uid": uid or f"ev-{reason}"},
        "involvedObject": {"kind": "Pod", "name": meta.get("name"), "uid": meta.get("uid")},
        "reason": reason,
        "message": message,
        "type": kind,
        "firstTimestamp": first,
        "lastTimestamp": first,
    }


def workload(
    conditions: list[dict[str, Any]], *, uid: str = "wl-1", queue: str = "team-a", cluster_queue: str | None = None
) -> dict[str, Any]:
    status: dict[str, Any] = {"conditions": conditions}
    if cluster_queue:
        status["admission"] = {"clusterQueue": cluster_queue}
    return {
        "metadata": {
            "name": f"job-{KEY}-trainer-1234",
            "uid": uid,
            "creationTimestamp": "2026-12-05T14:00:01Z",
            "ownerReferences": [{"kind": "Job", "name": f"{KEY}-trainer"}],
        },
        "spec": {"queueName": queue},
        "status": status,
    }
