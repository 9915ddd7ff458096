"""Which pod stands for a replica when several exist (restarts, a brief duplicate): the server
and the in-cluster master both read pods through `cluster_master`, so this decides what users see."""

from __future__ import annotations

import json
import time
from typing import Any

from paddle_nbext.model.contract import RECORD_UID_LABEL
from paddle_nbext_server.backends.kubernetes.build.manifests import UID_PLACEHOLDER  # what the submitted Jobs carry
from paddle_nbext_server.runtime import replicas
from paddle_nbext_server.runtime.replicas import current_pods, decide_job, job_note, newest_pod, observe_replicas

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


def test_replacement_of_a_failed_pod_stands_for_the_replica() -> None:
    failed = pod("job-trainer-0-zzzzz", "Failed", exit_code=3)
    replacement = pod("job-trainer-0-aaaaa", "Pending")
    assert newest_pod([failed, replacement]) is replacement
    (view,) = observe_replicas([failed, replacement], pservers=0, trainers=1)
    assert view.phase == "Pending"


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


def _record(spec: dict[str, Any], restarts: dict[str, Any] | None = None, **data: str) -> dict[str, Any]:
    annotations = {"paddle-nbext/restart": json.dumps(restarts)} if restarts else {}
    return {
        "metadata": {"name": "train-2bd806", "uid": "u1", "resourceVersion": "7", "annotations": annotations},
        "data": {"spec.json": json.dumps(spec), **data},
    }


def _evicted(name: str, index: int = 0, reason: str = "EvictionByEvictionAPI") -> dict[str, Any]:
    evicted = pod(name, "Failed", index=index, exit_code=143)
    evicted["status"]["conditions"] = [
        {"type": "DisruptionTarget", "status": "True", "reason": reason, "message": "Eviction API: evicting"}
    ]
    return evicted


PS = {"job_name": "train", "mode": "ps", "pservers": 0, "trainers": 2, "max_restarts": 3}


def test_an_evicted_replica_restarts_the_whole_job_without_using_up_max_restarts() -> None:
    """A replica restarted alone never rejoins its gang: an eviction restarts every replica, and
    says so; the collective peer that aborted because of it is no failure of its own."""
    aborted = pod("job-trainer-0-aaaaa", "Failed", index=0, exit_code=134)
    views, decision = decide_job(_record(PS), [aborted, _evicted("job-trainer-1-bbbbb", index=1)])
    assert decision.disruption and sorted(decision.restart) == [("trainer", 0), ("trainer", 1)] and not decision.terminal
    assert decision.message == (
        "restart 1: trainer 1 was evicted (a node drain or an eviction); all replicas restarting "
        "(evictions and preemptions do not use up max_restarts)"
    )
    # Preempted: the words say which; past MAX_DISRUPTION_RESTARTS the job ends.
    _, decision = decide_job(_record(PS), [_evicted("job-trainer-1-bbbbb", index=1, reason="PreemptionByScheduler")])
    assert "trainer 1 was preempted by a higher-priority pod" in decision.message
    tenth = _evicted("job-trainer-1-bbbbb", index=1)
    tenth["metadata"]["labels"]["paddle-nbext/attempt"] = "10"
    _, decision = decide_job(_record(PS, {"attempt": 10, "disruptions": 10}), [tenth])
    assert decision.phase == "Failed" and "after 10 restarts for evictions and preemptions" in decision.message


def test_an_evicted_pod_already_gone_is_read_from_its_failed_job() -> None:
    """Eviction deletes the pod; the Job's FailJob rule keeps what happened (reason PodFailurePolicy)."""
    job = {
        "metadata": {"name": "train-2bd806-trainer", "labels": {"paddle-nbext/role": "trainer"}},
        "status": {
            "conditions": [
                {
                    "type": "Failed",
                    "status": "True",
                    "reason": "PodFailurePolicy",
                    "message": "Pod ns/train-2bd806-trainer-1-x7k2p has condition DisruptionTarget matching FailJob rule at index 0",
                }
            ]
        },
    }
    note = job_note("trainer", job)
    assert note is not None and note.failed and note.disruption == "trainer 1 was evicted, drained or preempted"
    _, decision = decide_job(_record(PS), [], role_notes={"trainer": note})
    assert decision.disruption and decision.message.startswith("restart 1: trainer 1 was evicted, drained or preempted; all replicas")


