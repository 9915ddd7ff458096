"""The fence in deploy/policy/job-pods-policy.yaml, on the real API server (issue 22): in a namespace
it is bound to, paddle-nbext's own jobs are admitted, and the Jobs user code could make with the
notebook's token to run pods of another shape are refused with the policy's words."""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException
from kubernetes.config import new_client_from_config
from support.waiting import eventually

from cluster.k8s_objects import name_of
from cluster.test_k8s_backend import REPO, obj, run, running, spec, workspace
from paddle_nbext_server.backends.base import SubmitRequest

if TYPE_CHECKING:
    from cluster.conftest import Cluster

pytestmark = pytest.mark.cluster

POLICY = [d for d in yaml.safe_load_all((REPO / "deploy" / "policy" / "job-pods-policy.yaml").read_text()) if d]


def apply_policy(admin: client.ApiClient) -> None:
    api = client.AdmissionregistrationV1Api(admin)
    for document in POLICY:
        create, delete = (
            (api.create_validating_admission_policy, api.delete_validating_admission_policy)
            if document["kind"] == "ValidatingAdmissionPolicy"
            else (api.create_validating_admission_policy_binding, api.delete_validating_admission_policy_binding)
        )
        try:
            create(document)
        except ApiException as error:
            if error.status != 409:
                raise
            delete(document["metadata"]["name"])

            def made_again(c: Callable[[Any], object] = create, d: dict[str, Any] = document) -> bool:
                return _created(c, d)

            eventually(made_again, f"{document['kind']} made again")


def _created(create: Callable[[Any], object], document: dict[str, Any]) -> bool:
    try:
        create(document)
    except ApiException as error:
        if error.status == 409:
            return False
        raise
    return True


def remove_policy(admin: client.ApiClient) -> None:
    api = client.AdmissionregistrationV1Api(admin)
    for document in POLICY:
        delete = (
            api.delete_validating_admission_policy
            if document["kind"] == "ValidatingAdmissionPolicy"
            else api.delete_validating_admission_policy_binding
        )
        try:
            delete(document["metadata"]["name"])
        except ApiException as error:
            if error.status != 404:
                raise


def job(name: str, pod: dict[str, Any], labels: dict[str, str] | None = None) -> dict[str, Any]:
    ours = {"app.kubernetes.io/managed-by": "paddle-nbext", "paddle-nbext/owner": "alice", "paddle-nbext/role": "trainer"}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "labels": ours if labels is None else labels},
        "spec": {"template": {"spec": {"restartPolicy": "Never", **pod}}},
    }


CONTAINER = {"name": "main", "image": "registry.local/paddle-job:3.0.0", "command": ["python3", "train.py"]}


#: What `fenced` gives a test: the namespace, the notebook's kubeconfig, its BatchV1Api and the home.
Fenced = tuple[str, str, client.BatchV1Api, Path]


@pytest.fixture
def fenced(cluster: Cluster, tmp_path: Path) -> Iterator[Fenced]:
    namespace, kubeconfig, admin, home = workspace(cluster, tmp_path)
    client.CoreV1Api(admin).patch_namespace(namespace, {"metadata": {"labels": {"paddle-nbext/jobs-policy": "enforced"}}})
    apply_policy(admin)
    notebook = new_client_from_config(config_file=kubeconfig)
    batch = client.BatchV1Api(notebook)

    def in_force() -> bool:  # the API server compiles a new policy a moment after it is made
        try:
            batch.create_namespaced_job(
                namespace, client.V1Job.model_validate(job("probe", {"containers": [CONTAINER]}, labels={})), dry_run="All"
            )
        except ApiException as error:
            return error.status == 422 or (error.status == 400 and "paddle-nbext" in str(error.body))
        return False

    eventually(in_force, "the policy in force", seconds=60)
    try:
        yield namespace, kubeconfig, batch, home
    finally:
        remove_policy(admin)


def refusal(batch: client.BatchV1Api, namespace: str, manifest: dict[str, Any]) -> str:
    with pytest.raises(ApiException) as refused:
        batch.create_namespaced_job(namespace, client.V1Job.model_validate(manifest))
    assert refused.value.status in (400, 422), refused.value
    return str(refused.value.body)


def test_the_policy_admits_paddle_nbext_jobs_and_refuses_other_shapes(fenced: Fenced) -> None:
    namespace, kubeconfig, batch, home = fenced

    async def submit() -> None:
        async with running(kubeconfig, namespace, home) as backend:
            await backend.submit(SubmitRequest(spec("fenced", pservers=1, trainers=1), "alice", home))

    run(submit())
    made = {name_of(j) for j in batch.list_namespaced_job(namespace).items}
    assert {f"{obj('fenced')}-{role}" for role in ("master", "pserver", "trainer")} <= made

    # (`privileged: true` itself this test API server refuses before any policy: --allow-privileged=false)
    escalating = {
        "containers": [{**CONTAINER, "securityContext": {"allowPrivilegeEscalation": True, "capabilities": {"add": ["SYS_ADMIN"]}}}]
    }
    assert "no privileged container, no privilege escalation and no added capabilities" in refusal(
        batch, namespace, job("root", escalating)
    )
    host = {"containers": [CONTAINER], "volumes": [{"name": "host", "hostPath": {"path": "/"}}]}
    assert "no hostPath volume" in refusal(batch, namespace, job("host", host))
    theirs: dict[str, Any] = {"containers": [CONTAINER], "volumes": [{"name": "home", "persistentVolumeClaim": {"claimName": "claim-bob"}}]}
    assert "only its owner's home claim, claim-alice" in refusal(batch, namespace, job("theirs", theirs))
    assert "only paddle-nbext jobs run in this namespace" in refusal(batch, namespace, job("plain", {"containers": [CONTAINER]}, labels={}))
    as_master = {"serviceAccountName": "paddle-nbext-master", "containers": [CONTAINER]}
    assert "runs only the job master" in refusal(batch, namespace, job("token", as_master))
    own_home = copy.deepcopy(theirs)
    own_home["volumes"][0]["persistentVolumeClaim"]["claimName"] = "claim-alice"
    batch.create_namespaced_job(
        namespace, client.V1Job.model_validate(job("mine", own_home)), dry_run="All"
    )  # the owner's own claim: admitted
