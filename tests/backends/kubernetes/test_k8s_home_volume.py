"""Which volume job pods mount as the user's home, from sample notebook pod specs (as the API
returns them) and from the pvc / cephfs settings."""

from __future__ import annotations

import re
from typing import Any

import pytest

from paddle_nbext_server.backends.kubernetes.build import home_volume as homes
from paddle_nbext_server.backends.kubernetes.build import usernames


def notebook_pod(volume: dict[str, Any], mount_path: str = "/home/jovyan", sub_path: str | None = None) -> dict[str, Any]:
    mount = {"name": "home", "mountPath": mount_path}
    if sub_path:
        mount["subPath"] = sub_path
    return {
        "metadata": {"name": "jupyter-alice"},
        "spec": {
            "containers": [
                {
                    "name": "notebook",
                    "volumeMounts": [{"name": "kube-api-access", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}, mount],
                },
            ],
            "volumes": [{"name": "home", **volume}, {"name": "kube-api-access", "projected": {"sources": []}}],
        },
    }


def test_auto_copies_a_pvc_home() -> None:
    home = homes.from_pod(notebook_pod({"persistentVolumeClaim": {"claimName": "claim-alice"}}), "/home/jovyan")
    assert home.volume() == {"name": "home", "persistentVolumeClaim": {"claimName": "claim-alice"}}
    assert home.mount() == {"name": "home", "mountPath": "/home/jovyan"}


def test_auto_copies_a_cephfs_home_with_its_secret_reference() -> None:
    cephfs = {"cephfs": {"monitors": ["10.0.0.1:6789"], "path": "/homes/alice", "user": "jhub", "secretRef": {"name": "ceph-secret"}}}
    home = homes.from_pod(notebook_pod(cephfs), "/home/jovyan")
    assert home.volume()["cephfs"] == cephfs["cephfs"]


def test_auto_copies_a_hostpath_mounted_above_the_home_with_its_subpath() -> None:
    pod = notebook_pod({"hostPath": {"path": "/srv/homes", "type": "Directory"}}, mount_path="/home", sub_path="users")
    home = homes.from_pod(pod, "/home/jovyan")
    assert home.volume() == {"name": "home", "hostPath": {"path": "/srv/homes", "type": "Directory"}}
    assert home.mount() == {"name": "home", "mountPath": "/home", "subPath": "users"}


def test_auto_refuses_an_emptydir_home_and_names_the_setting() -> None:
    with pytest.raises(homes.HomeVolumeError, match="emptyDir.*home_volume"):
        homes.from_pod(notebook_pod({"emptyDir": {}}), "/home/jovyan")


def test_auto_without_a_home_mount_names_the_fix() -> None:
    with pytest.raises(homes.HomeVolumeError, match="no volume of pod jupyter-alice is mounted at the home path /home/bob"):
        homes.from_pod(notebook_pod({"persistentVolumeClaim": {"claimName": "x"}}), "/home/bob")


def test_pvc_template() -> None:
    home = homes.from_pvc_template("claim-{username}", "alice", "/home/jovyan")
    assert home.volume() == {"name": "home", "persistentVolumeClaim": {"claimName": "claim-alice"}}
    with pytest.raises(homes.HomeVolumeError, match="home_pvc_template"):
        homes.from_pvc_template("claim-{user}", "alice", "/home/jovyan")


def test_cephfs_source_takes_a_secret_by_name_never_a_key() -> None:
    home = homes.from_cephfs(
        {"monitors": ["m1:6789", "m2:6789"], "path": "/volumes/{username}", "user": "jhub", "secret_ref": "ceph-secret"},
        "alice",
        "/home/jovyan",
    )
    assert home.volume()["cephfs"] == {
        "monitors": ["m1:6789", "m2:6789"],
        "path": "/volumes/alice",
        "user": "jhub",
        "secretRef": {"name": "ceph-secret"},
    }
    with pytest.raises(homes.HomeVolumeError, match="never the key"):
        homes.from_cephfs({"monitors": ["m1:6789"], "key": "AQB..."}, "alice", "/home/jovyan")
    with pytest.raises(homes.HomeVolumeError, match="monitors"):
        homes.from_cephfs({"path": "/x"}, "alice", "/home/jovyan")


