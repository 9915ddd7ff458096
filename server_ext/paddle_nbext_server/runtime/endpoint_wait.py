"""Waiting until a replica's peers can be reached: every pserver port accepts (Paddle 3.0's own
wait is a no-op, so a trainer that starts early dies with "Connection refused"), and, on
Kubernetes, a pod's own and its peers' names resolve (Paddle resolves them once and fails the job
at once while a pod has no address yet).

Why the short back-off: every tenth of a second of lateness here delays the whole job, while a
refused connect on loopback or a name that does not resolve yet costs next to nothing.

Standard library only: this file is shipped into every job beside the launcher.
"""

from __future__ import annotations

import functools
import socket
import time
from collections.abc import Callable

MAX_WAIT_DELAY = 0.2  # seconds between connection attempts to a pserver that is not up yet
#: The same for a pserver named by its IP address (the local backend's 127.0.0.1): no name is
#: looked up and a refused connect costs microseconds, so the trainer may look as often as a
#: script that starts the processes itself; named hosts keep `MAX_WAIT_DELAY` for cluster DNS.
MAX_WAIT_DELAY_ADDRESS = 0.05
CONNECT_TIMEOUT = 0.5  # seconds one connection attempt to a pserver may take


def until(ready: Callable[[float], bool], timeout: float, max_delay: float = MAX_WAIT_DELAY) -> bool:
    """Call `ready(seconds left)` until it is true, with a short back-off; False once `timeout`
    seconds have passed.  A refused connect on loopback or a not-yet-resolvable pod name costs
    next to nothing, while every tenth of a second of lateness here delays the whole job: the
    back-off stays short (`max_delay`)."""
    deadline = time.monotonic() + timeout
    delay = min(0.05, max_delay)
    while True:
        if ready(max(0.0, deadline - time.monotonic())):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(min(delay, max(0.0, deadline - time.monotonic())))
        delay = min(delay * 1.5, max_delay)


def is_address(host: str) -> bool:
    """Whether `host` is an IPv4 or IPv6 address rather than a name to look up."""
    for family in (socket.AF_INET, socket.AF_INET6):
        try:
            socket.inet_pton(family, host)
        except (OSError, ValueError):
            continue
        return True
    return False


def _accepts(host: str, port: int, why: list[str], left: float) -> bool:
    """Whether the endpoint accepts a connection now; if not, `why[0]` says why in words."""
    try:
        socket.getaddrinfo(host, port)
    except OSError:
        why[:] = ["its name does not resolve yet: its pod is not running (still Pending, pulling its image, or not scheduled)"]
        return False
    try:
        # A short connect: after a whole restart the name may still resolve to the old pod's
        # address for a DNS TTL, and a connect to an address nobody holds hangs until its
        # timeout; resolving again soon finds the new pod (a pod-network connect takes ms).
        with socket.create_connection((host, port), timeout=min(CONNECT_TIMEOUT, max(0.1, left))):
            return True
    except ConnectionRefusedError:
        why[:] = ["it refuses connections: its pod runs, but its code has not started serving (fleet.run_server())"]
    except OSError as error:
        why[:] = [f"connecting fails: {error}"]
    return False


def wait_for(endpoints: list[tuple[str, int]], timeout: float) -> tuple[str, int, str] | None:
    """Block until every endpoint accepts a TCP connection; return the first one that still
    does not when `timeout` seconds have passed, with why, else None."""
    deadline = time.monotonic() + timeout
    for host, port in endpoints:
        why = ["it never answered"]
        pace = MAX_WAIT_DELAY_ADDRESS if is_address(host) else MAX_WAIT_DELAY
        if not until(functools.partial(_accepts, host, port, why), max(0.0, deadline - time.monotonic()), pace):
            return host, port, why[0]
    return None


def wait_resolvable(host: str, timeout: float) -> bool:
    """Block until `host` (the replica's own endpoint name) resolves; False after `timeout`
    seconds.  On Kubernetes a pod's name is published in cluster DNS only once the pod has an
    address, a moment after its container may already run: Paddle binding its own endpoint
    before that fails ("Name or service not known") and the job with it."""

    def resolves(_left: float) -> bool:
        try:
            socket.getaddrinfo(host, None)
        except OSError:
            return False
        return True

    return until(resolves, timeout)
