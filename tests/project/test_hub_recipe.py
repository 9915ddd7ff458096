"""deploy/jupyterhub/jupyterhub_config.py as JupyterHub loads it, without a cluster: the shared
namespace by default, and with PADDLE_NBEXT_HUB_USER_NAMESPACES=1 one namespace per user whose
hook puts the shipped RBAC and the site ConfigMap into the user's namespace (the real hub runs it
in tests/cluster/test_real_node_jupyterhub_isolation.py).  And the CephFS homes the admin guide's
steps provision bind to the claims the recipe (and the chart's values) make, in both namespace
layouts: the PV controller's checks of a pre-bound volume, applied to provision_home.py's volume
and to KubeSpawner's own claim."""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import io
import re
import shlex
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


def test_the_hubs_cluster_role_allows_what_the_hook_does(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every API call of the recipe's hook (a first spawn and a second) is one that
    deploy/rbac/hub-user-namespaces.yaml grants the hub: a verb the ClusterRole lacks would fail
    the spawn on a real cluster only."""
    spawner_config = load(monkeypatch, USER_NAMESPACES="1", NAMESPACE="jhub").KubeSpawner
    calls: list[tuple[str, tuple[Any, ...]]] = []
    spawner = mock.Mock(namespace="paddle-alice", service_account="paddle-notebook", api=FakeApi(calls))
    with mock.patch("kubespawner.clients.shared_client", lambda kind: FakeApi(calls)):
        asyncio.run(spawner_config.modify_pod_hook(spawner, "the pod"))
    role = next(
        d for d in yaml.safe_load_all((ROOT / "deploy" / "rbac" / "hub-user-namespaces.yaml").read_text()) if d["kind"] == "ClusterRole"
    )
    granted = {(resource, verb) for rule in role["rules"] for resource in rule["resources"] for verb in rule["verbs"]}
    verbs = {"create": "create", "replace": "update", "read": "get", "patch": "patch", "delete": "delete"}
    needed: set[tuple[str, str]] = set()
    for name, _ in calls:
        verb, _, kind = name.partition("_namespaced_")
        needed.add((kind.replace("_", "") + "s", verbs[verb]))
    assert needed and needed <= granted, f"the hook needs {sorted(needed - granted)}, which the ClusterRole does not grant"


def test_every_setting_of_the_recipe_is_a_configurable_trait(monkeypatch: pytest.MonkeyPatch) -> None:
    """traitlets ignores a misspelt setting without a word; the recipe's are all real (both layouts)."""
    from jupyterhub.app import JupyterHub
    from jupyterhub.proxy import ConfigurableHTTPProxy
    from kubespawner import KubeSpawner  # type: ignore[import-untyped]

    classes = {cls.__name__: set(cls.class_traits(config=True)) for cls in (JupyterHub, ConfigurableHTTPProxy, KubeSpawner)}
    for settings in ({}, {"USER_NAMESPACES": "1", "HOME_STORAGE_CLASS": "cephfs-home", "HUB_CONNECT_URL": "http://hub:8081"}):
        config = load(monkeypatch, **settings)
        assert set(config) <= set(classes), f"sections of no known class: {set(config) - set(classes)}"
        unknown = [f"c.{section}.{name}" for section in config for name in config[section] if name not in classes[section]]
        assert not unknown, f"not configurable traits: {unknown}"


# ------------------------------------------------------------------ CephFS homes: do the claims bind?

ADMIN_GUIDE = ROOT / "docs" / "admin-guide.md"
HUB_SETTING = re.compile(r"\bPADDLE_NBEXT_HUB_(\w+)=([^\s`]*)")
BINARY_UNITS = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50}
DECIMAL_UNITS = {"k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "": 1}


def quantity(text: str) -> int:
    """Bytes of a Kubernetes storage quantity (`10Gi`, `100G`, `512M`)."""
    number, unit = re.fullmatch(r"(\d+)([A-Za-z]*)", text).groups()  # type: ignore[union-attr]
    return int(number) * (BINARY_UNITS.get(unit) or DECIMAL_UNITS[unit])


def provisioned_volume(*args: str) -> dict[str, Any]:
    """The PersistentVolume `deploy/cephfs/provision_home.py ARGS --dry-run` would apply."""
    spec = importlib.util.spec_from_file_location("provision_home", ROOT / "deploy" / "cephfs" / "provision_home.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    args = tuple("test-cluster" if arg == "<id>" else arg for arg in args)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert module.main([*args, "--dry-run"]) == 0
    volume: dict[str, Any] = next(d for d in yaml.safe_load_all(out.getvalue()) if d and d["kind"] == "PersistentVolume")
    return volume


def hub_claim(monkeypatch: pytest.MonkeyPatch, settings: dict[str, str], user: str = "alice") -> tuple[str, Any]:
    """(namespace, claim) that the recipe loaded with these PADDLE_NBEXT_HUB_* settings has
    KubeSpawner make for `user` (its own make_pvc, from the loaded configuration)."""
    from kubespawner.objects import make_pvc  # type: ignore[import-untyped]

    for name in ("HOME_STORAGE_CLASS", "HOME_ACCESS_MODE", "HOME_SIZE", "USER_NAMESPACES"):
        monkeypatch.delenv(f"PADDLE_NBEXT_HUB_{name}", raising=False)
    spawner = load(monkeypatch, **settings).KubeSpawner
    namespace = spawner.user_namespace_template if spawner.get("enable_user_namespaces") else spawner.namespace
    claim = make_pvc(
        name=spawner.pvc_name_template.format(username=user),
        storage_class=spawner.get("storage_class"),  # unset: KubeSpawner's default, None
        access_modes=spawner.storage_access_modes,
        selector=None,
        storage=spawner.storage_capacity,
        labels={},
        annotations={},
    )
    return namespace.format(username=user), claim


def binding_problems(namespace: str, claim: Any, volume: dict[str, Any]) -> list[str]:
    """Why the PV controller would not bind `claim` to the volume made for it (its checks of a
    volume pre-bound by claimRef: the claim's name, class, access modes and size)."""
    spec = volume["spec"]
    problems: list[str] = []
    if spec["claimRef"] != {"namespace": namespace, "name": claim.metadata.name}:
        problems.append(f"the volume is made for {spec['claimRef']}, the hub makes {namespace}/{claim.metadata.name}")
    if claim.spec.storage_class_name is None:
        problems.append("the claim names no class: the cluster's default class (if any) is given it, not the volume's")
    elif claim.spec.storage_class_name != spec["storageClassName"]:
        problems.append(f"class {claim.spec.storage_class_name!r} != the volume's {spec['storageClassName']!r}")
    if missing := set(claim.spec.access_modes) - set(spec["accessModes"]):
        problems.append(f"the claim asks for {sorted(missing)}, the volume offers {spec['accessModes']}")
    if quantity(claim.spec.resources.requests["storage"]) > quantity(spec["capacity"]["storage"]):
        problems.append(
            f"the claim asks for {claim.spec.resources.requests['storage']}, more than the volume's {spec['capacity']['storage']}"
        )
    return problems


def documented_user_namespace_steps() -> tuple[dict[str, str], list[str]]:
    """The hub's settings and provision_home.py's arguments as the admin guide's "One namespace
    per user with this recipe" block gives them."""
    section = ADMIN_GUIDE.read_text(encoding="utf-8").split("**One namespace per user with this recipe.**", 1)[1]
    block = section.split("```bash\n", 1)[1].split("```", 1)[0].replace("\\\n", " ")
    settings: dict[str, str] = {}
    provision: list[str] = []
    for line in block.splitlines():
        command = line.split("#", 1)[0]
        if "jupyterhub -f deploy/jupyterhub/jupyterhub_config.py" in command:
            settings = dict(HUB_SETTING.findall(command))
        if "deploy/cephfs/provision_home.py" in command:
            provision = shlex.split(command.split("provision_home.py", 1)[1])
    assert settings and provision, f"the block names the hub's command and provision_home.py:\n{block}"
    return {k: "jhub" if v.startswith("<") else v for k, v in settings.items()}, provision


def test_the_documented_user_namespace_cephfs_homes_bind(monkeypatch: pytest.MonkeyPatch) -> None:
    settings, provision = documented_user_namespace_steps()
    assert settings.get("USER_NAMESPACES") == "1"
    namespace, claim = hub_claim(monkeypatch, settings)
    assert binding_problems(namespace, claim, provisioned_volume(*provision)) == []


def test_the_documented_shared_namespace_cephfs_homes_bind(monkeypatch: pytest.MonkeyPatch) -> None:
    """Step 3 of the admin guide's "CephFS homes": the plain-hub settings, and the chart's values."""
    step = ADMIN_GUIDE.read_text(encoding="utf-8").split("3. **The hub**", 1)[1].split("\n\n", 1)[0]
    settings = dict(HUB_SETTING.findall(step))
    assert set(settings) == {"HOME_STORAGE_CLASS", "HOME_ACCESS_MODE"}, step
    volume = provisioned_volume("alice", "--namespace", "jhub", "--cluster-id", "<id>")
    namespace, claim = hub_claim(monkeypatch, {**settings, "NAMESPACE": "jhub"})
    assert binding_problems(namespace, claim, volume) == []

    from kubespawner.objects import make_pvc

    storage = yaml.safe_load((RECIPE / "values.yaml").read_text())["singleuser"]["storage"]
    chart_claim = make_pvc(
        name="claim-alice",
        storage_class=storage["dynamic"]["storageClass"],
        access_modes=storage["dynamic"]["storageAccessModes"],
        selector=None,
        storage=storage["capacity"],
        labels={},
        annotations={},
    )
    assert binding_problems("jhub", chart_claim, volume) == []


def test_the_binding_check_catches_the_claims_that_never_bind(monkeypatch: pytest.MonkeyPatch) -> None:
    """The recipe's defaults (ReadWriteOnce, no class) never bind to a CephFS home; an empty class
    setting asks for claims of no class (it used to be ignored), which bind to volumes of none."""
    volume = provisioned_volume("alice", "--namespace", "paddle-alice", "--cluster-id", "<id>")
    namespace, claim = hub_claim(monkeypatch, {"USER_NAMESPACES": "1"})
    problems = binding_problems(namespace, claim, volume)
    assert any("no class" in p for p in problems) and any("ReadWriteOnce" in p for p in problems), problems
    classless = provisioned_volume("alice", "--namespace", "paddle-alice", "--cluster-id", "<id>", "--storage-class", "")
    namespace, claim = hub_claim(monkeypatch, {"USER_NAMESPACES": "1", "HOME_STORAGE_CLASS": "", "HOME_ACCESS_MODE": "ReadWriteMany"})
    assert claim.spec.storage_class_name == ""
    assert binding_problems(namespace, claim, classless) == []
    namespace, claim = hub_claim(
        monkeypatch, {"NAMESPACE": "other", "HOME_STORAGE_CLASS": "cephfs-home", "HOME_ACCESS_MODE": "ReadWriteMany", "HOME_SIZE": "1Ti"}
    )
    problems = binding_problems(namespace, claim, volume)
    assert any("made for" in p for p in problems) and any("1Ti" in p for p in problems), problems
