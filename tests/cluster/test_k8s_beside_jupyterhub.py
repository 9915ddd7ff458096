"""Jobs beside a JupyterHub: they run in a namespace that holds no hub objects, and nothing a
user can reach through the backend (or with the notebook's own token) touches the hub.

The shared-jobs-namespace recipe of the admin guide ("Where jobs run"): the hub and the notebook
pods live in the hub's namespace; the notebook's ServiceAccount there is bound to the shipped
Role in a separate jobs namespace only.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException
from support.waiting import eventually

from cluster.k8s_objects import meta, name_of, present
from cluster.test_k8s_backend import NOTEBOOK_ROLE, home_dir, obj, objects_of, run, running, spec, workspace
from paddle_nbext_server.backends.base import SubmitRequest
from paddle_nbext_server.errors import BackendUnavailable

if TYPE_CHECKING:
    from cluster.conftest import Cluster

pytestmark = pytest.mark.cluster

HUB_LABELS = {"app": "jupyterhub", "component": "hub"}


def hub_namespace(cluster: Cluster) -> str:
    """A namespace as Zero to JupyterHub leaves it: the `hub` ConfigMap, Secret and ServiceAccount."""
    namespace = cluster.new_namespace()
    core = client.CoreV1Api(cluster.api_client())
    core.create_namespaced_config_map(
        namespace,
        client.V1ConfigMap.model_validate(
            {"metadata": {"name": "hub", "labels": HUB_LABELS}, "data": {"jupyterhub_config.py": "c.JupyterHub.log_level = 'INFO'\n"}}
        ),
    )
    core.create_namespaced_secret(
        namespace,
        client.V1Secret.model_validate(
            {"metadata": {"name": "hub", "labels": HUB_LABELS}, "stringData": {"hub.config.CryptKeeper.keys": "secret"}}
        ),
    )
    core.create_namespaced_service_account(
        namespace, client.V1ServiceAccount.model_validate({"metadata": {"name": "hub", "labels": HUB_LABELS}})
    )
    return namespace


def notebook_token_across(cluster: Cluster, hub_ns: str, jobs_ns: str) -> str:
    """The notebook's ServiceAccount lives in the hub's namespace; the shipped Role is bound to it
    in the jobs namespace only.  Returns a kubeconfig with its TokenRequest token."""
    admin = cluster.api_client()
    core, rbac = client.CoreV1Api(admin), client.RbacAuthorizationV1Api(admin)
    core.create_namespaced_service_account(hub_ns, client.V1ServiceAccount.model_validate({"metadata": {"name": "paddle-notebook"}}))
    role = {**NOTEBOOK_ROLE, "metadata": {"name": "paddle-nbext", "namespace": jobs_ns}}
    rbac.create_namespaced_role(jobs_ns, client.V1Role.model_validate(role))
    rbac.create_namespaced_role_binding(
        jobs_ns,
        client.V1RoleBinding.model_validate(
            {
                "metadata": {"name": "paddle-nbext"},
                "subjects": [{"kind": "ServiceAccount", "name": "paddle-notebook", "namespace": hub_ns}],
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "paddle-nbext"},
            }
        ),
    )
    status = core.create_namespaced_service_account_token(
        "paddle-notebook", hub_ns, client.AuthenticationV1TokenRequest.model_validate({"spec": {"expirationSeconds": 3600}})
    ).status
    token = present(present(status, "status").token, "token")
    return cluster.kubeconfig_with_token(token, jobs_ns)


def _status(call: Callable[[], object]) -> int:
    try:
        call()
    except ApiException as error:
        return int(error.status)
    return 200


def test_a_namespace_that_holds_a_jupyterhub_is_refused_unless_the_admin_allows_it(cluster: Cluster, tmp_path: Path) -> None:
    namespace, kubeconfig, admin, home = workspace(cluster, tmp_path)
    client.CoreV1Api(admin).create_namespaced_config_map(
        namespace, client.V1ConfigMap.model_validate({"metadata": {"name": "hub", "labels": HUB_LABELS}})
    )

    async def scenario() -> None:
        async with running(kubeconfig, namespace, home) as backend:
            with pytest.raises(BackendUnavailable, match=r"holds a JupyterHub \(ConfigMap hub\)") as error:
                await backend.submit(SubmitRequest(spec("beside"), "alice", home))
            assert "c.KubernetesBackend.namespace" in error.value.message and "allow_hub_namespace" in error.value.message
            assert "holds a JupyterHub" in backend.describe()["unsafe_namespace"]
        async with running(kubeconfig, namespace, home, allow_hub_namespace=True) as allowed:
            assert (await allowed.submit(SubmitRequest(spec("beside"), "alice", home)))["phase"] == "Pending"

    run(scenario())
    assert ("ConfigMap", obj("beside")) in objects_of(admin, namespace, "beside")


def test_the_shared_jobs_namespace_keeps_the_hub_out_of_the_notebooks_reach(cluster: Cluster, tmp_path: Path) -> None:
    hub_ns, jobs_ns = hub_namespace(cluster), cluster.new_namespace()
    cluster.home_claim(jobs_ns, "claim-alice")
    kubeconfig = notebook_token_across(cluster, hub_ns, jobs_ns)
    home = home_dir(tmp_path)
    admin = cluster.api_client()

    async def scenario() -> None:
        async with running(kubeconfig, jobs_ns, home) as backend:
            await backend.submit(SubmitRequest(spec("safe", pservers=1, trainers=1), "alice", home))

    run(scenario())
    jobs = client.BatchV1Api(admin).list_namespaced_job(jobs_ns, label_selector=f"paddle-nbext/job={obj('safe')}").items
    assert {name_of(j) for j in jobs} == {obj("safe") + "-master", obj("safe") + "-pserver", obj("safe") + "-trainer"}
    accounts = {name_of(j): present(present(j.spec, "spec").template.spec, "template.spec").service_account_name for j in jobs}
    assert accounts == {obj("safe") + "-master": "paddle-nbext-master", obj("safe") + "-pserver": None, obj("safe") + "-trainer": None}

    notebook = cluster.api_client(kubeconfig)
    core, batch = client.CoreV1Api(notebook), client.BatchV1Api(notebook)
    assert _status(lambda: core.patch_namespaced_config_map("hub", hub_ns, {"data": {"jupyterhub_config.py": "x"}})) == 403
    assert _status(lambda: core.read_namespaced_secret("hub", hub_ns)) == 403
    as_hub = {"metadata": {"name": "as-hub"}, "spec": {"serviceAccountName": "hub", "containers": [{"name": "c", "image": "paddle:3.0.0"}]}}
    assert _status(lambda: core.create_namespaced_pod(hub_ns, client.V1Pod.model_validate(as_hub))) == 403
    assert _status(lambda: core.create_namespaced_pod(jobs_ns, client.V1Pod.model_validate(as_hub))) == 403  # no pod create anywhere
    hub_job = {
        "metadata": {"name": "as-hub"},
        "spec": {
            "template": {
                "spec": {"restartPolicy": "Never", "serviceAccountName": "hub", "containers": [{"name": "c", "image": "paddle:3.0.0"}]}
            }
        },
    }
    assert _status(lambda: batch.create_namespaced_job(hub_ns, client.V1Job.model_validate(hub_job))) == 403
    # In the jobs namespace a Job may name only the ServiceAccounts that live there, and the
    # hub's is not one: the ServiceAccount admission plugin refuses every pod of it.
    created = batch.create_namespaced_job(jobs_ns, client.V1Job.model_validate(hub_job))
    refusal = eventually(
        lambda: [
            e.message
            for e in client.CoreV1Api(admin)
            .list_namespaced_event(jobs_ns, field_selector=f"involvedObject.uid={meta(created).uid},reason=FailedCreate")
            .items
        ],
        "the Job controller's FailedCreate event",
    )
    assert 'serviceaccount "hub" not found' in present(refusal[0], "message")
    assert (
        not client.CoreV1Api(admin)
        .list_namespaced_pod(jobs_ns, label_selector=f"batch.kubernetes.io/controller-uid={meta(created).uid}")
        .items
    )
