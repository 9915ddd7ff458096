"""Volcano as the gang scheduler (`gang_scheduler='volcano'`): the job's PodGroup and its pods'
scheduling in the plan (pure: no cluster), the words of a waiting gang, and the /config and
submit refusals.  The PodGroup is validated against Volcano's own CRD schema on the real
control plane by tests/cluster/test_k8s_volcano.py."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Iterable
from typing import Any

import kubernetes_validate
import pytest

from backends.kubernetes.test_k8s_manifests import OBJ, SETTINGS, by_name, plan
from paddle_nbext.model.contract import ROLE_LABEL
from paddle_nbext_server.backends.kubernetes import KubernetesBackend
from paddle_nbext_server.backends.kubernetes.build import manifests, volcano
from paddle_nbext_server.backends.kubernetes.build.jobset import QUEUE_LABEL
from paddle_nbext_server.backends.kubernetes.status import volcano_status
from paddle_nbext_server.backends.kubernetes.status.job_status import job_status
from paddle_nbext_server.errors import BackendUnavailable
from paddle_nbext_server.events import EventHub

VOLCANO = dataclasses.replace(SETTINGS, gang_scheduler="volcano", default_queue="research")


def pod_group_of(objects: Iterable[dict[str, Any]]) -> dict[str, Any]:
    return next(o for o in objects if o["kind"] == "PodGroup")


def test_the_pod_group_comes_right_after_the_record_and_is_owned_by_it() -> None:
    _, objects = plan(VOLCANO)
    assert [(o["kind"], o["metadata"]["name"]) for o in objects[:3]] == [("ConfigMap", OBJ), ("PodGroup", OBJ), ("Service", OBJ)]
    group = objects[1]
    assert group["apiVersion"] == "scheduling.volcano.sh/v1beta1"
    assert [(r["kind"], r["name"], r["controller"]) for r in group["metadata"]["ownerReferences"]] == [("ConfigMap", OBJ, True)]
    assert group["metadata"]["labels"][ROLE_LABEL] == "podgroup"
    assert group["metadata"]["labels"]["paddle-nbext/job"] == OBJ
    assert manifests.set_owner_uid(group, "uid-1")["metadata"]["ownerReferences"][0]["uid"] == "uid-1"
    # Without the setting the plan has no PodGroup and no pod names a scheduler.
    _, plain = plan()
    assert all(o["kind"] != "PodGroup" for o in plain)
    assert all("schedulerName" not in o["spec"]["template"]["spec"] for o in plain if o["kind"] == "Job")


def test_min_member_covers_every_pserver_and_trainer_but_not_the_master() -> None:
    _, objects = plan(VOLCANO)  # 2 pservers + 3 trainers
    assert pod_group_of(objects)["spec"]["minMember"] == 5
    _, collective = plan(VOLCANO, mode="collective", pservers=0, trainers=4)
    assert pod_group_of(collective)["spec"]["minMember"] == 4


def test_min_resources_are_the_gangs_total_requests() -> None:
    # pservers: 2 x (500m, 1Gi); trainers: 3 x (1 CPU, 1.5Gi, 1 GPU); the master is not counted.
    _, objects = plan(VOLCANO)
    assert pod_group_of(objects)["spec"]["minResources"] == {"cpu": "4", "memory": "6656Mi", "nvidia.com/gpu": "3"}
    _, small = plan(VOLCANO, pservers=1, trainers=2, trainer_gpu=0, trainer_cpu="250m", trainer_mem="512Mi", pserver_mem="256Mi")
    assert pod_group_of(small)["spec"]["minResources"] == {"cpu": "1", "memory": "1280Mi"}


def test_replica_pods_are_scheduled_by_volcano_as_members_and_the_master_keeps_the_default_scheduler() -> None:
    _, objects = plan(VOLCANO)
    jobs = by_name(objects)
    for role in ("pserver", "trainer"):
        template = jobs[("Job", f"{OBJ}-{role}")]["spec"]["template"]
        assert template["spec"]["schedulerName"] == "volcano"
        assert template["metadata"]["annotations"]["scheduling.k8s.io/group-name"] == OBJ
    master = jobs[("Job", f"{OBJ}-master")]["spec"]["template"]
    assert "schedulerName" not in master["spec"]
    assert "scheduling.k8s.io/group-name" not in master["metadata"]["annotations"]


def test_the_queue_is_volcanos_the_jobs_own_wins_and_no_kueue_label_is_left() -> None:
    _, objects = plan(VOLCANO)
    assert pod_group_of(objects)["spec"]["queue"] == "research"
    _, own = plan(VOLCANO, queue="team-b")
    assert pod_group_of(own)["spec"]["queue"] == "team-b"
    for obj in own:
        assert QUEUE_LABEL not in obj["metadata"]["labels"], obj["metadata"]["name"]
    _, unqueued = plan(dataclasses.replace(VOLCANO, default_queue=""))
    assert "queue" not in pod_group_of(unqueued)["spec"]  # Volcano's CRD defaults it to "default"


def test_the_priority_class_is_passed_through() -> None:
    _, objects = plan(VOLCANO)
    assert pod_group_of(objects)["spec"]["priorityClassName"] == "batch-low"
    _, none = plan(dataclasses.replace(VOLCANO, priority_class_name=""))
    assert "priorityClassName" not in pod_group_of(none)["spec"]


@pytest.mark.parametrize("version", ["1.30.0", "1.37.0"])
def test_the_volcano_scheduled_jobs_stay_valid_jobs(version: str) -> None:
    _, objects = plan(VOLCANO)
    for obj in objects:
        if obj["kind"] != "PodGroup":
            kubernetes_validate.validate(manifests.set_owner_uid(obj, "3f1c2a9e-0000-4000-8000-000000000001"), version, strict=True)


def test_volcano_is_refused_with_jobset_mode_and_allowed_with_jobs_mode() -> None:
    assert volcano.combination_problem("jobs") is None
    problem = volcano.combination_problem("jobset")
    assert problem is not None and "workload_mode 'jobs'" in problem and "gang_scheduler" in problem


# ---------------------------------------------------------------------------- a waiting gang in words


def pod(
    name: str,
    *,
    scheduler: str = "volcano",
    node: str | None = None,
    conditions: list[dict[str, str]] | None = None,
    phase: str = "Pending",
) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "labels": {"paddle-nbext/role": "trainer", "batch.kubernetes.io/job-completion-index": name[-1]},
        },
        "spec": {"schedulerName": scheduler, **({"nodeName": node} if node else {})},
        "status": {"phase": phase, **({"conditions": conditions} if conditions else {})},
    }


def group(status: dict[str, Any] | None = None, queue: str = "research") -> dict[str, Any]:
    return {"metadata": {"name": OBJ}, "spec": {"minMember": 2, "queue": queue}, **({"status": status} if status else {})}


UNSCHEDULABLE = {
    "phase": "Inqueue",
    "conditions": [
        {"type": "Scheduled", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"},
        {
            "type": "Unschedulable",
            "status": "True",
            "reason": "NotEnoughResources",
            "message": "2/2 tasks in gang unschedulable: pod group is not ready, 2 Pending, 2 minAvailable; Pending: 2 Unschedulable.",
            "lastTransitionTime": "2026-01-01T00:01:00Z",
        },
    ],
}


def test_a_gang_no_volcano_scheduler_has_seen_says_so() -> None:
    pods = [pod("t-0"), pod("t-1")]
    notes = volcano_status.pod_notes(pods, group())
    assert notes == {
        p: "Waiting for the volcano scheduler: no Volcano scheduler has looked at it yet (is Volcano running in the cluster?)"
        for p in ("t-0", "t-1")
    }
    assert volcano_status.job_note(pods, group()) == (
        f"Waiting for the volcano scheduler to place all 2 replicas together (PodGroup {OBJ}): "
        "no Volcano scheduler has looked at it yet (is Volcano running in the cluster?)."
    )


def test_volcanos_own_words_come_from_the_pod_group() -> None:
    pods = [pod("t-0"), pod("t-1")]
    unschedulable = volcano_status.job_note(pods, group(UNSCHEDULABLE))
    assert unschedulable is not None and unschedulable.endswith(
        "2/2 tasks in gang unschedulable: pod group is not ready, 2 Pending, 2 minAvailable; Pending: 2 Unschedulable."
    )
    pending = volcano_status.job_note(pods, group({"phase": "Pending"}))
    assert pending is not None and pending.endswith("queue research has not admitted it yet.")
    # No pod at all: Volcano's webhook refuses the pods of a Pending PodGroup; the job still says why.
    assert volcano_status.job_note([], group({"phase": "Pending"})) is not None
    assert "admitted by queue research" in volcano_status.pod_notes(pods, group({"phase": "Inqueue"}))["t-0"]


def test_a_placed_gang_has_no_volcano_words() -> None:
    placed = [pod("t-0", node="n1", phase="Running"), pod("t-1", node="n2")]
    assert volcano_status.pod_notes(placed, group({"phase": "Running"})) == {}
    assert volcano_status.job_note(placed, group({"phase": "Inqueue"})) is None
    assert volcano_status.job_note([], group({"phase": "Running"})) is None
    assert volcano_status.pod_notes([pod("t-0", scheduler="default-scheduler")], group()) == {}
    assert volcano_status.job_note([pod("t-0")], None) is None


def test_the_pods_own_words_come_before_the_gangs() -> None:
    """A pod whose status has its own reason (a scheduler's PodScheduled=False) keeps it; the
    gang's words fill only replicas that say nothing."""
    record = {
        "metadata": {"name": OBJ, "uid": "u1", "annotations": {"paddle-nbext/owner": "alice"}, "creationTimestamp": "2026-01-01T00:00:00Z"},
        "data": {"spec.json": '{"job_name": "mnist", "pservers": 0, "trainers": 2, "mode": "collective"}'},
    }
    own = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "0/3 nodes are available"}
    pods = [pod("t-0", conditions=[own]), pod("t-1")]
    status, _, _ = job_status(record, pods, {}, volcano_status.pod_notes(pods, group()), queue_note=volcano_status.job_note(pods, group()))
    reasons = {r.index: r.reason for r in status.replicas}
    assert reasons[0] == "Unschedulable: 0/3 nodes are available"
    assert reasons[1] is not None and reasons[1].startswith("Waiting for the volcano scheduler: no Volcano scheduler has looked at it yet")
    assert status.phase == "Pending" and status.message.startswith("Waiting for the volcano scheduler to place all 2 replicas")


