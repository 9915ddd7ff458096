#!/usr/bin/python3
"""Give one user a CephFS home for JupyterHub notebooks and paddle-nbext jobs (the admin guide's
"CephFS homes"), or set up ceph-csi's cluster ConfigMaps once (``--cluster``).

Per user, as a Ceph admin (the host's ``ceph.conf`` and ``client.admin`` keyring, Debian's
``ceph-common`` and ``python3-cephfs``) with a kubeconfig that may create Secrets in ceph-csi's
namespace and PersistentVolumes:

1. the user's directory ``<root>/<username>`` in the filesystem, owned by the notebook's uid and
   gid (made through libcephfs: nothing is mounted);
2. a Ceph client ``client.<prefix><username>`` whose key reaches that directory only
   (``ceph fs authorize``): no user can mount another's home, or the filesystem's root;
3. ``home.yaml`` beside this script, filled in and applied with ``kubectl apply -f -``: the key in
   a Secret of ceph-csi's namespace (no notebook can read it) and a static ceph-csi
   PersistentVolume bound ahead of time to the user's claim ``claim-<username>``; with
   ``--claim`` the claim too (where KubeSpawner does not make it).

``--cluster``: ceph-csi's ConfigMaps (cluster ID -> monitors, ceph.conf with its ``keyring`` key,
the KMS ConfigMap) and the CSIDriver, rendered from paddle-nbext's chart (``deploy/chart``, the one
place they are written; ``helm template``) with the monitors of ``--monitors`` or of the monitor
map, and applied.  Sites that install the chart with ``cephfs.enabled`` need no ``--cluster``.

Run it again at any time: what exists is kept and said so (a directory owned by someone else is
reported, never changed; kubectl says ``unchanged``).  ``--dry-run`` prints the manifests with the
key left out and changes nothing; it needs no live cluster (with ``--cluster``, give
``--monitors``).  Why not the hub's spawn hook: the hub would need Ceph's admin key to make the
directory and the user's key, and a hub compromise would then reach every home.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from string import Template

HERE = Path(__file__).resolve().parent
CHART = HERE.parent / "chart"
#: What KubeSpawner's escaped or safe {username} can be, and a Kubernetes name part must be.
USERNAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
CSI_NAMESPACE = "ceph-csi-cephfs"  # ceph-csi's Helm chart's; its hand-install manifests use "default"
#: One monitor address as Ceph writes it: an optional v1/v2 type, host:port, an optional /nonce.
MONITOR_ADDRESS = re.compile(r"^(?:(v[12]):)?([^\s,/\[\]]+:[0-9]+)(?:/[0-9]+)?$")


class ProvisionError(Exception):
    """A step failed; the message says which and why."""


def _run(argv: list[str], stdin: str | None = None) -> str:
    done = subprocess.run(argv, input=stdin, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        shown = " ".join(argv[:4])
        raise ProvisionError(f"`{shown} ...` failed (exit {done.returncode}): {done.stderr.strip() or done.stdout.strip()}")
    return done.stdout


def make_directory(conf: str, fs_name: str, path: str, uid: int, gid: int) -> str:
    """The user's directory with its owner; an existing one is kept as it is."""
    try:
        import cephfs  # Debian's python3-cephfs (built for Debian's own python3)
    except ImportError:
        raise ProvisionError(
            "libcephfs's Python binding is missing: apt-get install python3-cephfs, and run this with /usr/bin/python3"
        ) from None
    fs = cephfs.LibCephFS(conffile=conf)
    fs.mount(filesystem_name=fs_name.encode())
    try:
        try:
            st = fs.stat(path.encode())
        except cephfs.ObjectNotFound:
            fs.mkdirs(path.encode(), 0o755)
            fs.chown(path.encode(), uid, gid)
            return f"made {path} owned by {uid}:{gid}"
        if (st.st_uid, st.st_gid) != (uid, gid):
            return f"kept {path}: it exists, owned by {st.st_uid}:{st.st_gid} (not {uid}:{gid}; change it yourself if that is wrong)"
        return f"kept {path}: it exists, owned by {uid}:{gid}"
    finally:
        fs.unmount()
        fs.shutdown()


