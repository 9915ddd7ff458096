"""Queue positions from Kueue's visibility API and the preemption words, without a cluster: the
pure parts (which Workloads wait, positions from a PendingWorkloadsSummary, the words) and the
refresh loop's handling of the API's answers.  The real API, through the aggregator, is
exercised by tests/cluster/test_k8s_queue_positions.py."""

from __future__ import annotations

import asyncio
import json
from typing import Any, cast

import pytest
from kubernetes.client import ApiClient
from kubernetes.client.exceptions import ApiException

from paddle_nbext_server.backends.kubernetes.status import queue_positions, queue_status
from paddle_nbext_server.backends.kubernetes.status.queue_positions import Position, QueuePositions

QUOTA = "couldn't assign flavors to pod set trainer: insufficient unused quota for cpu in flavor default-flavor, 1 more needed"


def workload(name: str, conditions: list[dict[str, str]] | None = None, queue: str = "team-a", active: bool = True) -> dict[str, Any]:
    pending = [{"type": "QuotaReserved", "status": "False", "reason": "Pending", "message": QUOTA}]
    return {
        "metadata": {"name": name, "ownerReferences": [{"kind": "JobSet", "name": name.removeprefix("jobset-")}]},
        "spec": {"queueName": queue, "active": active},
        "status": {"conditions": pending if conditions is None else conditions},
    }


ADMITTED = [{"type": "QuotaReserved", "status": "True"}, {"type": "Admitted", "status": "True"}]
PREEMPTED = [
    {"type": "Evicted", "status": "True", "reason": "Preempted", "message": "Preempted to accommodate a workload"},
    {"type": "Preempted", "status": "True", "reason": "InClusterQueue", "message": "Preempted to accommodate a workload"},
    {"type": "QuotaReserved", "status": "False", "reason": "Pending"},
]


def summary(*names: str) -> dict[str, Any]:
    return {
        "kind": "PendingWorkloadsSummary",
        "items": [
            {
                "metadata": {"name": n, "namespace": "ns"},
                "positionInLocalQueue": i,
                "positionInClusterQueue": i + 4,
                "localQueueName": "team-a",
            }
            for i, n in enumerate(names)
        ],
    }


def test_positions_count_from_one_in_the_local_queue() -> None:
    found = queue_positions.positions_of(summary("a", "b", "c"))
    assert found == {"a": Position(1, 3), "b": Position(2, 3), "c": Position(3, 3)}
    assert found["b"].words() == "position 2 of 3"
    assert Position(7, queue_positions.LIMIT).words() == f"position 7 of {queue_positions.LIMIT}"
    long_queue = queue_positions.positions_of(summary(*(f"w{i}" for i in range(queue_positions.LIMIT + 1))))
    assert len(long_queue) == queue_positions.LIMIT and "w1000" not in long_queue
    assert long_queue["w999"].words() == f"position 1000 of more than {queue_positions.LIMIT}"
    assert queue_positions.positions_of({"items": None}) == {}


def test_only_waiting_workloads_of_our_queues_are_asked_about() -> None:
    finished = workload("done", [*ADMITTED, {"type": "Finished", "status": "True"}])
    listed = [
        workload("waits"),
        workload("preempted", PREEMPTED),
        workload("runs", ADMITTED),
        workload("stopped", active=False),
        finished,
        workload("elsewhere", queue="team-z"),
    ]
    found = queue_positions.waiting_queues(listed, ["team-a", "team-b"])
    assert {q: [w["metadata"]["name"] for w in ws] for q, ws in found.items()} == {"team-a": ["waits", "preempted"]}


def test_the_words_carry_the_position_and_who_preempted() -> None:
    assert queue_status.words(workload("w"), "position 3 of 7").text == f"queued in team-a (position 3 of 7); waiting for quota: {QUOTA}"
    preempted = queue_status.words(workload("p", PREEMPTED), "position 1 of 2")
    assert preempted == queue_status.QueueWords(
        queue_status.PREEMPTED, "preempted by a higher-priority workload; queued again in team-a (position 1 of 2)", evicted=True
    )
    # Admitted stays True while Kueue stops the pods: already preempted, not yet queued.
    stopping = queue_status.words(workload("p", [*PREEMPTED[:2], *ADMITTED]))
    assert stopping.text == "preempted by a higher-priority workload; stopping its pods to queue again in team-a"
    assert stopping.waiting and stopping.evicted
    reclaimed = [PREEMPTED[0], {**PREEMPTED[1], "reason": "InCohortReclamation"}]
    assert queue_status.words(workload("r", reclaimed)).text.startswith("preempted because another queue of the cohort reclaimed its quota")
    assert not queue_status.words(workload("runs", ADMITTED)).evicted


def test_a_job_is_stopped_by_kueue_while_any_part_is_evicted() -> None:
    running = queue_status.job_words([workload("jobset-a", ADMITTED)], [("job", "JobSet", "a")])
    assert not queue_status.stopped_by_kueue(running)
    parts = queue_status.job_words(
        [workload("jobset-a", ADMITTED), workload("jobset-b", PREEMPTED)], [("pserver", "JobSet", "a"), ("trainer", "JobSet", "b")]
    )
    assert queue_status.stopped_by_kueue(parts)
    # A cancel deactivates the Workload (Kueue evicts it as "Deactivated"): the job's own end, not Kueue's.
    cancelled = queue_status.job_words([workload("jobset-a", PREEMPTED, active=False)], [("job", "JobSet", "a")])
    assert not queue_status.stopped_by_kueue(cancelled)


