"""Finding and removing whatever a real node leaves behind: processes, mounts, cgroups, namespaces.

A node stopped in order (pods deleted, then kubelet, kube-proxy, CoreDNS, containerd) leaves
nothing; a crashed run (a killed test session, a machine handed on mid-run) leaves container
processes and shims, overlay and volume mounts under the node's directory, pod network
namespaces, cgroups under the node's cgroup root and the node's namespace with its veth.
``leftovers()`` names each of them (the tear-down test asserts it is empty) and ``sweep()`` removes
them all, in the order the kernel allows: processes first, then mounts, cgroups, namespaces.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

from . import node_network
from .node_identity import ALL_NODES, BRIDGE, NODE_1, NodeIdentity

CGROUP_BASE = Path("/sys/fs/cgroup")
POD_NETNS_DIR = Path("/run/netns")
KILL_WAIT = 10.0


def _net_inode(pid: str) -> int | None:
    try:
        return os.stat(f"/proc/{pid}/ns/net").st_ino
    except OSError:
        return None


def _pids() -> list[str]:
    return [p.name for p in Path("/proc").iterdir() if p.name.isdigit() and p.name != str(os.getpid())]


def cgroup_dirs(node: NodeIdentity = NODE_1) -> list[Path]:
    """The node's cgroup root in every hierarchy that has one (deepest first)."""
    found: list[Path] = []
    with contextlib.suppress(OSError):
        for hierarchy in CGROUP_BASE.iterdir():
            root = hierarchy / node.cgroup_root
            if root.is_dir():
                found += sorted((p for p in root.rglob("*") if p.is_dir()), key=lambda p: len(p.parts), reverse=True)
                found.append(root)
    return found


def node_processes(root: Path, node: NodeIdentity = NODE_1) -> list[int]:
    """Processes in the node's network namespace or in its cgroups (containers, shims, pause),
    and those started with a file of the node's directory (the host end of the API relay)."""
    inode = node_network.namespace_inode(node)
    marker = (str(root.resolve()) + os.sep).encode()  # node 1's directory is a prefix of node 2's name
    found: set[int] = set()
    for pid in _pids():
        if inode is not None and _net_inode(pid) == inode:
            found.add(int(pid))
        else:
            with contextlib.suppress(OSError):
                if marker in Path(f"/proc/{pid}/cmdline").read_bytes():
                    found.add(int(pid))
    for directory in cgroup_dirs(node):
        with contextlib.suppress(OSError):
            found |= {int(line) for line in (directory / "cgroup.procs").read_text().split() if line.strip()}
    found.discard(os.getpid())
    return sorted(found)


def _mounts() -> list[str]:
    points = []
    with contextlib.suppress(OSError), open("/proc/self/mountinfo") as info:
        for line in info:
            fields = line.split()
            if len(fields) > 4:
                points.append(fields[4].replace("\\040", " "))
    return points


def node_mounts(root: Path) -> list[str]:
    """Mounts under the node's directory, deepest first."""
    prefix = str(root.resolve()) + os.sep
    return sorted((m for m in _mounts() if m.startswith(prefix)), key=len, reverse=True)


def stale_pod_namespaces() -> list[Path]:
    """Pod network namespaces (containerd's ``cni-*``) that no process is in any more."""
    used = {_net_inode(pid) for pid in _pids()}
    stale = []
    with contextlib.suppress(OSError):
        for path in POD_NETNS_DIR.glob("cni-*"):
            with contextlib.suppress(OSError):
                if os.stat(path).st_ino not in used:
                    stale.append(path)
    return stale


def leftovers(root: Path, node: NodeIdentity = NODE_1) -> list[str]:
    """Everything of a node that is still there, one line each; [] when the node is gone (the
    host's bridge counts once no node's link is on it)."""
    found = [f"process {pid} ({_command(pid)})" for pid in node_processes(root, node)]
    found += [f"mount {m}" for m in node_mounts(root)]
    found += [f"cgroup {d}" for d in cgroup_dirs(node)]
    found += [f"pod network namespace {p}" for p in stale_pod_namespaces()]
    if node_network.exists(node):
        found.append(f"network namespace {node.netns}")
    if node_network.host_veth_exists(node):
        found.append(f"veth {node.host_veth}")
    if node_network.bridge_exists() and not any(node_network.host_veth_exists(n) for n in ALL_NODES):
        found.append(f"bridge {BRIDGE}")
    return found


def _command(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()[:120]
    except OSError:
        return "?"


def kill_node_processes(root: Path, node: NodeIdentity = NODE_1) -> None:
    deadline = time.monotonic() + KILL_WAIT
    while (pids := node_processes(root, node)) and time.monotonic() < deadline:
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        for pid in pids:
            with contextlib.suppress(ChildProcessError, OSError):
                os.waitpid(pid, os.WNOHANG)
        time.sleep(0.1)


def sweep(root: Path, node: NodeIdentity = NODE_1, *, remove_directory: bool = True) -> None:
    """Remove every leftover of a node whose directory is ``root``; safe when there are none."""
    kill_node_processes(root, node)
    for point in node_mounts(root):
        subprocess.run(["umount", "--lazy", point], capture_output=True, check=False)
    for path in stale_pod_namespaces():
        subprocess.run(["umount", "--lazy", str(path)], capture_output=True, check=False)
        with contextlib.suppress(OSError):
            path.unlink()
    deadline = time.monotonic() + KILL_WAIT
    while (dirs := cgroup_dirs(node)) and time.monotonic() < deadline:
        for directory in dirs:
            with contextlib.suppress(OSError):
                directory.rmdir()
        if cgroup_dirs(node):
            time.sleep(0.1)
    node_network.delete(node)
    if remove_directory and root.exists():
        shutil.rmtree(root, ignore_errors=True)
