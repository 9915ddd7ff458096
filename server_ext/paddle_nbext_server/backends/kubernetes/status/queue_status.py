"""Kueue's Workloads -> what a queued job is waiting for, in words.

Kueue makes one Workload per queued object: one for a JobSet (`jobset` mode), one per Job
(`jobs` mode, so a job's roles can be admitted apart).  Its conditions say where it stands:
`QuotaReserved`=False with Kueue's reason ("insufficient unused quota for nvidia.com/gpu in
flavor gpu, 4 more needed"), `Admitted`=True, `Evicted`=True with reason `Preempted`, and
`spec.active`=false once it is stopped (a cancel).  A preempted Workload keeps `Evicted` and
`Preempted`=True (the latter's reason says who preempted it) until Kueue reserves quota for it
again.  Pure functions of watched objects and of the cached queue positions
(queue_positions.py): listing jobs costs no API call.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from ..build.jobset import QUEUE_LABEL

QUEUED = "Queued"
ADMITTED = "Admitted"
PREEMPTED = "Preempted"
DEACTIVATED = "Deactivated"

#: Kueue's reasons of the `Preempted` condition, in words ("preempted <words>").
PREEMPTED_BY = {
    "InClusterQueue": "by a higher-priority workload",
    "InCohortReclaimWhileBorrowing": "by a higher-priority workload of the cohort (this one was borrowing quota)",
    "InCohortReclamation": "because another queue of the cohort reclaimed its quota",
    "InCohortFairSharing": "to share the cohort's quota fairly",
}


@dataclass(frozen=True)
class QueueWords:
    """Where one Workload stands: `state` (one of the constants above), a sentence, and whether
    Kueue evicted it (preempted, or stopped for another reason) and has not admitted it again:
    then Kueue is stopping or has stopped its pods, and how they end is not the job's doing."""

    state: str
    text: str
    evicted: bool = False

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


def finished(workload: dict[str, Any]) -> bool:
    """Kueue's `Finished` condition: the job it stood for has ended (it holds no place in a queue)."""
    return _true(_condition(workload, "Finished"))


def preempted_by(workload: dict[str, Any]) -> str:
    preempted = _condition(workload, "Preempted")
    reason = str((preempted or {}).get("reason") or "") if _true(preempted) else ""
    if not reason or reason in PREEMPTED_BY:
        return PREEMPTED_BY[reason or "InClusterQueue"]
    return f"by Kueue ({(preempted or {}).get('message') or reason})"


def queue_of(workload: dict[str, Any]) -> str:
    spec_queue = (workload.get("spec") or {}).get("queueName")
    return str(spec_queue or ((workload.get("metadata") or {}).get("labels") or {}).get(QUEUE_LABEL) or "its queue")


def waiting_for(message: str) -> str:
    """Kueue's reason for not reserving quota, as the part after "waiting for ..."."""
    text = message.strip().rstrip(".")
    if "quota" in text:
        return f"waiting for quota: {text}"
    return f"waiting: {text}" if text else "waiting for its turn"


def words(workload: dict[str, Any], position: str | None = None) -> QueueWords:
    """Where `workload` stands, in the words users see ("queued in team-a (position 3 of 7);
    waiting for quota: ...", "admitted by cluster queue gpu", "preempted by a higher-priority
    workload"); `position` is its place in the LocalQueue when known ("position 3 of 7",
    queue_positions.Position.words)."""
    queue = queue_of(workload)
    if position:
        queue = f"{queue} ({position})"
    if (workload.get("spec") or {}).get("active") is False:
        return QueueWords(DEACTIVATED, f"stopped in queue {queue} (its Kueue Workload is deactivated)")
    evicted = _condition(workload, "Evicted")
    admitted = _condition(workload, "Admitted")
    if evicted is not None and _true(evicted):
        # Admitted stays True until Kueue has stopped the job's pods; Evicted until it is admitted again.
        again = f"stopping its pods to queue again in {queue}" if _true(admitted) else f"queued again in {queue}"
        if evicted.get("reason") == "Preempted":
            return QueueWords(PREEMPTED, f"preempted {preempted_by(workload)}; {again}", evicted=True)
        return QueueWords(QUEUED, f"evicted by Kueue ({evicted.get('message') or evicted.get('reason')}); {again}", evicted=True)
    if _true(admitted):
        cluster_queue = ((workload.get("status") or {}).get("admission") or {}).get("clusterQueue")
        return QueueWords(ADMITTED, f"admitted by cluster queue {cluster_queue}" if cluster_queue else "admitted")
    reserved = _condition(workload, "QuotaReserved")
    message = str((reserved or {}).get("message") or "") if reserved and reserved.get("status") == "False" else ""
    return QueueWords(QUEUED, f"queued in {queue}; {waiting_for(message)}")


def job_words(
    workloads: Iterable[dict[str, Any]],
    owners: list[tuple[str, str, str]],
    position_of: Callable[[dict[str, Any]], str | None] | None = None,
) -> dict[str, QueueWords]:
    """For each (label, kind, name) in `owners` (the job's JobSet, or each role's Job) that Kueue
    manages: the newest Workload's words (with its queue position from `position_of`), keyed by label."""
    listed = list(workloads)
    found: dict[str, QueueWords] = {}
    for label, kind, name in owners:
        mine = owned_workloads(listed, kind, name)
        if mine:
            found[label] = words(mine[0], position_of(mine[0]) if position_of else None)
    return found


def stopped_by_kueue(found: dict[str, QueueWords]) -> bool:
    """Whether Kueue evicted any part of the job (`job_words`) and has not admitted it again: its
    pods end because Kueue suspends the JobSet or Jobs (a replica's exit code 143 is SIGTERM from
    that stop, not a failure), and the job waits in its queue to run again."""
    return any(w.evicted for w in found.values())


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
