"""A hub whose notebook ServiceAccount is bound to nothing, for real (issue 24, "Bad input and faults").

The session's JupyterHub (``hub`` in conftest.py, the shipped recipe) spawns a user's notebook pod
on the real node while the notebooks' RoleBinding (deploy/rbac/notebook-role.yaml's
``paddle-nbext``) is missing, as on a site that applied the Role but forgot the binding:
paddle-nbext in that pod runs with the pod's own token and must say, in ``GET /config`` (what
the panel shows) and in every job route, exactly which permission is missing (the account, the
verb, the resource, the namespace) and which file grants it; a submit is refused with the same
words and leaves nothing behind, neither in the namespace nor in the home.  Once the binding is
back the same server recovers by itself.  The namespace's ``default`` account (a hub config
that names no ServiceAccount) gets the same words plus the hub setting to fix, on the control
plane: tests/cluster/test_k8s_faults_cluster.py.
"""

from __future__ import annotations

import contextlib
import os
import re
import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException
from support.hub_site import HubSite

from cluster.k8s_objects import meta, present

pytestmark = pytest.mark.timeout(1200)

USER = "dave"  # a user of this module only: no other test's jobs in the way
BINDING = "paddle-nbext"  # deploy/rbac/notebook-role.yaml's RoleBinding of the notebooks' account
ACCOUNT = "paddle-notebook"
WAIT = 120.0
T = TypeVar("T")


def wait_for(check: Callable[[], T], what: str, timeout: float = WAIT) -> T:
    """`check()` until it is truthy; an assertion it raises is retried and reported at the deadline."""
    deadline = time.monotonic() + timeout
    last = ""
    while time.monotonic() < deadline:
        try:
            value = check()
            if value:
                return value
            last = f"last value {value!r}"
        except AssertionError as error:
            last = str(error)
        time.sleep(0.5)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}; last seen: {last}")


def allowed(hub: HubSite, verb: str, resource: str) -> bool:
    review = {
        "spec": {
            "user": f"system:serviceaccount:{hub.namespace}:{ACCOUNT}",
            "groups": ["system:serviceaccounts", f"system:serviceaccounts:{hub.namespace}", "system:authenticated"],
            "resourceAttributes": {"namespace": hub.namespace, "verb": verb, "resource": resource},
        }
    }
    answer = client.AuthorizationV1Api(hub.api).create_subject_access_review(client.V1SubjectAccessReview.model_validate(review))
    return bool(present(answer.status, "status").allowed)


@contextlib.contextmanager
def binding_removed(hub: HubSite) -> Iterator[None]:
    """The notebooks' RoleBinding deleted (and in force: the API server's authorizer cache follows
    a moment later), made again as it was after the block."""
    rbac = client.RbacAuthorizationV1Api(hub.api)
    kept = rbac.read_namespaced_role_binding(BINDING, hub.namespace)
    rbac.delete_namespaced_role_binding(BINDING, hub.namespace)
    try:
        wait_for(lambda: not allowed(hub, "list", "configmaps"), "the RoleBinding's removal to be in force", 60)
        yield
    finally:
        body = {"metadata": {"name": BINDING, "labels": meta(kept).labels}, "roleRef": kept.role_ref, "subjects": kept.subjects}
        with contextlib.suppress(ApiException):  # 409: made again already
            rbac.create_namespaced_role_binding(hub.namespace, client.V1RoleBinding.model_validate(body))
        wait_for(lambda: allowed(hub, "list", "configmaps"), "the RoleBinding to be in force again", 60)


def ours(hub: HubSite) -> list[str]:
    """The user's paddle-nbext objects in the namespace (by the owner label the backend sets)."""
    selector = f"app.kubernetes.io/managed-by=paddle-nbext,paddle-nbext/owner={USER}"
    core, batch = client.CoreV1Api(hub.api), client.BatchV1Api(hub.api)
    found = [f"ConfigMap {meta(o).name}" for o in core.list_namespaced_config_map(hub.namespace, label_selector=selector).items]
    found += [f"Service {meta(o).name}" for o in core.list_namespaced_service(hub.namespace, label_selector=selector).items]
    found += [f"Job {meta(o).name}" for o in batch.list_namespaced_job(hub.namespace, label_selector=selector).items]
    found += [f"Pod {meta(o).name}" for o in core.list_namespaced_pod(hub.namespace, label_selector=selector).items]
    return found


