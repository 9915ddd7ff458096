"""Resource use on Kubernetes from metrics.k8s.io (`backends/kubernetes/usage/resource_usage.py`),
against a unit fake of the API's answers: PodMetricsList bodies as metrics-server writes them
(nanocores, Ki), the cache's pods with their requests and limits, and the API's refusals (no
metrics-server: 404; the Role lacks the read: 403; metrics-server down: 503), each in words."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from kubernetes.client.exceptions import ApiException

from paddle_nbext.model.status import JobStatus
from paddle_nbext_server.backends.kubernetes import KubernetesBackend
from paddle_nbext_server.backends.kubernetes.usage import resource_usage as ru
from paddle_nbext_server.events import EventHub

KEY = "train-2bd806"
GiB = 1 << 30


def pod(role: str, index: int, *, created: str = "2026-12-05T14:00:00Z", suffix: str = "abcde", limit: str = "2Gi") -> dict[str, Any]:
    """A job pod as the watch cache holds it."""
    return {
        "metadata": {
            "name": f"{KEY}-{role}-{index}-{suffix}",
            "creationTimestamp": created,
            "labels": {"paddle-nbext/job": KEY, "paddle-nbext/role": role, "batch.kubernetes.io/job-completion-index": str(index)},
        },
        "spec": {"containers": [{"name": role, "resources": {"requests": {"cpu": "1", "memory": limit}, "limits": {"memory": limit}}}]},
        "status": {"phase": "Running"},
    }


def pod_metrics(name: str, timestamp: str, cpu: str, memory: str) -> dict[str, Any]:
    """One item of metrics-server's PodMetricsList."""
    return {
        "metadata": {"name": name, "namespace": "pnb-users", "labels": {"paddle-nbext/job": KEY}},
        "timestamp": timestamp,
        "window": "15.009s",
        "containers": [{"name": "trainer", "usage": {"cpu": cpu, "memory": memory}}],
    }


def status(phase: str = "Running") -> JobStatus:
    return JobStatus(
        name="train", owner="alice", backend="kubernetes", phase=phase, message="", spec={"trainers": 2}, created="2026-12-05T14:00:00.000Z"
    )


def test_pod_metrics_become_cores_and_bytes_beside_requests_and_limits() -> None:
    pods = [pod("trainer", 0), pod("trainer", 1)]
    items = [
        pod_metrics(f"{KEY}-trainer-0-abcde", "2026-12-05T14:02:11Z", "982113456n", "1887436Ki"),
        pod_metrics(f"{KEY}-trainer-1-abcde", "2026-12-05T14:02:11Z", "250m", "512Mi"),
    ]
    memory: dict[tuple[str, int], ru.ReplicaMemory] = {}
    answer = ru.usage_answer(status(), pods, items, memory)
    assert answer["available"] is True and answer["sampled"] == "2026-12-05T14:02:11Z"
    first, second = answer["replicas"]
    assert (first["role"], first["index"], first["phase"]) == ("trainer", 0, "Running")
    assert first["cpu"] == 0.982 and first["memory"] == 1887436 * 1024
    assert (first["cpu_request"], first["cpu_limit"], first["memory_request"], first["memory_limit"]) == (1.0, None, 2 * GiB, 2 * GiB)
    assert second["cpu"] == 0.25 and second["memory"] == 512 << 20
    # metrics-server repeats a sample until its next scrape: kept once; a new one is added.
    ru.usage_answer(status(), pods, items, memory)
    items[0] = pod_metrics(f"{KEY}-trainer-0-abcde", "2026-12-05T14:02:26Z", "1500m", "1Gi")
    again = ru.usage_answer(status(), pods, items, memory)
    first = again["replicas"][0]
    assert [sample["memory"] for sample in first["history"]] == [1887436 * 1024, GiB]
    assert first["peak_memory"] == 1887436 * 1024 and first["peak_cpu"] == 1.5


