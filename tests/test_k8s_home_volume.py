"""Which volume job pods mount as the user's home, from sample notebook pod specs (as the API
returns them) and from the pvc / cephfs settings."""
from __future__ import annotations

import pytest

from paddle_nbext_server.backends.kubernetes import home_volume as homes


def notebook_pod(volume: dict, mount_path: str = "/home/jovyan", sub_path: str | None = None) -> dict:
    mount = {"name": "home", "mountPath": mount_path}
    if sub_path:
        mount["subPath"] = sub_path
    return {
        "metadata": {"name": "jupyter-alice"},
        "spec": {
            "containers": [
                {"name": "notebook", "volumeMounts": [
                    {"name": "kube-api-access", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}, mount]},
            ],
            "volumes": [{"name": "home", **volume},
                        {"name": "kube-api-access", "projected": {"sources": []}}],
        },
    }  # fmt: skip


def test_auto_copies_a_pvc_home():
    home = homes.from_pod(notebook_pod({"persistentVolumeClaim": {"claimName": "claim-alice"}}), "/home/jovyan")
    assert home.volume() == {"name": "home", "persistentVolumeClaim": {"claimName": "claim-alice"}}
    assert home.mount() == {"name": "home", "mountPath": "/home/jovyan"}


def test_auto_copies_a_cephfs_home_with_its_secret_reference():
    cephfs = {"cephfs": {"monitors": ["10.0.0.1:6789"], "path": "/homes/alice", "user": "jhub", "secretRef": {"name": "ceph-secret"}}}
    home = homes.from_pod(notebook_pod(cephfs), "/home/jovyan")
    assert home.volume()["cephfs"] == cephfs["cephfs"]


def test_auto_copies_a_hostpath_mounted_above_the_home_with_its_subpath():
    pod = notebook_pod({"hostPath": {"path": "/srv/homes", "type": "Directory"}}, mount_path="/home", sub_path="users")
    home = homes.from_pod(pod, "/home/jovyan")
    assert home.volume() == {"name": "home", "hostPath": {"path": "/srv/homes", "type": "Directory"}}
    assert home.mount() == {"name": "home", "mountPath": "/home", "subPath": "users"}


def test_auto_refuses_an_emptydir_home_and_names_the_setting():
    with pytest.raises(homes.HomeVolumeError, match="emptyDir.*home_volume"):
        homes.from_pod(notebook_pod({"emptyDir": {}}), "/home/jovyan")


def test_auto_without_a_home_mount_names_the_fix():
    with pytest.raises(homes.HomeVolumeError, match="no volume of pod jupyter-alice is mounted at the home path /home/bob"):
        homes.from_pod(notebook_pod({"persistentVolumeClaim": {"claimName": "x"}}), "/home/bob")


def test_pvc_template():
    home = homes.from_pvc_template("claim-{username}", "alice", "/home/jovyan")
    assert home.volume() == {"name": "home", "persistentVolumeClaim": {"claimName": "claim-alice"}}
    with pytest.raises(homes.HomeVolumeError, match="home_pvc_template"):
        homes.from_pvc_template("claim-{user}", "alice", "/home/jovyan")


def test_cephfs_source_takes_a_secret_by_name_never_a_key():
    home = homes.from_cephfs({"monitors": ["m1:6789", "m2:6789"], "path": "/volumes/{username}", "user": "jhub",
                              "secret_ref": "ceph-secret"}, "alice", "/home/jovyan")
    assert home.volume()["cephfs"] == {"monitors": ["m1:6789", "m2:6789"], "path": "/volumes/alice", "user": "jhub",
                                       "secretRef": {"name": "ceph-secret"}}
    with pytest.raises(homes.HomeVolumeError, match="never the key"):
        homes.from_cephfs({"monitors": ["m1:6789"], "key": "AQB..."}, "alice", "/home/jovyan")
    with pytest.raises(homes.HomeVolumeError, match="monitors"):
        homes.from_cephfs({"path": "/x"}, "alice", "/home/jovyan")