def test_a_notebook_spawned_without_its_role_binding_says_which_permission_is_missing(hub: HubSite) -> None:
    if USER not in hub.homes:  # the user's home claim, as for the hub's other users
        home = hub.site.new_home(USER)
        hub.site.home_claim(hub.api, hub.namespace, f"claim-{USER}", home)
        hub.homes[USER] = home  # the module's teardown stops the user's server
    home = hub.homes[USER]
    package = home / "faults"
    package.mkdir(exist_ok=True)
    (package / "train.py").write_text("print('never runs')\n")
    for item in (package, package / "train.py"):
        os.chown(item, hub.site.uid, hub.site.gid)
    account = f"system:serviceaccount:{hub.namespace}:{ACCOUNT}"

    with binding_removed(hub):
        hub.start_server(USER)
        token = hub.user_token(USER)

        def config_names_the_missing_permissions() -> dict[str, Any]:
            answer = hub.notebook(USER, token, "GET", "config")
            assert answer.status_code == 200, f"GET config: {answer.status_code} {answer.text[:300]}"
            backend = answer.json()["backend"]
            error = backend.get("error") or ""
            assert backend["ok"] is False and error.startswith(f"the notebook's ServiceAccount {account} may not list "), backend
            assert all(kind in error for kind in ("configmaps", "jobs.batch", "pods")), error
            return dict(backend)

        backend = wait_for(config_names_the_missing_permissions, "GET /config to name the missing permissions")
        error = backend["error"]
        assert f"in namespace {hub.namespace} (HTTP 403): the Role in deploy/rbac/notebook-role.yaml grants it" in error
        assert f"kubectl -n {hub.namespace} apply -f deploy/rbac/notebook-role.yaml" in error
        assert f"its RoleBinding's subject set to ServiceAccount {ACCOUNT}" in error
        assert "singleuser.serviceAccountName" not in error  # an account of its own: only the binding is missing
        assert {(f["verb"], f["resource"], f["namespace"], f["user"]) for f in backend["forbidden"]} >= {
            ("list", "configmaps", hub.namespace, account)
        }

        listed = hub.notebook(USER, token, "GET", "jobs")
        assert listed.status_code == 503, listed.text[:500]
        body = listed.json()
        assert body["error"] == "forbidden_by_cluster", body
        assert f"{account} may not list " in body["message"] and "(HTTP 403)" in body["message"], body

        submitted = hub.notebook(
            USER,
            token,
            "POST",
            "jobs",
            {
                "job_name": "half",
                "entry_point": "python train.py",
                "trainer_package": "faults",
                "mode": "collective",
                "pservers": 0,
                "trainers": 1,
            },
        )
        assert submitted.status_code == 503, submitted.text[:800]
        body = submitted.json()
        assert body["error"] == "forbidden_by_cluster", body
        # home_volume 'auto' reads the notebook's own pod first: the first thing refused is named
        # (a site with home_volume 'pvc' would be refused at the runtime ConfigMap's create instead)
        assert re.search(rf"{account} may not (get pods|create configmaps) in namespace {hub.namespace} \(HTTP 403\)", body["message"]), (
            body
        )
        assert "nothing was created" in body["message"], body
        assert ours(hub) == []
        assert not (home / ".paddle-jobs" / "half").exists()

    # the binding is back: the same server recovers by itself (the cache keeps retrying)
    def recovered() -> bool:
        config = hub.notebook(USER, token, "GET", "config").json()["backend"]
        assert config["ok"] is True and not config.get("forbidden"), config
        answer = hub.notebook(USER, token, "GET", "jobs")
        assert answer.status_code == 200, answer.text[:300]
        return True

    wait_for(recovered, "the notebook's backend to recover once the RoleBinding is back")
