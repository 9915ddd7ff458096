"""Issue 24's "Bad input and faults", in words: an RBAC refusal names who may not do what where,
and the fix (`kubernetes/client/forbidden.py`); a home claim that does not bind is named in the job's
reason and message (`runtime/replicas.claim_words`).  The words on a real API server and
scheduler: tests/cluster/test_k8s_faults_cluster.py; through a real JupyterHub:
tests/cluster/test_real_node_hub_faults.py."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from paddle_nbext_server.backends.kubernetes import KubernetesBackend
from paddle_nbext_server.backends.kubernetes.client.cache import describe_failure
from paddle_nbext_server.backends.kubernetes.client.forbidden import denial_of, sentence_of
from paddle_nbext_server.errors import BackendForbidden, BackendUnavailable
from paddle_nbext_server.events import EventHub
from paddle_nbext_server.runtime import replicas
from paddle_nbext_server.runtime.replicas import claim_words, decide_job, pod_view

NS = "pnb-users"


def refusal(verb: str, resource: str, group: str = "", account: str = "default", name: str = "") -> ApiException:
    """A 403 as kube-apiserver's RBAC authorizer words it (the Status body)."""
    plural = resource.partition("/")[0]
    subject = f'{plural} "{name}"' if name else plural
    message = (
        f'{subject} is forbidden: User "system:serviceaccount:{NS}:{account}" cannot {verb} resource "{resource}" '
        f'in API group "{group}" in the namespace "{NS}"'
    )
    error = ApiException(status=403, reason="Forbidden")
    error.body = json.dumps({"kind": "Status", "status": "Failure", "message": message, "reason": "Forbidden", "code": 403})
    return error


def test_a_refused_list_names_the_account_verb_resource_namespace_and_the_fix() -> None:
    denial = denial_of(refusal("list", "configmaps"))
    assert denial is not None
    words = denial.sentence()
    assert words.startswith(f"the notebook's ServiceAccount system:serviceaccount:{NS}:default may not list configmaps in namespace {NS}")
    assert "(HTTP 403)" in words
    assert f"kubectl -n {NS} apply -f deploy/rbac/notebook-role.yaml" in words
    assert "subject set to ServiceAccount default" in words
    # the namespace's default account: the hub's config forgot the notebook's ServiceAccount
    assert "singleuser.serviceAccountName" in words and "service_account" in words
    assert describe_failure(refusal("list", "configmaps")) == words


def test_an_account_of_its_own_without_the_binding_is_told_the_binding_only() -> None:
    denial = denial_of(refusal("create", "jobs", group="batch", account="paddle-notebook"))
    assert denial is not None
    words = denial.sentence()
    assert f"ServiceAccount system:serviceaccount:{NS}:paddle-notebook may not create jobs.batch in namespace {NS}" in words
    assert "subject set to ServiceAccount paddle-notebook" in words
    assert "singleuser.serviceAccountName" not in words


def test_subresources_and_the_queue_and_gang_roles_name_their_own_role_file() -> None:
    log = denial_of(refusal("get", "pods/log", name="x-trainer-0"))
    assert log is not None and log.what == "pods/log" and log.role_file == "deploy/rbac/notebook-role.yaml"
    workloads = denial_of(refusal("watch", "workloads", group="kueue.x-k8s.io"))
    assert workloads is not None and workloads.role_file == "deploy/rbac/notebook-role-queues.yaml"
    groups = denial_of(refusal("create", "podgroups", group="scheduling.volcano.sh"))
    assert groups is not None and groups.role_file == "deploy/rbac/notebook-role-volcano.yaml"


def test_a_watch_error_event_is_read_the_same_as_an_answer() -> None:
    """A watch's ERROR event becomes ApiException(status, reason=<the Status message>) in cache.py."""
    message = (
        f'pods is forbidden: User "system:serviceaccount:{NS}:default" cannot watch resource "pods" in API group "" in the namespace "{NS}"'
    )
    denial = denial_of(ApiException(status=403, reason=message))
    assert denial is not None and (denial.verb, denial.resource, denial.namespace) == ("watch", "pods", NS)


def test_other_403s_keep_the_api_servers_words() -> None:
    quota = ApiException(status=403, reason="Forbidden")
    quota.body = json.dumps({"message": 'pods "x" is forbidden: exceeded quota: q, requested: cpu=4, used: cpu=0, limited: cpu=2'})
    assert denial_of(quota) is None
    assert describe_failure(quota).startswith('HTTP 403: pods "x" is forbidden: exceeded quota')
    assert denial_of(ApiException(status=404, reason="Not Found")) is None