def authorize(ceph: list[str], fs_name: str, client: str, path: str) -> str:
    """The client's key, limited to ``path`` (``ceph fs authorize`` is a no-op when it already is)."""
    _run([*ceph, "fs", "authorize", fs_name, f"client.{client}", path, "rw"])
    return _run([*ceph, "auth", "get-key", f"client.{client}"]).strip()


def render(name: str, values: dict[str, str]) -> str:
    try:
        return Template((HERE / name).read_text()).substitute(values)
    except KeyError as missing:
        raise ProvisionError(f"{name} names ${missing} which this script does not fill in") from None


def home_documents(values: dict[str, str], *, claim: bool) -> str:
    documents = render("home.yaml", values).split("\n---\n")
    return "\n---\n".join(documents if claim else documents[:2]) + "\n"


def monitor(address: str) -> str:
    """One monitor for ceph-csi's config.json from any form Ceph prints: ``1.2.3.4:6789`` (v1),
    ``v2:1.2.3.4:3300/0`` (v2; the nonce dropped) or an address vector ``[v2:...,v1:...]``, of
    which the v1 address is kept (every mounter speaks it; a vector without one keeps its v2)."""
    text = address.strip()
    parts = [p.strip() for p in text[1:-1].split(",")] if text.startswith("[") and text.endswith("]") else [text]
    parsed = [MONITOR_ADDRESS.match(part) for part in parts]
    if not parts or not all(parsed):
        raise ProvisionError(f"{address!r} is not a monitor address (1.2.3.4:6789, v2:1.2.3.4:3300/0 or [v2:...,v1:...])")
    typed = [(m.group(1) or "v1", m.group(2)) for m in parsed if m]
    v1 = [where for kind, where in typed if kind == "v1"]
    return v1[0] if v1 else f"v2:{typed[0][1]}"


def monitors_given(text: str) -> list[str]:
    """``--monitors``: addresses separated by spaces or commas (a vector's commas stay inside it)."""
    found = re.findall(r"\[[^\]]*\]|[^\s,\[\]]+", text)
    if not found:
        raise ProvisionError("--monitors names no monitor address")
    return [monitor(address) for address in found]


def monitors_of(ceph: list[str]) -> list[str]:
    """The monitors of the monitor map (``ceph mon dump``), one address each (``monitor``)."""
    dump = json.loads(_run([*ceph, "mon", "dump", "--format", "json"]))
    found = []
    for mon in dump.get("mons", []):
        vector = mon.get("public_addrs", {}).get("addrvec", [])
        if vector:
            found.append(monitor("[" + ",".join(f"{a['type']}:{a['addr']}" for a in vector) + "]"))
    if not found:
        raise ProvisionError("the monitor map lists no monitor address")
    return found


def cluster_documents(helm: str, cluster_id: str, monitors: list[str], csi_namespace: str) -> str:
    """ceph-csi's cluster objects as paddle-nbext's chart writes them (``helm template``: no
    cluster is contacted)."""
    values = {"cephfs": {"enabled": True, "csiDriver": True, "namespace": csi_namespace, "clusterID": cluster_id, "monitors": monitors}}
    argv = [helm, "template", "paddle-nbext", str(CHART), "--show-only", "templates/ceph-csi.yaml", "--values", "-"]
    try:
        return _run(argv, stdin=json.dumps(values))
    except FileNotFoundError:
        raise ProvisionError(
            f"--cluster renders paddle-nbext's chart with Helm, and {helm!r} is not there: install Helm or give --helm"
        ) from None