def test_only_the_newest_pod_of_a_replica_counts() -> None:
    old = pod("trainer", 0, created="2026-12-05T13:00:00Z", suffix="old00")
    new = pod("trainer", 0, created="2026-12-05T14:00:00Z", suffix="new00", limit="4Gi")
    items = [pod_metrics(f"{KEY}-trainer-0-new00", "2026-12-05T14:02:11Z", "1", "1Gi")]
    (replica,) = ru.usage_answer(status(), [old, new], items, {})["replicas"]
    assert replica["memory"] == GiB and replica["memory_limit"] == 4 * GiB


def test_no_sample_yet_and_no_pods_say_why() -> None:
    answer = ru.usage_answer(status(), [pod("trainer", 0)], [], {})
    assert answer["available"] is False and "has no sample of the job's pods yet" in answer["reason"]
    answer = ru.usage_answer(status(), [], [], {})
    assert answer["reason"] == "the job has no pods yet, so nothing runs to measure"


def refused(status_code: int, reason: str, message: str) -> ApiException:
    error = ApiException(status=status_code, reason=reason)
    error.body = json.dumps({"kind": "Status", "status": "Failure", "message": message, "code": status_code})
    return error


def test_refusals_of_the_metrics_api_in_words() -> None:
    missing = ru.reason_of(refused(404, "Not Found", "the server could not find the requested resource"))
    assert missing.startswith("this cluster does not serve the metrics.k8s.io API (metrics-server is not installed)")
    unregistered = ru.reason_of(refused(503, "Service Unavailable", "the server could not find the requested resource"))
    assert unregistered == missing
    forbidden = ru.reason_of(refused(403, "Forbidden", 'pods.metrics.k8s.io is forbidden: User "x" cannot list resource "pods"'))
    assert "may not read pods.metrics.k8s.io" in forbidden and "deploy/rbac/notebook-role.yaml" in forbidden
    down = ru.reason_of(refused(503, "Service Unavailable", "no endpoints available for service metrics-server"))
    assert down.startswith("metrics-server does not answer right now") and "no endpoints available" in down


def test_the_backend_reads_the_job_pods_by_label_and_answers_404_words_without_metrics_server() -> None:
    backend = KubernetesBackend(events=EventHub())
    asked: list[str] = []

    async def get_job(name: str, owner: str) -> JobStatus:
        return status()

    class Connection:
        api = object()
        namespace = "pnb-users"

    async def conn() -> Any:
        return Connection()

    answers: list[Any] = [
        {"kind": "PodMetricsList", "items": [pod_metrics(f"{KEY}-trainer-0-abcde", "2026-12-05T14:02:11Z", "500m", "1Gi")]},
        refused(404, "Not Found", "the server could not find the requested resource"),
    ]

    async def call(doing: str, fn: Any, api: Any, namespace: str, selector: str) -> Any:
        assert fn is ru.list_pod_metrics and namespace == "pnb-users"
        asked.append(selector)
        answer = answers.pop(0)
        if isinstance(answer, ApiException):
            raise answer
        return answer

    backend.get_job = get_job  # type: ignore[method-assign]
    backend.api.connect = conn  # type: ignore[method-assign]
    backend.api.call = call  # type: ignore[method-assign]
    backend.view.key = lambda status: KEY  # type: ignore[method-assign]
    backend.view.pods_by_job[KEY] = {p["metadata"]["name"]: p for p in (pod("trainer", 0),)}
    answer = asyncio.run(backend.usage("train", "alice"))
    assert asked == [f"paddle-nbext/job={KEY}"]
    assert answer["available"] is True and answer["replicas"][0]["memory"] == GiB
    again = asyncio.run(backend.usage("train", "alice"))
    assert again == answer and len(asked) == 1  # within REFRESH seconds the last read is reused
    backend.resource_usage._usage_read.clear()  # as REFRESH seconds later
    answer = asyncio.run(backend.usage("train", "alice"))
    assert answer["available"] is False and "metrics-server is not installed" in answer["reason"]
    # Another job of a cluster without metrics-server: said without asking the API again.
    backend.view.key = lambda status: "other-2bd806"  # type: ignore[method-assign]
    backend.view.pods_by_job["other-2bd806"] = {"p": pod("trainer", 0)}
    again = asyncio.run(backend.usage("train", "alice"))
    assert again["reason"] == answer["reason"] and len(asked) == 2