def test_a_failed_trainer_with_restarts_left_restarts_the_whole_job_and_counts_for_everyone() -> None:
    failed = pod("job-trainer-0-aaaaa", "Failed", index=0, exit_code=3)
    views, decision = decide_job(_record(PS), [failed, pod("job-trainer-1-bbbbb", "Running", index=1)], log_tail="ValueError: bad batch")
    assert decision.restart == [("trainer", 0)] and not decision.disruption and decision.phase == "Running"
    assert decision.message == "restart 1 of 3: trainer 0 failed with Exit code 3 (ValueError: bad batch); all replicas restarting"
    # After two whole restarts (one an eviction) every replica says 2, the budget counts 1.
    views, decision = decide_job(_record(PS, {"attempt": 2, "failures": 1, "disruptions": 1}), [])
    assert [v.public()["restarts"] for v in views] == [2, 2] and [v.restarts for v in views] == [1, 1]


def test_while_a_restart_stops_the_previous_attempt_its_pods_and_failed_jobs_do_not_count() -> None:
    old = pod("job-trainer-0-aaaaa", "Failed", index=0, exit_code=3)  # attempt 0: no label
    failed_job = replicas.RoleNote("BackoffLimitExceeded: Job has reached the specified backoff limit", True)
    stopping = {"attempt": 1, "failures": 1, "stopping": True, "message": "restart 1 of 3: trainer 0 failed; all replicas restarting"}
    views, decision = decide_job(_record(PS, stopping), [old], role_notes={"trainer": failed_job})
    assert [v.phase for v in views] == ["Pending", "Pending"]
    assert (decision.phase, decision.message, decision.terminal) == ("Pending", stopping["message"], False)


def test_a_completed_index_whose_pod_is_gone_counts_as_succeeded() -> None:
    """Every end is seen: the Job's completedIndexes (or Complete) stand for garbage-collected pods."""
    note = job_note("trainer", {"status": {"completedIndexes": "0-1", "succeeded": 2}})
    views, decision = decide_job(_record(PS), [], role_notes={"trainer": note} if note else {})
    assert [v.phase for v in views] == ["Succeeded", "Succeeded"] and decision.phase == "Succeeded"
    complete = job_note("trainer", {"spec": {"completions": 2}, "status": {"conditions": [{"type": "Complete", "status": "True"}]}})
    assert complete is not None and complete.completed == frozenset({0, 1})


def test_the_master_finds_its_objects_by_the_names_it_is_given() -> None:
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
    """What `reconcile_once` asks the API for: one record, its pods, its Jobs; what it writes."""

    def __init__(self, record: dict[str, Any], pods: list[dict[str, Any]], jobs: list[dict[str, Any]]) -> None:
        self.record, self.pods, self.listed = record, pods, jobs
        self.recorded: list[dict[str, Any]] = []
        self.restarts: list[dict[str, Any]] = []
        self.stopped: list[tuple[str, bool]] = []
        self.deleted: list[str] = []
        self.created: list[dict[str, Any]] = []
        self.silent: set[str] = set()  # pods whose kubelet does not answer (`answers`)
        self.calls: list[str] = []  # select_attempt and create_job, in order

    def get_record(self, name: str) -> dict[str, Any]:
        return self.record

    def job_pods(self, name: str) -> list[dict[str, Any]]:
        return self.pods

    def jobs(self, job: Any) -> list[dict[str, Any]]:
        return self.listed

    def log_tail(self, pod: str, lines: int = 200) -> str:
        return "Terminated"

    def answers(self, pod: str) -> bool | None:
        return pod not in self.silent

    def record_final(self, name: str, status: dict[str, Any], resource_version: str | None = None) -> None:
        self.recorded.append(status)

    def record_restarts(self, name: str, restarts: Any, resource_version: str | None) -> None:
        self.restarts.append(json.loads(restarts.to_json()))

    def stop_role(self, job: Any, role: str, succeeded: bool = False) -> None:
        self.stopped.append((role, succeeded))

    def delete_job(self, name: str) -> None:
        self.deleted.append(name)

    def create_job(self, manifest: dict[str, Any]) -> None:
        self.created.append(manifest)
        self.calls.append("create_job")

    def select_attempt(self, job: Any, attempt: int) -> None:
        self.calls.append(f"select_attempt {attempt}")


def _job_obj(name: str, role: str, attempt: int = 0, **extra: Any) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": {"paddle-nbext/role": role, "paddle-nbext/attempt": str(attempt)}, **extra}}