def test_job_words_ask_for_each_workloads_position() -> None:
    asked: list[str] = []

    def position_of(w: dict[str, Any]) -> str | None:
        asked.append(w["metadata"]["name"])
        return "position 2 of 2"

    found = queue_status.job_words([workload("jobset-a")], [("job", "JobSet", "a")], position_of)
    assert queue_status.summary(found) == f"Queued in team-a (position 2 of 2); waiting for quota: {QUOTA}."
    assert asked == ["jobset-a"]


def api_error(status: int, details: dict[str, str] | None = None) -> ApiException:
    body = {"kind": "Status", "message": f"status {status}", "details": details or {}}
    return ApiException(status=status, reason="x", body=json.dumps(body))


def refresh_once(monkeypatch: pytest.MonkeyPatch, answer: Any, workloads: list[dict[str, Any]], positions: QueuePositions) -> list[str]:
    """One pass of `positions.run` against `answer(path)` (a summary, or raises); returns the
    names of the Workloads reported changed and the paths asked."""
    paths: list[str] = []

    def fake_get(_api: Any, path: str) -> dict[str, Any]:
        paths.append(path)
        return dict(answer(path))

    monkeypatch.setattr(queue_positions, "_get", fake_get)
    changed: list[str] = []

    no_client = cast(ApiClient, None)  # _get is faked above: no request is made

    async def one_pass() -> None:
        task = asyncio.create_task(
            positions.run(no_client, "ns", lambda: workloads, ["team-a"], lambda w: changed.append(w["metadata"]["name"]))
        )
        await asyncio.sleep(0.05)
        task.cancel()

    asyncio.run(one_pass())
    return changed + [f"asked {p}" for p in paths]


def test_the_newest_served_version_is_found_once_and_positions_are_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    def answer(path: str) -> dict[str, Any]:
        if "/v1beta2/" in path:
            raise api_error(404)  # an older Kueue: no such version
        return summary("jobset-a", "jobset-b")

    positions = QueuePositions()
    seen = refresh_once(monkeypatch, answer, [workload("jobset-a"), workload("jobset-b")], positions)
    assert sorted(s for s in seen if not s.startswith("asked")) == ["jobset-a", "jobset-b"]
    assert [s.split("/apis/")[1] for s in seen if s.startswith("asked")] == [
        "visibility.kueue.x-k8s.io/v1beta2/namespaces/ns/localqueues/team-a/pendingworkloads?limit=1001",
        "visibility.kueue.x-k8s.io/v1beta1/namespaces/ns/localqueues/team-a/pendingworkloads?limit=1001",
    ]
    assert positions.words_of(workload("jobset-b")) == "position 2 of 2"
    assert positions.describe() == {"api": "visibility.kueue.x-k8s.io/v1beta1", "error": None}


def test_a_local_queue_kueue_does_not_know_has_no_positions_and_no_problem(monkeypatch: pytest.MonkeyPatch) -> None:
    def answer(path: str) -> dict[str, Any]:
        raise api_error(404, {"kind": "localqueue", "name": "team-a"})

    positions = QueuePositions()
    assert refresh_once(monkeypatch, answer, [workload("jobset-a")], positions) == [
        "asked /apis/visibility.kueue.x-k8s.io/v1beta2/namespaces/ns/localqueues/team-a/pendingworkloads?limit=1001"
    ]
    assert positions.problem is None and positions.words_of(workload("jobset-a")) is None


@pytest.mark.parametrize(
    ("status", "says"),
    [
        (403, "may not read Kueue's pending workloads in namespace ns (HTTP 403: status 403); grant get on localqueues/pendingworkloads"),
        (503, "Kueue's visibility API is unavailable (HTTP 503: status 503)"),
        (404, "the cluster serves no Kueue visibility API"),
    ],
)
def test_a_refused_read_drops_the_positions_and_says_why(monkeypatch: pytest.MonkeyPatch, status: int, says: str) -> None:
    positions = QueuePositions()
    positions._positions = {"jobset-a": Position(1, 1)}  # known from an earlier refresh
    positions._seen = {"jobset-a": workload("jobset-a")}

    def answer(path: str) -> dict[str, Any]:
        raise api_error(status)

    seen = refresh_once(monkeypatch, answer, [workload("jobset-a")], positions)
    assert "jobset-a" in seen  # its job is re-marked: its words lose the position
    assert positions.words_of(workload("jobset-a")) is None
    assert says in (positions.describe()["error"] or ""), positions.describe()


def test_no_waiting_job_means_no_request(monkeypatch: pytest.MonkeyPatch) -> None:
    def answer(path: str) -> dict[str, Any]:
        raise AssertionError(f"asked {path}")

    assert refresh_once(monkeypatch, answer, [workload("runs", ADMITTED)], QueuePositions()) == []
