"""Resource use of a Kubernetes job's replicas, read the way `kubectl top pod` reads it: from the
`metrics.k8s.io` API that metrics-server serves through the API server's aggregation layer.

A part of `KubernetesBackend` (backend.py): its `usage()` finds the caller's job, `answer()` lists the job's pod metrics
with its label selector (one call per request; the event ticker asks only for jobs whose owner
has a stream open), turns each current pod's containers into the replica's CPU cores and
working-set bytes, puts them beside the pod's requests and limits (from the watch cache, no
call), and keeps per job the recent samples and the peaks it has seen (metrics-server samples
every 15 s or so; a sample is kept once, by its timestamp).

Without figures the answer says why in words: metrics-server is not installed (the API group is
missing: 404 or 503 "the server could not find the requested resource"), the notebook's Role may
not read `pods.metrics.k8s.io` (403), metrics-server does not answer (503), or the pods have no
sample yet (metrics-server's first scrape comes a few seconds after a container starts).
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from paddle_nbext.model.contract import JOB_LABEL, Phase, parse_time
from paddle_nbext.model.quantity import Quantity
from paddle_nbext.model.status import JobStatus

from ....runtime import replicas
from ..client.api_calls import KubernetesClient
from ..job_view import JobView

METRICS_GROUP, METRICS_VERSION = "metrics.k8s.io", "v1beta1"
#: Samples kept per replica for its sparkline.
HISTORY = 60
#: Seconds a job's pod metrics are reused before the API is asked again (metrics-server scrapes
#: every 15 s by default, so asking more often only repeats its last sample).
REFRESH = 10.0
#: Seconds the answer "no metrics-server" holds for every job before the API is asked again (an
#: admin may install it meanwhile): a cluster without it costs one call a minute, not one per job.
MISSING_RECHECK = 60.0
ROLE_FILE = "deploy/rbac/notebook-role.yaml"
NOT_SERVED = "this cluster does not serve the metrics.k8s.io API"


def quantity(text: Any) -> Fraction | None:
    """A resource quantity as metrics-server writes it (`123456789n`, `250m`, `1Gi`, `8Ki`)."""
    if not isinstance(text, str) or not text:
        return None
    try:
        return Quantity.parse(text).value
    except ValueError:
        return None


def unavailable(name: str, reason: str) -> dict[str, Any]:
    return {"name": name, "available": False, "reason": reason, "sampled": None, "interval": None, "replicas": []}


def reason_of(error: ApiException) -> str:
    """Why the pod metrics could not be read, in words a user can act on (or pass to an admin)."""
    status = error.status or 0
    body = str(error.body or error.reason or "")
    if status == 404 or (status == 503 and "could not find the requested resource" in body):
        return (
            f"{NOT_SERVED} (metrics-server is not installed), "
            "so resource use is not available; an admin installs metrics-server to turn it on"
        )
    if status == 403:
        return (
            "the notebook's service account may not read pods.metrics.k8s.io; "
            f"an admin grants it with the Role in {ROLE_FILE} (kubectl apply -f {ROLE_FILE})"
        )
    if status == 503:
        return f"metrics-server does not answer right now (the API server says: {body[:200] or 'service unavailable'})"
    return f"reading pod metrics failed ({status} {error.reason or ''})".rstrip()


def pod_usage(item: dict[str, Any]) -> tuple[float, int]:
    """(cores, working-set bytes) of one PodMetrics item: the sum over its containers."""
    cpu, memory = Fraction(0), Fraction(0)
    for container in item.get("containers") or []:
        usage = container.get("usage") or {}
        cpu += quantity(usage.get("cpu")) or 0
        memory += quantity(usage.get("memory")) or 0
    return float(cpu), int(memory)


def pod_resources(pod: dict[str, Any]) -> dict[str, float | int | None]:
    """The pod's requests and limits of CPU (cores) and memory (bytes), summed over its
    containers; None where no container sets one."""
    totals: dict[str, Fraction | None] = {"cpu_request": None, "cpu_limit": None, "memory_request": None, "memory_limit": None}
    for container in (pod.get("spec") or {}).get("containers") or []:
        resources = container.get("resources") or {}
        for kind in ("request", "limit"):
            amounts = resources.get(f"{kind}s") or {}
            for resource in ("cpu", "memory"):
                value = quantity(amounts.get(resource))
                if value is not None:
                    key = f"{resource}_{kind}"
                    totals[key] = (totals[key] or 0) + value
    return {key: (None if value is None else float(value) if key.startswith("cpu") else int(value)) for key, value in totals.items()}


@dataclass
class ReplicaMemory:
    """What one replica's samples left: its recent history and its peaks."""

    history: deque[tuple[float, float, int]] = field(default_factory=lambda: deque(maxlen=HISTORY))
    peak_cpu: float = 0.0
    peak_memory: int = 0
    last: str = ""  # timestamp of the last sample taken (metrics-server repeats it until the next scrape)

    def take(self, timestamp: str, cpu: float, memory: int) -> None:
        if timestamp and timestamp == self.last:
            return
        self.last = timestamp
        moment = parse_time(timestamp)
        self.history.append((moment.timestamp() if moment else 0.0, cpu, memory))
        self.peak_cpu = max(self.peak_cpu, cpu)
        self.peak_memory = max(self.peak_memory, memory)