def test_a_preempted_job_whose_pods_stop_with_143_is_not_recorded_as_failed_by_the_master() -> None:
    """Kueue takes a running job back by suspending its Jobs; their pods end with 143, which
    alone reads as a trainer failure.  While the Jobs are suspended the master records nothing
    (the job is queued again); once they are not, the same pods do fail the job."""
    from paddle_nbext_server.runtime.cluster_master import JobObjects, Pass, reconcile_once

    spec = {"job_name": "train", "mode": "collective", "pservers": 0, "trainers": 1, "max_restarts": 0}
    record = _record(spec)
    stopped = pod("train-2bd806-trainer-0-aaaaa", "Failed", exit_code=143)
    stopped["metadata"]["labels"][RECORD_UID_LABEL] = "u1"
    job = JobObjects("train-2bd806", {})
    suspended = _job_obj("train-2bd806-trainer", "trainer")
    suspended["spec"] = {"suspend": True}

    preempted = _FakeApi(record, [stopped], [suspended])
    assert reconcile_once(preempted, job) is Pass.WAIT  # type: ignore[arg-type]
    assert preempted.recorded == [] and preempted.stopped == []

    failed = _FakeApi(record, [stopped], [])
    assert reconcile_once(failed, job) is Pass.OVER  # type: ignore[arg-type]
    assert [status["phase"] for status in failed.recorded] == ["Failed"]


def test_the_master_restarts_the_whole_job_in_steps_never_two_attempts_at_once() -> None:
    """Failure with restarts left -> the record says "stopping"; the next passes delete every
    replica Job of the old attempt, and only once none is left make them again, labelled with
    the new attempt, from the Jobs the record holds."""
    from paddle_nbext_server.runtime.cluster_master import JobObjects, Pass, reconcile_once

    spec = {**PS, "pservers": 1, "trainers": 1, "max_restarts": 1}
    submitted = [
        {
            "metadata": {
                "name": f"train-2bd806-{role}",
                "labels": {"paddle-nbext/role": role},
                "ownerReferences": [{"uid": UID_PLACEHOLDER}],
            },
            "spec": {"template": {"metadata": {"labels": {"paddle-nbext/role": role}}}},
        }
        for role in ("pserver", "trainer")
    ]
    record = _record(spec, None, **{"replica-jobs.json": json.dumps(submitted)})
    job = JobObjects("train-2bd806", {})
    failed = pod("train-2bd806-trainer-0-aaaaa", "Failed", exit_code=3)
    server = pod("train-2bd806-pserver-0-ccccc", "Running")
    server["metadata"]["labels"]["paddle-nbext/role"] = "pserver"

    api = _FakeApi(record, [failed, server], [])
    assert reconcile_once(api, job) is Pass.SOON  # type: ignore[arg-type]
    began = api.restarts[0]["began"]
    assert isinstance(began, float) and abs(began - time.time()) < 600
    assert api.recorded == [] and api.restarts == [
        {"attempt": 1, "failures": 1, "disruptions": 0, "stopping": True, "message": api.restarts[0]["message"], "began": began}
    ]
    assert api.restarts[0]["message"].startswith("restart 1 of 1: trainer 0 failed with Exit code 3 (Terminated)")

    stopping = _record(spec, api.restarts[0], **{"replica-jobs.json": json.dumps(submitted)})
    old_jobs = [_job_obj("train-2bd806-pserver", "pserver"), _job_obj("train-2bd806-trainer", "trainer", deletionTimestamp="now")]
    api = _FakeApi(stopping, [failed, server], old_jobs)
    assert reconcile_once(api, job) is Pass.SOON  # type: ignore[arg-type]
    assert api.deleted == ["train-2bd806-pserver"] and api.created == []  # one already being deleted
    assert api.calls == []  # the Service still publishes the old attempt's pods while they stop

    api = _FakeApi(stopping, [], [])
    assert reconcile_once(api, job) is Pass.SOON  # type: ignore[arg-type]
    assert [m["metadata"]["name"] for m in api.created] == ["train-2bd806-pserver", "train-2bd806-trainer"]
    # The Service names the new attempt's pods only, before any of them exists (issue 46: a new
    # pserver resolved its own name to its predecessor's address on a node without power).
    assert api.calls == ["select_attempt 1", "create_job", "create_job"]
    for manifest in api.created:
        assert manifest["metadata"]["labels"]["paddle-nbext/attempt"] == "1"
        assert manifest["metadata"]["ownerReferences"] == [{"uid": "u1"}]
        assert manifest["spec"]["template"]["metadata"]["labels"]["paddle-nbext/attempt"] == "1"
        assert manifest["spec"]["template"]["metadata"]["labels"][RECORD_UID_LABEL] == "u1"
    assert api.restarts[-1]["stopping"] is False and api.restarts[-1]["attempt"] == 1


