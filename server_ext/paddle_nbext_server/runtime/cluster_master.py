"""The job master inside a Kubernetes cluster (docs/admin-guide.md, "A job's objects"), standard library only.

It runs as the single pod of the `<job>-master` Job, from the files of the job record ConfigMap,
in the job's own base image.  At every change of the job's pods (a watch, and at least every few
seconds) it reads the job's pods and the record through the API with its service-account
token, turns the pods into replica states, asks the shared
lifecycle `policy.decide`, and acts on it: when the job is over it writes the final status into
the record and stops what still runs (ends each Job through its deadline, see `STOP_PATCH`, or
deletes the pservers' Job after a success so that nothing reads Failed); when a replica failed
with restarts left, or was evicted, drained or preempted, it restarts the whole job
(`restart_step`: every replica Job deleted with its pods, then made again from the record for
the next attempt), because a Paddle replica restarted alone never rejoins its gang.  It keeps
nothing in memory that matters (a restart in progress is written in the record), so when
Kubernetes restarts it, it re-derives everything from the API.

How pods and Jobs read as replicas and a decision is `replicas.py`, shared with the server's
status cache so that both read a job exactly the same way; it is shipped beside this file.

API access: in a pod, the in-cluster defaults (KUBERNETES_SERVICE_HOST/PORT, the mounted
token, CA and namespace).  For tests and unusual setups: `PADDLE_NBEXT_KUBE_API` (base URL),
`PADDLE_NBEXT_KUBE_TOKEN_FILE`, `PADDLE_NBEXT_KUBE_CA_FILE`, `PADDLE_NBEXT_KUBE_INSECURE=1`
(skip TLS verification), `PADDLE_NBEXT_NAMESPACE`.
"""

from __future__ import annotations

import dataclasses
import enum
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
from dataclasses import dataclass
from typing import Any

if __package__:  # imported from the installed package (the server, the local backend)
    from paddle_nbext.model import contract
else:  # a plain script: in a job's bundle, the contract shipped beside it (even where the image
    # has some other paddle-nbext installed); run from a source tree, the installed one
    try:
        import contract  # type: ignore[import-not-found,no-redef]
    except ImportError:
        from paddle_nbext.model import contract
if __package__:
    from . import replicas
else:  # run as a plain script from the runtime bundle's files
    import replicas  # type: ignore[import-not-found,no-redef]

ReplicaPhase, Role = contract.ReplicaPhase, contract.Role
#: When the restart that made an attempt began (`paddle_nbext_fence.BEGAN_VAR`).
BEGAN_VAR = "PADDLE_NBEXT_ATTEMPT_BEGAN"
SA_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
# How a runner stops a role: the Job's deadline, counted from its start, is set to have passed.
# The Job controller then stops the pods and marks the Job Failed (DeadlineExceeded), so every
# Job of a job ends Complete or Failed and `ttlSecondsAfterFinished` applies (a suspended Job
# never finishes); nobody needs the right to delete pods.
STOP_PATCH = {"spec": {"activeDeadlineSeconds": 1}}


# --------------------------------------------------------------------------- the API, stdlib only


#: Lines of a failed replica's log read to find why it failed: Paddle's fatal-signal block (a C++
#: stack, a framed summary) can follow the Python traceback for well over a hundred lines.
FAILURE_TAIL_LINES = 1000


#: Seconds a kubelet has to serve one line of a pod's log before its node counts as not answering.
ANSWER_SECONDS = 10.0

#: Seconds between passes while a whole restart is under way: each step waits on the last one's
#: effect (pods gone, Jobs gone), and the job's replicas wait on the restart.
RESTART_PASS_SECONDS = 0.3


