"""CephFS homes on the real node: the test Ceph, ceph-csi's cluster objects, and users' homes.

``CephSite.start(plane, nodes)`` starts a ``CephCluster`` whose daemons listen on the host's bridge
to the real nodes (every node's CSI plugin and ``ceph-fuse`` reach them from the node's network
namespace), applies ceph-csi's cluster objects of paddle-nbext's chart through
``provision_home.py --cluster`` (the CSIDriver and ceph-csi's ConfigMaps) and hands those
ConfigMaps to every node's plugin as the kubelet would mount them: one home, every node.  ``home(user, namespace)`` then
provisions a user exactly as the admin guide says and mounts the home for the notebook side.

One per machine, at a fixed place (``ROOT``, under /tmp so that the notebook's uid can reach the
homes mounted below it); ``start`` sweeps what a crashed run left there.
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import Any

from support.controlplane import ControlPlane
from support.controlplane.build import HELM_COMPONENTS, find_binaries
from support.controlplane.errors import ControlPlaneError
from support.controlplane.node_network import HOST_IP
from support.controlplane.realnode import RealNode

from . import homes
from .cluster import CephCluster, sweep

ROOT = Path("/tmp/pnb-ceph")


class CephSite:
    def __init__(self, plane: ControlPlane, nodes: list[RealNode], kubeconfig: str) -> None:
        self.plane = plane
        self.nodes = nodes
        self.cluster = CephCluster(ROOT / "cluster", HOST_IP)
        binaries = find_binaries()
        if binaries is None:
            raise ControlPlaneError("kubectl is not built: run `bash scripts/controlplane.sh build`")
        self.kubectl = homes.Kubectl(binaries["kubectl"], kubeconfig)
        self.mounts: list[Path] = []

    @property
    def homes_dir(self) -> Path:
        return ROOT / "homes"

    def start(self) -> CephSite:
        sweep(ROOT)
        ROOT.mkdir(mode=0o755)
        self.homes_dir.mkdir(mode=0o755)
        try:
            self.cluster.start()
            self.cluster.paths.root.chmod(0o755)
            self.cluster.paths.keys.chmod(0o700)
            self._create_namespace(homes.CSI_NAMESPACE)
            self.apply_cluster_objects()
            self.configure_nodes()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        for target in reversed(self.mounts):
            homes.unmount(target)
        self.mounts.clear()
        try:
            self.cluster.stop()
        finally:
            sweep(ROOT)

    def apply_cluster_objects(self) -> None:
        """ceph-csi's ConfigMaps and CSIDriver as ``provision_home.py --cluster`` applies them
        (what ceph-csi's own chart and paddle-nbext's ``cephfs`` values make on a site)."""
        helm = find_binaries(HELM_COMPONENTS)
        if helm is None:
            raise ControlPlaneError("helm is not built: run `bash scripts/controlplane.sh build`")
        homes.provision_script(self.cluster, self.kubectl, "--cluster", f"--helm={helm['helm']}")

    def configure_nodes(self) -> None:
        """ceph-csi's ConfigMaps as the API server holds them now, handed to every node's plugin
        (as the kubelet mounts them into ceph-csi's pods, and updates them when they change)."""
        for node in self.nodes:
            node.configure_ceph_csi([self.config_map("ceph-csi-config"), self.config_map("ceph-config")])

    def _create_namespace(self, name: str) -> None:
        with contextlib.suppress(Exception):
            self.plane.api("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})

    def config_map(self, name: str) -> dict[str, Any]:
        return dict(self.plane.api("GET", f"/api/v1/namespaces/{homes.CSI_NAMESPACE}/configmaps/{name}"))

    def home(
        self,
        user: str,
        namespace: str,
        uid: int,
        gid: int,
        *,
        claim: bool = True,
        root: str = homes.HOMES_ROOT,
        client_prefix: str = homes.CLIENT_PREFIX,
    ) -> tuple[homes.CephHome, Path]:
        """``user``'s CephFS home provisioned by the recipe (directory ``<root>/<user>``, the key of
        ``client.<client_prefix><user>``, Secret, PV and, with ``claim``, ``claim-<user>`` in
        ``namespace``), and where the notebook side sees it.  A second home of the same user (another
        root) needs a client of its own: a Ceph client's key reaches one directory."""
        home = homes.provision(self.cluster, self.kubectl, user, namespace, uid, gid, claim=claim, root=root, client_prefix=client_prefix)
        target = self.homes_dir / f"{namespace}-{user}"
        homes.mount(self.cluster, home, target)
        self.mounts.append(target)
        return home, target

    def unmount(self, target: Path) -> None:
        homes.unmount(target)
        with contextlib.suppress(ValueError):
            self.mounts.remove(target)

    def node_ceph_mounts(self) -> list[str]:
        """ceph-fuse mounts under any node's kubelet directory (staged or published volumes)."""
        prefixes = tuple(str(node.paths.kubelet_dir) + os.sep for node in self.nodes)
        found = []
        with open("/proc/self/mountinfo") as info:
            for line in info:
                fields = line.split()
                point = fields[4]
                kind = fields[fields.index("-") + 1]
                if point.startswith(prefixes) and kind.startswith("fuse"):
                    found.append(point)
        return found

    def describe(self) -> str:
        plugins = ", ".join(str(node.paths.logs / "cephcsi.log") for node in self.nodes)
        return self.cluster.describe() + f"; CSI plugin logs {plugins}; " + json.dumps([node.state() for node in self.nodes])
