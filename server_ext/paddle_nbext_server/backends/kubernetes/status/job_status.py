"""The job record + the job's pods -> `JobStatus` (and the policy's decision while it runs).

The reading of a pod (phase, reason in words, restarts) is `replicas.observe_replicas`, the
same code the in-cluster master runs, so the server and the master never disagree.  Once a job
has ended its final status is stored in the record (annotation `paddle-nbext/status`), which is
what users see from then on — pods may be gone by then (stopped, TTL, node loss).
"""

from __future__ import annotations

import json
from typing import Any

from paddle_nbext.model.contract import OWNER_ANNOTATION, RESUMED_FROM_ANNOTATION, SPEC_KEY, STATUS_ANNOTATION, Phase
from paddle_nbext.model.status import JobStatus, ReplicaStatus, resumed_link

from ....runtime import policy, replicas

BACKEND_NAME = "kubernetes"


def record_owner(record: dict[str, Any]) -> str:
    return str(((record.get("metadata") or {}).get("annotations") or {}).get(OWNER_ANNOTATION, ""))


def record_spec(record: dict[str, Any]) -> dict[str, Any]:
    try:
        spec = json.loads((record.get("data") or {}).get(SPEC_KEY) or "{}")
    except ValueError:
        return {}
    return spec if isinstance(spec, dict) else {}


def link_record(record: dict[str, Any], resumed_from: dict[str, Any]) -> None:
    """Write the link of a job that Resume started into its record (before it is created)."""
    record["metadata"].setdefault("annotations", {})[RESUMED_FROM_ANNOTATION] = json.dumps(resumed_from, sort_keys=True)


def record_resumed_from(record: dict[str, Any]) -> dict[str, Any] | None:
    raw = ((record.get("metadata") or {}).get("annotations") or {}).get(RESUMED_FROM_ANNOTATION)
    try:
        return resumed_link(json.loads(raw)) if raw else None
    except ValueError:
        return None


def final_of(record: dict[str, Any]) -> dict[str, Any] | None:
    raw = ((record.get("metadata") or {}).get("annotations") or {}).get(STATUS_ANNOTATION)
    if not raw:
        return None
    try:
        final = json.loads(raw)
    except ValueError:
        return None
    return final if isinstance(final, dict) else None


def job_status(
    record: dict[str, Any],
    pods: list[dict[str, Any]],
    role_notes: dict[str, replicas.RoleNote] | None = None,
    pod_notes: dict[str, str] | None = None,
    queue_note: str | None = None,
    unreachable: frozenset[str] = frozenset(),
) -> tuple[JobStatus, policy.Decision | None, list[replicas.ReplicaView]]:
    """The status users see; the decision is None once the job's end is recorded.
    The notes (see `replicas.decide_job`) say what the Jobs and Events add to the pods;
    `queue_note` (queue_status.summary) is the job's message while it is pending in a queue."""
    meta = record.get("metadata") or {}
    spec = record_spec(record)
    base: dict[str, Any] = {
        # The user's name of the job (the record is named `<job>-<owner tag>`; a record from before
        # names were per owner has the bare name, which its spec holds too).
        "name": str(spec.get("job_name") or meta.get("name", "")),
        "owner": record_owner(record),
        "backend": BACKEND_NAME,
        "spec": spec,
        "created": meta.get("creationTimestamp") or "",
        "resumed_from": record_resumed_from(record),
    }
    final = final_of(record)
    if final is not None:
        status = JobStatus(
            **base,
            phase=final.get("phase", Phase.FAILED),
            message=final.get("message", ""),
            started=final.get("started"),
            finished=final.get("finished"),
            replicas=[ReplicaStatus.from_dict(r) for r in final.get("replicas", [])],
        )
        return status, None, []
    views, decision = replicas.decide_job(record, pods, role_notes=role_notes, pod_notes=pod_notes, unreachable=unreachable)
    started = [v.started for v in views if v.started]
    status = JobStatus(
        **base,
        phase=decision.phase,
        message=queue_note if queue_note and decision.phase == Phase.PENDING else decision.message,
        started=min(started) if started else None,
        finished=None,
        replicas=[ReplicaStatus(**v.public()) for v in views],
    )
    return status, decision, views