# ---------------------------------------------------------------- {username} as KubeSpawner spells it
#
# Derived by hand from the two schemes (usernames.py's docstring); hashes are the first 8 hex
# digits of the SHA-256 of the raw name's UTF-8 bytes, computed with `sha256sum`.
#   safe:   a valid DNS label of <= 48 characters without "--" stays; anything else becomes
#           lower(name) with each run of other characters -> "-", stripped of "-", cut to 37,
#           "x-" in front when it starts with a digit ("x" when empty), then "---<hash>".
#   escape: each character outside a-z0-9 -> "-" + hex of each UTF-8 byte (no zero padding),
#           then lower-cased.
LONG_EMAIL = "firstname.middlename.lastname@department.example.org"  # 52 characters
USERNAME_TABLE = [
    # name, safe, escape
    ("alice", "alice", "alice"),
    ("Alice", "alice---3bc51062", "-41lice"),
    ("alice@example.org", "alice-example-org---7a64adf2", "alice-40example-2eorg"),
    ("alice.smith", "alice-smith---63425827", "alice-2esmith"),
    ("alice_smith", "alice-smith---a073a3b2", "alice-5fsmith"),
    ("alice-smith", "alice-smith", "alice-2dsmith"),  # already valid: kept by "safe"
    ("bob--x", "bob-x---ee9b647c", "bob-2d-2dx"),  # "--" is reserved for joined slugs
    ("2fast", "x-2fast---323a2d31", "2fast"),  # a name must start with a letter
    ("a\tb", "a-b---894891f8", "a-9b"),  # hex without zero padding
    ("José", "jos---24c2ab65", "-4aos-c3-a9"),  # é is C3 A9 in UTF-8
    ("张伟", "x---a3a0bafd", "-e5-bc-a0-e4-bc-9f"),  # nothing readable is left: "x"
    ("a" * 48, "a" * 48, "a" * 48),  # the longest name kept as it is
    ("a" * 49, "a" * 37 + "---8f9bec6a", "a" * 49),
    (LONG_EMAIL, "firstname-middlename-lastname-departm---9d468c9b", "firstname-2emiddlename-2elastname-40department-2eexample-2eorg"),
    # KubeSpawner cuts to 35 before adding "x-", which can leave a "-" before the "---"
    ("2" * 34 + ".bob", "x-" + "2" * 34 + "----739cf28d", "2" * 34 + "-2ebob"),
]


@pytest.mark.parametrize(("name", "safe", "escaped"), USERNAME_TABLE, ids=[repr(row[0])[:24] for row in USERNAME_TABLE])
def test_username_schemes_match_kubespawner(name: str, safe: str, escaped: str) -> None:
    assert usernames.safe_slug(name) == safe
    assert usernames.escape_slug(name) == escaped
    assert usernames.expand("{username}", name, "safe") == safe
    assert usernames.expand("{username}", name, "escape") == escaped
    # whatever the scheme, the explicit forms are there too
    assert usernames.expand("{safe_username}|{escaped_username}|{unescaped_username}", name, "escape") == (f"{safe}|{escaped}|{name}")


@pytest.mark.parametrize(("name", "safe", "_"), USERNAME_TABLE, ids=[repr(row[0])[:24] for row in USERNAME_TABLE])
def test_safe_slugs_are_valid_object_names(name: str, safe: str, _: str) -> None:
    assert len(safe) <= 48 and re.fullmatch(r"[a-z]([a-z0-9-]*[a-z0-9])?", safe), safe


