"""One process per rank: the environment `paddle.distributed.launch` gives each process of a
trainer, computed here so both backends' launchers give the same (docs/paddle-facts.md, "GPUs,
several processes per node").

A trainer (a Kubernetes pod, a local replica) runs `ranks` processes: one per GPU when it has
GPUs, else the job's `procs_per_trainer`.  Trainer `t` of `T`, rank `r` of `R`:

* global rank `t*R + r` of `T*R` (`PADDLE_GLOBAL_RANK`/`_SIZE`, and the older
  `PADDLE_TRAINER_ID`/`PADDLE_TRAINERS_NUM`), local rank `r` of `R` (`PADDLE_LOCAL_RANK`/`_SIZE`,
  `PADDLE_RANK_IN_NODE`), `T` nodes (`PADDLE_NNODES`);
* one endpoint per rank, every trainer: the trainer's host with consecutive ports from its base
  port (`host:base`, `host:base+1`, ...), in global rank order (`PADDLE_TRAINER_ENDPOINTS`), and
  the rank's own (`PADDLE_CURRENT_ENDPOINT`);
* its device: `FLAGS_selected_gpus=r`, counted inside the set the container sees.  That set is
  `CUDA_VISIBLE_DEVICES` when set (CUDA renumbers what it lists from 0; empty: none), else the
  container runtime's `NVIDIA_VISIBLE_DEVICES` (indexes or UUIDs; `all` or unset: the GPUs the
  job asked for; `none`, `void` or empty: none).  A rank without a device trains with gloo on the
  CPU (`PADDLE_DISTRI_BACKEND=gloo`); a rank with one never gets that.

An entry point that runs `paddle.distributed.launch` itself is one process per trainer that
starts its ranks on its own: it gets the master (trainer 0's base endpoint), the node count and
its node rank as launch's environment forms (`PADDLE_MASTER`, `PADDLE_NNODES`, `PADDLE_RANK`,
which launch reads in place of `--master`, `--nnodes`, `--rank`), and its own log directory.

Pure functions of their inputs, standard library only: this file is shipped into every job.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

__all__ = [
    "RankError",
    "device_count",
    "launch_env",
    "rank_endpoints",
    "rank_env",
    "visible_devices",
]

#: NVIDIA_VISIBLE_DEVICES values that give the container no GPU.
NO_DEVICES = frozenset({"", "none", "void"})


class RankError(ValueError):
    """The ranks cannot be given what they need; the message says what and why."""


def visible_devices(env: Mapping[str, str]) -> tuple[str, list[str] | None]:
    """(the variable that decides, the devices the processes see, as listed there; None: all the
    container has, count unknown).  `CUDA_VISIBLE_DEVICES` when set, else `NVIDIA_VISIBLE_DEVICES`."""
    if "CUDA_VISIBLE_DEVICES" in env:
        raw = env["CUDA_VISIBLE_DEVICES"].strip()
        return "CUDA_VISIBLE_DEVICES", [part.strip() for part in raw.split(",") if part.strip()]
    given = env.get("NVIDIA_VISIBLE_DEVICES")
    if given is None or given.strip().lower() == "all":
        return "NVIDIA_VISIBLE_DEVICES", None
    if given.strip().lower() in NO_DEVICES:
        return "NVIDIA_VISIBLE_DEVICES", []
    return "NVIDIA_VISIBLE_DEVICES", [part.strip() for part in given.split(",") if part.strip()]


def device_count(env: Mapping[str, str], gpus: int, ranks: int) -> int:
    """How many GPUs the trainer's processes see: the listed ones, or (`all`, or nothing said)
    the `gpus` the job asked for; none for the CPU ranks of a job without GPUs.  RankError when a trainer that asked for GPUs sees none, or
    sees fewer than it has ranks to give one each."""
    if not gpus and ranks > 1:
        return 0  # CPU ranks (procs_per_trainer): gloo, whatever GPUs the machine shows
    name, listed = visible_devices(env)
    count = gpus if listed is None else len(listed)
    if gpus and count == 0:
        raise RankError(
            f"the trainer asked for {gpus} GPU{'s' if gpus != 1 else ''} but sees none ({name}={env.get(name, '')!r}); "
            "is the GPU device plugin (or the local gpu_pool) handing them out?"
        )
    if count and count < ranks:
        raise RankError(
            f"the trainer runs {ranks} ranks, one per GPU, but sees {count} GPU{'s' if count != 1 else ''} ({name}={env.get(name, '')!r})"
        )
    return count


def rank_endpoints(trainers: Sequence[tuple[str, int]], ranks: int) -> list[str]:
    """Every rank's endpoint in global rank order: each trainer's host with `ranks` consecutive
    ports from its base port."""
    return [f"{host}:{port + rank}" for host, port in trainers for rank in range(ranks)]


def rank_env(*, trainers: Sequence[tuple[str, int]], index: int, ranks: int, rank: int, devices: int, collective: bool) -> dict[str, str]:
    """The Paddle launch contract of rank `rank` of trainer `index` (`trainers`: every trainer's
    host and base port, in index order; `devices`: GPUs the trainer sees, `device_count`).
    Trainers of both modes get the ids, sizes and endpoints; the gloo fallback is collective's."""
    if not 0 <= index < len(trainers):
        raise RankError(f"trainer index {index} is out of range: only {len(trainers)} trainer endpoints are given")
    if not 0 <= rank < ranks:
        raise RankError(f"rank {rank} is out of range: the trainer runs {ranks}")
    endpoints = rank_endpoints(trainers, ranks)
    global_rank = index * ranks + rank
    env = {
        "PADDLE_GLOBAL_RANK": str(global_rank),
        "PADDLE_GLOBAL_SIZE": str(len(endpoints)),
        "PADDLE_LOCAL_RANK": str(rank),
        "PADDLE_LOCAL_SIZE": str(ranks),
        "PADDLE_NNODES": str(len(trainers)),
        "PADDLE_RANK_IN_NODE": str(rank),
        "PADDLE_TRAINER_ID": str(global_rank),
        "PADDLE_TRAINERS_NUM": str(len(endpoints)),
        "PADDLE_TRAINER_ENDPOINTS": ",".join(endpoints),
        "PADDLE_CURRENT_ENDPOINT": endpoints[global_rank],
    }
    if devices:
        env["FLAGS_selected_gpus"] = str(rank)
    elif collective:
        # Without it init_parallel_env takes a legacy path that fails on CPU (docs/paddle-facts.md).
        env["PADDLE_DISTRI_BACKEND"] = "gloo"
    return env


#: launch's own flag for where it writes `workerlog.<i>`; given in the entry point, it is kept.
LAUNCH_LOG_DIR_FLAG = "--log_dir"


def launch_env(*, trainers: Sequence[tuple[str, int]], index: int, entry: str, log_dir: str) -> dict[str, str]:
    """What a `paddle.distributed.launch` entry point of trainer `index` needs to rendezvous with
    the others: the master (trainer 0's base endpoint, which the launch of trainer 0 serves), the
    node count and this node's rank, in the environment forms launch reads; and a log directory
    of its own (`log_dir`), since every trainer's launch would write `log/workerlog.0` in the one
    package directory, unless the entry point names one."""
    if not 0 <= index < len(trainers):
        raise RankError(f"trainer index {index} is out of range: only {len(trainers)} trainer endpoints are given")
    host, port = trainers[0]
    env = {"PADDLE_MASTER": f"{host}:{port}", "PADDLE_NNODES": str(len(trainers)), "PADDLE_RANK": str(index)}
    if LAUNCH_LOG_DIR_FLAG not in entry.replace("=", " ").split():
        env["PADDLE_LOG_DIR"] = os.path.join(log_dir, f"trainer-{index}.launch")
    return env
