"""How a Kubernetes job's pods and Jobs read as replicas and a decision, standard library only.

The server's status cache and the in-cluster master (cluster_master.py) must read a job exactly
the same way, so both use this module: a pod -> the replica state users see (`pod_view`,
`observe_replicas`: the newest pod of each index, of the record's current attempt), what a role's
Job adds (`job_note`: failed, disrupted, completed indexes), the job's whole restarts kept in the
record (`Restarts`), and the lifecycle decision on all of it (`decide_job`, over the shared
`policy`).  It is shipped in every job's runtime bundle beside cluster_master.py.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import asdict, dataclass
from typing import Any

if __package__:  # imported from the installed package (the server, the local backend)
    from paddle_nbext.model import contract
else:  # a plain script: in a job's bundle, the contract shipped beside it
    try:
        import contract  # type: ignore[import-not-found,no-redef]
    except ImportError:
        from paddle_nbext.model import contract
if __package__:
    from . import policy
else:  # run as a plain script from the bundle's files
    import policy  # type: ignore[import-not-found,no-redef]

ReplicaPhase, Role = contract.ReplicaPhase, contract.Role
INDEX_KEY = "batch.kubernetes.io/job-completion-index"
CONTAINER = "main"


@dataclass
class ReplicaView:
    """One replica as users see it, read from its newest pod (older pods count as restarts)."""

    role: str
    index: int
    phase: str = ReplicaPhase.PENDING
    reason: str | None = None
    exit_code: int | None = None
    restarts: int = 0
    started: str | None = None
    finished: str | None = None
    pod: str | None = None
    #: Whole-job restarts after evictions, drains and preemptions (`restarts` counts those after
    #: failures, the ones `max_restarts` bounds); users see the sum.
    disruptions: int = 0
    #: Set when its pod was evicted, drained or preempted: "was evicted (a node drain or an eviction)".
    disruption: str | None = None
    #: The node its pod was on, once that node stopped responding (the pod is lost with it).
    lost_node: str | None = None
    #: While Pending on a node: since when (ISO 8601), to bound how long its image may fail to pull.
    waiting_since: str | None = None

    def observed(self, log_tail: str = "") -> policy.Observed:
        return policy.Observed(self.role, self.index, self.phase, self.exit_code, self.restarts, self.reason, log_tail, self.finished)

    def public(self) -> dict[str, Any]:
        data = asdict(self)
        for internal in ("pod", "disruptions", "disruption", "lost_node", "waiting_since"):
            data.pop(internal)
        data["restarts"] = self.restarts + self.disruptions
        return data


def pod_identity(pod: dict[str, Any]) -> tuple[str, int] | None:
    """(role, index) of a job pod: role from our label, index from the Indexed Job's label or
    annotation (the hostname suffix as a last resort)."""
    meta = pod.get("metadata") or {}
    labels = meta.get("labels") or {}
    role = labels.get(contract.ROLE_LABEL)
    if role not in contract.ROLES:
        return None
    raw = labels.get(INDEX_KEY) or (meta.get("annotations") or {}).get(INDEX_KEY)
    if raw is None:
        hostname = (pod.get("spec") or {}).get("hostname") or ""
        raw = hostname.rsplit("-", 1)[-1] if "-" in hostname else None
    try:
        return role, int(raw)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None


def container_status(pod: dict[str, Any]) -> dict[str, Any]:
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    for status in statuses:
        if status.get("name") == CONTAINER:
            return dict(status)
    return dict(statuses[0]) if statuses else {}


def _with_message(reason: str, message: str | None) -> str:
    message = (message or "").strip()
    return f"{reason}: {message}" if message else reason


_CLAIM_NOT_FOUND = re.compile(r'persistentvolumeclaim "([^"]+)" not found')
_CLAIM_UNBOUND = "unbound immediate PersistentVolumeClaims"
HOME_VOLUME = "home"  # the name of the home's volume in every job pod (home_volume.HomeVolume.volume)


def _claims(pod: dict[str, Any]) -> dict[str, str]:
    """The pod's PersistentVolumeClaims: claim name -> volume name."""
    volumes = (pod.get("spec") or {}).get("volumes") or []
    return {
        str(v["persistentVolumeClaim"]["claimName"]): str(v.get("name") or "")
        for v in volumes
        if (v.get("persistentVolumeClaim") or {}).get("claimName")
    }


