"""A Kubernetes job's timeline entries from its objects in the watch cache, in users' words.

Each entry carries the time the object says it happened (a condition's `lastTransitionTime`, a
container's `startedAt`, an event's first time, the record's restart bookkeeping), never when the
server noticed: a server that was down derives the same entries later with the same times.  Each
has a stable `key` naming what it is about (a pod's uid, a Workload condition's transition), so a
second derivation of the same objects, after a server restart too, adds nothing
(timeline/store.py keeps the keys).  Where two sources say the same thing (the pod's `PodScheduled`
condition and the scheduler's FailedScheduling event; a pod's `DisruptionTarget` condition and the
kubelet's Evicted event) they share a key, so the first one seen is the one kept.

Pure functions of watched objects: no API call, no file.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from paddle_nbext.model.contract import RECORD_UID_LABEL, format_time, parse_time

from ....runtime import pod_views, policy, replicas
from ..status import queue_status, volcano_status
from ..status.job_status import final_of, record_resumed_from
from ..status.resume_note import attempt_label


@dataclass(frozen=True)
class Derived:
    """One timeline entry before the writer numbers it (`timeline.Entry` without `seq`)."""

    key: str
    t: str  # the API's time format (`contract.format_time`)
    kind: str
    text: str
    role: str | None = None
    index: int | None = None

    @property
    def epoch(self) -> float:
        moment = parse_time(self.t)
        return moment.timestamp() if moment is not None else 0.0


def stamp(text: Any) -> str | None:
    """An object's time in the timeline's format (milliseconds, `Z`), None when it has none."""
    moment = parse_time(text) if isinstance(text, str) and text else None
    return format_time(moment) if moment is not None else None


def stamp_epoch(seconds: float) -> str | None:
    """Epoch seconds in the timeline's format; None for a number no clock shows (a damaged file)."""
    try:
        return format_time(datetime.fromtimestamp(seconds, timezone.utc))
    except (OverflowError, OSError, ValueError):
        return None


def sentence(text: str) -> str:
    """`text` as one sentence: a capital first letter and one full stop."""
    text = text.strip().rstrip(".")
    return f"{text[:1].upper()}{text[1:]}." if text else ""


def said(text: str) -> str:
    """`text` with one full stop (a replica's entry starts with its role, in lower case, as the
    local backend's do: "trainer 1 finished.")."""
    text = text.strip().rstrip(".")
    return f"{text}." if text else ""


# ---------------------------------------------------------------------------------- the record


def record_entries(record: dict[str, Any]) -> list[Derived]:
    """Submitted, each whole restart the record's bookkeeping holds (with its cause), the end."""
    meta = record.get("metadata") or {}
    found: list[Derived] = []
    created = stamp(meta.get("creationTimestamp"))
    if created:
        origin = record_resumed_from(record)
        resumed = ""
        if origin is not None:
            step = f" from step {origin['step']}" if origin.get("step") is not None else ""
            resumed = f" to resume job {origin['job']}{step}"
        found.append(Derived("submitted", created, "submitted", f"Submitted{resumed}."))
    restarts = replicas.Restarts.of(record)
    began = stamp_epoch(restarts.began) if restarts.began is not None else None
    if restarts.attempt > 0 and began is not None:
        # The record keeps the latest restart's cause only: earlier ones were written as they
        # happened (while a server ran), each under its own attempt's key.
        found.append(Derived(f"restart:{restarts.attempt}", began, "restart", sentence(restarts.message or f"restart {restarts.attempt}")))
    final = final_of(record)
    if final is not None:
        when = stamp(final.get("finished")) or stamp(meta.get("creationTimestamp"))
        if when:
            found.append(Derived("ended", when, "ended", f"{final.get('phase') or 'Ended'}: {final.get('message') or ''}".rstrip(": ")))
    return found


# ---------------------------------------------------------------------------------- pods

_REPLICA_OF_POD = re.compile(r"-(pserver|trainer)(?:-0)?-(\d+)-[a-z0-9]+$")


def _condition(pod: dict[str, Any], kind: str) -> dict[str, Any]:
    for condition in (pod.get("status") or {}).get("conditions") or []:
        if condition.get("type") == kind:
            return dict(condition)
    return {}


