"""Users' CephFS homes in the test cluster, made with the recipe an admin runs.

``provision`` runs ``deploy/cephfs/provision_home.py`` as shipped (Debian's Python, whose
``python3-cephfs`` it uses) against the test Ceph and the test control plane: the user's directory
with its owner, a key for that directory alone, its Secret and the static ceph-csi
PersistentVolume bound to ``claim-<user>``.  ``owner`` and ``read_file`` look at CephFS from the
admin's side (libcephfs, no mount), to check what pods wrote without trusting any mount.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

from .cluster import CephCluster, CephError
from .conf import FS_NAME, client_conf

DEBIAN_PYTHON = "/usr/bin/python3"
REPO = Path(__file__).resolve().parents[3]
PROVISION = REPO / "deploy" / "cephfs" / "provision_home.py"
HOMES_ROOT = "/volumes/jupyter"
CLIENT_PREFIX = "home-"
CSI_NAMESPACE = "ceph-csi-cephfs"

_LIBCEPHFS = """
import sys, cephfs
conf, action, path = sys.argv[1], sys.argv[2], sys.argv[3].encode()
fs = cephfs.LibCephFS(conffile=conf)
fs.mount(filesystem_name=sys.argv[4].encode())
try:
    if action == "stat":
        st = fs.stat(path)
        print(st.st_uid, st.st_gid)
    elif action == "read":
        fd = fs.open(path, "r")
        sys.stdout.buffer.write(fs.read(fd, 0, 1 << 24))
        fs.close(fd)
finally:
    fs.unmount()
    fs.shutdown()
"""


@dataclass(frozen=True)
class CephHome:
    """One user's home on CephFS: its path in the filesystem and the Ceph client that may mount it."""

    user: str
    namespace: str
    path: str
    client_id: str

    @property
    def volume_name(self) -> str:
        return f"cephfs-home-{self.namespace}-{self.user}"


@dataclass(frozen=True)
class Kubectl:
    """How the recipe's script reaches the test control plane."""

    binary: Path
    kubeconfig: str


def provision_script(cluster: CephCluster, kubectl: Kubectl, *args: str) -> str:
    """``provision_home.py ARGS`` with the test cluster's conf, ID and kubectl; its output."""
    done = subprocess.run(
        [
            DEBIAN_PYTHON,
            str(PROVISION),
            *args,
            f"--ceph-conf={cluster.paths.conf}",
            f"--cluster-id={cluster.fsid}",
            f"--kubectl={kubectl.binary}",
            f"--kubeconfig={kubectl.kubeconfig}",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if done.returncode != 0:
        raise CephError(f"provision_home.py {' '.join(args)} failed (exit {done.returncode}): {done.stderr.strip() or done.stdout.strip()}")
    return done.stdout


def provision(
    cluster: CephCluster,
    kubectl: Kubectl,
    user: str,
    namespace: str,
    uid: int,
    gid: int,
    *,
    claim: bool = True,
    root: str = HOMES_ROOT,
    client_prefix: str = CLIENT_PREFIX,
) -> CephHome:
    args = [user, f"--namespace={namespace}", f"--uid={uid}", f"--gid={gid}", f"--root={root}", f"--client-prefix={client_prefix}"]
    provision_script(cluster, kubectl, *args, "--storage-class=", *(["--claim"] if claim else []))
    return CephHome(user=user, namespace=namespace, path=f"{root}/{user}", client_id=f"{client_prefix}{user}")


def key_of(cluster: CephCluster, home: CephHome) -> str:
    return cluster.ceph("auth", "get-key", f"client.{home.client_id}").stdout.strip()


def _libcephfs(cluster: CephCluster, action: str, path: str) -> bytes:
    done = subprocess.run(
        [DEBIAN_PYTHON, "-c", _LIBCEPHFS, str(cluster.paths.conf), action, path, FS_NAME], capture_output=True, timeout=60, check=False
    )
    if done.returncode != 0:
        raise CephError(f"libcephfs {action} {path} failed: {done.stderr.decode(errors='replace').strip()}")
    return done.stdout


def owner(cluster: CephCluster, path: str) -> tuple[int, int]:
    """The uid and gid CephFS records for ``path`` (as every client sees them)."""
    uid, gid = _libcephfs(cluster, "stat", path).split()
    return int(uid), int(gid)


def read_file(cluster: CephCluster, path: str) -> bytes:
    """A file's bytes read by the admin straight from CephFS (no node, no pod)."""
    return _libcephfs(cluster, "read", path)


def mount(cluster: CephCluster, home: CephHome, target: Path) -> None:
    """Mount ``home`` at ``target`` with the user's own key, as the notebook pod's volume is: the
    suite's notebook server (a process on this machine) then sees the home a pod would."""
    target.mkdir(parents=True, exist_ok=True)
    conf = cluster.paths.root / "client.conf"
    conf.write_text(client_conf(cluster.monitors))
    keyfile = cluster.paths.keys / f"{home.client_id}.key"
    keyfile.write_text(key_of(cluster, home))
    keyfile.chmod(0o600)
    try:
        done = subprocess.run(
            ["ceph-fuse", str(target), "-c", str(conf), "-n", f"client.{home.client_id}", f"--keyfile={keyfile}", "-r", home.path]
            + [f"--client_mds_namespace={FS_NAME}"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    finally:
        keyfile.unlink()
    if done.returncode != 0:
        raise CephError(f"ceph-fuse could not mount {home.path} at {target}: {done.stderr.strip() or done.stdout.strip()}")


def unmount(target: Path) -> None:
    done = subprocess.run(["umount", str(target)], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        subprocess.run(["umount", "-l", str(target)], capture_output=True, check=False)