def authorize_and_say(ceph: list[str], fs_name: str, client: str, path: str) -> str:
    """``authorize``, saying whether the client was there already (``fs authorize`` keeps it)."""
    existed = subprocess.run([*ceph, "auth", "get-key", f"client.{client}"], capture_output=True, check=False).returncode == 0
    key = authorize(ceph, fs_name, client, path)
    print(f"kept client.{client}: its key exists (limited to {path})" if existed else f"made client.{client}, limited to {path}")
    return key


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("username", nargs="?", help="the user's name as KubeSpawner escapes it ({username})")
    parser.add_argument("--cluster", action="store_true", help="apply ceph-csi's ConfigMaps and CSIDriver (from deploy/chart) instead")
    parser.add_argument("--monitors", help="the monitors, e.g. '10.0.0.11:6789 v2:10.0.0.12:3300/0' (default: the monitor map)")
    parser.add_argument("--csi-namespace", default=CSI_NAMESPACE, help="ceph-csi's namespace [%(default)s]")
    parser.add_argument("--helm", default="helm", help="the helm command, for --cluster [%(default)s]")
    parser.add_argument("--uid", type=int, default=1000, help="owner of the new directory [1000: Zero to JupyterHub's]")
    parser.add_argument("--gid", type=int, default=100, help="group of the new directory [100]")
    parser.add_argument("--namespace", help="where the user's notebook and jobs run (the claim's namespace)")
    parser.add_argument("--root", default="/volumes/jupyter", help="where homes live in the filesystem [%(default)s]")
    parser.add_argument("--fs-name", default="cephfs", help="the CephFS filesystem [%(default)s]")
    parser.add_argument("--cluster-id", required=True, help="the name ceph-csi-config gives this Ceph cluster")
    parser.add_argument("--client-prefix", default="home-", help="Ceph client names are <prefix><username> [%(default)s]")
    parser.add_argument(
        "--storage-class", default="cephfs-home", help="the class the claim asks for (KubeSpawner's storage class) [%(default)s]"
    )
    parser.add_argument("--capacity", default="100Gi", help="the size the claim asks for [%(default)s]")
    parser.add_argument("--claim", action="store_true", help="also make the claim (where KubeSpawner does not)")
    parser.add_argument(
        "--ceph-conf",
        default=os.environ.get("CEPH_CONF", "/etc/ceph/ceph.conf"),
        help="the Ceph admin's configuration [$CEPH_CONF, as Ceph's own tools read it, else %(default)s]",
    )
    parser.add_argument("--kubectl", default="kubectl", help="the kubectl command [%(default)s]")
    parser.add_argument("--kubeconfig", help="passed to kubectl")
    parser.add_argument("--dry-run", action="store_true", help="print the manifests (key left out); change nothing")
    args = parser.parse_args(argv)
    ceph = ["ceph", "-c", args.ceph_conf]
    kubectl = [args.kubectl, *([f"--kubeconfig={args.kubeconfig}"] if args.kubeconfig else []), "apply", "-f", "-"]
    try:
        if args.cluster:
            monitors = monitors_given(args.monitors) if args.monitors else monitors_of(ceph)
            text = cluster_documents(args.helm, args.cluster_id, monitors, args.csi_namespace)
        else:
            if not args.username or not USERNAME.match(args.username):
                parser.error("give the user's name as KubeSpawner escapes it: lower-case letters, digits and '-'")
            if not args.namespace:
                parser.error("--namespace is required: the namespace of the user's notebook and jobs")
            path = f"{args.root.rstrip('/')}/{args.username}"
            client = f"{args.client_prefix}{args.username}"
            values = {
                "USERNAME": args.username,
                "NAMESPACE": args.namespace,
                "CEPH_USER": client,
                "CEPH_KEY": "<the key of client." + client + ">",
                "CAPACITY": args.capacity,
                "STORAGE_CLASS": args.storage_class,
                "CLUSTER_ID": args.cluster_id,
                "FS_NAME": args.fs_name,
                "ROOT_PATH": path,
                "CSI_NAMESPACE": args.csi_namespace,
            }
            if args.dry_run:
                print(home_documents(values, claim=args.claim), end="")
                return 0
            print(make_directory(args.ceph_conf, args.fs_name, path, args.uid, args.gid))
            values["CEPH_KEY"] = authorize_and_say(ceph, args.fs_name, client, path)
            text = home_documents(values, claim=args.claim)
        if args.dry_run:
            print(text, end="")
            return 0
        print(_run(kubectl, stdin=text), end="")
    except ProvisionError as error:
        print(f"provision_home: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
