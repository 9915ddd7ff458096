"""The test Ceph's files: where each daemon keeps its state, and the one ``ceph.conf`` they share.

One host, one monitor, one OSD, one MDS, pools of size 1: the smallest cluster that is still a
real Ceph (cephx keys, a monitor map, CRUSH, an active MDS).  The OSD keeps its objects in memory
(``memstore``), which costs no disk set-up and is gone with the process; the settings that keep
such a cluster healthy are the ones measured in shared/k8s-facts.md ("CephFS here").  Every path
(admin sockets, logs, pid files, daemon data) is under the cluster's own directory, so nothing of
the host's ``/etc/ceph`` or ``/var/lib/ceph`` is read or written.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

FS_NAME = "cephfs"
MON_ID = "a"
MDS_ID = "a"
MON_V2_PORT = 3300
MON_V1_PORT = 6789
#: memstore's size limit for the one OSD (it holds the data in memory; homes in tests are small).
OSD_BYTES = 3 << 30
#: How long a client (ceph-fuse, the admin's tools) tries to reach the cluster before it gives up:
#: a test of "Ceph is down" must see the mount fail within the kubelet's own CSI call timeout.
CLIENT_MOUNT_TIMEOUT = 20


@dataclass(frozen=True)
class CephPaths:
    """Where one test cluster keeps everything, all under ``root``."""

    root: Path

    @property
    def conf(self) -> Path:
        return self.root / "ceph.conf"

    @property
    def keys(self) -> Path:
        """One keyring per entity, ``<name>.keyring`` (the conf's ``keyring`` points here)."""
        return self.root / "keys"

    def keyring(self, entity: str) -> Path:
        return self.keys / f"{entity}.keyring"

    @property
    def monmap(self) -> Path:
        return self.root / "monmap"

    @property
    def data(self) -> Path:
        return self.root / "data"

    @property
    def run(self) -> Path:
        return self.root / "run"

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    @property
    def admin_mount(self) -> Path:
        """Where the admin mounts the filesystem's root for a moment (``homes.py``)."""
        return self.root / "admin-mount"

    def daemon_dir(self, kind: str, ident: str) -> Path:
        return self.data / f"{kind}-{ident}"


def monitor_addresses(host: str) -> str:
    """The monitor as clients name it (``mon_host``): both protocols, v2 first."""
    return f"[v2:{host}:{MON_V2_PORT},v1:{host}:{MON_V1_PORT}]"


def ceph_conf(paths: CephPaths, fsid: str, host: str) -> str:
    """The cluster's ``ceph.conf``: daemons bind ``host`` only (the address the real node reaches)."""
    settings = {
        "fsid": fsid,
        "mon_host": monitor_addresses(host),
        "public_addr": host,
        "ms_bind_ipv6": "false",
        "auth_cluster_required": "cephx",
        "auth_service_required": "cephx",
        "auth_client_required": "cephx",
        "auth_allow_insecure_global_id_reclaim": "false",
        "keyring": f"{paths.keys}/$name.keyring",
        "admin_socket": f"{paths.run}/$name.asok",
        "pid_file": f"{paths.run}/$name.pid",
        "log_file": f"{paths.logs}/$name.log",
        "log_to_stderr": "false",
        "err_to_stderr": "true",
        "mon_cluster_log_file": f"{paths.logs}/cluster.log",
        "mon_data": f"{paths.data}/mon-$id",
        "osd_data": f"{paths.data}/osd-$id",
        "mds_data": f"{paths.data}/mds-$id",
        # One host, one OSD: pools of one copy, placement without a failure domain.
        "osd_pool_default_size": "1",
        "osd_pool_default_min_size": "1",
        "osd_pool_default_pg_num": "8",
        "osd_pool_default_pgp_num": "8",
        "mon_allow_pool_size_one": "true",
        "mon_warn_on_pool_no_redundancy": "false",
        "osd_crush_chooseleaf_type": "0",
        # A test machine's disk is often fuller than a production monitor would accept.
        "mon_data_avail_warn": "2",
        "mon_data_avail_crit": "1",
        "osd_objectstore": "memstore",
        "memstore_device_bytes": str(OSD_BYTES),
        "client_mount_timeout": str(CLIENT_MOUNT_TIMEOUT),
    }
    lines = ["[global]", *(f"{key} = {value}" for key, value in settings.items())]
    return "\n".join(lines) + "\n"


def client_conf(monitors: list[str], *, mount_timeout: int = CLIENT_MOUNT_TIMEOUT) -> str:
    """A client's ``ceph.conf``: the monitors and nothing else (what the CSI plugin writes too)."""
    return f"[global]\nmon_host = {','.join(monitors)}\nclient_mount_timeout = {mount_timeout}\n"