def test_after_a_success_the_master_deletes_the_pservers_job_rather_than_failing_it() -> None:
    from paddle_nbext_server.runtime.cluster_master import JobObjects, Pass, reconcile_once

    spec = {**PS, "pservers": 1, "trainers": 1}
    done = pod("train-2bd806-trainer-0-aaaaa", "Succeeded", exit_code=0)
    server = pod("train-2bd806-pserver-0-ccccc", "Running")
    server["metadata"]["labels"]["paddle-nbext/role"] = "pserver"
    api = _FakeApi(_record(spec), [done, server], [])
    assert reconcile_once(api, JobObjects("train-2bd806", {})) is Pass.OVER  # type: ignore[arg-type]
    assert [s["phase"] for s in api.recorded] == ["Succeeded"] and api.stopped == [("pserver", True)]


def test_in_jobset_mode_the_pods_restart_attempt_counts_and_ends_the_job_at_max_restarts() -> None:
    """JobSet restarts the whole job itself (its failurePolicy); the job must count those restarts,
    or a failure at JobSet's last attempt would read "restart 1 of 1" for ever."""
    failed = pod("train-trainer-0-0-aaaaa", "Failed", exit_code=3)
    failed["metadata"]["labels"]["jobset.sigs.k8s.io/restart-attempt"] = "1"
    views, decision = decide_job(_record({**PS, "trainers": 1, "max_restarts": 1}), [failed])
    assert views[0].restarts == 1
    assert decision.phase == "Failed" and decision.message.startswith("trainer 0 failed with Exit code 3 after 1 restart")


def _lost(name: str, index: int, node: str = "pnb-real-node-2") -> dict[str, Any]:
    """A pod of a node that stopped responding, as Kubernetes leaves it: Running for ever (no
    kubelet reports its end), marked not Ready by the node lifecycle controller, and deleted by
    the taint manager after its `node_lost_seconds`."""
    lost = pod(name, "Running", index=index)
    lost["spec"] = {"nodeName": node}
    lost["metadata"]["deletionTimestamp"] = "2026-11-29T17:01:00Z"
    lost["status"]["conditions"] = [
        {"type": "Ready", "status": "False"},
        {
            "type": "DisruptionTarget",
            "status": "True",
            "reason": "DeletionByTaintManager",
            "message": "Taint manager: deleting due to NoExecute taint",
        },
    ]
    return lost


def test_a_pod_lost_with_its_node_restarts_the_job_whole_and_says_so_in_words() -> None:
    record = _record({"job_name": "train", "mode": "collective", "pservers": 0, "trainers": 2, "max_restarts": 0})
    aborted = pod("train-2bd806-trainer-0-aaaaa", "Failed", index=0, exit_code=134)
    views, decision = decide_job(record, [aborted, _lost("train-2bd806-trainer-1-bbbbb", 1)])
    assert decision.restart and decision.disruption, decision
    assert decision.message.startswith("restart 1: node pnb-real-node-2 stopped responding; trainer 1 lost; all replicas restarting"), (
        decision
    )


def test_a_noexecute_taint_on_a_node_that_still_answers_is_an_eviction_not_a_lost_node() -> None:
    record = _record({"job_name": "train", "mode": "collective", "pservers": 0, "trainers": 1, "max_restarts": 0})
    tainted = _lost("train-2bd806-trainer-0-aaaaa", 0)
    tainted["status"]["conditions"][0]["status"] = "True"  # its kubelet still reports it Ready
    _, decision = decide_job(record, [tainted])
    assert decision.message.startswith("restart 1: trainer 0 was evicted by a NoExecute taint on its node"), decision


def test_the_master_holds_a_failure_back_while_a_running_peers_node_does_not_answer() -> None:
    """Trainer 0 aborted because its peer's node died; trainer 1 still reads Running (nothing
    reports its end) but its kubelet does not answer: the job waits for Kubernetes to declare the
    node lost (then restarts whole) instead of ending Failed.  A peer that answers lets it end."""
    from paddle_nbext_server.runtime.cluster_master import JobObjects, Pass, reconcile_once

    record = _record({"job_name": "train", "mode": "collective", "pservers": 0, "trainers": 2, "max_restarts": 0})
    aborted = pod("train-2bd806-trainer-0-aaaaa", "Failed", index=0, exit_code=134)
    running = pod("train-2bd806-trainer-1-bbbbb", "Running", index=1)
    api = _FakeApi(record, [aborted, running], [])
    api.silent = {"train-2bd806-trainer-1-bbbbb"}
    assert reconcile_once(api, JobObjects("train-2bd806", {})) is Pass.WAIT  # type: ignore[arg-type]
    assert api.recorded == [] and api.stopped == []
    _, held = decide_job(record, [aborted, running], unreachable=frozenset(api.silent))
    assert held.phase == "Running" and held.message.startswith("trainer 1 does not answer (its node stopped responding)"), held

    answering = _FakeApi(record, [aborted, running], [])
    assert reconcile_once(answering, JobObjects("train-2bd806", {})) is Pass.OVER  # type: ignore[arg-type]
    assert [status["phase"] for status in answering.recorded] == ["Failed"]