def test_several_refused_kinds_are_one_sentence() -> None:
    denials = [denial_of(refusal("list", kind, group)) for kind, group in (("configmaps", ""), ("jobs", "batch"), ("pods", ""))]
    words = sentence_of([d for d in denials if d is not None])
    assert words.startswith(
        f"the notebook's ServiceAccount system:serviceaccount:{NS}:default may not list configmaps, jobs.batch and pods in namespace {NS} (HTTP 403): "
    )
    assert words.count("deploy/rbac/notebook-role.yaml") >= 2


def test_a_refused_create_is_a_503_named_forbidden_by_cluster_and_nothing_is_kept() -> None:
    """`KubernetesClient.create` turns the refusal into BackendForbidden (REST: 503, error `forbidden_by_cluster`)."""
    backend = KubernetesBackend(events=EventHub())

    class Api:
        def create_namespaced_config_map(self, namespace: str, body: Any, **_: Any) -> Any:
            raise refusal("create", "configmaps")

    backend.api.api_for = lambda kind: (Api(), "config_map")  # type: ignore[method-assign]
    created: list[dict[str, Any]] = []
    manifest = {"kind": "ConfigMap", "metadata": {"name": "train-2bd806", "namespace": NS}}
    with pytest.raises(BackendForbidden) as error:
        asyncio.run(backend.api.create(manifest, created, "train"))
    assert isinstance(error.value, BackendUnavailable)
    assert (error.value.status, error.value.code) == (503, "forbidden_by_cluster")
    assert f"may not create configmaps in namespace {NS}" in error.value.message
    assert "nothing of job 'train' was left behind" in error.value.message
    assert created == []


# --- a home claim that does not bind ---------------------------------------------------------------


def pending_pod(message: str, claim: str = "claim-alice") -> dict[str, Any]:
    """A job pod as the scheduler leaves it when it cannot place it (PodScheduled False)."""
    return {
        "metadata": {
            "name": "train-2bd806-trainer-0-abcde",
            "creationTimestamp": "2026-12-02T06:00:00Z",
            "labels": {"paddle-nbext/role": "trainer", "batch.kubernetes.io/job-completion-index": "0"},
            "annotations": {"batch.kubernetes.io/job-completion-index": "0"},
        },
        "spec": {
            "volumes": [
                {"name": "home", "persistentVolumeClaim": {"claimName": claim}},
                {"name": "runtime", "configMap": {"name": "paddle-nbext-runtime"}},
            ]
        },
        "status": {
            "phase": "Pending",
            "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": message}],
        },
    }


UNBOUND = (
    "0/4 nodes are available: pod has unbound immediate PersistentVolumeClaims. preemption: 0/4 nodes are available: "
    "4 Preemption is not helpful for scheduling."
)
MISSING = 'persistentvolumeclaim "claim-alice" not found'


def test_an_unbound_home_claim_is_named_with_what_to_do() -> None:
    view = pod_view(pending_pod(UNBOUND), "trainer", 0)
    assert view.phase == "Pending"
    assert view.reason is not None and view.reason.startswith("Unschedulable: the home claim claim-alice is not bound to a volume")
    assert "storageClass does not exist" in view.reason and "kubectl describe pvc claim-alice" in view.reason
    assert view.reason.endswith(f"(scheduler: {UNBOUND})")


def test_a_missing_home_claim_is_named() -> None:
    message = f"0/4 nodes are available: {MISSING}. preemption: 0/4 nodes are available: 4 Preemption is not helpful for scheduling."
    view = pod_view(pending_pod(message), "trainer", 0)
    assert view.reason is not None
    assert view.reason.startswith("Unschedulable: the home claim claim-alice does not exist in the job's namespace")


def test_the_jobs_message_carries_the_claims_words_not_just_pending() -> None:
    record = {
        "metadata": {"name": "train-2bd806", "uid": "u1", "resourceVersion": "7", "annotations": {}},
        "data": {"spec.json": json.dumps({"job_name": "train", "mode": "collective", "pservers": 0, "trainers": 1})},
    }
    _views, decision = decide_job(record, [pending_pod(UNBOUND)])
    assert decision.phase == "Pending"
    assert "trainer 0" in decision.message and "the home claim claim-alice is not bound to a volume" in decision.message