class Pass(enum.Enum):
    """What one pass of the master found, and so when the next one runs."""

    OVER = "over"  # the job is over and recorded: the master exits
    WAIT = "wait"  # nothing to do until the job's pods change
    SOON = "soon"  # a restart is under way: look again shortly


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
        self.pods_version: str | None = None  # resourceVersion of the last list of the job's pods
        self.can_watch = True  # False once a watch was refused (a master Role from before 0.2)
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

    def _headers(self) -> dict[str, str]:
        headers = {"Accept": "application/json"}
        if self.token_file:
            with open(self.token_file, encoding="utf-8") as handle:  # re-read: projected tokens rotate
                headers["Authorization"] = f"Bearer {handle.read().strip()}"
        return headers

    def request(self, method: str, path: str, body: Any = None, content_type: str = "application/json", raw: bool = False) -> Any:
        headers = self._headers()
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
        listed = self.request("GET", self.ns(f"pods?labelSelector={selector}"))
        self.pods_version = (listed.get("metadata") or {}).get("resourceVersion") or None
        return list(listed.get("items") or [])

    def wait_for_pods(self, job: str, seconds: float) -> None:
        """Return at the first change of the job's pods since the last `job_pods`, or after
        `seconds`: a failed or evicted replica is acted on at once, not at the next poll."""
        if not self.can_watch or not self.pods_version or seconds < 1:
            time.sleep(seconds)
            return
        selector = urllib.parse.quote(f"{contract.JOB_LABEL}={job}")
        query = f"labelSelector={selector}&watch=1&resourceVersion={self.pods_version}&timeoutSeconds={int(seconds)}"
        req = urllib.request.Request(self.base + self.ns(f"pods?{query}"), headers=self._headers())
        started = time.monotonic()
        try:
            with urllib.request.urlopen(req, timeout=seconds + 10, context=self.context) as response:
                response.readline()  # the first event (or an expired version's ERROR): look again
        except urllib.error.HTTPError as error:
            if error.code == 403:
                self.can_watch = False  # polling it is, as before
            time.sleep(max(0.0, seconds - (time.monotonic() - started)))
        except OSError:  # the API restarting: the next pass reports what is wrong
            time.sleep(max(0.0, min(seconds, 1.0) - (time.monotonic() - started)))

    def jobs(self, job: JobObjects) -> list[dict[str, Any]]:
        """The job's Jobs (every role's and the master's).  [] when the Role may not list Jobs
        (a master Role from before 0.2): the master then decides from pods alone."""
        selector = urllib.parse.quote(f"{contract.JOB_LABEL}={job.record}")
        try:
            listed = self.request("GET", self.ns(f"jobs?labelSelector={selector}", "apis/batch/v1"))
        except ApiError as error:
            if error.status == 403:
                return []
            raise
        return list(listed.get("items") or [])

    def delete_job(self, name: str) -> None:
        """Delete a Job and its pods (Background: the Job goes at once, the garbage collector
        deletes its pods; `restart_step` waits for the pods themselves)."""
        try:
            self.request("DELETE", self.ns(f"jobs/{name}", "apis/batch/v1"), {"propagationPolicy": "Background"})
        except ApiError as error:
            if error.status != 404:
                raise

    def create_job(self, manifest: dict[str, Any]) -> None:
        try:
            self.request("POST", self.ns("jobs", "apis/batch/v1"), manifest)
        except ApiError as error:
            if error.status != 409:  # made by an earlier pass of this step
                raise

    def select_attempt(self, job: JobObjects, attempt: int) -> None:
        """From now on the job's headless Service publishes `attempt`'s pods only.  It publishes
        not-ready addresses (peers resolve each other before they are ready), and so a pod of an
        earlier attempt still Terminating on a node that lost power kept its hostname's address:
        the new pserver 0 resolved its own name to the dead pod's address and could not listen.
        A master Role from before 0.4 may not patch Services: the restart goes on as before."""
        body = {"spec": {"selector": {contract.ATTEMPT_LABEL: str(attempt)}}}
        try:
            self.request("PATCH", self.ns(f"services/{job.record}"), body, "application/merge-patch+json")
        except ApiError as error:
            if error.status not in (403, 404):
                raise
            print(f"cluster_master: the Service {job.record} still names every attempt's pods ({error.status}: {error})", flush=True)

    def record_restarts(self, job: str, restarts: replicas.Restarts, resource_version: str | None) -> None:
        """Write the restart state, on the record version it was decided on (409 if changed)."""
        meta: dict[str, Any] = {"annotations": {contract.RESTART_ANNOTATION: restarts.to_json()}}
        if resource_version:
            meta["resourceVersion"] = resource_version
        self.request("PATCH", self.ns(f"configmaps/{job}"), {"metadata": meta}, "application/merge-patch+json")

    def answers(self, pod: str) -> bool | None:
        """Whether the pod's kubelet serves its log (True), cannot be reached through the API
        (False: the API server's request to the node failed or timed out), or we cannot tell."""
        path = self.ns(f"pods/{pod}/log?container={replicas.CONTAINER}&tailLines=1")
        req = urllib.request.Request(self.base + path, headers=self._headers())
        try:
            with urllib.request.urlopen(req, timeout=ANSWER_SECONDS, context=self.context) as response:
                response.read()
            return True
        except urllib.error.HTTPError as error:
            detail = error.read().decode(errors="replace")
            return False if replicas.kubelet_unreachable(error.code, detail) else None
        except TimeoutError:
            return False
        except OSError as error:
            return False if isinstance(getattr(error, "reason", None), TimeoutError) else None

    def log_tail(self, pod: str, lines: int = FAILURE_TAIL_LINES) -> str:
        try:
            return str(self.request("GET", self.ns(f"pods/{pod}/log?container={replicas.CONTAINER}&tailLines={lines}"), raw=True))
        except (ApiError, OSError):
            return ""

    def record_final(self, job: str, status: dict[str, Any], resource_version: str | None = None) -> None:
        """Write the end once: with the resourceVersion of the record it was decided on, a record
        changed since (a cancel, the server's own end) refuses it with 409."""
        meta: dict[str, Any] = {"annotations": {contract.STATUS_ANNOTATION: json.dumps(status)}}
        if resource_version:
            meta["resourceVersion"] = resource_version
        self.request("PATCH", self.ns(f"configmaps/{job}"), {"metadata": meta}, "application/merge-patch+json")

    def stop_role(self, job: JobObjects, role: str, succeeded: bool = False) -> None:
        """End the role's Job (see `STOP_PATCH`); the Job controller stops its pods.  After a
        success the Job is deleted instead: ending it by its deadline would mark it Failed
        (DeadlineExceeded), an alert on a real cluster for a job that went well; the replicas'
        logs stay in the user's home, their states in the record."""
        try:
            if succeeded:
                self.request("DELETE", self.ns(f"jobs/{job.role_job(role)}", "apis/batch/v1"), {"propagationPolicy": "Background"})
            else:
                self.request("PATCH", self.ns(f"jobs/{job.role_job(role)}", "apis/batch/v1"), STOP_PATCH, "application/merge-patch+json")
        except ApiError as error:
            if error.status != 404:
                raise


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


