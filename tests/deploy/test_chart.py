"""paddle-nbext's chart as `helm lint` and `helm template` see it, for the value sets a site uses:
the objects users rely on (names, verbs, accounts), required values and the schema's refusals."""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml

from .chart import CHART, REPO, HelmFailed, by_kind_and_name, helm, objects, template

pytestmark = pytest.mark.usefixtures("helm_path")

CEPH: dict[str, Any] = {"cephfs": {"enabled": True, "clusterID": "ceph-a", "monitors": ["10.0.0.11:6789", "v2:10.0.0.12:3300"]}}


def rules(role: dict[str, Any]) -> dict[tuple[str, str], set[str]]:
    return {
        (group, resource): set(rule["verbs"]) for rule in role["rules"] for group in rule["apiGroups"] for resource in rule["resources"]
    }


def test_helm_lint_passes_for_defaults_and_every_part() -> None:
    assert "0 chart(s) failed" in helm("lint", str(CHART))
    everything = ["--set", "queues.enabled=true,queues.clusterQueueReader=true,volcano.enabled=true,userNamespaces.enabled=true"]
    ceph = ["--set", "cephfs.enabled=true,cephfs.clusterID=ceph-a,cephfs.monitors={10.0.0.11:6789}"]
    assert "0 chart(s) failed" in helm("lint", str(CHART), *everything, *ceph)


def test_defaults_make_the_notebook_and_master_accounts_and_their_roles() -> None:
    made = by_kind_and_name(template())
    assert ("ServiceAccount", "paddle-notebook") in made, "the notebook pods' account (KubeSpawner names it, creates none)"
    assert ("ServiceAccount", "paddle-nbext-master") in made
    notebook = rules(made["Role", "paddle-nbext"])
    assert notebook["", "pods"] == {"get", "list", "watch"}
    assert notebook["batch", "jobs"] == {"create", "list", "watch", "patch", "delete"}
    assert made["RoleBinding", "paddle-nbext"]["subjects"] == [{"kind": "ServiceAccount", "name": "paddle-notebook"}]
    assert made["RoleBinding", "paddle-nbext-master"]["subjects"] == [{"kind": "ServiceAccount", "name": "paddle-nbext-master"}]
    assert ("ValidatingAdmissionPolicy", "paddle-nbext-jobs") in made
    assert not any(kind in ("ClusterRole", "ClusterRoleBinding") for kind, _ in made), "no cluster-wide rights by default"
    assert not any(name.startswith("ceph") for _, name in made), "CephFS is off by default"


def test_the_account_the_hub_values_name_is_made() -> None:
    """Zero to JupyterHub's singleuser.serviceAccountName (deploy/jupyterhub/values.yaml) exists in
    the render: else the notebook pods never start."""
    hub = yaml.safe_load((REPO / "deploy" / "jupyterhub" / "values.yaml").read_text())
    account = hub["singleuser"]["serviceAccountName"]
    made = by_kind_and_name(template())
    assert ("ServiceAccount", account) in made
    assert made["RoleBinding", "paddle-nbext"]["subjects"][0]["name"] == account


def test_site_settings_are_the_values_and_name_the_masters_account() -> None:
    site = by_kind_and_name(template())["ConfigMap", "paddle-nbext-site"]
    settings = json.loads(site["data"]["paddle_nbext_site.json"])
    assert settings["PaddleNbext"] == {"backend": "kubernetes"}
    assert settings["KubernetesBackend"]["master_service_account_name"] == "paddle-nbext-master"
    assert settings["KubernetesBackend"]["home_volume"] == "auto"
    per_job = by_kind_and_name(template({"master": {"perJob": True}}))
    assert (
        json.loads(per_job["ConfigMap", "paddle-nbext-site"]["data"]["paddle_nbext_site.json"])["KubernetesBackend"][
            "master_service_account_name"
        ]
        == ""
    )
    assert ("ServiceAccount", "paddle-nbext-master") not in per_job and ("Role", "paddle-nbext-per-job-master") in per_job


