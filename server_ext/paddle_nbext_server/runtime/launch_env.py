"""A replica's process environment from the launcher's few `PADDLE_NBEXT_*` inputs
(docs/architecture.md, "Launcher"): the Paddle environment contract for its role, mode and rank,
where `report()` writes, and which endpoints it must wait for.

Why apart from the launcher's process code: it is pure (inputs in, environment out), so every
role, mode and rank is unit-testable, and a malformed input is a `LaunchError` whose message names
the variable and what it must hold.

Standard library only: this file is shipped into every job beside the launcher.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping

if __package__:  # imported from the installed package (the server, the local backend)
    from paddle_nbext.model import contract
else:  # a plain script: in a job's bundle, the contract shipped beside it (even where the image
    # has some other paddle-nbext installed); run from a source tree, the installed one
    try:
        import contract  # type: ignore[import-not-found,no-redef]
    except ImportError:
        from paddle_nbext.model import contract

if __package__:
    from . import ranks, replica_files
else:  # a plain script: the bundle's files beside this one
    import ranks  # type: ignore[import-not-found,no-redef]
    import replica_files  # type: ignore[import-not-found,no-redef]

Mode, Role = contract.Mode, contract.Role

#: GLOG_minloglevel when the job sets none: 2 keeps Paddle's C++ errors and drops INFO/WARNING.
QUIET_GLOG_LEVEL = "2"

#: Variables of the Paddle contract (dropped from the inherited environment first).
CONTRACT_VARS = contract.PADDLE_CONTRACT_VARS
DEFAULT_WAIT_TIMEOUT = 300.0


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


def _whole(env: Mapping[str, str], name: str, default: int, lowest: int) -> int:
    raw = env.get(name, "").strip()
    if not raw:
        return default
    if not raw.isdigit() or int(raw) < lowest:
        raise LaunchError(f"{name} must be a whole number of at least {lowest}, got {raw!r}")
    return int(raw)


def ranks_per_trainer(base: Mapping[str, str]) -> int:
    """`PADDLE_NBEXT_PROCS`: the processes (ranks) every trainer of the job runs [1]."""
    return _whole(base, "PADDLE_NBEXT_PROCS", 1, 1)


def runs_launch(base: Mapping[str, str]) -> bool:
    """True for a trainer whose entry point runs `paddle.distributed.launch` (it starts its ranks itself)."""
    return base.get("PADDLE_NBEXT_ROLE") == Role.TRAINER and contract.launch_entry(base.get("PADDLE_NBEXT_ENTRY", ""))


def process_count(base: Mapping[str, str]) -> int:
    """How many processes this replica's launcher starts: one per rank for a trainer, one for a
    pserver and for a `paddle.distributed.launch` entry point."""
    if base.get("PADDLE_NBEXT_ROLE") != Role.TRAINER or runs_launch(base):
        return 1
    return ranks_per_trainer(base)


def build_env(base: Mapping[str, str], pylib: str | None = None, rank: int = 0) -> dict[str, str]:
    """The full environment of one process of the replica (`rank`, of `process_count`): `base`
    without stale contract variables, plus the Paddle contract for its role, index, mode and
    rank (`ranks.rank_env`; a `paddle.distributed.launch` entry point gets `ranks.launch_env`),
    and where `report()` writes (`replica_files.metrics_file`), with the bundle's `pylib` (when
    given) first on `PYTHONPATH`.  Pure, so every role, mode and rank is unit-testable."""
    mode = _require(base, "PADDLE_NBEXT_MODE")
    role = _require(base, "PADDLE_NBEXT_ROLE")
    if mode not in tuple(Mode):
        raise LaunchError(f"PADDLE_NBEXT_MODE must be 'ps' or 'collective', got {mode!r}")
    if role not in contract.ROLES:
        raise LaunchError(f"PADDLE_NBEXT_ROLE must be 'pserver' or 'trainer', got {role!r}")
    if mode == Mode.COLLECTIVE and role != Role.TRAINER:
        raise LaunchError("collective mode has only trainers; PADDLE_NBEXT_ROLE must be 'trainer'")
    index = replica_index(base)
    entry = _require(base, "PADDLE_NBEXT_ENTRY")
    workdir = _require(base, "PADDLE_NBEXT_WORKDIR")
    pservers = _endpoints(base, "PADDLE_NBEXT_PSERVER_ENDPOINTS")
    trainers = _endpoints(base, "PADDLE_NBEXT_TRAINER_ENDPOINTS")
    if mode == Mode.PS and not pservers:
        raise LaunchError("PADDLE_NBEXT_PSERVER_ENDPOINTS is empty; ps mode needs every pserver's host:port")
    if not trainers:
        raise LaunchError("PADDLE_NBEXT_TRAINER_ENDPOINTS is empty; give every trainer's host:port")
    own_list = pservers if role == Role.PSERVER else trainers
    if index >= len(own_list):
        raise LaunchError(f"{role} index {index} is out of range: only {len(own_list)} {role} endpoints are given")
    own_host, own_port = own_list[index]
    per_trainer = ranks_per_trainer(base)
    gpus = _whole(base, "PADDLE_NBEXT_GPUS", 0, 0)
    count = process_count(base)
    if not 0 <= rank < count:
        raise LaunchError(f"rank {rank} is out of range: this {role} runs {count} process{'es' if count != 1 else ''}")
    launch = runs_launch(base)

    env = {key: value for key, value in base.items() if key not in CONTRACT_VARS}
    env.update(
        PADDLE_JOB_NAME=base.get("PADDLE_NBEXT_JOB", ""),
        # Every rank of every trainer is a trainer to Paddle (pservers count them all).
        PADDLE_TRAINERS_NUM=str(len(trainers) * per_trainer),
        PADDLE_TRAINER_ENDPOINTS=",".join(ranks.rank_endpoints(trainers, per_trainer)),
        TRAINERS=str(len(trainers)),
        PSERVERS=str(len(pservers)),
        ENTRY=entry,
        TRAINER_PACKAGE=workdir,
        POD_IP=own_host,
        PADDLE_PORT=str(own_port + rank),
    )
    env.setdefault("PYTHONUNBUFFERED", "1")  # logs must appear while the job runs, not at exit
    # Paddle's C++ INFO and WARNING lines are most of every log and read like failures
    # (docs/paddle-facts.md); errors only, unless the job's env asks for more.
    env.setdefault("GLOG_minloglevel", QUIET_GLOG_LEVEL)
    if mode == Mode.PS:
        env["PADDLE_PSERVERS_IP_PORT_LIST"] = _join(pservers)
        env["FLAGS_enable_pir_api"] = "0"  # PS minimize() fails on PIR programs (docs/paddle-facts.md)
    env["TRAINING_ROLE"] = "PSERVER" if role == Role.PSERVER else "TRAINER"
    if role == Role.PSERVER:
        env["PADDLE_PSERVER_ID"] = str(index)
    elif launch:
        # paddle.distributed.launch gives its ranks their contract and needs only the
        # rendezvous.  It must not see PADDLE_TRAINER_ENDPOINTS: launch then takes the node
        # count from the distinct hosts there (one, for local trainers all on 127.0.0.1) and
        # its first entry as the master.
        env.pop("PADDLE_TRAINER_ENDPOINTS", None)
        env.pop("PADDLE_TRAINERS_NUM", None)
        launch_logs = replica_files.metrics_dir(base) or os.path.join(workdir, "log")
        for key, value in ranks.launch_env(trainers=trainers, index=index, entry=entry, log_dir=launch_logs).items():
            env[key] = value if key != "PADDLE_LOG_DIR" else env.get(key, value)
    else:
        try:
            devices = ranks.device_count(base, gpus, per_trainer)
            contract_env = ranks.rank_env(
                trainers=trainers, index=index, ranks=per_trainer, rank=rank, devices=devices, collective=mode == Mode.COLLECTIVE
            )
        except ranks.RankError as error:
            raise LaunchError(str(error)) from None
        backend = contract_env.pop("PADDLE_DISTRI_BACKEND", None)
        env.update(contract_env)
        if backend is not None:  # no device: gloo, unless the job's env chose another
            env.setdefault("PADDLE_DISTRI_BACKEND", backend)
    env.pop(replica_files.METRICS_FILE_VAR, None)
    env.pop(replica_files.RANK_VAR, None)
    metrics = replica_files.metrics_file(base, role, index, rank if count > 1 else None)
    if metrics is not None:
        env[replica_files.METRICS_FILE_VAR] = metrics
    if count > 1:
        env[replica_files.RANK_VAR] = str(rank)
    if pylib is not None:
        inherited = env.get("PYTHONPATH", "")
        env["PYTHONPATH"] = pylib + (os.pathsep + inherited if inherited else "")
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
    if base.get("PADDLE_NBEXT_MODE") == Mode.PS and base.get("PADDLE_NBEXT_ROLE") == Role.TRAINER:
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


def peer_hosts(base: Mapping[str, str], own_host: str) -> list[str]:
    """The other trainers' host names a collective replica must be able to resolve before Paddle
    starts (on Kubernetes, where `own_host` is set): Paddle's rendezvous resolves them once and
    fails the job at once ("Temporary failure in name resolution") when a peer's pod has no
    address yet, e.g. while the kubelet still retries mounting its home.  None elsewhere."""
    if not own_host or base.get("PADDLE_NBEXT_MODE") != Mode.COLLECTIVE:
        return []
    hosts = dict.fromkeys(host for host, _ in _endpoints(base, "PADDLE_NBEXT_TRAINER_ENDPOINTS"))
    return [host for host in hosts if host != own_host]
