"""The job master inside a Kubernetes cluster (docs/admin-guide.md, "A job's objects"), standard library only.

It runs as the single pod of the `<job>-master` Job, from the files of the job record ConfigMap,
in the job's own base image.  Every few seconds it reads the job's pods and the record through
the API with its service-account token, turns the pods into replica states, asks the shared
lifecycle `policy.decide(..., runner_restarts=False)` (the Job controller recreates failed
trainer pods itself) and, when the job is over, writes the final status into the record and
stops what still runs (ends each Job through its deadline, see `STOP_PATCH`).  It keeps nothing in memory that
matters, so when Kubernetes restarts it, it re-derives everything from the API.

The pod -> replica mapping (`observe_replicas`) lives here because both the master and the
server extension's status cache need exactly the same reading of a pod; the server imports it.

API access: in a pod, the in-cluster defaults (KUBERNETES_SERVICE_HOST/PORT, the mounted
token, CA and namespace).  For tests and unusual setups: `PADDLE_NBEXT_KUBE_API` (base URL),
`PADDLE_NBEXT_KUBE_TOKEN_FILE`, `PADDLE_NBEXT_KUBE_CA_FILE`, `PADDLE_NBEXT_KUBE_INSECURE=1`
(skip TLS verification), `PADDLE_NBEXT_NAMESPACE`.
"""

from __future__ import annotations

import json
import os
import signal
import ssl
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

if __package__:  # imported from the installed package (the server, the local backend)
    from paddle_nbext import contract
else:  # a plain script: in a job's bundle, the contract shipped beside it (even where the image
    # has some other paddle-nbext installed); run from a source tree, the installed one
    try:
        import contract  # type: ignore[import-not-found,no-redef]
    except ImportError:
        from paddle_nbext import contract
if __package__:
    from . import policy
else:  # run as a plain script from the record's files
    import policy  # type: ignore[import-not-found,no-redef]

ReplicaPhase, Role = contract.ReplicaPhase, contract.Role
SA_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
INDEX_KEY = "batch.kubernetes.io/job-completion-index"
CONTAINER = "main"
# How a runner stops a role: the Job's deadline, counted from its start, is set to have passed.
# The Job controller then stops the pods and marks the Job Failed (DeadlineExceeded), so every
# Job of a job ends Complete or Failed and `ttlSecondsAfterFinished` applies (a suspended Job
# never finishes); nobody needs the right to delete pods.
STOP_PATCH = {"spec": {"activeDeadlineSeconds": 1}}


# --------------------------------------------------------------------------- pods -> replicas


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

    def observed(self, log_tail: str = "") -> policy.Observed:
        return policy.Observed(self.role, self.index, self.phase, self.exit_code, self.restarts, self.reason, log_tail, self.finished)

    def public(self) -> dict[str, Any]:
        data = asdict(self)
        data.pop("pod")
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


def _container_status(pod: dict[str, Any]) -> dict[str, Any]:
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    for status in statuses:
        if status.get("name") == CONTAINER:
            return dict(status)
    return dict(statuses[0]) if statuses else {}


def _with_message(reason: str, message: str | None) -> str:
    message = (message or "").strip()
    return f"{reason}: {message}" if message else reason


# A pod's phase, as Kubernetes writes it (its own words, not the job's `contract.Phase`).
POD_PENDING, POD_RUNNING, POD_SUCCEEDED, POD_FAILED = "Pending", "Running", "Succeeded", "Failed"


def pod_view(pod: dict[str, Any], role: str, index: int) -> ReplicaView:
    """The replica state that one pod shows, reasons in words."""
    status = pod.get("status") or {}
    phase = status.get("phase") or POD_PENDING
    container = _container_status(pod)
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
                view.reason = _with_message(condition.get("reason") or "Unschedulable", condition.get("message"))
        if view.reason is None and waiting.get("reason") and waiting.get("reason") != "ContainerCreating":
            view.reason = _with_message(waiting["reason"], waiting.get("message"))
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
        elif status.get("reason"):  # Evicted, DeadlineExceeded, NodeLost ...
            view.reason = _with_message(status["reason"], status.get("message"))
        elif view.exit_code is not None:
            view.reason = f"Exit code {view.exit_code}"
        else:
            view.reason = _with_message("Failed", status.get("message"))
    return view


def _age_key(pod: dict[str, Any]) -> tuple[str, int, str, str]:
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
    finished = ((_container_status(pod).get("state") or {}).get("terminated") or {}).get("finishedAt") or ""
    return meta.get("creationTimestamp") or "", liveness, finished, meta.get("name") or ""


def newest_pod(pods: list[dict[str, Any]]) -> dict[str, Any]:
    """The pod that currently stands for a replica (several exist after restarts)."""
    return max(pods, key=_age_key)


