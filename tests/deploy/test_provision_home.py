"""deploy/cephfs/provision_home.py without a live cluster: monitor addresses in every form Ceph
prints, dry runs that touch nothing, ceph-csi's cluster objects from the chart, and a second run
that changes nothing and says so."""

from __future__ import annotations

import importlib.util
import json
import os
import stat
import sys
import types
from pathlib import Path
from typing import Any

import pytest
import yaml

from .chart import REPO

SCRIPT = REPO / "deploy" / "cephfs" / "provision_home.py"


def load() -> types.ModuleType:
    spec = importlib.util.spec_from_file_location("provision_home", SCRIPT)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


provision = load()


@pytest.mark.parametrize(
    ("given", "kept"),
    [
        ("1.2.3.4:6789", "1.2.3.4:6789"),
        ("v1:1.2.3.4:6789/0", "1.2.3.4:6789"),
        ("v2:1.2.3.4:3300/0", "v2:1.2.3.4:3300"),
        ("[v2:1.2.3.4:3300/0,v1:1.2.3.4:6789/0]", "1.2.3.4:6789"),
        ("[v2:1.2.3.4:3300/0]", "v2:1.2.3.4:3300"),
    ],
)
def test_a_monitor_in_any_form_ceph_prints_becomes_one_address(given: str, kept: str) -> None:
    assert provision.monitor(given) == kept


def test_monitors_are_split_on_spaces_and_commas_but_not_inside_a_vector() -> None:
    given = "[v2:10.0.0.1:3300/0,v1:10.0.0.1:6789/0], 10.0.0.2:6789 v2:10.0.0.3:3300/0"
    assert provision.monitors_given(given) == ["10.0.0.1:6789", "10.0.0.2:6789", "v2:10.0.0.3:3300"]
    with pytest.raises(provision.ProvisionError, match="not a monitor address"):
        provision.monitors_given("mon-a")


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = provision.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_a_users_dry_run_needs_no_ceph_and_no_cluster(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    args = ("alice", "--namespace", "jhub", "--cluster-id", "ceph-a", "--kubectl", str(tmp_path / "no-kubectl"))
    code, out, err = run(capsys, *args, "--ceph-conf", str(tmp_path / "none.conf"), "--csi-namespace", "default", "--dry-run")
    assert code == 0, err
    secret, volume = yaml.safe_load_all(out)
    assert secret["metadata"]["namespace"] == "default" and "<the key of client.home-alice>" in secret["stringData"]["userKey"]
    assert volume["spec"]["claimRef"] == {"namespace": "jhub", "name": "claim-alice"}
    assert volume["spec"]["csi"]["nodeStageSecretRef"]["namespace"] == "default"


@pytest.mark.usefixtures("helm_path")
def test_the_cluster_objects_dry_run_works_offline_from_the_chart(capsys: pytest.CaptureFixture[str], helm_path: Path) -> None:
    monitors = "[v2:10.0.0.1:3300/0,v1:10.0.0.1:6789/0] v2:10.0.0.2:3300/0"
    code, out, err = run(capsys, "--cluster", "--cluster-id", "ceph-a", "--monitors", monitors, "--helm", str(helm_path), "--dry-run")
    assert code == 0, err
    assert "${" not in out
    made = {(d["kind"], d["metadata"]["name"]): d for d in yaml.safe_load_all(out) if d}
    config = json.loads(made["ConfigMap", "ceph-csi-config"]["data"]["config.json"])
    assert config == [{"clusterID": "ceph-a", "monitors": ["10.0.0.1:6789", "v2:10.0.0.2:3300"]}]
    assert made["CSIDriver", "cephfs.csi.ceph.com"]["spec"]["fsGroupPolicy"] == "None"
    assert set(made["ConfigMap", "ceph-config"]["data"]) == {"ceph.conf", "keyring"}


def test_the_cluster_objects_without_helm_say_so(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    argv = ("--cluster", "--cluster-id", "c", "--monitors", "10.0.0.1:6789", "--helm", str(tmp_path / "helm"), "--dry-run")
    code, _, err = run(capsys, *argv)
    assert code == 1 and "install Helm or give --helm" in err


class FakeCephFS:
    """libcephfs's binding as provision_home.py uses it, over a dict of paths -> (uid, gid)."""

    tree: dict[str, tuple[int, int]] = {}

    class ObjectNotFound(Exception):
        pass

    def __init__(self, conffile: str) -> None:
        self.conffile = conffile

    def mount(self, filesystem_name: bytes) -> None:
        return None

    def stat(self, path: bytes) -> Any:
        if path.decode() not in self.tree:
            raise FakeCephFS.ObjectNotFound(path)
        uid, gid = self.tree[path.decode()]
        return types.SimpleNamespace(st_uid=uid, st_gid=gid)

    def mkdirs(self, path: bytes, mode: int) -> None:
        self.tree[path.decode()] = (0, 0)

    def chown(self, path: bytes, uid: int, gid: int) -> None:
        self.tree[path.decode()] = (uid, gid)

    def unmount(self) -> None:
        return None

    def shutdown(self) -> None:
        return None


def executable(path: Path, text: str) -> str:
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def test_a_second_run_changes_nothing_and_says_so(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cephfs = types.ModuleType("cephfs")
    cephfs.LibCephFS = FakeCephFS  # type: ignore[attr-defined]
    cephfs.ObjectNotFound = FakeCephFS.ObjectNotFound  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "cephfs", cephfs)
    FakeCephFS.tree = {}
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    # ceph: `fs authorize` records the client; `auth get-key` knows only recorded clients
    executable(
        bin_dir / "ceph",
        '#!/bin/sh\nstate="$FAKE_STATE/clients"\ncase "$3 $4" in\n'
        '  "fs authorize") echo "$6" >>"$state" ;;\n'
        '  "auth get-key") grep -qx "$5" "$state" 2>/dev/null && echo AQBfakekey== || { echo "ENOENT" >&2; exit 2; } ;;\nesac\n',
    )
    # kubectl apply -f -: "unchanged" when the same text was applied before
    kubectl = executable(
        bin_dir / "kubectl",
        '#!/bin/sh\nnew="$FAKE_STATE/new"; cat >"$new"\n'
        'if cmp -s "$new" "$FAKE_STATE/applied"; then echo "applied unchanged"; else mv "$new" "$FAKE_STATE/applied"; echo "applied created"; fi\n',
    )
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_STATE", str(tmp_path))
    argv = ("alice", "--namespace", "jhub", "--cluster-id", "ceph-a", "--kubectl", kubectl)

    code, first, err = run(capsys, *argv)
    assert code == 0, err
    assert "made /volumes/jupyter/alice owned by 1000:100" in first
    assert "made client.home-alice" in first and "applied created" in first
    code, second, err = run(capsys, *argv)
    assert code == 0, err
    assert "kept /volumes/jupyter/alice: it exists, owned by 1000:100" in second
    assert "kept client.home-alice: its key exists" in second
    assert "applied unchanged" in second
    assert FakeCephFS.tree == {"/volumes/jupyter/alice": (1000, 100)}