def claim_words(pod: dict[str, Any], message: str) -> str | None:
    """The scheduler's words for a pod whose claim is missing or not bound, said of the claim
    (the home's, in a job pod), with the scheduler's own message after; None for other reasons.

    The scheduler names a missing claim (`persistentvolumeclaim "claim-x" not found`) but not an
    unbound one (`pod has unbound immediate PersistentVolumeClaims`, also for a claim whose
    storageClass does not exist): the pod's spec says which claims it mounts."""
    claims = _claims(pod)

    def named(claim: str) -> str:
        return f"the home claim {claim}" if claims.get(claim) == HOME_VOLUME else f"the claim {claim}"

    missing = _CLAIM_NOT_FOUND.search(message)
    if missing is not None:
        return (
            f"{named(missing.group(1))} does not exist in the job's namespace: ask the admin to create it "
            f"(the home volume settings name it) (scheduler: {message.strip()})"
        )
    if _CLAIM_UNBOUND in message and claims:
        which = " or ".join(named(claim) for claim in claims)
        commands = ", ".join(f"kubectl describe pvc {claim}" for claim in claims)
        return (
            f"{which} is not bound to a volume: it stays Pending while no PersistentVolume fits it or its "
            f"storageClass does not exist or provisions nothing; ask the admin ({commands}) (scheduler: {message.strip()})"
        )
    return None


# A pod's phase, as Kubernetes writes it (its own words, not the job's `contract.Phase`).
POD_PENDING, POD_RUNNING, POD_SUCCEEDED, POD_FAILED = "Pending", "Running", "Succeeded", "Failed"


def pod_view(pod: dict[str, Any], role: str, index: int) -> ReplicaView:
    """The replica state that one pod shows, reasons in words."""
    status = pod.get("status") or {}
    phase = status.get("phase") or POD_PENDING
    container = container_status(pod)
    state = container.get("state") or {}
    view = ReplicaView(role, index, pod=(pod.get("metadata") or {}).get("name"))
    view.restarts = int(container.get("restartCount") or 0)
    running = state.get("running") or {}
    terminated = state.get("terminated") or (container.get("lastState") or {}).get("terminated") or {}
    waiting = state.get("waiting") or {}
    view.started = running.get("startedAt") or terminated.get("startedAt") or status.get("startTime")
    if phase == POD_PENDING:
        view.phase = ReplicaPhase.PENDING
        view.started = None
        for condition in status.get("conditions") or []:
            if condition.get("type") == "PodScheduled" and condition.get("status") == "False":
                message = claim_words(pod, condition.get("message") or "") or condition.get("message")
                view.reason = _with_message(condition.get("reason") or "Unschedulable", message)
        if view.reason is None and waiting.get("reason") and waiting.get("reason") != "ContainerCreating":
            view.reason = _with_message(waiting["reason"], waiting.get("message"))
        scheduled: dict[str, Any] = next(
            (c for c in status.get("conditions") or [] if c.get("type") == "PodScheduled" and c.get("status") == "True"), {}
        )
        view.waiting_since = scheduled.get("lastTransitionTime") or (pod.get("metadata") or {}).get("creationTimestamp")
    elif phase == POD_RUNNING:
        view.phase = ReplicaPhase.RUNNING
        if waiting.get("reason"):  # e.g. CrashLoopBackOff between restarts
            view.reason = _with_message(waiting["reason"], waiting.get("message"))
    elif phase == POD_SUCCEEDED:
        view.phase = ReplicaPhase.SUCCEEDED
        view.exit_code = 0
        view.finished = terminated.get("finishedAt")
    else:  # Failed (or Unknown, which the API reports when the node is lost)
        view.phase = ReplicaPhase.FAILED
        code = terminated.get("exitCode")
        view.exit_code = int(code) if code is not None else None
        view.finished = terminated.get("finishedAt")
        if terminated.get("reason") == "OOMKilled":
            view.reason = "OOMKilled"
        elif view.exit_code == contract.STALL_EXIT_CODE and (terminated.get("message") or "").strip():
            # The launcher stopped its trainer for a stall; its termination message is the words.
            view.reason = f"{policy.STALL_REASON}{terminated['message'].strip()}"
        elif status.get("reason"):  # Evicted, DeadlineExceeded, NodeLost ...
            view.reason = _with_message(status["reason"], status.get("message"))
        elif view.exit_code is not None:
            view.reason = f"Exit code {view.exit_code}"
        else:
            view.reason = _with_message("Failed", status.get("message"))
    return view


