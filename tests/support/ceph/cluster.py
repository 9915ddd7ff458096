"""A real Ceph cluster for the suite: monitor, OSD and MDS from Debian's packages, one CephFS.

``CephCluster(root, host).start()`` bootstraps a cluster the way Ceph's manual deployment guide
does (a monitor map and keyrings made by hand, ``--mkfs`` of each daemon, pools, ``ceph fs
new``), runs each daemon in the foreground as a process of the suite, and returns once the
filesystem has an active MDS.  The daemons bind ``host`` only: the host's end of the real node's
veth, so the node's network namespace (its CSI plugin and ``ceph-fuse``) reaches the monitors
while nothing listens on the host's other addresses.  No manager daemon runs: CephFS I/O, keys
and pools need only the monitor (the health then says MGR_DOWN, which is muted).

``stop()`` kills every daemon (their data is in memory and goes with them), unmounts whatever
mount of this cluster is left and removes its directory; ``start()`` first sweeps what a crashed
run left (``sweep``).  The packages are installed by ``scripts/setup.sh`` (``CEPH_PACKAGES``).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any

from support.controlplane.errors import ControlPlaneError
from support.controlplane.processes import Process, pid_alive

from .conf import FS_NAME, MDS_ID, MON_ID, CephPaths, ceph_conf, monitor_addresses

START_TIMEOUT = 180.0
COMMAND_TIMEOUT = 60.0
#: (command, Debian package) the cluster needs.
CEPH_TOOLS = (
    ("ceph-mon", "ceph-mon"),
    ("ceph-osd", "ceph-osd"),
    ("ceph-mds", "ceph-mds"),
    ("ceph-fuse", "ceph-fuse"),
    ("ceph", "ceph-common"),
    ("ceph-authtool", "ceph-common"),
    ("monmaptool", "ceph-base"),
)
CEPH_PACKAGES = ("ceph-common", "ceph-fuse", "ceph-mds", "ceph-mon", "ceph-osd", "python3-cephfs")
METADATA_POOL = "cephfs_metadata"
DATA_POOL = "cephfs_data"


class CephError(ControlPlaneError):
    """The test Ceph could not be started or asked something; the message names the daemon and its log."""


def missing_tools() -> list[str]:
    return [f"{tool} (Debian package {package})" for tool, package in CEPH_TOOLS if shutil.which(tool) is None]


class CephCluster:
    """One monitor, one OSD, one MDS and the filesystem ``cephfs``, everything under ``root``."""

    def __init__(self, root: Path, host: str) -> None:
        self.paths = CephPaths(root.resolve())
        self.host = host
        self.fsid = ""
        self.processes: dict[str, Process] = {}
        self.startup_seconds: float | None = None

    @property
    def root(self) -> Path:
        return self.paths.root

    @property
    def monitors(self) -> list[str]:
        """The monitors as ceph-csi's cluster config lists them (``host:port``, the v1 port)."""
        return [f"{self.host}:6789"]

    @property
    def mon_host(self) -> str:
        return monitor_addresses(self.host)

    # --- lifecycle --------------------------------------------------------------------------------
    def start(self) -> CephCluster:
        missing = missing_tools()
        if missing:
            raise CephError(
                f"the test Ceph needs {', '.join(missing)}; `bash scripts/setup.sh` installs them "
                f"(apt-get install --no-install-recommends {' '.join(CEPH_PACKAGES)})"
            )
        started = time.monotonic()
        sweep(self.root)
        for directory in (self.paths.keys, self.paths.data, self.paths.run, self.paths.logs):
            directory.mkdir(parents=True, exist_ok=True)
        self.fsid = str(uuid.uuid4())
        self.paths.conf.write_text(ceph_conf(self.paths, self.fsid, self.host))
        try:
            self._start_monitor()
            self._start_osd()
            self._create_filesystem()
            self._start_mds()
        except BaseException:
            self.stop()
            raise
        self.startup_seconds = time.monotonic() - started
        return self

    def stop(self) -> None:
        """Kill the daemons at once (SIGKILL: their data lives in memory and is not kept), then
        remove everything of the cluster; raises if anything remains."""
        for name in list(self.processes):
            self.kill(name)
        self.processes.clear()
        sweep(self.root)
        left = leftovers(self.root)
        if left:
            raise CephError("the test Ceph left behind: " + "; ".join(left))

    def __enter__(self) -> CephCluster:  # noqa: PYI034 - Python 3.10 has no typing.Self
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- commands -----------------------------------------------------------------------------------
    def ceph(self, *args: str, timeout: float = COMMAND_TIMEOUT, check: bool = True) -> subprocess.CompletedProcess[str]:
        """``ceph ARGS`` as the cluster's admin (its own conf and keyring)."""
        done = subprocess.run(
            ["ceph", "-c", str(self.paths.conf), "--connect-timeout", str(int(timeout)), *args],
            capture_output=True,
            text=True,
            timeout=timeout + 10,
            check=False,
        )
        if check and done.returncode != 0:
            raise CephError(f"ceph {' '.join(args)} failed (exit {done.returncode}): {done.stderr.strip() or done.stdout.strip()}")
        return done

    def ceph_json(self, *args: str) -> Any:
        return json.loads(self.ceph(*args, "--format", "json").stdout)

    def _tool(self, *argv: str) -> None:
        done = subprocess.run(list(argv), capture_output=True, text=True, timeout=COMMAND_TIMEOUT, check=False)
        if done.returncode != 0:
            raise CephError(f"{' '.join(argv)} failed (exit {done.returncode}): {done.stderr.strip() or done.stdout.strip()}")

    def _daemon(self, kind: str, ident: str) -> Process:
        name = f"{kind}.{ident}"
        process = Process(
            f"ceph-{kind}.{ident}",
            [f"ceph-{kind}", "-f", "-c", str(self.paths.conf), "-i", ident],
            self.paths.logs / f"{name}.stderr.log",
        )
        process.start()
        self.processes[name] = process
        return process

    # --- bootstrap ----------------------------------------------------------------------------------
    def _start_monitor(self) -> None:
        mon_key, admin_key = self.paths.keyring(f"mon.{MON_ID}"), self.paths.keyring("client.admin")
        self._tool("ceph-authtool", "--create-keyring", str(mon_key), "--gen-key", "-n", "mon.", "--cap", "mon", "allow *")
        self._tool(
            "ceph-authtool",
            "--create-keyring",
            str(admin_key),
            "--gen-key",
            "-n",
            "client.admin",
            *("--cap", "mon", "allow *", "--cap", "osd", "allow *", "--cap", "mds", "allow *", "--cap", "mgr", "allow *"),
        )
        seed = self.paths.root / "mkfs.keyring"
        seed.write_text(mon_key.read_text() + admin_key.read_text())
        self._tool("monmaptool", "--create", "--fsid", self.fsid, "--addv", MON_ID, self.mon_host, str(self.paths.monmap))
        self._tool(
            "ceph-mon", "-c", str(self.paths.conf), "--mkfs", "-i", MON_ID, "--monmap", str(self.paths.monmap), "--keyring", str(seed)
        )
        seed.unlink()
        monitor = self._daemon("mon", MON_ID)
        monitor.wait_ready(lambda: self.ceph("mon", "stat", timeout=5, check=False).returncode == 0, START_TIMEOUT, "in quorum")
        # No manager runs (see the module's docstring): say so once instead of warning for ever.
        self.ceph("health", "mute", "MGR_DOWN", check=False)

    def _start_osd(self) -> None:
        osd_uuid = str(uuid.uuid4())
        ident = self.ceph("osd", "new", osd_uuid).stdout.strip()
        self.paths.daemon_dir("osd", ident).mkdir(parents=True, exist_ok=True)
        self.ceph(
            "auth",
            "get-or-create",
            f"osd.{ident}",
            *("mon", "allow profile osd", "mgr", "allow profile osd", "osd", "allow *"),
            "-o",
            str(self.paths.keyring(f"osd.{ident}")),
        )
        self._tool("ceph-osd", "-c", str(self.paths.conf), "-i", ident, "--mkfs", "--osd-uuid", osd_uuid)
        osd = self._daemon("osd", ident)

        def up() -> bool:
            return int(self.ceph_json("osd", "stat").get("num_up_osds", 0)) >= 1

        osd.wait_ready(up, START_TIMEOUT, "up in the OSD map")

    def _create_filesystem(self) -> None:
        for pool in (METADATA_POOL, DATA_POOL):
            self.ceph("osd", "pool", "create", pool, "8")
        self.ceph("fs", "new", FS_NAME, METADATA_POOL, DATA_POOL)
        self.ceph("fs", "set", FS_NAME, "standby_count_wanted", "0")

    def _start_mds(self) -> None:
        self.paths.daemon_dir("mds", MDS_ID).mkdir(parents=True, exist_ok=True)
        self.ceph(
            "auth",
            "get-or-create",
            f"mds.{MDS_ID}",
            *("mon", "profile mds", "mgr", "profile mds", "mds", "allow *", "osd", "allow *"),
            "-o",
            str(self.paths.keyring(f"mds.{MDS_ID}")),
        )
        mds = self._daemon("mds", MDS_ID)
        mds.wait_ready(self.filesystem_active, START_TIMEOUT, f"the active MDS of {FS_NAME}")

    def filesystem_active(self) -> bool:
        dump = self.ceph_json("fs", "dump")
        for fs in dump.get("filesystems", []):
            if fs["mdsmap"]["fs_name"] == FS_NAME:
                return any(info.get("state") == "up:active" for info in fs["mdsmap"].get("info", {}).values())
        return False

    # --- faults -------------------------------------------------------------------------------------
    def kill(self, name: str) -> None:
        """SIGKILL one daemon (``mon.a``, ``osd.0``, ``mds.a``), as a crash would."""
        process = self.processes[name]
        if process.pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
        process.stop()

    def restart(self, name: str) -> None:
        """Start a killed monitor again (its store is on disk) and wait for its quorum."""
        kind, ident = name.split(".")
        if kind != "mon":
            raise ValueError(f"only the monitor restarts with its data ({name} keeps its data in memory)")
        monitor = self._daemon(kind, ident)
        monitor.wait_ready(lambda: self.ceph("mon", "stat", timeout=5, check=False).returncode == 0, START_TIMEOUT, "in quorum again")

    def restart_mds(self) -> None:
        """Kill the MDS and start it again; returns once the filesystem is active again."""
        self.kill(f"mds.{MDS_ID}")
        mds = self._daemon("mds", MDS_ID)
        mds.wait_ready(self.filesystem_active, START_TIMEOUT, f"the active MDS of {FS_NAME} again")

    def describe(self) -> str:
        pids = {name: p.pid for name, p in self.processes.items()}
        return f"the test Ceph at {self.mon_host}: logs in {self.paths.logs}; pids {pids}"


