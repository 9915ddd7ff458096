"""A notebook user on the real node, set up as a site admin would: the namespace's shipped RBAC,
the notebook ServiceAccount's token, the user's home bound through ``claim-{username}``, and the
``jupyter_server_config.json`` settings of the ``kubernetes`` backend.  Shared by the real-node
tests and the real-node benchmark, so both measure the same path."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client

from support.realnode_site import RealNodeSite

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
NOTEBOOK_ACCOUNT = "paddle-notebook"  # Zero to JupyterHub's singleuser.serviceAccountName in the shipped RoleBinding


def shipped(name: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((REPO / "deploy" / "rbac" / name).read_text()) if d]


def apply_shipped_rbac(api: client.ApiClient, namespace: str) -> None:
    """deploy/rbac/notebook-role.yaml and master-role.yaml as an admin applies them (the first
    holds the notebook's ServiceAccount, NOTEBOOK_ACCOUNT)."""
    core, rbac = client.CoreV1Api(api), client.RbacAuthorizationV1Api(api)
    for doc in shipped("notebook-role.yaml") + shipped("master-role.yaml"):
        doc["metadata"]["namespace"] = namespace
        creators: dict[str, Callable[[str, Any], object]] = {
            "ServiceAccount": core.create_namespaced_service_account,
            "Role": rbac.create_namespaced_role,
            "RoleBinding": rbac.create_namespaced_role_binding,
        }
        creators[doc["kind"]](namespace, doc)


@dataclass
class NotebookSetup:
    home: Path
    settings: dict[str, Any]


def prepare_notebook(
    site: RealNodeSite, api: client.ApiClient, namespace: str, token_kubeconfig: Path, user: str, home: Path | None = None
) -> NotebookSetup:
    """The user's home (the examples copied in, owned by the notebook uid) bound as
    ``claim-<user>``, and the server settings; the token's kubeconfig is copied beside the home,
    readable by the notebook uid only.  A ``home`` given is one already bound as that claim (a
    CephFS home the recipe provisioned); otherwise a ``local`` volume on the node stands in."""
    if home is None:
        home = site.new_home(user)
        site.home_claim(api, namespace, f"claim-{user}", home)
    shutil.copytree(EXAMPLES, home / "examples")
    private = site.homes / f"{home.name}.kubeconfig"
    shutil.copyfile(token_kubeconfig, private)
    for path in [home, *home.rglob("*"), private]:
        os.lchown(path, site.uid, site.gid)
    private.chmod(0o600)
    settings = {
        "PaddleNbext": {"backend": "kubernetes"},
        "KubernetesBackend": {
            "kubeconfig": str(private),
            "namespace": namespace,
            "home_volume": "pvc",
            "home_pvc_template": "claim-{username}",
            "home_path": str(home),
            "default_image": site.image,
            "image_pull_policy": site.pull_policy,
            # The uid and groups by the settings a server outside a pod needs (a notebook pod's own are read instead).
            "run_as_user": site.uid,
            "run_as_group": site.gid,
            "fs_group": site.gid,
            **site.placement(),
        },
    }
    return NotebookSetup(home, settings)
