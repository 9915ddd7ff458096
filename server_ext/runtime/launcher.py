"""The launcher every replica runs before the user's entry point, on both backends.

It turns the few `PADDLE_NBEXT_*` inputs (docs/architecture.md, "Launcher") into the Paddle
environment contract for the replica's role and mode, makes trainers wait until every pserver
port accepts (Paddle 3.0's own wait is a no-op, so a trainer that starts early dies with
"Connection refused"), and then replaces itself with `/bin/sh -c <entry>` in the package dir, so
the runner sees the entry point's own exit code and signals reach it directly.

Standard library only: this file is copied into job containers and run as a plain script.
"""
from __future__ import annotations

import math
import os
import socket
import sys
import time
from collections.abc import Mapping

#: Variables of the Paddle contract.  Inherited values are dropped first so a stale variable of
#: the notebook's own environment can never leak into a replica of another role.
CONTRACT_VARS = (
    "TRAINING_ROLE",
    "PADDLE_TRAINER_ID",
    "PADDLE_TRAINERS_NUM",
    "PADDLE_PSERVERS_IP_PORT_LIST",
    "PADDLE_PSERVER_ID",
    "PADDLE_PORT",
    "POD_IP",
    "PADDLE_TRAINER_ENDPOINTS",
    "PADDLE_CURRENT_ENDPOINT",
    "PADDLE_JOB_NAME",
    "TRAINERS",
    "PSERVERS",
    "ENTRY",
    "TRAINER_PACKAGE",
)
DEFAULT_WAIT_TIMEOUT = 300.0
WAIT_EXIT_CODE = 3


class LaunchError(Exception):
    """A missing or malformed input; the message names the variable and what it must hold."""


def _require(env: Mapping[str, str], name: str) -> str:
    value = env.get(name, "").strip()
    if not value:
        raise LaunchError(f"{name} is not set; the job runner must set it for every replica")
    return value


def _endpoints(env: Mapping[str, str], name: str) -> list[tuple[str, int]]:
    raw = env.get(name, "").strip()
    result = []
    for item in filter(None, (part.strip() for part in raw.split(","))):
        host, sep, port = item.rpartition(":")
        if not sep or not host or not port.isdigit():
            raise LaunchError(f"{name} entry {item!r} is not host:port")
        result.append((host, int(port)))
    return result


def _join(endpoints: list[tuple[str, int]]) -> str:
    return ",".join(f"{host}:{port}" for host, port in endpoints)


def replica_index(env: Mapping[str, str]) -> int:
    """`PADDLE_NBEXT_INDEX`, else Kubernetes' `JOB_COMPLETION_INDEX` (Indexed Jobs)."""
    raw = env.get("PADDLE_NBEXT_INDEX", "").strip() or env.get("JOB_COMPLETION_INDEX", "").strip()
    if not raw.isdigit():
        raise LaunchError(f"PADDLE_NBEXT_INDEX must be a replica index (0, 1, ...), got {raw!r}")
    return int(raw)


def build_env(base: Mapping[str, str]) -> dict[str, str]:
    """The replica's full environment: `base` without stale contract variables, plus the Paddle
    contract for its role, index and mode.  Pure, so every role and mode is unit-testable."""
    mode = _require(base, "PADDLE_NBEXT_MODE")
    role = _require(base, "PADDLE_NBEXT_ROLE")
    if mode not in ("ps", "collective"):
        raise LaunchError(f"PADDLE_NBEXT_MODE must be 'ps' or 'collective', got {mode!r}")
    if role not in ("pserver", "trainer"):
        raise LaunchError(f"PADDLE_NBEXT_ROLE must be 'pserver' or 'trainer', got {role!r}")
    if mode == "collective" and role != "trainer":
        raise LaunchError("collective mode has only trainers; PADDLE_NBEXT_ROLE must be 'trainer'")
    index = replica_index(base)
    entry = _require(base, "PADDLE_NBEXT_ENTRY")
    workdir = _require(base, "PADDLE_NBEXT_WORKDIR")
    pservers = _endpoints(base, "PADDLE_NBEXT_PSERVER_ENDPOINTS")
    trainers = _endpoints(base, "PADDLE_NBEXT_TRAINER_ENDPOINTS")
    if mode == "ps" and not pservers:
        raise LaunchError("PADDLE_NBEXT_PSERVER_ENDPOINTS is empty; ps mode needs every pserver's host:port")
    if not trainers:
        raise LaunchError("PADDLE_NBEXT_TRAINER_ENDPOINTS is empty; give every trainer's host:port")
    own_list = pservers if role == "pserver" else trainers
    if index >= len(own_list):
        raise LaunchError(f"{role} index {index} is out of range: only {len(own_list)} {role} endpoints are given")
    own_host, own_port = own_list[index]

    env = {key: value for key, value in base.items() if key not in CONTRACT_VARS}
    env.update(
        PADDLE_JOB_NAME=base.get("PADDLE_NBEXT_JOB", ""),
        PADDLE_TRAINERS_NUM=str(len(trainers)),
        PADDLE_TRAINER_ENDPOINTS=_join(trainers),
        TRAINERS=str(len(trainers)),
        PSERVERS=str(len(pservers)),
        ENTRY=entry,
        TRAINER_PACKAGE=workdir,
        POD_IP=own_host,
        PADDLE_PORT=str(own_port),
    )
    env.setdefault("PYTHONUNBUFFERED", "1")  # logs must appear while the job runs, not at exit
    if mode == "ps":
        env["PADDLE_PSERVERS_IP_PORT_LIST"] = _join(pservers)
        env["FLAGS_enable_pir_api"] = "0"  # PS minimize() fails on PIR programs (paddle-facts)
        if role == "pserver":
            env["TRAINING_ROLE"] = "PSERVER"
            env["PADDLE_PSERVER_ID"] = str(index)
        else:
            env["TRAINING_ROLE"] = "TRAINER"
            env["PADDLE_TRAINER_ID"] = str(index)
    else:
        env["TRAINING_ROLE"] = "TRAINER"
        env["PADDLE_TRAINER_ID"] = str(index)
        env["PADDLE_CURRENT_ENDPOINT"] = f"{own_host}:{own_port}"
        if not env.get("CUDA_VISIBLE_DEVICES", "").strip():
            # Without it init_parallel_env takes a legacy path that fails on CPU (paddle-facts).
            env.setdefault("PADDLE_DISTRI_BACKEND", "gloo")
    cpu = base.get("PADDLE_NBEXT_CPU", "").strip()
    if cpu:
        try:
            threads = max(1, math.ceil(float(cpu)))
        except ValueError:
            raise LaunchError(f"PADDLE_NBEXT_CPU must be a number of cores, got {cpu!r}") from None
        env["CPU_NUM"] = str(threads)
        env["OMP_NUM_THREADS"] = str(threads)
    return env


