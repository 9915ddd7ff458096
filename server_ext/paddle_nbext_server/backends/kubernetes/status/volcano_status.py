"""A job's PodGroup and pods -> why its gang waits for Volcano, in words.

A pod with `schedulerName: volcano` is never looked at by the default scheduler, so while it
waits it may carry no `PodScheduled` condition at all: its own status says nothing.  Volcano
writes where the gang stands on the PodGroup (watched in the cache with the job's other
objects): `status.phase` Pending (the queue has not admitted the gang), Inqueue (admitted,
being placed), Running; and a condition `Unschedulable` whose message is Volcano's reason
("3/3 tasks in gang unschedulable: pod group is not ready, 3 Pending, 3 minAvailable").
A PodGroup without any status was never seen by a Volcano scheduler.  Pure functions of
watched objects: listing jobs costs no API call.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..build.volcano import SCHEDULER_NAME

PENDING, INQUEUE = "Pending", "Inqueue"


def waits_for_volcano(pod: dict[str, Any]) -> bool:
    """A pod of the gang that Volcano has not bound to a node yet."""
    spec, status = pod.get("spec") or {}, pod.get("status") or {}
    if spec.get("schedulerName") != SCHEDULER_NAME or spec.get("nodeName") or (pod.get("metadata") or {}).get("deletionTimestamp"):
        return False
    return (status.get("phase") or "Pending") == "Pending"


def _unschedulable(pod_group: dict[str, Any]) -> str | None:
    """Volcano's newest `Unschedulable` message, if that condition stands."""
    found = [
        c for c in (pod_group.get("status") or {}).get("conditions") or [] if c.get("type") == "Unschedulable" and c.get("status") == "True"
    ]
    if not found:
        return None
    newest = max(found, key=lambda c: c.get("lastTransitionTime") or "")
    return str(newest.get("message") or newest.get("reason") or "Unschedulable").strip().rstrip(".")


def gang_state(pod_group: dict[str, Any]) -> str:
    """Where the gang stands, as the part of a sentence after its name."""
    reason = _unschedulable(pod_group)
    if reason:
        return reason
    phase = (pod_group.get("status") or {}).get("phase")
    queue = (pod_group.get("spec") or {}).get("queue") or "default"
    if phase == PENDING:
        return f"queue {queue} has not admitted it yet"
    if phase == INQUEUE:
        return f"admitted by queue {queue}, waiting for room on the nodes for all of it"
    if not phase:
        return "no Volcano scheduler has looked at it yet (is Volcano running in the cluster?)"
    return f"PodGroup phase {phase}"


def pod_notes(pods: Iterable[dict[str, Any]], pod_group: dict[str, Any] | None) -> dict[str, str]:
    """Pod name -> why it is not scheduled, for the job's pods that wait for Volcano (status
    uses a note only for a pod whose own status gives no reason: a pod's own words come first)."""
    if pod_group is None:
        return {}
    words = f"Waiting for the volcano scheduler: {gang_state(pod_group)}"
    return {str(p["metadata"]["name"]): words for p in pods if waits_for_volcano(p)}


def job_note(pods: Iterable[dict[str, Any]], pod_group: dict[str, Any] | None) -> str | None:
    """The job's message while its gang waits for Volcano (some pod is not bound yet, or the
    PodGroup is not running: Volcano's admission webhook refuses the pods of a Pending PodGroup,
    so a queued gang may have no pod at all), else None."""
    if pod_group is None:
        return None
    gang = [p for p in pods if (p.get("spec") or {}).get("schedulerName") == SCHEDULER_NAME]
    if not any(waits_for_volcano(p) for p in gang) and (
        gang or (pod_group.get("status") or {}).get("phase") not in (None, PENDING, INQUEUE)
    ):
        return None
    name = (pod_group.get("metadata") or {}).get("name")
    size = (pod_group.get("spec") or {}).get("minMember")
    return f"Waiting for the volcano scheduler to place all {size} replicas together (PodGroup {name}): {gang_state(pod_group)}."