def current_pods(record: dict[str, Any], pods: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The pods of this incarnation of the job: an earlier job of the same name, deleted and
    submitted again, leaves pods that terminate for a while and must not count.  Pods without
    the label come from a version that did not set it, and are taken as current."""
    uid = (record.get("metadata") or {}).get("uid")
    if not uid:
        return pods
    return [p for p in pods if ((p.get("metadata") or {}).get("labels") or {}).get(contract.RECORD_UID_LABEL, uid) == uid]


def disrupted(pod: dict[str, Any]) -> bool:
    """Evicted, drained or preempted (the `DisruptionTarget` condition): not the replica's failure."""
    return any(c.get("type") == "DisruptionTarget" and c.get("status") == "True" for c in (pod.get("status") or {}).get("conditions") or [])


def observe_replicas(pods: list[dict[str, Any]], pservers: int, trainers: int) -> list[ReplicaView]:
    """Every desired replica, from its newest pod; failed older pods of the same index are the
    restarts the Job controller made.  A replica without a pod yet is Pending."""
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
            if view.phase == ReplicaPhase.FAILED and disrupted(newest):
                # The Job controller ignores this failure (podFailurePolicy) and makes a new pod.
                condition = next(c for c in (newest.get("status") or {}).get("conditions") or [] if c.get("type") == "DisruptionTarget")
                view = ReplicaView(
                    role,
                    index,
                    reason=_with_message(
                        condition.get("reason") or "DisruptionTarget",
                        f"{condition.get('message') or 'the pod was disrupted'}; a new pod replaces it",
                    ),
                )
            view.restarts += sum(
                1 for p in candidates if p is not newest and (p.get("status") or {}).get("phase") == POD_FAILED and not disrupted(p)
            )
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
    """What the server knows of a role's Job beyond its pods (the master reads pods only):
    why its pod-less replicas have no pod, and whether the Job has failed for good."""

    reason: str
    failed: bool = False


def decide_job(
    record: dict[str, Any],
    pods: list[dict[str, Any]],
    log_tail: str = "",
    role_notes: dict[str, RoleNote] | None = None,
    pod_notes: dict[str, str] | None = None,
) -> tuple[list[ReplicaView], policy.Decision]:
    """Replica views and the policy's decision for a running (not yet recorded) job.

    `role_notes` explain replicas without a pod from their Job: the Job controller could not
    create the pod (a FailedCreate event: quota, LimitRange, PodSecurity...), the Job is
    suspended, or it failed (then the replica fails too, even if its pods are gone).
    `pod_notes` (pod name -> reason) explain pending pods, e.g. the kubelet's FailedMount."""
    spec = spec_of(record)
    views = observe_replicas(current_pods(record, pods), int(spec.get("pservers") or 0), int(spec.get("trainers") or 0))
    for view in views:
        note = (role_notes or {}).get(view.role)
        if view.pod is None and view.reason is None and note is not None:
            view.reason = note.reason
            if note.failed:
                view.phase = ReplicaPhase.FAILED
        elif view.pod is not None and view.phase == ReplicaPhase.PENDING and view.reason is None:
            view.reason = (pod_notes or {}).get(view.pod)
    cancelled = ((record.get("metadata") or {}).get("annotations") or {}).get(contract.CANCELLED_ANNOTATION) == "true"
    observed = [v.observed(log_tail if v.phase == ReplicaPhase.FAILED else "") for v in views]
    decision = policy.decide(
        observed,
        max_restarts=int(spec.get("max_restarts") or 0),
        cancelled=cancelled,
        timed_out_after=timed_out(record, spec),
        runner_restarts=False,
        now=time.time(),
    )
    return views, decision


def final_status(views: list[ReplicaView], decision: policy.Decision) -> dict[str, Any]:
    started = [v.started for v in views if v.started]
    return {
        "phase": decision.phase,
        "message": decision.message,
        "started": min(started) if started else None,
        "finished": contract.now_iso(),
        "replicas": final_replicas(views, decision),
    }


# --------------------------------------------------------------------------- the API, stdlib only


#: Lines of a failed replica's log read to find why it failed: Paddle's fatal-signal block (a C++
#: stack, a framed summary) can follow the Python traceback for well over a hundred lines.
FAILURE_TAIL_LINES = 1000


class ApiError(Exception):
    def __init__(self, status: int, message: str):
        super().__init__(f"HTTP {status}: {message}")
        self.status = status


class Api:
    """The few API calls the master needs, over urllib with a bearer token."""

    def __init__(self, base: str, token_file: str | None, ca_file: str | None, insecure: bool, namespace: str):
        self.base = base.rstrip("/")
        self.token_file = token_file
        self.namespace = namespace
        self.context: ssl.SSLContext | None = None
        if base.startswith("https"):
            self.context = ssl.create_default_context(cafile=ca_file) if ca_file else ssl.create_default_context()
            if insecure:
                self.context.check_hostname = False
                self.context.verify_mode = ssl.CERT_NONE

    @classmethod
    def from_environment(cls) -> Api:
        env = os.environ
        base = env.get("PADDLE_NBEXT_KUBE_API")
        if not base:
            host, port = env.get("KUBERNETES_SERVICE_HOST"), env.get("KUBERNETES_SERVICE_PORT", "443")
            if not host:
                raise SystemExit("cluster_master: no API address: set PADDLE_NBEXT_KUBE_API or run in a pod")
            base = f"https://[{host}]:{port}" if ":" in host else f"https://{host}:{port}"
        token_file = env.get("PADDLE_NBEXT_KUBE_TOKEN_FILE") or f"{SA_DIR}/token"
        ca_file = env.get("PADDLE_NBEXT_KUBE_CA_FILE") or (f"{SA_DIR}/ca.crt" if os.path.exists(f"{SA_DIR}/ca.crt") else None)
        namespace = env.get("PADDLE_NBEXT_NAMESPACE")
        if not namespace:
            with open(f"{SA_DIR}/namespace", encoding="utf-8") as handle:
                namespace = handle.read().strip()
        insecure = env.get("PADDLE_NBEXT_KUBE_INSECURE", "") in ("1", "true", "yes")
        return cls(base, token_file if os.path.exists(token_file) else None, ca_file, insecure, namespace)

    def request(self, method: str, path: str, body: Any = None, content_type: str = "application/json", raw: bool = False) -> Any:
        headers = {"Accept": "application/json"}
        if self.token_file:
            with open(self.token_file, encoding="utf-8") as handle:  # re-read: projected tokens rotate
                headers["Authorization"] = f"Bearer {handle.read().strip()}"
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = content_type
        req = urllib.request.Request(self.base + path, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=30, context=self.context) as response:
                payload = response.read()
        except urllib.error.HTTPError as error:
            detail = error.read().decode(errors="replace")
            try:
                detail = json.loads(detail).get("message", detail)
            except (ValueError, AttributeError):
                pass
            raise ApiError(error.code, detail) from None
        if raw:
            return payload.decode(errors="replace")
        return json.loads(payload) if payload else {}

    def ns(self, resource: str, group: str = "api/v1") -> str:
        return f"/{group}/namespaces/{self.namespace}/{resource}"

    def get_record(self, job: str) -> dict[str, Any] | None:
        try:
            record: dict[str, Any] = self.request("GET", self.ns(f"configmaps/{job}"))
            return record
        except ApiError as error:
            if error.status == 404:
                return None
            raise

    def job_pods(self, job: str) -> list[dict[str, Any]]:
        selector = urllib.parse.quote(f"{contract.JOB_LABEL}={job}")
        return self.request("GET", self.ns(f"pods?labelSelector={selector}")).get("items") or []

    def suspended_jobs(self, job: JobObjects) -> list[str]:
        """The job's Jobs that are suspended now: a queue (Kueue) took the job back (a preemption)
        or has not admitted it yet, and stops their pods itself.  [] when the Role may not list
        Jobs (a master Role from before 0.2): the master then decides as it always did."""
        selector = urllib.parse.quote(f"{contract.JOB_LABEL}={job.record}")
        try:
            listed = self.request("GET", self.ns(f"jobs?labelSelector={selector}", "apis/batch/v1"))
        except ApiError as error:
            if error.status == 403:
                return []
            raise
        return sorted(
            str((item.get("metadata") or {}).get("name")) for item in listed.get("items") or [] if (item.get("spec") or {}).get("suspend")
        )

    def log_tail(self, pod: str, lines: int = FAILURE_TAIL_LINES) -> str:
        try:
            return str(self.request("GET", self.ns(f"pods/{pod}/log?container={CONTAINER}&tailLines={lines}"), raw=True))
        except (ApiError, OSError):
            return ""

    def record_final(self, job: str, status: dict[str, Any], resource_version: str | None = None) -> None:
        """Write the end once: with the resourceVersion of the record it was decided on, a record
        changed since (a cancel, the server's own end) refuses it with 409."""
        meta: dict[str, Any] = {"annotations": {contract.STATUS_ANNOTATION: json.dumps(status)}}
        if resource_version:
            meta["resourceVersion"] = resource_version
        self.request("PATCH", self.ns(f"configmaps/{job}"), {"metadata": meta}, "application/merge-patch+json")

    def stop_role(self, job: JobObjects, role: str) -> None:
        """End the role's Job (see `STOP_PATCH`); the Job controller stops its pods."""
        try:
            self.request("PATCH", self.ns(f"jobs/{job.role_job(role)}", "apis/batch/v1"), STOP_PATCH, "application/merge-patch+json")
        except ApiError as error:
            if error.status != 404:
                raise


def failed_trainer_pod(views: list[ReplicaView], decision: policy.Decision) -> str | None:
    if decision.phase != contract.Phase.FAILED:
        return None
    for view in views:
        if view.phase == ReplicaPhase.FAILED and view.pod:
            return view.pod
    return None


@dataclass(frozen=True)
class JobObjects:
    """The names of the job's objects the master reads and patches, from its environment:
    `PADDLE_NBEXT_RECORD` (the record ConfigMap, whose name is also the pods' job label: the
    job's object name, `<job>-<owner tag>`) and `PADDLE_NBEXT_ROLE_JOBS` (JSON role -> Job name:
    `<obj>-<role>`, or JobSet's child `<obj>-<role>-0`)."""

    record: str
    role_jobs: dict[str, str]

    def role_job(self, role: str) -> str:
        return self.role_jobs.get(role) or f"{self.record}-{role}"

    @classmethod
    def from_environment(cls, env: Mapping[str, str]) -> JobObjects | None:
        record = env.get("PADDLE_NBEXT_RECORD", "").strip()
        if not record:
            return None
        try:
            named = json.loads(env.get("PADDLE_NBEXT_ROLE_JOBS") or "{}")
        except ValueError:
            named = {}
        role_jobs = {str(k): str(v) for k, v in named.items()} if isinstance(named, dict) else {}
        return cls(record, role_jobs)


def reconcile_once(api: Api, job: JobObjects) -> bool:
    """One pass; True when the job is over (recorded) and the master may exit."""
    record = api.get_record(job.record)
    if record is None:
        return True  # deleted: the garbage collector takes this pod's Job too
    annotations = (record.get("metadata") or {}).get("annotations") or {}
    pods = current_pods(record, api.job_pods(job.record))
    if contract.STATUS_ANNOTATION in annotations:
        final = json.loads(annotations[contract.STATUS_ANNOTATION])
        stopped_roles = {r["role"] for r in final.get("replicas", []) if r.get("phase") == ReplicaPhase.STOPPED}
        for role in sorted(stopped_roles):
            api.stop_role(job, role)
        return True
    views, decision = decide_job(record, pods)
    if not decision.terminal:
        return False
    if decision.phase == contract.Phase.FAILED and api.suspended_jobs(job):
        # A preemption: Kueue suspended the Jobs and stops their pods (exit 143), which reads as a
        # failure; the job is queued again, not over (the server holds back the same way).
        return False
    failed_pod = failed_trainer_pod(views, decision)
    if failed_pod:
        views, decision = decide_job(record, pods, api.log_tail(failed_pod))
    try:
        api.record_final(job.record, final_status(views, decision), (record.get("metadata") or {}).get("resourceVersion"))
    except ApiError as error:
        if error.status == 409:
            return False  # the record changed (a cancel?): the next pass reads it again
        raise
    for role in sorted({role for role, _ in decision.stop}):
        api.stop_role(job, role)
    return True


def _exit_on_sigterm(signum: int, _frame: object) -> None:
    """SIGTERM is an eviction, a drain or a preemption, never the job's end: exit non-zero so
    Kubernetes runs the master again (exit 0 would complete its Job and leave the job unwatched).

    `os._exit`, not `sys.exit`: a SystemExit raised while the interpreter runs a finalizer (an SSL
    socket being collected mid-request) is printed as "Exception ignored" and swallowed, and the
    master then kept watching until the kubelet's SIGKILL. Nothing here needs unwinding: every
    record write is one API call that either happened or did not.
    """
    print("cluster_master: SIGTERM (eviction, drain or preemption): exiting for Kubernetes to restart me", file=sys.stderr, flush=True)
    os._exit(128 + signum)


def main() -> int:
    job = JobObjects.from_environment(os.environ)
    if job is None:
        print("cluster_master: PADDLE_NBEXT_RECORD (the job record's name) is not set", file=sys.stderr)
        return 2
    interval = float(os.environ.get("PADDLE_NBEXT_MASTER_INTERVAL", "3"))
    api = Api.from_environment()
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    print(f"cluster_master: watching job {job.record} in namespace {api.namespace}", flush=True)
    while True:
        try:
            if reconcile_once(api, job):
                print(f"cluster_master: job {job.record} is over", flush=True)
                return 0
        except (ApiError, OSError, ValueError) as error:  # API restarts, network blips: try again
            print(f"cluster_master: {error}", file=sys.stderr, flush=True)
        time.sleep(interval)


if __name__ == "__main__":
    sys.exit(main())
