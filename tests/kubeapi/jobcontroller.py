"""The Indexed Job controller, played in-process when the cluster has none (the emulator).

It does what kube-controller-manager's job controller does for ``completionMode: Indexed`` jobs with
``restartPolicy: Never``: one pod per pending index named ``<job>-<index>-<random>`` with the job
labels, completion-index label/annotation, hostname ``<job>-<index>``, the template's subdomain,
``JOB_COMPLETION_INDEX`` and a controlling ownerReference; failed pods are replaced until failures
exceed ``backoffLimit``; ``.status`` gets active/succeeded/failed/completedIndexes and the
``Complete``/``Failed``/``Suspended`` conditions; suspend deletes active pods. It writes through the
store directly, so its work does not show up in request counts.

Like the real controller (a work queue never syncs one Job on two workers at once), reconciles are
serialized: ``watch_namespace`` reconciles on the caller's thread while the controller thread may be
reconciling the same namespace, and two concurrent list-then-create passes would both see an index
missing and start two pods for it.  Should an index still have several active pods, the extras are
deleted as the real controller does, keeping the most advanced one (running and ready, then oldest).
"""

from __future__ import annotations

import copy
import threading
from typing import Any

from .admission import random_suffix
from .errors import ApiError
from .resources import by_kind
from .store import Store, now

JOB, POD = by_kind("Job"), by_kind("Pod")
INDEX_KEY = "batch.kubernetes.io/job-completion-index"


def _index_ranges(indexes: list[int]) -> str:
    parts: list[str] = []
    for i in sorted(indexes):
        if parts and _last(parts[-1]) == i - 1:
            start = parts[-1].split("-")[0]
            parts[-1] = f"{start}-{i}"
        else:
            parts.append(str(i))
    return ",".join(parts)


def _last(part: str) -> int:
    return int(part.split("-")[-1])