# ---------------------------------------------------------------------------- /config and submit


def test_config_says_the_scheduler_and_refuses_the_jobset_combination() -> None:
    backend = KubernetesBackend(events=EventHub(), gang_scheduler="volcano", default_queue="research")
    described = backend.describe()
    assert described["gang_scheduler"] == "volcano"
    assert described["volcano"] == {"scheduler_name": "volcano", "podgroup_api": None, "default_queue": "research", "allowed_queues": []}
    assert "queues" not in described  # the queues are Volcano's: no Kueue Workloads are watched
    assert KubernetesBackend(events=EventHub()).describe()["gang_scheduler"] is None
    combined = KubernetesBackend(events=EventHub(), gang_scheduler="volcano", workload_mode="jobset").describe()
    assert combined["ok"] is False and "workload_mode 'jobs' only" in combined["error"]


def test_a_missing_pod_group_api_is_named_with_its_fix() -> None:
    backend = KubernetesBackend(events=EventHub(), gang_scheduler="volcano")
    backend.api.apis[(volcano.GROUP, volcano.VERSION)] = False  # what discovery found at start
    described = backend.describe()
    assert described["ok"] is False and described["volcano"]["podgroup_api"] is False
    assert "serves no PodGroup API (scheduling.volcano.sh/v1beta1)" in described["error"] and "install Volcano" in described["error"]
    with pytest.raises(BackendUnavailable) as refused:
        asyncio.run(backend.admission.require_workload_api(None))  # type: ignore[arg-type]
    assert refused.value.message == described["error"]
