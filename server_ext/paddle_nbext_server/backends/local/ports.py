"""Free TCP ports on this machine for replica endpoints: picked at submit, re-checked by the
master at admission (a job that waited may find its planned port taken by then)."""

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