# --- what a cluster leaves behind ------------------------------------------------------------------
def _processes(root: Path) -> list[int]:
    """Ceph daemons and clients started with this cluster's files (its conf, its keyrings)."""
    marker = str(root).encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        with contextlib.suppress(OSError):
            if marker in (entry / "cmdline").read_bytes():
                found.append(int(entry.name))
    return found


def _mounts_under(root: Path) -> list[str]:
    points = []
    with contextlib.suppress(OSError), open("/proc/self/mountinfo") as info:
        for line in info:
            point = line.split()[4].replace("\\040", " ")
            if point == str(root) or point.startswith(str(root) + "/"):
                points.append(point)
    return points


def leftovers(root: Path) -> list[str]:
    root = root.resolve()
    left = [f"process {pid}" for pid in _processes(root)]
    left += [f"mount {point}" for point in _mounts_under(root)]
    if root.exists():
        left.append(f"directory {root}")
    return left


def sweep(root: Path) -> None:
    """Remove whatever a cluster at ``root`` left: mounts first (lazily: a FUSE mount whose
    daemon is dead answers ENOTCONN), then processes, then the directory."""
    root = root.resolve()
    for point in sorted(_mounts_under(root), key=len, reverse=True):
        subprocess.run(["umount", "-l", point], capture_output=True, check=False)
    for pid in _processes(root):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while any(pid_alive(pid) for pid in _processes(root)) and time.monotonic() < deadline:
        time.sleep(0.05)
    shutil.rmtree(root, ignore_errors=True)