def role_notes(job: JobObjects, record: dict[str, Any], jobs: list[dict[str, Any]]) -> dict[str, replicas.RoleNote]:
    """The notes of the role Jobs of the record's current attempt (see `replicas.job_note`)."""
    uid = (record.get("metadata") or {}).get("uid")
    attempt = replicas.Restarts.of(record).attempt
    notes: dict[str, replicas.RoleNote] = {}
    for obj in jobs:
        meta = obj.get("metadata") or {}
        labels = meta.get("labels") or {}
        role = labels.get(contract.ROLE_LABEL)
        if role not in contract.ROLES or meta.get("name") != job.role_job(str(role)) or replicas.attempt_of(obj) != attempt:
            continue
        if uid and any(ref.get("uid") not in (uid, None) for ref in meta.get("ownerReferences") or []):
            continue  # a Job of an earlier job of the same name, still being deleted
        note = replicas.job_note(str(role), obj)
        if note is not None:
            notes[str(role)] = note
    return notes


def next_attempt_jobs(record: dict[str, Any], attempt: int, began: float | None = None) -> list[dict[str, Any]]:
    """The replica Jobs as submitted (`contract.REPLICA_JOBS_KEY`), for `attempt`: owned by the
    record, their pods labelled with its uid and the attempt, and told when the restart that
    makes them began (`began`, for the attempt fence in the home)."""
    uid = str((record.get("metadata") or {}).get("uid") or "")
    manifests: list[dict[str, Any]] = json.loads((record.get("data") or {}).get(contract.REPLICA_JOBS_KEY) or "[]")
    for manifest in manifests:
        for reference in manifest["metadata"].get("ownerReferences", []):
            reference["uid"] = uid
        manifest["metadata"].setdefault("labels", {})[contract.ATTEMPT_LABEL] = str(attempt)
        labels = manifest["spec"]["template"]["metadata"].setdefault("labels", {})
        labels[contract.ATTEMPT_LABEL] = str(attempt)
        if uid:
            labels[contract.RECORD_UID_LABEL] = uid
        if began is not None:
            for container in (manifest["spec"]["template"].get("spec") or {}).get("containers") or []:
                env = [e for e in container.get("env") or [] if e.get("name") != BEGAN_VAR]
                container["env"] = [*env, {"name": BEGAN_VAR, "value": f"{began:.3f}"}]
    return manifests


