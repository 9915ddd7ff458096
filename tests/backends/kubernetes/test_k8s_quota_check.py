"""Quota before submit (issue 17): the job's need from its plan, what ResourceQuotas and a
ClusterQueue have free, the verdict, the field to blame and the sentence (backends/kubernetes/quota/quota.py)."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import pytest

from paddle_nbext.model.quota import QuotaCheck, Verdict
from paddle_nbext.model.spec import JobSpec
from paddle_nbext_server.backends.kubernetes.build import manifests
from paddle_nbext_server.backends.kubernetes.build.home_volume import HomeVolume
from paddle_nbext_server.backends.kubernetes.quota import quota
from paddle_nbext_server.backends.kubernetes.settings import ManifestSettings
from paddle_nbext_server.jobfiles.runtime_files import read_bundle

GPU = "nvidia.com/gpu"
HOME = HomeVolume({"persistentVolumeClaim": {"claimName": "claim-alice"}}, "/home/jovyan")
RUNTIME = read_bundle()


def plan(mode: str = "jobs", **fields: Any) -> list[dict[str, Any]]:
    settings = ManifestSettings(namespace="team-a", default_image="paddle:3", home_path="/home/jovyan", workload_mode=mode)
    spec = JobSpec.from_dict({"job_name": "mnist", "entry_point": "python train.py", **fields})
    return manifests.build_plan(spec, "alice", settings, home=HOME, workdir="/home/jovyan/mnist", runtime=RUNTIME)


def groups(mode: str = "jobs", **fields: Any) -> list[quota.PodGroup]:
    return quota.pod_groups(plan(mode, **fields))


def resource_quota(name: str, hard: dict[str, str], used: dict[str, str], **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"hard": hard, **spec}, "status": {"hard": hard, "used": used}}


def cluster_queue(
    flavors: list[tuple[str, dict[str, str]]],
    used: dict[tuple[str, str], str] | None = None,
    covered: tuple[str, ...] = ("cpu", "memory", GPU),
    **spec: Any,
) -> dict[str, Any]:
    usage: dict[str, list[dict[str, str]]] = {}
    for (flavor, resource), total in (used or {}).items():
        usage.setdefault(flavor, []).append({"name": resource, "total": total, "borrowed": "0"})
    return {
        "metadata": {"name": "team-a"},
        "spec": {
            "resourceGroups": [
                {
                    "coveredResources": list(covered),
                    "flavors": [
                        {"name": name, "resources": [{"name": r, "nominalQuota": q} for r, q in resources.items()]}
                        for name, resources in flavors
                    ],
                }
            ],
            **spec,
        },
        "status": {"flavorsReservation": [{"name": f, "resources": r} for f, r in usage.items()]},
    }


@pytest.mark.parametrize("mode", ["jobs", "jobset"])
def test_the_need_is_every_pod_of_the_plan_including_the_master(mode: str) -> None:
    found = groups(mode, pservers=2, trainers=4, pserver_cpu="500m", pserver_mem="2Gi", trainer_cpu="2", trainer_mem="8Gi", trainer_gpu=1)
    by_role = {g.role: (g.pods, {k: v.canonical() for k, v in g.each.items()}) for g in found}
    objects = by_role.pop("")  # what object count quotas count: nothing a user sets
    assert by_role == {
        "master": (1, {"cpu": "10m", "memory": "128Mi", "pods": "1"}),
        "pserver": (2, {"cpu": "500m", "memory": "2Gi", "pods": "1"}),
        "trainer": (4, {"cpu": "2", "memory": "8Gi", GPU: "1", "pods": "1"}),
    }
    # The record, the Service (JobSet's own in jobset mode) and the three Jobs (JobSet's children).
    assert objects[1]["count/jobs.batch"] == "3" and objects[1]["count/configmaps"] == "1" and objects[1]["count/services"] == "1"
    need = quota.job_need(found)
    assert need["cpu"] == Fraction(9010, 1000) and need["memory"] == Fraction(36 * 2**30 + 128 * 2**20) and need[GPU] == Fraction(4)
    assert need["pods"] == 7


def test_a_pods_quota_smaller_than_the_job_can_never_run_and_names_the_replica_count() -> None:
    """A `pods: 3` quota and a 5-pod job (master, 1 pserver, 3 trainers): never, not "fits"."""
    found = groups(pservers=1, trainers=3)
    bounds, _ = quota.resource_quota_bounds([resource_quota("small", {"pods": "3"}, {"pods": "0"})], quota.job_need(found))
    check = quota.judge(found, bounds, [], GPU)
    assert check.verdict == Verdict.NEVER and check.field == "trainers", check.words
    assert "it can never run: it needs 5 pods, but ResourceQuota small has at most 3 pods; ask for fewer trainers" in check.words
    jobs_quota = [resource_quota("objects", {"count/jobs.batch": "5"}, {"count/jobs.batch": "4"})]
    bounds, _ = quota.resource_quota_bounds(jobs_quota, quota.job_need(found))
    check = quota.judge(found, bounds, [], GPU)
    assert check.verdict == Verdict.WAITS and "short of 2 Jobs in ResourceQuota objects" in check.words, check.words
    assert check.field is None


def test_a_queue_that_does_not_cover_pods_does_not_count_them() -> None:
    found = groups(pservers=1, trainers=3)
    bounds = quota.cluster_queue_bounds(cluster_queue([("default", {"cpu": "64", "memory": "256Gi", GPU: "8"})]), quota.job_need(found))
    assert {b.resource for b in bounds} == {"cpu", "memory"}


def test_collective_jobs_have_no_pserver_pods() -> None:
    assert {g.role for g in groups(mode="collective", trainers=2)} == {"master", "trainer", ""}  # "": the objects


def test_a_pod_request_counts_its_largest_init_container_and_its_overhead() -> None:
    pod = {
        "containers": [{"resources": {"requests": {"cpu": "1"}}}, {"resources": {"limits": {"memory": "1Gi"}}}],
        "initContainers": [{"resources": {"requests": {"cpu": "3", "memory": "512Mi"}}}],
        "overhead": {"cpu": "250m"},
    }
    job = {"kind": "Job", "spec": {"parallelism": 2, "template": {"metadata": {"labels": {"paddle-nbext/role": "trainer"}}, "spec": pod}}}
    group, objects = quota.pod_groups([job])
    assert (group.pods, {k: v.canonical() for k, v in group.each.items()}) == (2, {"cpu": "3250m", "memory": "1Gi", "pods": "1"})
    assert {k: v.canonical() for k, v in objects.each.items()} == {"count/jobs.batch": "1"}


def test_free_from_resource_quotas_is_hard_minus_used_for_the_keys_that_bound_our_pods() -> None:
    quotas = [
        resource_quota(
            "compute", {"requests.cpu": "32", "limits.memory": "128Gi", "pods": "10"}, {"requests.cpu": "16", "limits.memory": "64Gi"}
        ),
        resource_quota("gpus", {f"requests.{GPU}": "8"}, {f"requests.{GPU}": "6"}),
    ]
    bounds, notes = quota.resource_quota_bounds(quotas, ["cpu", "memory", GPU])
    assert notes == []
    assert [(b.resource, b.source, b.limit, b.free) for b in bounds] == [
        ("cpu", "ResourceQuota compute", Fraction(32), Fraction(16)),
        ("memory", "ResourceQuota compute", Fraction(128 * 2**30), Fraction(64 * 2**30)),
        (GPU, "ResourceQuota gpus", Fraction(8), Fraction(2)),
    ]


def test_a_resource_quota_scoped_away_from_our_pods_is_not_counted() -> None:
    best_effort = resource_quota("be", {"cpu": "0"}, {}, scopes=["BestEffort"])
    other_class = resource_quota(
        "high",
        {"cpu": "0"},
        {},
        scopeSelector={"matchExpressions": [{"scopeName": "PriorityClass", "operator": "In", "values": ["high"]}]},
    )
    mine = resource_quota(
        "low",
        {"cpu": "4"},
        {"cpu": "1"},
        scopeSelector={"matchExpressions": [{"scopeName": "PriorityClass", "operator": "In", "values": ["batch-low"]}]},
    )
    odd = resource_quota("odd", {"cpu": "0"}, {}, scopes=["SomethingNew"])
    bounds, notes = quota.resource_quota_bounds([best_effort, other_class, mine, odd], ["cpu"], priority_class="batch-low")
    assert [(b.source, b.free) for b in bounds] == [("ResourceQuota low", Fraction(3))]
    assert notes == ["ResourceQuota odd has a scope this check does not know; it was not counted"]


def test_cluster_queue_free_sums_its_flavors_and_one_role_must_fit_one_flavor() -> None:
    queue = cluster_queue(
        [("a100", {"cpu": "64", "memory": "256Gi", GPU: "4"}), ("h100", {"cpu": "64", "memory": "256Gi", GPU: "4"})],
        used={("a100", GPU): "3", ("a100", "cpu"): "8"},
    )
    (cpu, gpu) = quota.cluster_queue_bounds(queue, ["cpu", GPU])
    assert (cpu.limit, cpu.free, cpu.largest) == (Fraction(128), Fraction(120), Fraction(64))
    assert (gpu.limit, gpu.free, gpu.largest, gpu.largest_free) == (Fraction(8), Fraction(5), Fraction(4), Fraction(4))
    # 6 trainers x 1 GPU: less than the queue's 8 GPUs, more than one flavor's 4: never.
    check = quota.judge(groups(trainers=6, trainer_gpu=1), [gpu], [], GPU)
    assert check.verdict == Verdict.NEVER and check.field == "trainers", check
    assert "its trainers need 6 GPUs, but ClusterQueue team-a has at most 4 GPUs in one flavor" in check.words


def test_a_cluster_queue_in_a_cohort_may_borrow_up_to_its_borrowing_limit() -> None:
    queue = cluster_queue([("default", {"cpu": "4"})], used={("default", "cpu"): "4"}, cohortName="org")
    (cpu,) = quota.cluster_queue_bounds(queue, ["cpu"])
    assert cpu.limit is None and cpu.free == 0  # no borrowing limit: the cohort decides
    check = quota.judge(groups(trainers=2), [cpu], [], GPU)
    assert check.verdict == Verdict.WAITS and "it may borrow from cohort org" in check.words, check.words
    limited = cluster_queue([("default", {"cpu": "4"})], cohortName="org")
    limited["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["borrowingLimit"] = "2"
    (cpu,) = quota.cluster_queue_bounds(limited, ["cpu"])
    assert (cpu.limit, cpu.free) == (Fraction(6), Fraction(4))


def test_a_resource_the_cluster_queue_does_not_cover_can_never_be_admitted() -> None:
    queue = cluster_queue([("default", {"cpu": "64", "memory": "64Gi"})], covered=("cpu", "memory"))
    bounds = quota.cluster_queue_bounds(queue, ["cpu", "memory", GPU])
    check = quota.judge(groups(trainers=2, trainer_gpu=1), bounds, [], GPU)
    assert check.verdict == Verdict.NEVER and check.field == "trainer_gpu"
    assert "it does not cover nvidia.com/gpu" in check.words


def test_verdicts_and_words() -> None:
    job = groups(mode="collective", trainers=4, trainer_cpu="2", trainer_mem="8Gi", trainer_gpu=1)
    need = quota.job_need(job)

    def bound(resource: str, limit: int, free: int) -> quota.Bound:
        unit = 2**30 if resource == "memory" else 1
        return quota.Bound(resource, "ResourceQuota team", Fraction(limit * unit), Fraction(free * unit))

    fits = quota.judge(job, [bound("cpu", 32, 16), bound("memory", 128, 64), bound(GPU, 8, 8)], [], GPU)
    assert fits.verdict == Verdict.FITS and fits.field is None
    assert fits.words == "This job needs 8.01 CPU, 32.12Gi, 4 GPUs; free now: 16 CPU, 64Gi, 8 GPUs — it fits."

    waits = quota.judge(job, [bound("cpu", 32, 16), bound("memory", 128, 64), bound(GPU, 8, 2)], [], GPU)
    assert waits.verdict == Verdict.WAITS and waits.field is None
    assert waits.words == (
        "This job needs 8.01 CPU, 32.12Gi, 4 GPUs; free now: 16 CPU, 64Gi, 2 GPUs — it will wait (short of 2 GPUs in ResourceQuota team)."
    )

    # One trainer's GPUs fit the hard limit of 2, four do not: the count is what exceeds.
    never = quota.judge(job, [bound(GPU, 2, 2)], [], GPU)
    assert never.verdict == Verdict.NEVER and never.field == "trainers"
    assert never.words.endswith("it can never run: it needs 4 GPUs, but ResourceQuota team has at most 2 GPUs; ask for fewer trainers.")
    # Not even one trainer's 8 CPU (with the master's 10m) fits a limit of 6: the amount is.
    cpu = quota.judge(groups(mode="collective", trainers=1, trainer_cpu="8"), [bound("cpu", 6, 6)], [], GPU)
    assert cpu.verdict == Verdict.NEVER and cpu.field == "trainer_cpu", cpu.words
    assert need[GPU] == 4


def test_nothing_to_check_and_nothing_readable_say_so() -> None:
    job = groups(mode="collective", trainers=1)
    free = quota.judge(job, [], [], GPU)
    assert (free.verdict, free.words) == (Verdict.FITS, "This job needs 1.01 CPU, 1.12Gi; no ResourceQuota or queue limits it.")
    unknown = quota.judge(job, [], ["the ResourceQuotas of team-a: forbidden (the Role needs 'list resourcequotas')"], GPU)
    assert unknown.verdict == Verdict.UNKNOWN
    assert unknown.words.endswith("quota unknown (the ResourceQuotas of team-a: forbidden (the Role needs 'list resourcequotas')).")
    partly = quota.judge(job, [quota.Bound("cpu", "ResourceQuota q", Fraction(4), Fraction(4))], ["ClusterQueue x: not found"], GPU)
    assert partly.verdict == Verdict.FITS and partly.words.endswith("— it fits. Not checked: ClusterQueue x: not found.")


def test_the_check_survives_its_json() -> None:
    check = quota.judge(groups(trainers=2), [quota.Bound("cpu", "ResourceQuota q", Fraction(2), Fraction(1))], ["x"], GPU)
    data = check.to_dict()
    assert data["verdict"] == "never" and data["bounds"] == [{"resource": "cpu", "source": "ResourceQuota q", "limit": "2", "free": "1"}]
    assert QuotaCheck.from_dict(data) == check