def _submitted() -> list[dict[str, Any]]:
    return [
        {
            "metadata": {
                "name": "train-2bd806-trainer",
                "labels": {"paddle-nbext/role": "trainer"},
                "ownerReferences": [{"uid": UID_PLACEHOLDER}],
            },
            "spec": {
                "template": {
                    "metadata": {"labels": {"paddle-nbext/role": "trainer"}},
                    "spec": {"containers": [{"name": "main", "env": []}]},
                }
            },
        }
    ]


def test_a_restart_does_not_wait_for_the_pods_of_a_lost_node_but_waits_for_any_other() -> None:
    """The dead node's pod stays Terminating until the node returns: the new attempt is made
    without it (told when the restart began, for the attempt fence in the home).  A pod that is
    still stopping on a node that answers is waited for: never two attempts at once."""
    from paddle_nbext_server.runtime.cluster_master import BEGAN_VAR, JobObjects, Pass, reconcile_once

    spec = {"job_name": "train", "mode": "collective", "pservers": 0, "trainers": 2, "max_restarts": 0}
    restarting = {"attempt": 1, "failures": 0, "disruptions": 1, "stopping": True, "message": "restart 1: ...", "began": 1796500000.5}
    stopping = _record(spec, restarting, **{"replica-jobs.json": json.dumps(_submitted())})
    job = JobObjects("train-2bd806", {})

    stopping_pod = pod("train-2bd806-trainer-0-aaaaa", "Running", index=0)
    stopping_pod["metadata"]["deletionTimestamp"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 30))
    waiting = _FakeApi(stopping, [stopping_pod, _lost("train-2bd806-trainer-1-bbbbb", 1)], [])
    assert reconcile_once(waiting, job) is Pass.SOON  # type: ignore[arg-type]
    assert waiting.created == []

    api = _FakeApi(stopping, [_lost("train-2bd806-trainer-1-bbbbb", 1)], [])
    assert reconcile_once(api, job) is Pass.SOON  # type: ignore[arg-type]
    (made,) = api.created
    assert made["metadata"]["labels"]["paddle-nbext/attempt"] == "1"
    assert made["spec"]["template"]["spec"]["containers"][0]["env"] == [{"name": BEGAN_VAR, "value": "1796500000.500"}]
    assert api.restarts[-1]["stopping"] is False and api.restarts[-1]["began"] == 1796500000.5


def test_a_replica_whose_image_keeps_failing_to_pull_fails_the_job_after_the_admins_bound() -> None:
    """`image_pull_seconds` (written into the record at submit): within it the job waits, saying
    why; past it the job fails naming the image and stops what runs."""
    record = _record({"job_name": "train", "mode": "collective", "pservers": 0, "trainers": 2}, None, **{"image-pull-seconds": "300"})
    running = pod("train-2bd806-trainer-0-aaaaa", "Running", index=0)
    pulling = pod("train-2bd806-trainer-1-bbbbb", "Pending", index=1)
    reason = 'Back-off pulling image "example.org/paddle:9"'
    pulling["status"]["containerStatuses"] = [{"name": "main", "state": {"waiting": {"reason": "ImagePullBackOff", "message": reason}}}]
    scheduled = {"type": "PodScheduled", "status": "True"}

    scheduled["lastTransitionTime"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - 60))
    pulling["status"]["conditions"] = [scheduled]
    _, waiting = decide_job(record, [running, pulling])
    assert waiting.phase == "Pending" and waiting.message.startswith("trainer 1: ImagePullBackOff"), waiting

    scheduled["lastTransitionTime"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - 301))
    _, failed = decide_job(record, [running, pulling])
    assert failed.phase == "Failed" and failed.message == (
        f"trainer 1 cannot start: its image could not be pulled for 300 s: ImagePullBackOff: {reason}"
    ), failed
    assert sorted(failed.stop) == [("trainer", 0), ("trainer", 1)]