def test_user_server_for_default_and_named_servers() -> None:
    """{user_server} (KubeSpawner's own PVC template is `claim-{user_server}`)."""
    assert usernames.expand("claim-{user_server}", "alice") == "claim-alice"
    assert usernames.expand("claim-{user_server}", "alice", "safe", "gpu") == "claim-alice--gpu"
    assert usernames.expand("claim-{user_server}", "Alice", "escape", "GPU") == "claim--41lice---47-50-55"
    # a 47- or 48-character slug takes the joined form even for the default server:
    # 17 readable characters per name, "x" for the empty server name, hash of name + 0xFF + ""
    assert usernames.expand("claim-{user_server}", "a" * 47) == "claim-" + "a" * 17 + "--x---b191b19d"
    assert usernames.expand("claim-{user_server}", LONG_EMAIL) == "claim-firstname-middlen--x---75b28308"
    assert usernames.expand("claim-{username}", LONG_EMAIL) == "claim-firstname-middlename-lastname-departm---9d468c9b"


def test_a_trailing_dash_from_an_empty_server_name_is_dropped() -> None:
    assert usernames.expand("claim-{username}-{servername}", "alice") == "claim-alice"
    assert usernames.expand("claim-{escaped_user_server}", "alice", "escape") == "claim-alice"
    assert usernames.expand("claim-{username}-", "alice") == "claim-alice-"  # the template's own "-" stays


def test_unknown_scheme_and_placeholders_are_refused() -> None:
    with pytest.raises(ValueError, match="safe, escape"):
        usernames.expand("{username}", "alice", "lower")  # type: ignore[arg-type]
    with pytest.raises(KeyError):
        usernames.expand("claim-{userid}", "alice")


def test_pvc_and_cephfs_templates_use_the_scheme() -> None:
    home = homes.from_pvc_template("claim-{username}", "alice@example.org", "/home/jovyan")
    assert home.source == {"persistentVolumeClaim": {"claimName": "claim-alice-example-org---7a64adf2"}}
    home = homes.from_pvc_template("claim-{username}", "Alice", "/home/jovyan", scheme="escape")
    assert home.source == {"persistentVolumeClaim": {"claimName": "claim--41lice"}}
    ceph = {"monitors": ["m1:6789"], "path": "/volumes/jupyter/{username}"}
    assert homes.from_cephfs(ceph, "José", "/home/jovyan").source["cephfs"]["path"] == "/volumes/jupyter/jos---24c2ab65"
    assert homes.from_cephfs(ceph, "José", "/home/jovyan", scheme="escape").source["cephfs"]["path"] == ("/volumes/jupyter/-4aos-c3-a9")
    with pytest.raises(homes.HomeVolumeError, match=r"home_pvc_template.*\{user_server\}"):
        homes.from_pvc_template("claim-{userid}", "alice", "/home/jovyan")
    with pytest.raises(homes.HomeVolumeError, match=r"cephfs\['path'\]"):
        homes.from_cephfs({**ceph, "path": "/v/{user}"}, "alice", "/home/jovyan")


def test_job_pods_run_as_the_notebook_container_user_with_the_pods_groups() -> None:
    """KubeSpawner: uid on the container, fsGroup on the pod; the container wins over the pod."""
    pod = {
        "spec": {
            "securityContext": {"runAsUser": 0, "fsGroup": 100, "supplementalGroups": [100, 2000], "seccompProfile": {}},
            "containers": [
                {"name": "sidecar", "securityContext": {"runAsUser": 7}},
                {
                    "name": "notebook",
                    "securityContext": {"runAsUser": 1000, "runAsGroup": 100, "privileged": False},
                    "volumeMounts": [{"name": "home", "mountPath": "/home/jovyan"}],
                },
            ],
        }
    }
    assert homes.identity_of(pod, "/home/jovyan") == {
        "runAsUser": 1000,
        "runAsGroup": 100,
        "fsGroup": 100,
        "supplementalGroups": [100, 2000],
    }
    assert homes.identity_of({"spec": {"containers": [{"name": "n"}]}}, "/home/jovyan") == {}
