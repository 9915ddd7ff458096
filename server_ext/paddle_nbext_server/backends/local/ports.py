"""Free TCP ports on this machine for replica endpoints: picked at submit, re-checked by the
master at admission (a job that waited may find its planned port taken by then).  A trainer of
several ranks gets a block of consecutive ports (`free_ports`), one per rank."""

from __future__ import annotations

import socket

HOST = "127.0.0.1"


def port_free(host: str, port: int) -> bool:
    """Nothing listens on (or holds) `host:port` right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind((host, port))
        except OSError:
            return False
    return True


def free_port(host: str = HOST, avoid: set[int] | None = None) -> int:
    """A port the kernel reports free, never one of `avoid` (ports already given to this job)."""
    while True:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            probe.bind((host, 0))
            port: int = probe.getsockname()[1]
        if not avoid or port not in avoid:
            return port


#: Base ports `free_ports` tries before it gives up (each one the kernel picked, then checked upward).
BLOCK_TRIES = 200


def free_ports(host: str = HOST, count: int = 1, avoid: set[int] | None = None) -> int:
    """The first of `count` consecutive ports that are all free and none of `avoid`: the kernel
    picks a base, the rest are checked (a port taken, the search moves on).  OSError when no
    such block turns up."""
    if count <= 1:
        return free_port(host, avoid)
    for _ in range(BLOCK_TRIES):
        base = free_port(host, avoid)
        block = range(base, base + count)
        if block[-1] <= 65535 and not (avoid and avoid.intersection(block)) and all(port_free(host, port) for port in block[1:]):
            return base
    raise OSError(f"no {count} consecutive free ports on {host}")