def restart_step(api: Api, job: JobObjects, record: dict[str, Any], restarts: replicas.Restarts, pods: list[dict[str, Any]]) -> None:
    """Carry a whole restart one step on.  Idempotent, so any pass of any master incarnation
    may run it: delete every replica Job of the previous attempt (its pods with it); once none
    is left and none of their pods either (never two generations of pods at once: a new
    pserver must not meet an old trainer), make them again for the new attempt and record that
    it runs.

    Except the pods of a node that died (`replicas.left_behind`): they stay Terminating until
    their node returns, maybe for ever, and waiting for them would stop the job with them.  They
    run nothing (a node without power), or run cut off from the other nodes (a partition) until
    their kubelet, back, stops them first thing; meanwhile the attempt fence in the home
    (`paddle_nbext_fence`, the begin time passed to the new attempt) keeps what they still
    write out of the new attempt's checkpoints and curves."""
    manifests = next_attempt_jobs(record, restarts.attempt, restarts.began)
    if not manifests:
        raise ValueError(f"job record {job.record} holds no {contract.REPLICA_JOBS_KEY} to restart the job from")
    names = {m["metadata"]["name"] for m in manifests}
    left = [
        obj for obj in api.jobs(job) if (obj.get("metadata") or {}).get("name") in names and replicas.attempt_of(obj) != restarts.attempt
    ]
    for obj in left:
        if not (obj.get("metadata") or {}).get("deletionTimestamp"):
            api.delete_job(str(obj["metadata"]["name"]))
    now = time.time()
    old = [p for p in pods if replicas.pod_identity(p) is not None and replicas.attempt_of(p) != restarts.attempt]
    waiting = [p for p in old if not replicas.left_behind(p, now)]
    if left or waiting:
        return
    api.select_attempt(job, restarts.attempt)  # before any new pod: names resolve to this attempt's pods only
    for manifest in manifests:
        api.create_job(manifest)
    started = dataclasses.replace(restarts, stopping=False)
    api.record_restarts(job.record, started, (record.get("metadata") or {}).get("resourceVersion"))
    print(f"cluster_master: {restarts.message}: attempt {restarts.attempt} started", flush=True)