def test_cephfs_on_makes_ceph_csis_configmaps_with_no_placeholder() -> None:
    rendered = template(CEPH)
    assert "${" not in rendered
    made = by_kind_and_name(rendered)
    config = made["ConfigMap", "ceph-csi-config"]
    assert config["metadata"]["namespace"] == "ceph-csi-cephfs"
    assert json.loads(config["data"]["config.json"]) == [{"clusterID": "ceph-a", "monitors": ["10.0.0.11:6789", "v2:10.0.0.12:3300"]}]
    ceph_conf = made["ConfigMap", "ceph-config"]["data"]
    assert set(ceph_conf) == {"ceph.conf", "keyring"}, "ceph-csi's manifest calls `keyring` required"
    assert "auth_client_required = cephx" in ceph_conf["ceph.conf"]
    assert made["ConfigMap", "ceph-csi-encryption-kms-config"]["data"] == {"config.json": "{}"}
    hand = by_kind_and_name(template({"cephfs": {**CEPH["cephfs"], "namespace": "default", "csiDriver": True, "subvolumeGroup": "csi"}}))
    assert all(o["metadata"].get("namespace") == "default" for (kind, _), o in hand.items() if kind == "ConfigMap" and "ceph" in _)
    assert hand["CSIDriver", "cephfs.csi.ceph.com"]["spec"]["fsGroupPolicy"] == "None"
    assert json.loads(hand["ConfigMap", "ceph-csi-config"]["data"]["config.json"])[0]["cephFS"] == {"subvolumeGroup": "csi"}


def test_cephfs_on_without_cluster_id_or_monitors_is_refused_by_name() -> None:
    with pytest.raises(HelmFailed, match="clusterID"):
        template({"cephfs": {"enabled": True, "monitors": ["10.0.0.11:6789"]}})
    with pytest.raises(HelmFailed, match="monitors"):
        template({"cephfs": {"enabled": True, "clusterID": "ceph-a"}})


def test_queues_and_volcano_add_their_roles_bound_to_the_notebook() -> None:
    made = by_kind_and_name(template({"queues": {"enabled": True, "clusterQueueReader": True}, "volcano": {"enabled": True}}))
    assert rules(made["Role", "paddle-nbext-queues"])["kueue.x-k8s.io", "workloads"] == {"list", "watch", "patch"}
    assert rules(made["Role", "paddle-nbext-volcano"])["scheduling.volcano.sh", "podgroups"] == {"create", "delete", "list", "watch"}
    for binding in ("paddle-nbext-queues", "paddle-nbext-volcano"):
        assert made["RoleBinding", binding]["subjects"][0]["name"] == "paddle-notebook"
    reader = made["ClusterRoleBinding", "paddle-nbext-queue-reader"]["subjects"]
    assert reader == [{"kind": "ServiceAccount", "name": "paddle-notebook", "namespace": "jupyter"}]


def test_user_namespaces_give_the_hub_its_cluster_role() -> None:
    made = by_kind_and_name(template({"userNamespaces": {"enabled": True, "hubNamespace": "jhub"}}))
    assert rules(made["ClusterRole", "paddle-nbext-hub-user-namespaces"])["", "namespaces"] == {"create"}
    subjects = made["ClusterRoleBinding", "paddle-nbext-hub-user-namespaces"]["subjects"]
    assert subjects == [{"kind": "ServiceAccount", "name": "hub", "namespace": "jhub"}]


@pytest.mark.parametrize(
    ("values", "field"),
    [
        ({"notebook": {"serviceAccount": {"name": "Paddle_Notebook", "create": True}}}, "notebook.serviceAccount.name"),
        ({"cephfs": {"enabled": "yes"}}, "cephfs.enabled"),
        ({"cephfs": {"enabled": True, "clusterID": "a", "monitors": ["not an address"]}}, "cephfs.monitors"),
        ({"site": {"config": {"PaddleNbext": {}, "KubernetesBackend": {"home_volume": "nfs"}}}}, "home_volume"),
        ({"queue": {"enabled": True}}, "queue"),
    ],
)
def test_a_bad_value_is_refused_by_the_schema_naming_the_field(values: dict[str, Any], field: str) -> None:
    with pytest.raises(HelmFailed) as refused:
        template(values)
    assert "values don't meet the specifications of the schema" in str(refused.value)
    assert field.split(".")[-1] in str(refused.value), str(refused.value)


def test_no_render_has_a_placeholder_or_a_namespace_of_its_own_for_namespaced_objects() -> None:
    rendered = template({"queues": {"enabled": True, "clusterQueueReader": True}, "volcano": {"enabled": True}, **CEPH})
    assert "${" not in rendered
    for obj in objects(rendered):
        if obj["kind"] in ("ServiceAccount", "Role", "RoleBinding") or obj["metadata"]["name"] == "paddle-nbext-site":
            assert "namespace" not in obj["metadata"], f"{obj['kind']} {obj['metadata']['name']}: Helm puts it in the release's namespace"


def test_chart_readme_names_every_value_section() -> None:
    readme = (CHART / "README.md").read_text()
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    missing = [key for key in values if f"`{key}" not in readme]
    assert not missing, f"deploy/chart/README.md does not describe {missing}"