def age_key(pod: dict[str, Any]) -> tuple[str, int, str, str]:
    """Sort key, oldest first.  creationTimestamp has one-second resolution, and the Job
    controller replaces a failed pod within the same second, so within a second the pod that
    still runs is the newer one, and among ended pods the one that ended later.  A running pod
    ranks above a pending one of the same second: when the Job controller briefly has two pods
    for one index, the running one is the pod it keeps."""
    meta = pod.get("metadata") or {}
    status = pod.get("status") or {}
    phase = status.get("phase")
    deleting = bool(meta.get("deletionTimestamp"))
    liveness = 0 if deleting or phase not in (None, POD_PENDING, POD_RUNNING) else (2 if phase == POD_RUNNING else 1)
    finished = ((container_status(pod).get("state") or {}).get("terminated") or {}).get("finishedAt") or ""
    return meta.get("creationTimestamp") or "", liveness, finished, meta.get("name") or ""


def newest_pod(pods: list[dict[str, Any]]) -> dict[str, Any]:
    """The pod that currently stands for a replica (several exist after restarts)."""
    return max(pods, key=age_key)


def current_pods(record: dict[str, Any], pods: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The pods of this incarnation of the job: an earlier job of the same name, deleted and
    submitted again, leaves pods that terminate for a while and must not count.  Pods without
    the label come from a version that did not set it, and are taken as current."""
    uid = (record.get("metadata") or {}).get("uid")
    attempt = Restarts.of(record).attempt
    if uid:
        pods = [p for p in pods if ((p.get("metadata") or {}).get("labels") or {}).get(contract.RECORD_UID_LABEL, uid) == uid]
    return [p for p in pods if attempt_of(p) == attempt]


#: JobSet's label on the pods of each whole restart it made (0 first).
JOBSET_RESTART_LABEL = "jobset.sigs.k8s.io/restart-attempt"


def _int_label(obj: dict[str, Any], key: str) -> int:
    try:
        return max(0, int(((obj.get("metadata") or {}).get("labels") or {}).get(key) or 0))
    except ValueError:
        return 0


def attempt_of(obj: dict[str, Any]) -> int:
    """The whole-job attempt a replica Job or pod belongs to (`contract.ATTEMPT_LABEL`; 0 without it)."""
    return _int_label(obj, contract.ATTEMPT_LABEL)


#: Why a pod is being taken away (its `DisruptionTarget` condition's reason), in users' words.
DISRUPTIONS = {
    "EvictionByEvictionAPI": "was evicted (a node drain or an eviction)",
    "PreemptionByScheduler": "was preempted by a higher-priority pod",
    "PreemptionByKubeScheduler": "was preempted by a higher-priority pod",
    "DeletionByTaintManager": "was evicted by a NoExecute taint on its node",
    "DeletionByPodGC": "was lost with its node",
    "TerminationByKubelet": "was evicted by the kubelet (node pressure)",
}


def disruption_of(pod: dict[str, Any]) -> str | None:
    """How the pod is being taken away when it is evicted, drained or preempted (the
    `DisruptionTarget` condition, set before its container is stopped), else None: not the
    replica's failure, and not counted against `max_restarts`."""
    for condition in (pod.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "DisruptionTarget" and condition.get("status") == "True":
            reason = condition.get("reason") or ""
            return DISRUPTIONS.get(reason, f"was disrupted ({reason or 'DisruptionTarget'})")
    return None


def disrupted(pod: dict[str, Any]) -> bool:
    return disruption_of(pod) is not None


def may_still_start(pod: dict[str, Any]) -> bool:
    """Whether the pod is bound to a node whose kubelet has not started its container yet (it may
    still do so, deleted or not, until the kubelet sees the deletion), on a node that answers."""
    status = pod.get("status") or {}
    if not (pod.get("spec") or {}).get("nodeName") or status.get("phase") not in (None, POD_PENDING):
        return False
    return node_lost_by(pod) is None


def node_lost_by(pod: dict[str, Any]) -> str | None:
    """The pod's node when Kubernetes has given up on it: the taint manager deletes the pods of a
    node that stopped responding (its `unreachable`/`not-ready` NoExecute taints, after the pods'
    tolerationSeconds) once the node lifecycle controller has marked them not Ready.  None for a
    NoExecute taint an admin put on a node that still answers (its pods stay Ready until stopped),
    and for every other pod."""
    status = pod.get("status") or {}
    node = (pod.get("spec") or {}).get("nodeName")
    if not node:
        return None
    if status.get("reason") == "NodeLost":
        return str(node)
    conditions = {c.get("type"): c for c in status.get("conditions") or []}
    target, ready = conditions.get("DisruptionTarget") or {}, conditions.get("Ready") or {}
    if target.get("status") == "True" and target.get("reason") == "DeletionByTaintManager" and ready.get("status") != "True":
        return str(node)
    return None


def observe_replicas(pods: list[dict[str, Any]], pservers: int, trainers: int) -> list[ReplicaView]:
    """Every desired replica, from its newest pod (with `backoffLimit: 0` a Job makes one pod per
    index; two exist only for a moment, or when a pod was deleted by hand).  A replica without
    a pod yet is Pending."""
    by_identity: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for pod in pods:
        identity = pod_identity(pod)
        if identity is not None:
            by_identity.setdefault(identity, []).append(pod)
    views: list[ReplicaView] = []
    for role, count in zip(contract.ROLES, (pservers, trainers), strict=True):
        for index in range(count):
            candidates = by_identity.get((role, index), [])
            if not candidates:
                views.append(ReplicaView(role, index))
                continue
            newest = newest_pod(candidates)
            view = pod_view(newest, role, index)
            view.disruption = disruption_of(newest)
            view.lost_node = node_lost_by(newest)
            # In `jobset` mode JobSet restarts the whole job itself; its pods say which attempt.
            view.restarts += _int_label(newest, JOBSET_RESTART_LABEL)
            views.append(view)
    return views


def final_replicas(views: list[ReplicaView], decision: policy.Decision) -> list[dict[str, Any]]:
    """The replica list stored in the record when the job ends: what the runner stops is Stopped."""
    stopped = set(decision.stop)
    out = []
    for view in views:
        data = view.public()
        if (view.role, view.index) in stopped:
            data["phase"] = ReplicaPhase.STOPPED
            data["finished"] = data["finished"] or contract.now_iso()
        out.append(data)
    return out


def spec_of(record: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = json.loads((record.get("data") or {}).get(contract.SPEC_KEY) or "{}")
    return spec


def timed_out(record: dict[str, Any], spec: dict[str, Any], now: float | None = None) -> int | None:
    timeout = spec.get("timeout")
    created = contract.parse_time((record.get("metadata") or {}).get("creationTimestamp"))
    if timeout and created is not None and (now or time.time()) - created.timestamp() > int(timeout):
        return int(timeout)
    return None


@dataclass(frozen=True)
class RoleNote:
    """What a role's Job says beyond its pods: why its pod-less replicas have no pod, whether
    the Job has failed for good (and whether because a pod was disrupted), and which indexes
    completed (their pods may since be gone: garbage-collected, a lost node)."""

    reason: str = ""
    failed: bool = False
    #: "trainer 1 was evicted, drained or preempted": the Job failed by its DisruptionTarget rule.
    disruption: str | None = None
    completed: frozenset[int] = frozenset()


def _indexes(text: str | None) -> frozenset[int]:
    """The Job status' index list ("0-2,4") as numbers; unreadable parts are left out."""
    found: set[int] = set()
    for part in (text or "").split(","):
        low, _, high = part.strip().partition("-")
        try:
            found.update(range(int(low), int(high or low) + 1))
        except ValueError:
            continue
    return frozenset(found)


_POD_IN_MESSAGE = re.compile(r"Pod \S+?/(\S+) has condition DisruptionTarget")
_INDEX_OF_POD = re.compile(r"-(\d+)-[a-z0-9]{5}$")


def job_note(role: str, obj: dict[str, Any]) -> RoleNote | None:
    """The note of one role Job (of the current attempt): Failed (its pods may be gone), which
    indexes completed, None when it has nothing to add to its pods."""
    status = obj.get("status") or {}
    completed = _indexes(status.get("completedIndexes"))
    for condition in status.get("conditions") or []:
        if condition.get("status") != "True":
            continue
        kind, reason, message = condition.get("type"), condition.get("reason") or "", (condition.get("message") or "").strip()
        if kind == "Complete":
            count = int((obj.get("spec") or {}).get("completions") or 0)
            return RoleNote(completed=frozenset(range(count)) | completed)
        if kind in ("FailureTarget", "Failed"):  # FailureTarget first: the controller is stopping the pods
            disruption = None
            found = _POD_IN_MESSAGE.search(message)
            if found:
                index = _INDEX_OF_POD.search(found.group(1))
                disruption = f"{role} {index.group(1) if index else ''} was evicted, drained or preempted".replace("  ", " ")
            return RoleNote(f"{reason or 'Failed'}: {message}".rstrip(": "), True, disruption, completed)
    return RoleNote(completed=completed) if completed else None


#: Whole-job restarts after evictions, drains and preemptions are not the code's fault and do not
#: use up `max_restarts`; after this many (a node drained again and again) the job ends.
MAX_DISRUPTION_RESTARTS = 10


@dataclass(frozen=True)
class Restarts:
    """The job's whole restarts so far, kept in the record (`contract.RESTART_ANNOTATION`) so
    that any master incarnation, and the server, read the same."""

    attempt: int = 0  # the attempt whose Jobs and pods count now (0: as submitted)
    failures: int = 0  # restarts after a replica failed (bounded by max_restarts)
    disruptions: int = 0  # restarts after an eviction, drain or preemption
    stopping: bool = False  # the previous attempt's Jobs are being deleted; this one's not made yet
    message: str = ""  # why: "restart 1 of 3: trainer 1 failed with ...; all replicas restarting"
    began: float | None = None  # when this restart was decided (epoch seconds; None: never restarted)

    @classmethod
    def of(cls, record: dict[str, Any]) -> Restarts:
        raw = ((record.get("metadata") or {}).get("annotations") or {}).get(contract.RESTART_ANNOTATION)
        try:
            data = json.loads(raw) if raw else {}
            return cls(
                int(data.get("attempt", 0)),
                int(data.get("failures", 0)),
                int(data.get("disruptions", 0)),
                bool(data.get("stopping", False)),
                str(data.get("message", "")),
                float(data["began"]) if data.get("began") is not None else None,
            )
        except (ValueError, TypeError, AttributeError):
            return cls()

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    def next(self, decision: policy.Decision) -> Restarts:
        disruption = decision.disruption
        return Restarts(
            self.attempt + 1,
            self.failures + (0 if disruption else 1),
            self.disruptions + (1 if disruption else 0),
            True,
            decision.message,
            time.time(),
        )


def pods_to_ask(views: list[ReplicaView], decision: policy.Decision) -> list[str]:
    """Before a failure is recorded: the pods of running replicas whose kubelet must answer for
    the failure to stand (`_unanswered_decision`); [] when the failure does not hang on them."""
    if decision.phase != contract.Phase.FAILED:
        return []
    failed = [v for v in views if v.role == Role.TRAINER and v.phase == ReplicaPhase.FAILED]
    if not failed or any(policy.signal_of(v.exit_code) not in policy.CONSEQUENTIAL_SIGNALS for v in failed):
        return []
    return [v.pod for v in views if v.pod and v.phase == ReplicaPhase.RUNNING]


#: Seconds past a pod's deletion deadline (its deletionTimestamp: the request plus its grace
#: period) after which its node is taken to be gone: a kubelet that answers has killed the
#: containers at the deadline and removed the pod right after.
OVERDUE_SECONDS = 30.0


#: How the API server says it could not reach a pod's kubelet (for pods/log, exec, ...): its
#: proxy's dial or read failed.  Status 500/502/503/504 with one of these in the message.
_KUBELET_UNREACHABLE = re.compile(r"dial tcp|connection refused|no route to host|i/o timeout|timed out|timeout|EOF|connection reset")


def kubelet_unreachable(status: int, message: str) -> bool:
    """Whether an API error of a pods/log request means the pod's node did not answer."""
    return status in (500, 502, 503, 504) and _KUBELET_UNREACHABLE.search(message) is not None


def left_behind(pod: dict[str, Any], now: float) -> bool:
    """Whether a pod being deleted will not go away while its node is down, and so must not be
    waited for: its node was declared lost (`node_lost_by`), or it is long past its deletion
    deadline.  (Its node, if it comes back, finishes it: the kubelet sees it deleted.)"""
    if node_lost_by(pod) is not None:
        return True
    deadline = policy.epoch((pod.get("metadata") or {}).get("deletionTimestamp"))
    return deadline is not None and now - deadline > OVERDUE_SECONDS


def _disruption_words(view: ReplicaView) -> str:
    if view.lost_node:
        return f"node {view.lost_node} stopped responding; {view.role} {view.index} lost"
    return f"{view.role} {view.index} {view.disruption}"


#: Why a container waits while its image cannot be pulled (the kubelet retries, with back-off).
PULL_FAILURES = ("ErrImagePull", "ImagePullBackOff")


def _pull_decision(views: list[ReplicaView], record: dict[str, Any], now: float) -> policy.Decision | None:
    """The end of a job whose replica's image has failed to pull for longer than the admin's
    bound (`contract.IMAGE_PULL_KEY` in the record): the rest of the gang would otherwise run,
    waiting for it, for ever."""
    raw = (record.get("data") or {}).get(contract.IMAGE_PULL_KEY)
    if raw is None or not str(raw).isdigit():
        return None
    bound = int(raw)
    for view in views:
        since = policy.epoch(view.waiting_since)
        if (
            view.phase == ReplicaPhase.PENDING
            and (view.reason or "").startswith(PULL_FAILURES)
            and since is not None
            and now - since > bound
        ):
            message = f"{view.role} {view.index} cannot start: its image could not be pulled for {bound} s: {view.reason}"
            stop = [(v.role, v.index) for v in views if v.phase in (ReplicaPhase.RUNNING, ReplicaPhase.PENDING)]
            return policy.Decision(contract.Phase.FAILED, message, stop=stop)
    return None


def _unanswered_decision(views: list[ReplicaView], decision: policy.Decision, unreachable: frozenset[str]) -> policy.Decision | None:
    """Hold a failure back while a replica it may have come from cannot be asked: when the failed
    trainers only died because a peer went (aborted or stopped) and a replica still "running"
    sits on a node that does not answer (`unreachable`: pods whose log the API could not fetch
    from their kubelet), the peer's node has most likely died.  Kubernetes declares that only
    after its node-monitor grace period and the pods' `node_lost_seconds`; then the job restarts
    whole (an eviction, which uses up no max_restarts) instead of ending Failed."""
    if decision.phase != contract.Phase.FAILED or not unreachable:
        return None
    failed = [v for v in views if v.role == Role.TRAINER and v.phase == ReplicaPhase.FAILED]
    if not failed or any(policy.signal_of(v.exit_code) not in policy.CONSEQUENTIAL_SIGNALS for v in failed):
        return None
    silent = next((v for v in views if v.pod in unreachable and v.phase in (ReplicaPhase.RUNNING, ReplicaPhase.PENDING)), None)
    if silent is None:
        return None
    first = min(failed, key=lambda v: v.index)
    message = (
        f"{silent.role} {silent.index} does not answer (its node stopped responding) and trainer {first.index} "
        f"ended with {first.reason or policy.describe_exit(first.exit_code)}; waiting for Kubernetes to declare "
        "the node lost, then all replicas restart"
    )
    return policy.Decision(contract.Phase.RUNNING, message)


def _disruption_decision(views: list[ReplicaView], notes: dict[str, RoleNote], restarts: Restarts) -> policy.Decision | None:
    """A whole restart (or, past `MAX_DISRUPTION_RESTARTS`, the end) when a replica of this
    attempt is evicted, drained or preempted: every other failure of the attempt (a collective
    rank aborting because its peer went) follows from it."""
    what = next((_disruption_words(v) for v in views if v.disruption), None)
    what = what or next((note.disruption for note in notes.values() if note.disruption), None)
    if what is None:
        return None
    everyone = [(v.role, v.index) for v in views]
    if restarts.disruptions >= MAX_DISRUPTION_RESTARTS:
        message = f"{what}, after {restarts.disruptions} restarts for evictions and preemptions; the job gives up."
        return policy.Decision(contract.Phase.FAILED, message, stop=[r for r in everyone])
    running = any(v.phase == ReplicaPhase.RUNNING for v in views)
    message = (
        f"restart {restarts.failures + restarts.disruptions + 1}: {what}; all replicas restarting "
        "(evictions and preemptions do not use up max_restarts)"
    )
    return policy.Decision(contract.Phase.RUNNING if running else contract.Phase.PENDING, message, restart=everyone, disruption=True)


def decide_job(
    record: dict[str, Any],
    pods: list[dict[str, Any]],
    log_tail: str = "",
    role_notes: dict[str, RoleNote] | None = None,
    pod_notes: dict[str, str] | None = None,
    explaining_pod: str | None = None,
    unreachable: frozenset[str] = frozenset(),
) -> tuple[list[ReplicaView], policy.Decision]:
    """Replica views and the policy's decision for a running (not yet recorded) job.

    `log_tail` is the log of the failed replica whose pod is `explaining_pod` (`pick_explanation`),
    or, when none is named, of every failed replica.

    `role_notes` explain replicas without a pod from their Job: the Job controller could not
    create the pod (a FailedCreate event: quota, LimitRange, PodSecurity...), the Job is
    suspended, or it failed (then the replica fails too, even if its pods are gone).
    `pod_notes` (pod name -> reason) explain pending pods, e.g. the kubelet's FailedMount.
    `unreachable` names running pods whose kubelet did not answer (`_unanswered_decision`)."""
    spec = spec_of(record)
    restarts = Restarts.of(record)
    # While a restart stops the previous attempt, its Jobs' words (Failed) are not this one's.
    notes = {} if restarts.stopping else dict(role_notes or {})
    views = observe_replicas(current_pods(record, pods), int(spec.get("pservers") or 0), int(spec.get("trainers") or 0))
    for view in views:
        view.restarts += restarts.failures
        view.disruptions = restarts.disruptions
        note = notes.get(view.role)
        if view.pod is None and note is not None and view.index in note.completed:
            view.phase, view.exit_code = ReplicaPhase.SUCCEEDED, 0  # its pod is gone, its Job counted it
        elif view.pod is None and view.reason is None and note is not None and note.reason:
            view.reason = note.reason
            if note.failed:
                view.phase = ReplicaPhase.FAILED
        elif view.pod is not None and view.phase == ReplicaPhase.PENDING and view.reason is None:
            view.reason = (pod_notes or {}).get(view.pod)
    cancelled = ((record.get("metadata") or {}).get("annotations") or {}).get(contract.CANCELLED_ANNOTATION) == "true"
    observed = [v.observed(log_tail if v.phase == ReplicaPhase.FAILED and explaining_pod in (None, v.pod) else "") for v in views]
    decision = policy.decide(
        observed,
        max_restarts=int(spec.get("max_restarts") or 0),
        cancelled=cancelled,
        timed_out_after=timed_out(record, spec),
        now=time.time(),
        on_stall=str(spec.get("on_stall") or "warn"),
    )
    if cancelled or timed_out(record, spec) is not None:
        return views, decision
    if restarts.stopping:
        return views, policy.Decision(contract.Phase.PENDING, restarts.message)
    if decision.phase == contract.Phase.SUCCEEDED:
        return views, decision  # every trainer finished: an eviction now only ends a pserver early
    return views, (
        _disruption_decision(views, notes, restarts)
        or _pull_decision(views, record, time.time())
        or _unanswered_decision(views, decision, unreachable)
        or decision
    )


def final_status(views: list[ReplicaView], decision: policy.Decision) -> dict[str, Any]:
    started = [v.started for v in views if v.started]
    return {
        "phase": decision.phase,
        "message": decision.message,
        "started": min(started) if started else None,
        "finished": contract.now_iso(),
        "replicas": final_replicas(views, decision),
    }


def failed_trainer_pod(views: list[ReplicaView], decision: policy.Decision) -> str | None:
    """The pod whose log tail explains a failure (the end, or a restart after a failure)."""
    if decision.phase != contract.Phase.FAILED and not (decision.restart and not decision.disruption):
        return None
    for role, index in decision.restart:
        view = next((v for v in views if (v.role, v.index) == (role, index) and v.pod), None)
        if view is not None:
            return view.pod
    # The replica the message names (policy.blame_order: its own code failed, not a peer that
    # aborted or was stopped because of it), trainers first as the policy names them.
    failed = [v for v in views if v.phase == ReplicaPhase.FAILED and v.pod]
    failed.sort(key=lambda v: (v.role != contract.Role.TRAINER, policy.blame_order(v.observed())))
    return failed[0].pod if failed else None


def explaining_candidates(views: list[ReplicaView], decision: policy.Decision) -> list[str]:
    """The pods whose log tails may explain a failed end, the likeliest first: the one
    `failed_trainer_pod` names, and, when that one only aborted or was stopped (a consequence,
    which the pod whose rank raised may also show), every other failed trainer's pod, so that the
    caller can look for the one that raised (`pick_explanation`)."""
    first = failed_trainer_pod(views, decision)
    if first is None or decision.restart:
        return [first] if first else []
    chosen = next(v for v in views if v.pod == first)
    if policy.signal_of(chosen.exit_code) not in policy.CONSEQUENTIAL_SIGNALS:
        return [first]
    others = [v for v in views if v.role == contract.Role.TRAINER and v.phase == ReplicaPhase.FAILED and v.pod and v.pod != first]
    return [first, *(str(v.pod) for v in sorted(others, key=lambda v: v.index))]


def pick_explanation(tails: list[tuple[str, str]]) -> tuple[str, str]:
    """Of (pod, log tail) pairs from `explaining_candidates`, the first whose tail shows a Python
    exception, else the first."""
    return next(((pod, tail) for pod, tail in tails if policy.raised(tail)), tails[0])