def endpoints_to_wait_for(base: Mapping[str, str]) -> list[tuple[str, int]]:
    """Trainers in ps mode wait for every pserver; nobody else waits."""
    if base.get("PADDLE_NBEXT_MODE") == "ps" and base.get("PADDLE_NBEXT_ROLE") == "trainer":
        return _endpoints(base, "PADDLE_NBEXT_PSERVER_ENDPOINTS")
    return []


def wait_timeout(base: Mapping[str, str]) -> float:
    raw = base.get("PADDLE_NBEXT_WAIT_TIMEOUT", "").strip()
    if not raw:
        return DEFAULT_WAIT_TIMEOUT
    try:
        value = float(raw)
    except ValueError:
        raise LaunchError(f"PADDLE_NBEXT_WAIT_TIMEOUT must be seconds, got {raw!r}") from None
    if value <= 0:
        raise LaunchError(f"PADDLE_NBEXT_WAIT_TIMEOUT must be positive, got {raw!r}")
    return value


MAX_WAIT_DELAY = 0.2  # seconds between connection attempts to a pserver that is not up yet


def wait_for(endpoints: list[tuple[str, int]], timeout: float) -> tuple[str, int] | None:
    """Block until every endpoint accepts a TCP connection; return the first one that still
    does not when `timeout` seconds have passed, else None."""
    deadline = time.monotonic() + timeout
    pending = list(endpoints)
    delay = 0.05
    while pending:
        host, port = pending[0]
        try:
            with socket.create_connection((host, port), timeout=min(2.0, max(0.1, deadline - time.monotonic()))):
                pending.pop(0)
                continue
        except OSError:
            pass
        if time.monotonic() >= deadline:
            return pending[0]
        time.sleep(min(delay, max(0.0, deadline - time.monotonic())))
        # A refused connect on loopback or to a not-yet-resolvable pod name costs next to
        # nothing, while every tenth of a second of lateness here delays the whole job: keep the
        # back-off short.
        delay = min(delay * 1.5, MAX_WAIT_DELAY)
    return None


def main() -> int:
    base = dict(os.environ)
    try:
        env = build_env(base)
        waits = endpoints_to_wait_for(base)
        timeout = wait_timeout(base)
    except LaunchError as error:
        print(f"paddle-nbext launcher: {error}", file=sys.stderr, flush=True)
        return 2
    workdir = env["TRAINER_PACKAGE"]
    if not os.path.isdir(workdir):
        print(f"paddle-nbext launcher: the package dir {workdir} does not exist", file=sys.stderr, flush=True)
        return 2
    if waits:
        missing = wait_for(waits, timeout)
        if missing is not None:
            position = waits.index(missing)
            print(
                f"paddle-nbext launcher: pserver {position} at {missing[0]}:{missing[1]} did not accept "
                f"connections within {timeout:g}s (PADDLE_NBEXT_WAIT_TIMEOUT); is it running?",
                file=sys.stderr,
                flush=True,
            )
            return WAIT_EXIT_CODE
    os.chdir(workdir)
    sys.stdout.flush()
    sys.stderr.flush()
    os.execvpe("/bin/sh", ["/bin/sh", "-c", env["ENTRY"]], env)
    return 0  # not reached: exec replaced this process


if __name__ == "__main__":
    sys.exit(main())