def reconcile_once(api: Api, job: JobObjects) -> Pass:
    """One pass; `Pass.OVER` when the job is over (recorded) and the master may exit."""
    record = api.get_record(job.record)
    if record is None:
        return Pass.OVER  # deleted: the garbage collector takes this pod's Job too
    annotations = (record.get("metadata") or {}).get("annotations") or {}
    every_pod = api.job_pods(job.record)
    pods = replicas.current_pods(record, every_pod)
    if contract.STATUS_ANNOTATION in annotations:
        final = json.loads(annotations[contract.STATUS_ANNOTATION])
        stopped_roles = {r["role"] for r in final.get("replicas", []) if r.get("phase") == ReplicaPhase.STOPPED}
        for role in sorted(stopped_roles):
            api.stop_role(job, role, succeeded=final.get("phase") == contract.Phase.SUCCEEDED)
        return Pass.OVER
    jobs = api.jobs(job)
    restarts = replicas.Restarts.of(record)
    if restarts.stopping and not annotations.get(contract.CANCELLED_ANNOTATION) == "true":
        restart_step(api, job, record, restarts, every_pod)
        return Pass.SOON
    views, decision = replicas.decide_job(record, pods, role_notes=role_notes(job, record, jobs))
    # JobSet restarts its own children; a record from before 0.2 has no Jobs to make again.
    restartable = contract.REPLICA_JOBS_KEY in (record.get("data") or {})
    if decision.restart and not decision.terminal and restartable:
        failed_pod = None if decision.disruption else replicas.failed_trainer_pod(views, decision)
        if failed_pod:
            views, decision = replicas.decide_job(record, pods, api.log_tail(failed_pod), role_notes(job, record, jobs))
        if decision.restart:
            try:
                api.record_restarts(job.record, restarts.next(decision), (record.get("metadata") or {}).get("resourceVersion"))
            except ApiError as error:
                if error.status != 409:
                    raise
                return Pass.SOON  # the record changed (a cancel?): the next pass reads it again
            # The restart is in the record (a master run again carries it on); begin it now.
            recorded = api.get_record(job.record)
            if recorded is not None and replicas.Restarts.of(recorded).stopping:
                restart_step(api, job, recorded, replicas.Restarts.of(recorded), api.job_pods(job.record))
            return Pass.SOON
    unreachable = frozenset(pod for pod in replicas.pods_to_ask(views, decision) if api.answers(pod) is False)
    if unreachable:  # a peer's node stopped answering: Kubernetes will declare it lost (a restart)
        views, decision = replicas.decide_job(record, pods, role_notes=role_notes(job, record, jobs), unreachable=unreachable)
    if not decision.terminal:
        return Pass.WAIT
    if decision.phase == contract.Phase.FAILED and any((obj.get("spec") or {}).get("suspend") for obj in jobs):
        # A preemption: Kueue suspended the Jobs and stops their pods (exit 143), which reads as a
        # failure; the job is queued again, not over (the server holds back the same way).
        return Pass.WAIT
    candidates = replicas.explaining_candidates(views, decision)
    if candidates:
        failed_pod, tail = replicas.pick_explanation([(pod, api.log_tail(pod)) for pod in candidates])
        views, decision = replicas.decide_job(record, pods, tail, role_notes(job, record, jobs), explaining_pod=failed_pod)
    try:
        api.record_final(job.record, replicas.final_status(views, decision), (record.get("metadata") or {}).get("resourceVersion"))
    except ApiError as error:
        if error.status == 409:
            return Pass.SOON  # the record changed (a cancel?): the next pass reads it again
        raise
    for role in sorted({role for role, _ in decision.stop}):
        api.stop_role(job, role, succeeded=decision.phase == contract.Phase.SUCCEEDED)
    return Pass.OVER


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
        outcome = Pass.WAIT
        try:
            outcome = reconcile_once(api, job)
            if outcome is Pass.OVER:
                print(f"cluster_master: job {job.record} is over", flush=True)
                return 0
        except (ApiError, OSError, ValueError) as error:  # API restarts, network blips: try again
            print(f"cluster_master: {error}", file=sys.stderr, flush=True)
            time.sleep(interval)
            continue
        if outcome is Pass.SOON:
            time.sleep(RESTART_PASS_SECONDS)
        else:
            api.wait_for_pods(job.record, interval)


if __name__ == "__main__":
    sys.exit(main())