def test_other_scheduling_reasons_are_left_as_the_scheduler_says_them() -> None:
    message = "0/4 nodes are available: 4 Insufficient nvidia.com/gpu."
    assert claim_words(pending_pod(message), message) is None
    assert pod_view(pending_pod(message), "trainer", 0).reason == f"Unschedulable: {message}"


def failed_trainer(index: int, exit_code: int) -> dict[str, Any]:
    """A trainer pod whose container ended with `exit_code` (134: aborted; 143: stopped)."""
    return {
        "metadata": {
            "name": f"ranks-2bd806-trainer-{index}-abcde",
            "creationTimestamp": "2026-12-02T06:00:00Z",
            "labels": {"paddle-nbext/role": "trainer", "batch.kubernetes.io/job-completion-index": str(index)},
            "annotations": {"batch.kubernetes.io/job-completion-index": str(index)},
        },
        "spec": {"volumes": []},
        "status": {
            "phase": "Failed",
            "containerStatuses": [
                {
                    "name": "paddle",
                    "state": {"terminated": {"exitCode": exit_code, "reason": "Error", "finishedAt": "2026-12-02T06:01:00Z"}},
                }
            ],
        },
    }


ABORTED = "[rank 2] FatalError: `Process abort signal` is detected by the operating system.\ntrainer 0 rank 2 failed: FatalError: `Process abort signal` is detected by the operating system.\n"
RAISED = (
    "[rank 1] Traceback (most recent call last):\n"
    '[rank 1]   File "collective_train.py", line 68, in main\n'
    "[rank 1] ValueError: bad batch at step 10: x has NaN values\n"
    "trainer 1 rank 1 failed: ValueError: bad batch at step 10: x has NaN values\n"
)


def test_the_rank_that_raised_is_named_even_when_its_pod_was_stopped_before_a_peer_aborted() -> None:
    """Across nodes a peer's abort (SIGABRT) can end before the raising rank's launcher exits,
    and the Job controller then stops that launcher (SIGTERM): both ends read as consequences.
    The pod whose log shows the Python exception is the one the job's message names."""
    record = {
        "metadata": {"name": "ranks-2bd806", "uid": "u1", "resourceVersion": "7", "annotations": {}},
        "data": {"spec.json": json.dumps({"job_name": "ranks", "mode": "collective", "pservers": 0, "trainers": 2})},
    }
    pods = [failed_trainer(0, 134), failed_trainer(1, 143)]
    views, decision = decide_job(record, pods)
    candidates = replicas.explaining_candidates(views, decision)
    assert candidates == ["ranks-2bd806-trainer-0-abcde", "ranks-2bd806-trainer-1-abcde"]
    tails = {candidates[0]: ABORTED, candidates[1]: RAISED}
    pod, tail = replicas.pick_explanation([(name, tails[name]) for name in candidates])
    assert pod == candidates[1]
    _views, decision = decide_job(record, pods, tail, explaining_pod=pod)
    assert decision.phase == "Failed"
    assert decision.message == "trainer 1 rank 1 failed: ValueError: bad batch at step 10: x has NaN values", decision.message
    # With no exception anywhere the first candidate explains it, as before.
    pod, tail = replicas.pick_explanation([(name, ABORTED) for name in candidates])
    assert pod == candidates[0]


def test_a_trainer_killed_before_its_launcher_named_the_rank_is_named_from_the_ranks_traceback() -> None:
    """The trainer's launcher could not print its `trainer 1 rank 1 failed: ...` line (killed), and
    its last line is another rank's abort: the rank whose traceback is in the log is named."""
    record = {
        "metadata": {"name": "ranks-2bd806", "uid": "u1", "resourceVersion": "7", "annotations": {}},
        "data": {"spec.json": json.dumps({"job_name": "ranks", "mode": "collective", "pservers": 0, "trainers": 2})},
    }
    pods = [failed_trainer(0, 134), failed_trainer(1, 143)]
    tail = RAISED.rsplit("trainer 1 rank 1", 1)[0] + "[rank 2] FatalError: `Process abort signal` is detected by the operating system.\n"
    _views, decision = decide_job(record, pods, tail, explaining_pod="ranks-2bd806-trainer-1-abcde")
    assert decision.message == "trainer 1 rank 1 failed: ValueError: bad batch at step 10: x has NaN values", decision.message