def _uid(obj: dict[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    return str(meta.get("uid") or meta.get("name") or "")


def _memory_limit(pod: dict[str, Any]) -> str | None:
    for container in (pod.get("spec") or {}).get("containers") or []:
        if container.get("name") == replicas.CONTAINER:
            limit = ((container.get("resources") or {}).get("limits") or {}).get("memory")
            return str(limit) if limit else None
    return None


def _disruption(pod: dict[str, Any], who: str) -> Derived | None:
    """Evicted, preempted, drained or lost with its node: the pod's own account of it."""
    status, node = pod.get("status") or {}, (pod.get("spec") or {}).get("nodeName")
    target = _condition(pod, "DisruptionTarget")
    finished = ((pod_views.container_status(pod).get("state") or {}).get("terminated") or {}).get("finishedAt")
    when = stamp(target.get("lastTransitionTime")) or stamp(finished) or stamp(_condition(pod, "Ready").get("lastTransitionTime"))
    lost = replicas.node_lost_by(pod)
    if lost is not None:
        text = f"Node {lost} stopped responding; {who} lost."
    elif status.get("reason") == "Evicted":
        message = str(status.get("message") or "").strip().rstrip(".")
        text = f"{who} was evicted by the kubelet{f' of node {node}' if node else ''}" + (f": {message}." if message else ".")
    elif target.get("status") == "True":
        text = f"{who} {replicas.disruption_of(pod)}."
    else:
        return None
    return Derived(f"disrupted:{_uid(pod)}", when, "warning", said(text) if text.startswith(who) else sentence(text)) if when else None


def _ended(pod: dict[str, Any], role: str, index: int, who: str) -> Derived | None:
    container = pod_views.container_status(pod)
    terminated = (container.get("state") or {}).get("terminated") or {}
    when = stamp(terminated.get("finishedAt"))
    if not when:
        return None
    code = terminated.get("exitCode")
    if terminated.get("reason") == "OOMKilled":
        limit = _memory_limit(pod)
        text = f"{who} was killed for running out of memory (OOMKilled{f', limit {limit}' if limit else ''})."
    elif code == 0:
        text = f"{who} finished."
    elif code == 128 + 15:
        return None  # SIGTERM: stopped by the job's end or restart, which the timeline says itself
    else:
        reason = replicas.pod_view(pod, role, index).reason or policy.describe_exit(int(code or 0))
        text = f"{who} failed: {reason}."
    return Derived(f"ended:{_uid(pod)}", when, "replica_ended", said(text), role, index)


def pod_entries(pod: dict[str, Any]) -> list[Derived]:
    """Scheduled (on which node), cannot be scheduled (why), started, ended (how: OOMKilled in
    words), evicted / preempted / lost with its node."""
    identity = replicas.pod_identity(pod)
    if identity is None:
        return []
    role, index = identity
    who = f"{role} {index}"
    uid, node = _uid(pod), (pod.get("spec") or {}).get("nodeName")
    found: list[Derived] = []
    scheduled = _condition(pod, "PodScheduled")
    when = stamp(scheduled.get("lastTransitionTime"))
    if when and scheduled.get("status") == "True" and node:
        found.append(Derived(f"scheduled:{uid}", when, "started", f"{who} scheduled on node {node}.", role, index))
    elif when and scheduled.get("status") == "False":
        message = str(scheduled.get("message") or scheduled.get("reason") or "no node fits it").strip().rstrip(".")
        found.append(Derived(f"unschedulable:{uid}", when, "waiting", f"{who} cannot be scheduled yet: {message}.", role, index))
    state = pod_views.container_status(pod).get("state") or {}
    started = stamp((state.get("running") or {}).get("startedAt") or (state.get("terminated") or {}).get("startedAt"))
    if started:
        found.append(Derived(f"started:{uid}", started, "started", f"{who} started{f' on node {node}' if node else ''}.", role, index))
    disruption = _disruption(pod, who)
    if disruption is not None:
        found.append(Derived(disruption.key, disruption.t, disruption.kind, disruption.text, role, index))
    else:
        ended = _ended(pod, role, index, who)
        if ended is not None:
            found.append(ended)
    return found


#: The kubelet's and the scheduler's pod events that matter to users -> (key prefix, kind, words).
EVENT_WORDS = {
    "FailedScheduling": ("unschedulable", "waiting", "cannot be scheduled yet"),
    "FailedMount": ("mount", "warning", "cannot mount its volumes"),
    "Evicted": ("disrupted", "warning", "was evicted"),
    "Preempted": ("disrupted", "warning", "was preempted"),
}


def event_entries(events: Iterable[dict[str, Any]], pods: Iterable[dict[str, Any]], since: str | None) -> list[Derived]:
    """The pods' Kubernetes events in `EVENT_WORDS`, each under its pod's key (an event about a
    pod that is gone already still names its replica by the pod's name); `since` (the record's
    creation) leaves out the events of an earlier job of the same name."""
    known: dict[str, tuple[str, int]] = {}
    for pod in pods:
        identity = replicas.pod_identity(pod)
        if identity is not None:
            known[_uid(pod)] = identity
    begin = parse_time(since) if since else None
    found: list[Derived] = []
    for event in events:
        words = EVENT_WORDS.get(str(event.get("reason") or ""))
        involved = event.get("involvedObject") or {}
        when = stamp(event.get("firstTimestamp") or event.get("eventTime") or event.get("lastTimestamp"))
        if words is None or not when or involved.get("kind") != "Pod":
            continue
        moment = parse_time(when)
        if begin is not None and moment is not None and moment < begin:
            continue
        uid = str(involved.get("uid") or involved.get("name") or "")
        identity = known.get(uid)
        if identity is None:
            named = _REPLICA_OF_POD.search(str(involved.get("name") or ""))
            if named is None:
                continue
            identity = (named.group(1), int(named.group(2)))
        role, index = identity
        prefix, kind, words_of = words
        message = str(event.get("message") or "").strip().rstrip(".")
        text = said(f"{role} {index} {words_of}" + (f": {message}" if message else ""))
        found.append(Derived(f"{prefix}:{uid}", when, kind, text, role, index))
    return found


_ROLE_OF_JOB = re.compile(r"-(master|pserver|trainer)(?:-0)?$")


def failed_create_entries(events: Iterable[dict[str, Any]], since: str | None) -> list[Derived]:
    """The Job controller's FailedCreate events (a quota, a LimitRange, Pod Security, a missing
    ServiceAccount keep a role's pods from being created), once per Job: nothing else says it."""
    begin = parse_time(since) if since else None
    found: list[Derived] = []
    for event in events:
        involved = event.get("involvedObject") or {}
        when = stamp(event.get("firstTimestamp") or event.get("eventTime") or event.get("lastTimestamp"))
        named = _ROLE_OF_JOB.search(str(involved.get("name") or ""))
        moment = parse_time(when)
        if (
            event.get("reason") != "FailedCreate"
            or not when
            or named is None
            or (begin is not None and moment is not None and moment < begin)
        ):
            continue
        role = named.group(1)
        who = "the job master's pod" if role == "master" else f"the {role}s' pods"
        message = str(event.get("message") or "").strip().rstrip(".")
        text = sentence(f"{who} cannot be created" + (f": {message}" if message else ""))
        found.append(Derived(f"failedcreate:{involved.get('uid') or involved.get('name')}", when, "warning", text))
    return found


def job_pods(record: dict[str, Any], pods: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """The pods of this record's job, every attempt's (not those of an earlier job of the same name)."""
    uid = (record.get("metadata") or {}).get("uid")
    return [p for p in pods if not uid or ((p.get("metadata") or {}).get("labels") or {}).get(RECORD_UID_LABEL, uid) == uid]


# ---------------------------------------------------------------------------------- queues


def workload_entries(label: str, workload: dict[str, Any]) -> list[Derived]:
    """Kueue's account of one Workload: queued, waiting (Kueue's reason), admitted, preempted or
    evicted, each transition once (keyed by its time).  `label` is the role whose Job it stands
    for in `jobs` mode ("job" for a JobSet, then no prefix)."""
    uid = _uid(workload)
    prefix = "" if label == "job" else f"{'the job master' if label == 'master' else f'the {label}s'}: "
    queue = queue_status.queue_of(workload)
    found: list[Derived] = []
    created = stamp((workload.get("metadata") or {}).get("creationTimestamp"))
    if created:
        found.append(Derived(f"queued:{uid}", created, "waiting", sentence(f"{prefix}queued in {queue}")))
    conditions = {c.get("type"): c for c in (workload.get("status") or {}).get("conditions") or []}
    reserved = conditions.get("QuotaReserved") or {}
    when = stamp(reserved.get("lastTransitionTime"))
    if when and reserved.get("status") == "False" and reserved.get("message"):
        words = queue_status.waiting_for(str(reserved["message"]))
        found.append(Derived(f"waiting:{uid}:{when}", when, "waiting", sentence(f"{prefix}{words}")))
    admitted = conditions.get("Admitted") or {}
    when = stamp(admitted.get("lastTransitionTime"))
    if when and admitted.get("status") == "True":
        cluster_queue = ((workload.get("status") or {}).get("admission") or {}).get("clusterQueue")
        words = f"admitted by cluster queue {cluster_queue}" if cluster_queue else "admitted by Kueue"
        found.append(Derived(f"admitted:{uid}:{when}", when, "admitted", sentence(f"{prefix}{words}")))
    evicted = conditions.get("Evicted") or {}
    when = stamp(evicted.get("lastTransitionTime"))
    if when and evicted.get("status") == "True":
        if evicted.get("reason") == "Preempted":
            words = f"preempted {queue_status.preempted_by(workload)}; queued again in {queue}"
        else:
            words = f"evicted by Kueue ({evicted.get('message') or evicted.get('reason')}); queued again in {queue}"
        found.append(Derived(f"evicted:{uid}:{when}", when, "warning", sentence(f"{prefix}{words}")))
    return found


def pod_group_entries(pod_group: dict[str, Any]) -> list[Derived]:
    """Volcano's account of the gang: waiting (Volcano's reason) and placed, each transition once."""
    uid = _uid(pod_group)
    size = (pod_group.get("spec") or {}).get("minMember")
    found: list[Derived] = []
    for condition in (pod_group.get("status") or {}).get("conditions") or []:
        when = stamp(condition.get("lastTransitionTime"))
        if not when or condition.get("status") != "True":
            continue
        if condition.get("type") == "Unschedulable":
            reason = str(condition.get("message") or condition.get("reason") or "Unschedulable").strip().rstrip(".")
            found.append(Derived(f"gang-waiting:{uid}:{when}", when, "waiting", f"Waiting for the volcano scheduler: {reason}."))
        elif condition.get("type") == "Scheduled":
            together = f"all {size} replicas" if size else "the gang"
            found.append(
                Derived(f"gang-admitted:{uid}:{when}", when, "admitted", f"Admitted by the volcano scheduler: {together} placed together.")
            )
    if not found and (pod_group.get("status") or {}).get("phase") == volcano_status.PENDING:
        created = stamp((pod_group.get("metadata") or {}).get("creationTimestamp"))
        if created:
            found.append(
                Derived(
                    f"gang-queued:{uid}", created, "waiting", f"Waiting for the volcano scheduler: {volcano_status.gang_state(pod_group)}."
                )
            )
    return found


# ---------------------------------------------------------------------------------- together


def resumed_entry(attempt: str, words: str, pods: Iterable[dict[str, Any]]) -> Derived | None:
    """ "Every replica resumes from step 40." for the attempt whose replicas' pods carry the
    attempt label `attempt`, at its first replica's start; `words` is the checkpoint's
    ("resumed from step 40", `checkpoints.resumed_words`)."""
    starts = []
    for pod in pods:
        if attempt_label(pod) != attempt:
            continue
        state = pod_views.container_status(pod).get("state") or {}
        started = stamp((state.get("running") or {}).get("startedAt") or (state.get("terminated") or {}).get("startedAt"))
        if started:
            starts.append(started)
    if not starts or not words.startswith("resumed from"):
        return None
    return Derived(
        f"resumed:{attempt}",
        min(starts, key=lambda t: parse_time(t) or datetime.min.replace(tzinfo=timezone.utc)),
        "resumed",
        f"Every replica {words.replace('resumed from', 'resumes from', 1)}.",
    )


def derive(
    record: dict[str, Any],
    pods: Iterable[dict[str, Any]],
    events: Iterable[dict[str, Any]] = (),
    workloads: Iterable[tuple[str, dict[str, Any]]] = (),
    pod_group: dict[str, Any] | None = None,
    resumed: tuple[str, str] | None = None,
    job_events: Iterable[dict[str, Any]] = (),
) -> list[Derived]:
    """Every entry the objects of one job say, in no particular order (the writer orders them)."""
    mine = job_pods(record, pods)
    created = (record.get("metadata") or {}).get("creationTimestamp")
    found = record_entries(record)
    for pod in mine:
        found.extend(pod_entries(pod))
    found.extend(event_entries(events, mine, created))
    found.extend(failed_create_entries(job_events, created))
    for label, workload in workloads:
        found.extend(workload_entries(label, workload))
    if pod_group is not None:
        found.extend(pod_group_entries(pod_group))
    if resumed is not None:
        entry = resumed_entry(resumed[0], resumed[1], mine)
        if entry is not None:
            found.append(entry)
    return found
