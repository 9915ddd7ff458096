"""A Kubernetes job pod read as the replica it stands for: its role and index, the state users see
(`pod_view`: phase and reason in words), which of a replica's pods is the current one
(`newest_pod`), and whether it is being taken away (evicted, drained, preempted) or was lost with
its node (`disruption_of`, `node_lost_by`).

Why apart from the job's decision (`replicas.py`): this reads one pod at a time and knows nothing
of the job's record or restarts; the server's status and timeline read pods with it too.  Standard
library only: shipped in every job's runtime bundle beside cluster_master.py.
"""

from __future__ import annotations

import re
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
