"""The real node's CephFS CSI node plugin: started with the node, registered with its kubelet.

ceph-csi cannot be built here (the Go module proxy refuses it), so ``gomod/cephcsi`` stands in for
its CephFS node service, honouring the contract a node sees (driver ``cephfs.csi.ceph.com``,
ceph-csi's ``volumeAttributes`` and Secret keys, staging with ``ceph-fuse``, publishing by bind
mount).  It runs like ceph-csi's node DaemonSet: in the node's network namespace and the host's
mount namespace (which the kubelet and runc share), with its sockets in the kubelet's
``plugins/`` and ``plugins_registry/`` directories, where the kubelet's plugin watcher finds it.

ceph-csi reads two ConfigMaps as files: ``ceph-csi-config`` (``config.json``: each cluster ID's
monitors) and ``ceph-config`` (``ceph.conf``).  ``write_config`` puts their data where the plugin
reads them, as the kubelet would mount them into ceph-csi's pod; until then a volume's staging
fails with ceph-csi's own words for a missing cluster configuration.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DRIVER = "cephfs.csi.ceph.com"
REGISTER_TIMEOUT = 60.0


@dataclass(frozen=True)
class CsiPaths:
    """The plugin's files on a node whose kubelet keeps its state in ``kubelet_dir``."""

    kubelet_dir: Path
    own: Path

    @property
    def endpoint(self) -> Path:
        return self.kubelet_dir / "plugins" / DRIVER / "csi.sock"

    @property
    def registration_dir(self) -> Path:
        return self.kubelet_dir / "plugins_registry"

    @property
    def cluster_config(self) -> Path:
        return self.own / "config.json"

    @property
    def ceph_conf(self) -> Path:
        return self.own / "ceph.conf"

    @property
    def keys(self) -> Path:
        return self.own / "keys"


def argv(binary: Path, paths: CsiPaths, node_name: str) -> list[str]:
    return [
        str(binary),
        f"--endpoint={paths.endpoint}",
        f"--registration-dir={paths.registration_dir}",
        f"--nodeid={node_name}",
        f"--cluster-config={paths.cluster_config}",
        f"--ceph-conf={paths.ceph_conf}",
        f"--state-dir={paths.keys}",
    ]


def write_config(paths: CsiPaths, config_maps: list[dict[str, Any]]) -> None:
    """The data of ceph-csi's ConfigMaps (``ceph-csi-config``'s ``config.json``, ``ceph-config``'s
    ``ceph.conf``), written where the plugin reads them."""
    paths.own.mkdir(parents=True, exist_ok=True)
    for config_map in config_maps:
        data = config_map.get("data") or {}
        if "config.json" in data:
            _replace(paths.cluster_config, data["config.json"])
        if "ceph.conf" in data:
            _replace(paths.ceph_conf, data["ceph.conf"])


def _replace(path: Path, text: str) -> None:
    partial = path.with_name(path.name + ".partial")
    partial.write_text(text)
    partial.replace(path)


def registered(node: Callable[[], dict[str, Any] | None]) -> bool:
    """Whether the kubelet lists the driver on its CSINode (it writes it once registration is done)."""
    csinode = node()
    drivers = ((csinode or {}).get("spec") or {}).get("drivers") or []
    return any(d.get("name") == DRIVER for d in drivers)