class JobController:
    """Reconciles the Jobs of the namespaces it is given, on every store change, until stopped."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self._namespaces: set[str] = set()
        self._lock = threading.Lock()
        self._reconciling = threading.Lock()  # one reconcile pass at a time (see the module docstring)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def watch_namespace(self, namespace: str) -> None:
        with self._lock:
            self._namespaces.add(namespace)
        self.reconcile(namespace)
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="kubeapi-jobs", daemon=True)
            self._thread.start()

    def forget_namespace(self, namespace: str) -> None:
        with self._lock:
            self._namespaces.discard(namespace)

    def stop(self) -> None:
        self._stop.set()
        with self._store.cond:
            self._store.cond.notify_all()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def _run(self) -> None:
        seen = -1
        while not self._stop.is_set():
            with self._store.cond:
                if self._store.resource_version == seen:
                    self._store.cond.wait(0.5)
                seen = self._store.resource_version
            with self._lock:
                namespaces = list(self._namespaces)
            for namespace in namespaces:
                try:
                    self.reconcile(namespace)
                except ApiError:
                    pass  # raced with a test's change; the next change brings us back

    def reconcile(self, namespace: str) -> None:
        with self._reconciling:
            jobs, _ = self._store.list(JOB, namespace)
            for job in jobs:
                if job.get("spec", {}).get("completionMode") == "Indexed":
                    self._reconcile_job(job)

    def _reconcile_job(self, job: dict[str, Any]) -> None:
        meta, spec = job["metadata"], job["spec"]
        if meta.get("deletionTimestamp"):
            return
        namespace, uid = meta["namespace"], meta["uid"]
        pods, _ = self._store.list(POD, namespace, lambda p: any(
            r.get("uid") == uid for r in p["metadata"].get("ownerReferences") or []))
        completions = int(spec.get("completions") or 0)
        parallelism = int(spec.get("parallelism") if spec.get("parallelism") is not None else 1)
        conditions = {c["type"]: c for c in (job.get("status") or {}).get("conditions") or []}
        finished = any(conditions.get(t, {}).get("status") == "True" for t in ("Complete", "Failed"))
        active = [p for p in pods if p["status"].get("phase") in ("Pending", "Running", None)
                  and not p["metadata"].get("deletionTimestamp")]
        failed = sum(1 for p in pods if p["status"].get("phase") == "Failed")
        succeeded = sorted({int(p["metadata"]["annotations"][INDEX_KEY]) for p in pods
                            if p["status"].get("phase") == "Succeeded"})
        active = self._without_duplicates(active)
        new_conditions = dict(conditions)
        suspended = bool(spec.get("suspend"))
        if not finished:
            if failed > int(spec.get("backoffLimit", 6)):
                new_conditions["Failed"] = self._condition("Failed", "BackoffLimitExceeded",
                                                           "Job has reached the specified backoff limit")
                finished = True
            elif completions and len(succeeded) >= completions:
                new_conditions["SuccessCriteriaMet"] = self._condition("SuccessCriteriaMet", "CompletionsReached",
                                                                       "Reached expected number of succeeded pods")
                new_conditions["Complete"] = self._condition("Complete", "CompletionsReached",
                                                             "Reached expected number of succeeded pods")
                finished = True
        if finished or suspended:
            for pod in active:
                self._delete_pod(pod)
            active = []
        if suspended and not finished:
            new_conditions["Suspended"] = self._condition("Suspended", "JobSuspended", "Job suspended")
        elif "Suspended" in new_conditions:
            new_conditions["Suspended"] = dict(new_conditions["Suspended"], status="False", reason="JobResumed",
                                               message="Job resumed")
        if not finished and not suspended:
            busy = {int(p["metadata"]["annotations"][INDEX_KEY]) for p in active}
            missing = [i for i in range(completions) if i not in busy and i not in succeeded]
            for index in missing[:max(0, parallelism - len(active))]:
                active.append(self._create_pod(job, index))
        status = copy.deepcopy(job.get("status") or {})
        status.update(active=len(active), succeeded=len(succeeded), failed=failed,
                      ready=sum(1 for p in active if p["status"].get("phase") == "Running"),
                      completedIndexes=_index_ranges(succeeded), uncountedTerminatedPods={})
        status.setdefault("startTime", now())
        if "Complete" in new_conditions and new_conditions["Complete"]["status"] == "True":
            status.setdefault("completionTime", now())
        if new_conditions:
            status["conditions"] = list(new_conditions.values())
        if status != (job.get("status") or {}):
            def write(o: dict[str, Any]) -> dict[str, Any]:
                o["status"] = status
                return o
            self._store.replace_with(JOB, namespace, meta["name"], write, "status")

    def _without_duplicates(self, active: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """One active pod per index: delete the others, keeping the running+ready, then oldest, one."""
        by_index: dict[str, list[dict[str, Any]]] = {}
        for pod in active:
            by_index.setdefault(pod["metadata"]["annotations"][INDEX_KEY], []).append(pod)
        kept = []
        for pods in by_index.values():
            pods.sort(key=_keep_first)
            kept.append(pods[0])
            for extra in pods[1:]:
                self._delete_pod(extra)
        return kept

    @staticmethod
    def _condition(kind: str, reason: str, message: str) -> dict[str, Any]:
        stamp = now()
        return {"type": kind, "status": "True", "reason": reason, "message": message,
                "lastProbeTime": stamp, "lastTransitionTime": stamp}

    def _delete_pod(self, pod: dict[str, Any]) -> None:
        try:
            self._store.delete(POD, pod["metadata"]["namespace"], pod["metadata"]["name"], "Background")
        except ApiError:
            pass

    def _create_pod(self, job: dict[str, Any], index: int) -> dict[str, Any]:
        meta = job["metadata"]
        template = copy.deepcopy(job["spec"]["template"])
        pod_meta = template.get("metadata") or {}
        labels = dict(pod_meta.get("labels") or {})
        labels[INDEX_KEY] = str(index)
        annotations = dict(pod_meta.get("annotations") or {})
        annotations[INDEX_KEY] = str(index)
        spec = template["spec"]
        spec["hostname"] = f"{meta['name']}-{index}"
        for container in spec.get("containers", []) + spec.get("initContainers", []):
            env = [e for e in container.get("env") or [] if e.get("name") != "JOB_COMPLETION_INDEX"]
            env.append({"name": "JOB_COMPLETION_INDEX", "valueFrom": {"fieldRef": {
                "apiVersion": "v1", "fieldPath": f"metadata.annotations['{INDEX_KEY}']"}}})
            container["env"] = env
        body = {"metadata": {"generateName": f"{meta['name']}-{index}-", "labels": labels,
                             "annotations": annotations,
                             "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": meta["name"],
                                                  "uid": meta["uid"], "controller": True,
                                                  "blockOwnerDeletion": True}]},
                "spec": spec}
        return self._store.create(POD, meta["namespace"], body)


def _keep_first(pod: dict[str, Any]) -> tuple[int, int, str, str]:
    """Sort key among duplicate pods of one index: the pod to keep sorts first."""
    status = pod.get("status") or {}
    ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or [])
    meta = pod["metadata"]
    return (0 if status.get("phase") == "Running" else 1, 0 if ready else 1,
            meta.get("creationTimestamp") or "", meta["name"])
