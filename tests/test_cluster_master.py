"""Which pod stands for a replica when several exist (restarts, a brief duplicate): the server
and the in-cluster master both read pods through `cluster_master`, so this decides what users see."""

from __future__ import annotations

from typing import Any

from paddle_nbext.contract import RECORD_UID_LABEL
from paddle_nbext_server.runtime.cluster_master import (
    current_pods,
    decide_job,
    newest_pod,
    observe_replicas,
)

SECOND = "2026-11-29T17:00:00Z"


def pod(name: str, phase: str, index: int = 0, created: str = SECOND, exit_code: int | None = None) -> dict[str, Any]:
    status: dict[str, Any] = {"phase": phase}
    if exit_code is not None:
        status["containerStatuses"] = [{"name": "paddle", "state": {"terminated": {"exitCode": exit_code, "finishedAt": created}}}]
    return {
        "metadata": {
            "name": name,
            "creationTimestamp": created,
            "labels": {"paddle-nbext/role": "trainer", "batch.kubernetes.io/job-completion-index": str(index)},
            "annotations": {"batch.kubernetes.io/job-completion-index": str(index)},
        },
        "status": status,
    }


def test_running_pod_wins_over_a_pending_duplicate_of_the_same_second() -> None:
    running, pending = pod("job-trainer-0-aaaaa", "Running"), pod("job-trainer-0-zzzzz", "Pending")
    assert newest_pod([running, pending]) is running
    assert newest_pod([pending, running]) is running


def test_replacement_of_a_failed_pod_stands_for_the_replica_and_counts_a_restart() -> None:
    failed = pod("job-trainer-0-zzzzz", "Failed", exit_code=3)
    replacement = pod("job-trainer-0-aaaaa", "Pending")
    assert newest_pod([failed, replacement]) is replacement
    (view,) = observe_replicas([failed, replacement], pservers=0, trainers=1)
    assert (view.phase, view.restarts) == ("Pending", 1)


def test_a_later_pod_wins_whatever_its_phase() -> None:
    old_running = pod("job-trainer-0-aaaaa", "Running", created="2026-11-29T16:59:59Z")
    new_pending = pod("job-trainer-0-bbbbb", "Pending")
    assert newest_pod([old_running, new_pending]) is new_pending


def test_pods_of_an_earlier_job_of_the_same_name_do_not_count() -> None:
    record = {"metadata": {"name": "job", "uid": "new-uid"}, "data": {"spec.json": '{"pservers": 0, "trainers": 1}'}}
    lingering = pod("job-trainer-0-old", "Running", created="2026-11-29T17:00:05Z")
    lingering["metadata"]["labels"][RECORD_UID_LABEL] = "old-uid"
    fresh = pod("job-trainer-0-new", "Pending")
    fresh["metadata"]["labels"][RECORD_UID_LABEL] = "new-uid"
    assert current_pods(record, [lingering, fresh]) == [fresh]
    views, decision = decide_job(record, [lingering, fresh])
    assert [v.phase for v in views] == ["Pending"] and decision.phase == "Pending"


def test_an_evicted_newest_pod_waits_for_its_replacement_and_is_no_restart() -> None:
    evicted = pod("job-trainer-0-aaaaa", "Failed", exit_code=143)
    evicted["status"]["conditions"] = [
        {"type": "DisruptionTarget", "status": "True", "reason": "EvictionByEvictionAPI", "message": "Eviction API: evicting"}
    ]
    (view,) = observe_replicas([evicted], pservers=0, trainers=1)
    assert view.phase == "Pending" and view.restarts == 0
    assert view.reason == "EvictionByEvictionAPI: Eviction API: evicting; a new pod replaces it"
    replacement = pod("job-trainer-0-bbbbb", "Running", created="2026-11-29T17:00:09Z")
    (view,) = observe_replicas([evicted, replacement], pservers=0, trainers=1)
    assert (view.phase, view.restarts) == ("Running", 0)


def test_the_master_finds_its_objects_by_the_names_it_is_given():
    """The record and role Jobs are named per owner (`<job>-<tag>`), JobSet children `-0`: the
    master patches exactly the Jobs the manifests name, and refuses to start without a record."""
    from paddle_nbext_server.runtime.cluster_master import JobObjects

    objects = JobObjects.from_environment(
        {"PADDLE_NBEXT_RECORD": "train-2bd806", "PADDLE_NBEXT_ROLE_JOBS": '{"trainer": "train-2bd806-trainer-0"}'}
    )
    assert objects is not None and objects.record == "train-2bd806"
    assert objects.role_job("trainer") == "train-2bd806-trainer-0"
    assert objects.role_job("pserver") == "train-2bd806-pserver"  # not named: the jobs-mode name
    assert JobObjects.from_environment({"PADDLE_NBEXT_ROLE_JOBS": "{}"}) is None
    assert JobObjects.from_environment({"PADDLE_NBEXT_RECORD": "x", "PADDLE_NBEXT_ROLE_JOBS": "not json"}) == JobObjects("x", {})


class _FakeApi:
    """What `reconcile_once` asks the API for: one record, its pods, its suspended Jobs."""

    def __init__(self, record: dict[str, Any], pods: list[dict[str, Any]], suspended: list[str]) -> None:
        self.record, self.pods, self.suspended = record, pods, suspended
        self.recorded: list[dict[str, Any]] = []
        self.stopped: list[str] = []

    def get_record(self, name: str) -> dict[str, Any]:
        return self.record

    def job_pods(self, name: str) -> list[dict[str, Any]]:
        return self.pods

    def suspended_jobs(self, job: Any) -> list[str]:
        return self.suspended

    def log_tail(self, pod: str, lines: int = 200) -> str:
        return "Terminated"

    def record_final(self, name: str, status: dict[str, Any], resource_version: str | None = None) -> None:
        self.recorded.append(status)

    def stop_role(self, job: Any, role: str) -> None:
        self.stopped.append(role)


def test_a_preempted_job_whose_pods_stop_with_143_is_not_recorded_as_failed_by_the_master() -> None:
    """Kueue takes a running job back by suspending its Jobs; their pods end with 143, which
    alone reads as a trainer failure.  While the Jobs are suspended the master records nothing
    (the job is queued again); once they are not, the same pods do fail the job."""
    import json

    from paddle_nbext_server.runtime.cluster_master import JobObjects, reconcile_once

    spec = {"job_name": "train", "mode": "collective", "pservers": 0, "trainers": 1, "max_restarts": 0}
    record = {"metadata": {"name": "train-2bd806", "uid": "u1", "resourceVersion": "7"}, "data": {"spec.json": json.dumps(spec)}}
    stopped = pod("train-2bd806-trainer-0-aaaaa", "Failed", exit_code=143)
    stopped["metadata"]["labels"][RECORD_UID_LABEL] = "u1"
    job = JobObjects("train-2bd806", {})

    preempted = _FakeApi(record, [stopped], suspended=["train-2bd806-trainer"])
    assert reconcile_once(preempted, job) is False  # type: ignore[arg-type]
    assert preempted.recorded == [] and preempted.stopped == []

    failed = _FakeApi(record, [stopped], suspended=[])
    assert reconcile_once(failed, job) is True  # type: ignore[arg-type]
    assert [status["phase"] for status in failed.recorded] == ["Failed"]
