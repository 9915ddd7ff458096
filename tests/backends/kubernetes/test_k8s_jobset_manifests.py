"""`jobset` workload mode and Kueue labels in the job's objects (pure: no cluster), and the queue
words read from Kueue Workloads.  The JobSet is validated against JobSet's CRD schema on the real
control plane by tests/cluster/test_k8s_queued.py; here its child Jobs are validated as Jobs."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any

import kubernetes_validate
import pytest

from backends.kubernetes.test_k8s_manifests import OBJ, SETTINGS, by_name, plan
from paddle_nbext.model.contract import RECORD_UID_LABEL, ROLE_LABEL
from paddle_nbext_server.backends.kubernetes.build import manifests
from paddle_nbext_server.backends.kubernetes.build.jobset import QUEUE_LABEL
from paddle_nbext_server.backends.kubernetes.status import queue_status

JOBSET = dataclasses.replace(SETTINGS, workload_mode="jobset", default_queue="team-a")


def env_of(container: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value") for e in container["env"]}


def test_jobset_mode_is_the_record_and_one_jobset_with_a_replicated_job_per_role() -> None:
    _, objects = plan(JOBSET)
    kinds = [(o["kind"], o["metadata"]["name"]) for o in objects]
    assert kinds == [("ConfigMap", OBJ), ("JobSet", OBJ)]
    jobset = objects[1]
    assert jobset["apiVersion"] == "jobset.x-k8s.io/v1alpha2"
    assert [r["name"] for r in jobset["spec"]["replicatedJobs"]] == ["master", "pserver", "trainer"]
    assert all(r["replicas"] == 1 for r in jobset["spec"]["replicatedJobs"])
    assert jobset["spec"]["network"] == {"enableDNSHostnames": True, "subdomain": OBJ, "publishNotReadyAddresses": True}
    assert jobset["spec"]["successPolicy"] == {"operator": "All", "targetReplicatedJobs": ["trainer"]}
    # JobSet restarts the whole job (every child Job) after a failure, up to max_restarts; an
    # eviction, drain or preemption (a Job failed by its DisruptionTarget rule) without counting.
    assert jobset["spec"]["failurePolicy"] == {
        "maxRestarts": 2,
        "rules": [{"action": "RestartJobSetAndIgnoreMaxRestarts", "onJobFailureReasons": ["PodFailurePolicy"]}],
    }
    # The TTL belongs to the JobSet (it deletes its children), not to the child Jobs.
    assert jobset["spec"]["ttlSecondsAfterFinished"] == 3600
    assert all("ttlSecondsAfterFinished" not in r["template"]["spec"] for r in jobset["spec"]["replicatedJobs"])
    # Kueue's label on the one workload; none on the child Jobs (they are not queued apart).
    assert jobset["metadata"]["labels"][QUEUE_LABEL] == "team-a"
    assert all(QUEUE_LABEL not in r["template"]["metadata"]["labels"] for r in jobset["spec"]["replicatedJobs"])
    assert jobset["metadata"]["ownerReferences"][0]["kind"] == "ConfigMap"


def test_jobset_children_keep_the_jobs_mode_pods_with_jobsets_hostnames() -> None:
    _, jobs_mode = plan()
    _, objects = plan(JOBSET)
    replicated = {r["name"]: r["template"] for r in objects[1]["spec"]["replicatedJobs"]}
    native = by_name(jobs_mode)
    trainer = replicated["trainer"]
    assert trainer["spec"]["backoffLimit"] == native[("Job", f"{OBJ}-trainer")]["spec"]["backoffLimit"] == 0
    assert trainer["spec"]["completionMode"] == "Indexed" and trainer["spec"]["completions"] == 3
    env = env_of(trainer["spec"]["template"]["spec"]["containers"][0])
    # JobSet names the child Job <job>-<role>-0 and its pods' hostnames <job>-<role>-0-<index>.
    assert (
        env["PADDLE_NBEXT_TRAINER_ENDPOINTS"] == f"{OBJ}-trainer-0-0.{OBJ}:6175,{OBJ}-trainer-0-1.{OBJ}:6175,{OBJ}-trainer-0-2.{OBJ}:6175"
    )
    assert env["PADDLE_NBEXT_PSERVER_ENDPOINTS"] == f"{OBJ}-pserver-0-0.{OBJ}:6174,{OBJ}-pserver-0-1.{OBJ}:6174"
    native_env = env_of(native[("Job", f"{OBJ}-trainer")]["spec"]["template"]["spec"]["containers"][0])
    assert native_env["PADDLE_NBEXT_TRAINER_ENDPOINTS"].startswith(f"{OBJ}-trainer-0.{OBJ}:6175,")
    assert trainer["metadata"]["labels"][ROLE_LABEL] == "trainer"


@pytest.mark.parametrize("version", ["1.30.0", "1.37.0"])
def test_jobset_child_jobs_are_valid_jobs(version: str) -> None:
    _, objects = plan(JOBSET)
    for replicated in objects[1]["spec"]["replicatedJobs"]:
        job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": f"{OBJ}-{replicated['name']}-0"}, **replicated["template"]}
        kubernetes_validate.validate(job, version, strict=True)


def test_created_jobset_children_carry_the_record_uid() -> None:
    _, objects = plan(JOBSET)
    created = manifests.set_owner_uid(objects[1], "uid-123")
    assert created["metadata"]["ownerReferences"][0]["uid"] == "uid-123"
    for replicated in created["spec"]["replicatedJobs"]:
        assert replicated["template"]["metadata"]["labels"][RECORD_UID_LABEL] == "uid-123"
        assert replicated["template"]["spec"]["template"]["metadata"]["labels"][RECORD_UID_LABEL] == "uid-123"


def test_jobs_mode_labels_every_job_for_the_queue_and_its_own_queue_wins() -> None:
    queued = dataclasses.replace(SETTINGS, default_queue="team-a")
    _, objects = plan(queued)
    jobs = [o for o in objects if o["kind"] == "Job"]
    assert {o["metadata"]["labels"][QUEUE_LABEL] for o in jobs} == {"team-a"}
    _, own = plan(queued, queue="team-b")
    assert {o["metadata"]["labels"][QUEUE_LABEL] for o in own if o["kind"] == "Job"} == {"team-b"}
    _, unqueued = plan()
    assert all(QUEUE_LABEL not in o["metadata"]["labels"] for o in unqueued)


def workload(
    conditions: Iterable[dict[str, str]] = (),
    active: bool = True,
    cluster_queue: str | None = None,
    owner: tuple[str, str] = ("JobSet", OBJ),
) -> dict[str, Any]:
    status: dict[str, Any] = {"conditions": [dict(c) for c in conditions]}
    if cluster_queue:
        status["admission"] = {"clusterQueue": cluster_queue}
    return {
        "metadata": {
            "name": "jobset-mnist-ps-1",
            "ownerReferences": [{"kind": owner[0], "name": owner[1]}],
            "creationTimestamp": "2026-01-01T00:00:00Z",
        },
        "spec": {"queueName": "team-a", "active": active},
        "status": status,
    }


GPU_MESSAGE = "couldn't assign flavors to pod set trainer: insufficient unused quota for nvidia.com/gpu in flavor gpu, 4 more needed"


def test_queue_words_from_the_workload_conditions() -> None:
    pending = workload([{"type": "QuotaReserved", "status": "False", "reason": "Pending", "message": GPU_MESSAGE}])
    assert queue_status.words(pending).text == f"queued in team-a; waiting for quota: {GPU_MESSAGE}"
    admitted = workload([{"type": "QuotaReserved", "status": "True"}, {"type": "Admitted", "status": "True"}], cluster_queue="gpu")
    assert queue_status.words(admitted) == queue_status.QueueWords(queue_status.ADMITTED, "admitted by cluster queue gpu")
    preempted = workload([{"type": "Evicted", "status": "True", "reason": "Preempted", "message": "Preempted to accommodate a workload"}])
    assert queue_status.words(preempted).text == "preempted by a higher-priority workload; queued again in team-a"
    stopped = workload([{"type": "Admitted", "status": "True"}], active=False)
    assert queue_status.words(stopped).state == queue_status.DEACTIVATED


def test_queue_summary_names_the_waiting_parts() -> None:
    pending = workload([{"type": "QuotaReserved", "status": "False", "message": GPU_MESSAGE}])
    found = queue_status.job_words([pending], [("job", "JobSet", OBJ)])
    assert queue_status.summary(found) == f"Queued in team-a; waiting for quota: {GPU_MESSAGE}."
    admitted = workload([{"type": "Admitted", "status": "True"}], owner=("Job", f"{OBJ}-pserver"))
    waiting = workload([{"type": "QuotaReserved", "status": "False", "message": GPU_MESSAGE}], owner=("Job", f"{OBJ}-trainer"))
    parts = queue_status.job_words([admitted, waiting], [("pserver", "Job", f"{OBJ}-pserver"), ("trainer", "Job", f"{OBJ}-trainer")])
    assert queue_status.summary(parts) == f"Trainer: queued in team-a; waiting for quota: {GPU_MESSAGE}."
    assert queue_status.summary({"pserver": queue_status.words(admitted)}) is None
    assert queue_status.job_words([pending], [("job", "JobSet", "other")]) == {}
