"""The real node's network: a namespace of its own joined to the host by one veth pair.

Everything of the node (the relay to the API server, containerd and the pods' bridge, kubelet,
kube-proxy's iptables rules, CoreDNS) runs inside ``NETNS``, entered with ``nsenter --net`` only,
so the mount namespace stays the host's (pod volumes and the kubelet's mounts must be seen by
containerd and runc).  The host keeps its ports, routes and iptables as they were; it gains the
veth end ``HOST_VETH`` (``HOST_IP``), through which the API server reaches the kubelet at
``NODE_IP``.  Pods get addresses in ``POD_CIDR`` on the node's ``cni0`` bridge; the node's
namespace has no default route, so nothing in it can reach past the host.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from pathlib import Path

from .errors import ControlPlaneError
from .pki import NODE_IP

NETNS = "pnb-node"
NETNS_PATH = Path("/run/netns") / NETNS
HOST_VETH = "pnb-host0"
NODE_VETH = "pnb-node0"
HOST_IP = "10.200.0.1"
PREFIX = 24
POD_CIDR = "10.244.0.0/24"
API_PORT = 6443  # where pods and node components reach the API server: NODE_IP:API_PORT
__all__ = ["API_PORT", "HOST_IP", "HOST_VETH", "NETNS", "NODE_IP", "NODE_VETH", "POD_CIDR", "create", "delete", "exists", "inside"]


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    tool = shutil.which("ip")
    if tool is None:
        raise ControlPlaneError("the real node needs the `ip` command (Debian package iproute2): apt-get install iproute2")
    done = subprocess.run([tool, *args], capture_output=True, text=True, check=False)
    if check and done.returncode != 0:
        raise ControlPlaneError(f"ip {' '.join(args)} failed: {done.stderr.strip()}")
    return done


def inside(argv: list[str]) -> list[str]:
    """``argv`` run in the node's network namespace (and nothing else of it)."""
    nsenter = shutil.which("nsenter")
    if nsenter is None:
        raise ControlPlaneError("the real node needs `nsenter` (Debian package util-linux)")
    return [nsenter, f"--net={NETNS_PATH}", "--", *argv]


def exists() -> bool:
    return NETNS_PATH.exists()


def host_veth_exists() -> bool:
    return Path("/sys/class/net", HOST_VETH).exists()


def create() -> None:
    """The namespace, the veth pair with both addresses, loopback up."""
    _ip("netns", "add", NETNS)
    try:
        _ip("link", "add", HOST_VETH, "type", "veth", "peer", "name", NODE_VETH)
        _ip("link", "set", NODE_VETH, "netns", NETNS)
        _ip("addr", "add", f"{HOST_IP}/{PREFIX}", "dev", HOST_VETH)
        _ip("link", "set", HOST_VETH, "up")
        for args in (
            ("addr", "add", f"{NODE_IP}/{PREFIX}", "dev", NODE_VETH),
            ("link", "set", NODE_VETH, "up"),
            ("link", "set", "lo", "up"),
        ):
            _ip("-n", NETNS, *args)
    except ControlPlaneError:
        delete()
        raise


def delete() -> None:
    """Remove the namespace (its end of the veth and the pods' bridge go with it) and the host's
    end of the veth if it is still there.  Safe to call when nothing exists."""
    if exists():
        _ip("netns", "delete", NETNS, check=False)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(NETNS_PATH)  # a netns file left unmounted by a crash
    if host_veth_exists():
        _ip("link", "delete", HOST_VETH, check=False)


def namespace_inode() -> int | None:
    try:
        return os.stat(NETNS_PATH).st_ino
    except OSError:
        return None
