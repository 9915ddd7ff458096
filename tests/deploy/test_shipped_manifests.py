"""The files an admin applies or hands to other charts, read as those tools read them: each breaker
of issue 44 fails here on the files shipped before the chart."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from .chart import CHART, REPO, SHIPPED, by_kind_and_name, shipped_text, template

DEPLOY = REPO / "deploy"


def documents(path: Path) -> list[dict]:  # type: ignore[type-arg]
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


@pytest.mark.usefixtures("helm_path")
@pytest.mark.parametrize("path", sorted(SHIPPED))
def test_each_shipped_manifest_is_the_charts_render(path: str) -> None:
    """Every fact once: deploy/rbac, deploy/policy and the site ConfigMap are the chart's templates
    rendered (regenerate: `PYTHONPATH=tests .venv/bin/python -m deploy.chart`)."""
    assert (REPO / path).read_text() == shipped_text(path), f"{path} is not the chart's render: regenerate it"


def test_the_notebook_account_is_shipped_with_its_role() -> None:
    """deploy/jupyterhub/values.yaml names singleuser.serviceAccountName; KubeSpawner needs the
    account to exist, so the notebook Role's file makes it (an admin without Helm applies only it)."""
    account = yaml.safe_load((DEPLOY / "jupyterhub" / "values.yaml").read_text())["singleuser"]["serviceAccountName"]
    kinds = {(d["kind"], d["metadata"]["name"]) for d in documents(DEPLOY / "rbac" / "notebook-role.yaml")}
    assert ("ServiceAccount", account) in kinds


def test_no_shipped_manifest_holds_a_placeholder() -> None:
    """What the docs say to apply as it is must be valid as it is: only home.yaml is a template
    (provision_home.py fills it in)."""
    templated = {DEPLOY / "cephfs" / "home.yaml"}
    found = [
        str(path.relative_to(REPO))
        for path in DEPLOY.rglob("*.yaml")
        if "node_modules" not in path.parts and CHART not in path.parents and path not in templated and "${" in path.read_text()
    ]
    assert not found, f"placeholders in {found}"


def test_ceph_csis_helm_route_sets_fs_group_policy_none_with_documented_keys() -> None:
    values = yaml.safe_load((DEPLOY / "cephfs" / "ceph-csi-values.yaml").read_text())
    assert values["CSIDriver"] == {"fsGroupPolicy": "None"}
    # only keys ceph-csi-cephfs's values.yaml documents
    assert set(values) <= {"CSIDriver", "externallyManagedConfigmap", "cephconf", "csiConfig", "configMapName", "cephConfConfigMapName"}


def test_ceph_csis_helm_route_gets_the_charts_ceph_conf() -> None:
    """ceph-csi's chart always makes ceph-config from its `cephconf`: the same text as ours."""
    ours = yaml.safe_load((CHART / "values.yaml").read_text())["cephfs"]["cephConfText"]
    theirs = yaml.safe_load((DEPLOY / "cephfs" / "ceph-csi-values.yaml").read_text())["cephconf"]
    assert theirs == ours


@pytest.mark.usefixtures("helm_path")
def test_the_charts_ceph_config_has_the_required_keyring_key() -> None:
    made = by_kind_and_name(template({"cephfs": {"enabled": True, "clusterID": "c", "monitors": ["10.0.0.1:6789"]}}))
    assert made["ConfigMap", "ceph-config"]["data"]["keyring"] == ""


def test_the_hubs_claim_name_is_the_one_home_volumes_are_bound_to() -> None:
    """KubeSpawner's default pvcNameTemplate is claim-{user_server}; provision_home.py binds each
    volume to claim-<username>: Zero to JupyterHub's values must say claim-{username}."""
    storage = yaml.safe_load((DEPLOY / "jupyterhub" / "values.yaml").read_text())["singleuser"]["storage"]
    template_name = storage["dynamic"].get("pvcNameTemplate")
    bound = next(d for d in documents(DEPLOY / "cephfs" / "home.yaml") if d["kind"] == "PersistentVolume")["spec"]["claimRef"]["name"]
    assert bound == "claim-${USERNAME}"
    assert template_name == "claim-{username}", f"singleuser.storage.dynamic.pvcNameTemplate is {template_name!r}"


def test_no_shipped_text_says_get_pods_is_only_for_auto() -> None:
    """pvc and cephfs read the notebook pod too (its uid, gid and fsGroup)."""
    wrong = re.compile(r"without reading the pod|drop \"get pods\"|home_volume=auto reads the notebook's own pod", re.I)
    paths = [DEPLOY / "jupyterhub" / "values.yaml", DEPLOY / "rbac" / "notebook-role.yaml", CHART / "values.yaml"]
    said = [str(p.relative_to(REPO)) for p in paths if wrong.search(p.read_text())]
    assert not said, f"{said} say `get pods` is needed only for home_volume auto"
