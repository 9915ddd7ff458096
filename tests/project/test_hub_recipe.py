"""deploy/jupyterhub/jupyterhub_config.py as JupyterHub loads it, without a cluster: the shared
namespace by default, and with PADDLE_NBEXT_HUB_USER_NAMESPACES=1 one namespace per user whose
hook puts the shipped RBAC and the site ConfigMap into the user's namespace (the real hub runs it
in tests/cluster/test_real_node_jupyterhub_isolation.py)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
import yaml
from traitlets.config import Config
from traitlets.config.loader import PyFileConfigLoader

pytest.importorskip("kubespawner")
from kubernetes_asyncio.client.rest import ApiException  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
RECIPE = ROOT / "deploy" / "jupyterhub"


def load(monkeypatch: pytest.MonkeyPatch, **settings: str) -> Config:
    for name, value in settings.items():
        monkeypatch.setenv(f"PADDLE_NBEXT_HUB_{name}", value)
    return PyFileConfigLoader("jupyterhub_config.py", path=str(RECIPE)).load_config()


class FakeApi:
    """Records every call; answers 409 to the first create of each Role and RoleBinding (as on a
    second spawn) and the site ConfigMap to a read."""

    def __init__(self, calls: list[tuple[str, tuple[Any, ...]]]) -> None:
        self.calls = calls

    def __getattr__(self, name: str) -> Any:
        async def call(*args: Any) -> Any:
            self.calls.append((name, args))
            if name == "read_namespaced_config_map":
                return mock.Mock(metadata=mock.Mock(labels={"app.kubernetes.io/name": "paddle-nbext"}), data={"site.json": "{}"})
            if name.startswith("create_namespaced_role") and [c[0] for c in self.calls].count(name) % 2 == 1:
                raise ApiException(status=409)
            return None

        return call


def test_the_shared_namespace_is_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PADDLE_NBEXT_HUB_USER_NAMESPACES", raising=False)
    config = load(monkeypatch, NAMESPACE="jhub")
    assert config.KubeSpawner.namespace == "jhub"
    assert "enable_user_namespaces" not in config.KubeSpawner and "modify_pod_hook" not in config.KubeSpawner


def test_user_namespaces_provision_the_shipped_rbac_and_site_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    config = load(monkeypatch, USER_NAMESPACES="1", NAMESPACE="jhub")
    spawner_config = config.KubeSpawner
    assert spawner_config.enable_user_namespaces is True
    assert spawner_config.user_namespace_template == "paddle-{username}"
    assert spawner_config.user_namespace_labels == {"paddle-nbext/jobs-policy": "enforced"}

    calls: list[tuple[str, tuple[Any, ...]]] = []
    spawner = mock.Mock(namespace="paddle-alice", service_account="paddle-notebook", api=FakeApi(calls))
    with mock.patch("kubespawner.clients.shared_client", lambda kind: FakeApi(calls)):
        assert asyncio.run(spawner_config.modify_pod_hook(spawner, "the pod")) == "the pod"

    made = {
        (name, args[-1]["kind"] if "kind" in args[-1] else "", args[-1]["metadata"]["name"])
        for name, args in calls
        if name.startswith("create")
    }
    assert made == {
        ("create_namespaced_service_account", "", "paddle-notebook"),
        ("create_namespaced_service_account", "ServiceAccount", "paddle-nbext-master"),
        ("create_namespaced_role", "Role", "paddle-nbext"),
        ("create_namespaced_role", "Role", "paddle-nbext-master"),
        ("create_namespaced_role_binding", "RoleBinding", "paddle-nbext"),
        ("create_namespaced_role_binding", "RoleBinding", "paddle-nbext-master"),
        ("create_namespaced_config_map", "", "paddle-nbext-site"),
    }
    assert all(args[0] == "paddle-alice" for name, args in calls if name.startswith("create"))
    shipped = {
        (d["kind"], d["metadata"]["name"]): d
        for d in yaml.safe_load_all((ROOT / "deploy" / "rbac" / "notebook-role.yaml").read_text())
        if d
    }
    roles = [args[-1] for name, args in calls if name in ("create_namespaced_role", "replace_namespaced_role")]
    assert any(role["rules"] == shipped["Role", "paddle-nbext"]["rules"] for role in roles)
    # A Role already there (a second spawn) is replaced by the shipped one.
    assert [args[0] for name, args in calls if name == "replace_namespaced_role"] == ["paddle-nbext"]
    bindings = {args[-1]["metadata"]["name"]: args[-1]["subjects"] for name, args in calls if name == "create_namespaced_role_binding"}
    assert bindings == {
        "paddle-nbext": [{"kind": "ServiceAccount", "name": "paddle-notebook", "namespace": "paddle-alice"}],
        "paddle-nbext-master": [{"kind": "ServiceAccount", "name": "paddle-nbext-master", "namespace": "paddle-alice"}],
    }
    assert ("read_namespaced_config_map", ("paddle-nbext-site", "jhub")) in calls