def usage_answer(
    status: JobStatus, pods: list[dict[str, Any]], items: list[dict[str, Any]], memory: dict[tuple[str, int], ReplicaMemory]
) -> dict[str, Any]:
    """The `GET /jobs/{name}/usage` answer from the job's pods (the cache's) and its PodMetrics
    `items`; `memory` (per replica) is updated with new samples and gives history and peaks."""
    by_pod = {str((item.get("metadata") or {}).get("name")): item for item in items}
    newest: dict[tuple[str, int], dict[str, Any]] = {}
    for pod in pods:
        identity = replicas.pod_identity(pod)
        if identity is not None and (identity not in newest or replicas.newest_pod([newest[identity], pod]) is pod):
            newest[identity] = pod
    answer_replicas, sampled = [], ""
    for (role, index), pod in sorted(newest.items(), key=lambda item: (item[0][0] != "pserver", item[0][1])):
        kept = memory.setdefault((role, index), ReplicaMemory())
        item = by_pod.get(str((pod.get("metadata") or {}).get("name")))
        cpu: float | None = None
        used: int | None = None
        processes = 0
        if item is not None:
            cpu, used = pod_usage(item)
            timestamp = str(item.get("timestamp") or "")
            kept.take(timestamp, cpu, used)
            sampled = max(sampled, timestamp)
            processes = len(item.get("containers") or [])
        answer_replicas.append(
            {
                "role": role,
                "index": index,
                "phase": str((pod.get("status") or {}).get("phase") or ""),
                "cpu": None if cpu is None else round(cpu, 3),
                "memory": used,
                "processes": processes,
                "peak_cpu": round(kept.peak_cpu, 3),
                "peak_memory": kept.peak_memory,
                **pod_resources(pod),
                "history": [{"t": t, "cpu": round(c, 3), "memory": m} for t, c, m in kept.history],
            }
        )
    if not answer_replicas:
        return unavailable(status.name, "the job has no pods yet, so nothing runs to measure")
    if not sampled and not any(replica["peak_memory"] for replica in answer_replicas):
        return unavailable(
            status.name, "metrics-server has no sample of the job's pods yet (its first scrape comes within about 15 s of a start)"
        )
    return {
        "name": status.name,
        "available": True,
        "reason": None,
        "sampled": sampled or None,
        "interval": None,
        "replicas": answer_replicas,
    }


def list_pod_metrics(api: client.ApiClient, namespace: str, selector: str, **kwargs: Any) -> Any:
    """Blocking: the namespace's PodMetrics of `selector` (`kubectl top pod -l ...`)."""
    return client.CustomObjectsApi(api).list_namespaced_custom_object(
        METRICS_GROUP, METRICS_VERSION, namespace, "pods", label_selector=selector, **kwargs
    )


class ResourceUsage:
    """Resource use per replica from metrics.k8s.io."""

    def __init__(self, api: KubernetesClient, view: JobView) -> None:
        self.api = api
        self.view = view
        self._usage_memory: dict[str, dict[tuple[str, int], ReplicaMemory]] = {}
        self._usage_read: dict[str, tuple[float, list[dict[str, Any]] | str]] = {}  # key -> (when, items or reason)
        self._metrics_missing: tuple[float, str] | None = None  # (when, why) the API said it has no metrics.k8s.io

    async def answer(self, status: JobStatus) -> dict[str, Any]:
        """The `usage()` answer for the job of `status` (see the module's docstring)."""
        name = status.name
        key = self.view.key(status)
        pods = self.view.pods(key)
        memory = self._usage_memory.setdefault(key, {})
        if status.phase == Phase.PENDING and not pods:
            return unavailable(name, "the job has not started yet, so nothing runs to measure")
        if status.terminal:
            ended = usage_answer(status, pods, [], memory)  # peaks seen while it ran; no call
            if ended["available"]:
                return ended
            return unavailable(name, "the job has ended; its pods' resource use was not sampled while it ran")
        read = self._usage_read.get(key)
        if read is None or time.monotonic() - read[0] >= REFRESH:
            read = (time.monotonic(), await self._read_pod_metrics(key))
            self._usage_read[key] = read
        if isinstance(read[1], str):
            return unavailable(name, read[1])
        return usage_answer(status, pods, read[1], memory)

    async def _read_pod_metrics(self, key: str) -> list[dict[str, Any]] | str:
        """The job's PodMetrics items, or why they cannot be read (in words)."""
        missing = self._metrics_missing
        if missing is not None and time.monotonic() - missing[0] < MISSING_RECHECK:
            return missing[1]
        connection = await self.api.connect()
        try:
            body = await self.api.call(
                "read the job's pod metrics", list_pod_metrics, connection.api, connection.namespace, f"{JOB_LABEL}={key}"
            )
        except ApiException as error:
            reason = reason_of(error)
            if reason.startswith(NOT_SERVED):
                self._metrics_missing = (time.monotonic(), reason)
            return reason
        self._metrics_missing = None
        items = body.get("items") if isinstance(body, dict) else None
        return items if isinstance(items, list) else []

    def forget(self, key: str) -> None:
        self._usage_memory.pop(key, None)
        self._usage_read.pop(key, None)
