"""The real nodes' network: each node a namespace of its own, joined to the host's bridge by a veth.

Everything of a node (the relay to the API server, containerd and the pods' bridge, kubelet,
kube-proxy's iptables rules, CoreDNS) runs inside its namespace (``NodeIdentity.netns``), entered
with ``nsenter --net`` only, so the mount namespace stays the host's (pod volumes and the kubelet's
mounts must be seen by containerd and runc).  The host keeps its ports, routes and iptables as they
were; it gains one bridge, ``BRIDGE`` (``HOST_IP``), and one veth end per node enslaved to it,
through which the API server reaches each kubelet at the node's address and the nodes reach each
other.  Pods get addresses in the node's pod range on its ``cni0`` bridge; each node forwards, and
routes every other node's pod range to that node's address, so pods on different nodes talk with
their own addresses (no NAT).  No node has a default route: nothing in them reaches past the host.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from pathlib import Path

from .errors import ControlPlaneError
from .node_identity import BRIDGE, HOST_IP, NODE_1, PREFIX, NodeIdentity

# Node 1's names, as every single-node caller has always used them.
NETNS = NODE_1.netns
HOST_VETH = NODE_1.host_veth
NODE_VETH = NODE_1.node_veth
NODE_IP = NODE_1.ip
POD_CIDR = NODE_1.pod_cidr
API_PORT = 6443  # where pods and node components reach the API server: the node's address, this port
__all__ = ["API_PORT", "HOST_IP", "HOST_VETH", "NETNS", "NODE_IP", "NODE_VETH", "POD_CIDR", "create", "delete", "exists", "inside"]


def netns_path(node: NodeIdentity = NODE_1) -> Path:
    return Path("/run/netns") / node.netns


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    tool = shutil.which("ip")
    if tool is None:
        raise ControlPlaneError("the real node needs the `ip` command (Debian package iproute2): apt-get install iproute2")
    done = subprocess.run([tool, *args], capture_output=True, text=True, check=False)
    if check and done.returncode != 0:
        raise ControlPlaneError(f"ip {' '.join(args)} failed: {done.stderr.strip()}")
    return done


def inside(argv: list[str], node: NodeIdentity = NODE_1) -> list[str]:
    """``argv`` run in the node's network namespace (and nothing else of it)."""
    nsenter = shutil.which("nsenter")
    if nsenter is None:
        raise ControlPlaneError("the real node needs `nsenter` (Debian package util-linux)")
    return [nsenter, f"--net={netns_path(node)}", "--", *argv]


def exists(node: NodeIdentity = NODE_1) -> bool:
    return netns_path(node).exists()


def host_veth_exists(node: NodeIdentity = NODE_1) -> bool:
    return Path("/sys/class/net", node.host_veth).exists()


def bridge_exists() -> bool:
    return Path("/sys/class/net", BRIDGE).exists()


def _bridge_members() -> list[str]:
    with contextlib.suppress(OSError):
        return sorted(p.name for p in Path("/sys/class/net", BRIDGE, "brif").iterdir())
    return []


def _ensure_bridge() -> None:
    if bridge_exists():
        return
    _ip("link", "add", BRIDGE, "type", "bridge")
    _ip("addr", "add", f"{HOST_IP}/{PREFIX}", "dev", BRIDGE)
    _ip("link", "set", BRIDGE, "up")


def create(node: NodeIdentity = NODE_1) -> None:
    """The namespace, the veth pair (the host's end on the bridge), the node's address, loopback
    up, forwarding on, and a route to every other node's pods."""
    _ensure_bridge()
    _ip("netns", "add", node.netns)
    try:
        _ip("link", "add", node.host_veth, "type", "veth", "peer", "name", node.node_veth)
        _ip("link", "set", node.node_veth, "netns", node.netns)
        _ip("link", "set", node.host_veth, "master", BRIDGE)
        _ip("link", "set", node.host_veth, "up")
        for args in (
            ("addr", "add", f"{node.ip}/{PREFIX}", "dev", node.node_veth),
            ("link", "set", node.node_veth, "up"),
            ("link", "set", "lo", "up"),
        ):
            _ip("-n", node.netns, *args)
        for other in node.others():
            _ip("-n", node.netns, "route", "add", other.pod_cidr, "via", other.ip)
        # Per namespace: the host's own forwarding setting stays as it was.
        done = subprocess.run(
            inside(["sh", "-c", "echo 1 > /proc/sys/net/ipv4/ip_forward"], node), capture_output=True, text=True, check=False
        )
        if done.returncode != 0:
            raise ControlPlaneError(f"cannot turn forwarding on in {node.netns}: {done.stderr.strip()}")
    except ControlPlaneError:
        delete(node)
        raise


def delete(node: NodeIdentity = NODE_1) -> None:
    """Remove the namespace (its end of the veth and the pods' bridge go with it), the host's end of
    the veth if it is still there, and the host's bridge once no node's link is on it.  Safe to
    call when nothing exists."""
    if exists(node):
        _ip("netns", "delete", node.netns, check=False)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(netns_path(node))  # a netns file left unmounted by a crash
    if host_veth_exists(node):
        _ip("link", "delete", node.host_veth, check=False)
    if bridge_exists() and not _bridge_members():
        _ip("link", "delete", BRIDGE, check=False)


def set_link(node: NodeIdentity, up: bool) -> None:
    """Cut (or restore) the node's only link, as a network partition does: its processes run on."""
    _ip("link", "set", node.host_veth, "up" if up else "down")


def namespace_inode(node: NodeIdentity = NODE_1) -> int | None:
    try:
        return os.stat(netns_path(node)).st_ino
    except OSError:
        return None
