"""Kueue's Workloads -> what a queued job is waiting for, in words.

Kueue makes one Workload per queued object: one for a JobSet (`jobset` mode), one per Job
(`jobs` mode, so a job's roles can be admitted apart).  Its conditions say where it stands:
`QuotaReserved`=False with Kueue's reason ("insufficient unused quota for nvidia.com/gpu in
flavor gpu, 4 more needed"), `Admitted`=True, `Evicted`=True with reason `Preempted`, and
`spec.active`=false once it is stopped (a cancel).  Pure functions of watched objects: listing
jobs costs no API call.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from .jobset import QUEUE_LABEL

QUEUED = "Queued"
ADMITTED = "Admitted"
PREEMPTED = "Preempted"
DEACTIVATED = "Deactivated"


@dataclass(frozen=True)
class QueueWords:
    """Where one Workload stands: `state` (one of the constants above) and a sentence."""

    state: str
    text: str

    @property
    def waiting(self) -> bool:
        return self.state != ADMITTED


def owned_workloads(workloads: Iterable[dict[str, Any]], kind: str, name: str) -> list[dict[str, Any]]:
    """The Workloads Kueue made for the object `kind`/`name` (newest first: a deleted and
    resubmitted job of the same name leaves an older one for a moment)."""
    found = [
        w
        for w in workloads
        if any(r.get("kind") == kind and r.get("name") == name for r in (w.get("metadata") or {}).get("ownerReferences") or [])
    ]
    return sorted(found, key=lambda w: (w.get("metadata") or {}).get("creationTimestamp") or "", reverse=True)


def _condition(workload: dict[str, Any], kind: str) -> dict[str, Any] | None:
    for condition in (workload.get("status") or {}).get("conditions") or []:
        if condition.get("type") == kind:
            return dict(condition)
    return None


def _true(condition: dict[str, Any] | None) -> bool:
    return condition is not None and condition.get("status") == "True"


def _queue(workload: dict[str, Any]) -> str:
    spec_queue = (workload.get("spec") or {}).get("queueName")
    return str(spec_queue or ((workload.get("metadata") or {}).get("labels") or {}).get(QUEUE_LABEL) or "its queue")


def _waiting_for(message: str) -> str:
    """Kueue's reason for not reserving quota, as the part after "waiting for ..."."""
    text = message.strip().rstrip(".")
    if "quota" in text:
        return f"waiting for quota: {text}"
    return f"waiting: {text}" if text else "waiting for its turn"


def words(workload: dict[str, Any]) -> QueueWords:
    """Where `workload` stands, in the words users see ("queued in team-a; waiting for quota:
    ...", "admitted by cluster queue gpu", "preempted by a higher-priority workload")."""
    queue = _queue(workload)
    if (workload.get("spec") or {}).get("active") is False:
        return QueueWords(DEACTIVATED, f"stopped in queue {queue} (its Kueue Workload is deactivated)")
    evicted = _condition(workload, "Evicted")
    admitted = _condition(workload, "Admitted")
    if evicted is not None and _true(evicted) and not _true(admitted):
        if evicted.get("reason") == "Preempted":
            return QueueWords(PREEMPTED, f"preempted by a higher-priority workload; queued again in {queue}")
        return QueueWords(QUEUED, f"evicted by Kueue ({evicted.get('message') or evicted.get('reason')}); queued again in {queue}")
    if _true(admitted):
        cluster_queue = ((workload.get("status") or {}).get("admission") or {}).get("clusterQueue")
        return QueueWords(ADMITTED, f"admitted by cluster queue {cluster_queue}" if cluster_queue else "admitted")
    reserved = _condition(workload, "QuotaReserved")
    message = str((reserved or {}).get("message") or "") if reserved and reserved.get("status") == "False" else ""
    return QueueWords(QUEUED, f"queued in {queue}; {_waiting_for(message)}")


def job_words(workloads: Iterable[dict[str, Any]], owners: list[tuple[str, str, str]]) -> dict[str, QueueWords]:
    """For each (label, kind, name) in `owners` (the job's JobSet, or each role's Job) that Kueue
    manages: the newest Workload's words, keyed by label."""
    listed = list(workloads)
    found: dict[str, QueueWords] = {}
    for label, kind, name in owners:
        mine = owned_workloads(listed, kind, name)
        if mine:
            found[label] = words(mine[0])
    return found


def summary(found: dict[str, QueueWords]) -> str | None:
    """One sentence for the job while it waits: the one Workload's words (JobSet), else each
    waiting role's ("trainer: queued in ..."), None once every part is admitted."""
    waiting = {label: w for label, w in found.items() if w.waiting}
    if not waiting:
        return None
    if len(found) == 1:
        return _sentence(next(iter(waiting.values())).text)
    return _sentence("; ".join(f"{label}: {w.text}" for label, w in waiting.items()))


def _sentence(text: str) -> str:
    return text[:1].upper() + text[1:] + "."
