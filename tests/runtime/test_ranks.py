"""One process per rank: the exact Paddle launch contract of every rank (runtime/ranks.py), as
the launcher gives it (runtime/launcher.py), for CPU ranks and for 1, 2 and 8 GPUs given as
NVIDIA_VISIBLE_DEVICES (Kubernetes' device plugin) and as CUDA_VISIBLE_DEVICES (the local pool)."""

from __future__ import annotations

from pathlib import Path

import pytest

from paddle_nbext.model.contract import launch_entry
from paddle_nbext_server.runtime import launcher, ranks

TRAINERS = "job-trainer-0.job:6170,job-trainer-1.job:6170"
TWO = [("job-trainer-0.job", 6170), ("job-trainer-1.job", 6170)]


def inputs(**overrides: str | None) -> dict[str, str]:
    base: dict[str, str | None] = {
        "PATH": "/usr/bin:/bin",
        "PADDLE_NBEXT_JOB": "gpus",
        "PADDLE_NBEXT_MODE": "collective",
        "PADDLE_NBEXT_ROLE": "trainer",
        "PADDLE_NBEXT_INDEX": "1",
        "PADDLE_NBEXT_TRAINER_ENDPOINTS": TRAINERS,
        "PADDLE_NBEXT_ENTRY": "python train.py",
        "PADDLE_NBEXT_WORKDIR": "/home/alice/work",
    }
    base.update(overrides)
    return {k: v for k, v in base.items() if v is not None}


RANK_NAMES = (
    "PADDLE_GLOBAL_RANK",
    "PADDLE_GLOBAL_SIZE",
    "PADDLE_LOCAL_RANK",
    "PADDLE_LOCAL_SIZE",
    "PADDLE_NNODES",
    "PADDLE_RANK_IN_NODE",
    "PADDLE_TRAINER_ID",
    "PADDLE_TRAINERS_NUM",
    "PADDLE_TRAINER_ENDPOINTS",
    "PADDLE_CURRENT_ENDPOINT",
    "FLAGS_selected_gpus",
    "PADDLE_DISTRI_BACKEND",
)


def contract(env: dict[str, str]) -> dict[str, str]:
    return {name: env[name] for name in RANK_NAMES if name in env}


def endpoints(per_trainer: int) -> str:
    return ",".join(f"job-trainer-{t}.job:{6170 + r}" for t in range(2) for r in range(per_trainer))


@pytest.mark.parametrize(
    ("devices", "gpus"),
    [
        ({"NVIDIA_VISIBLE_DEVICES": "3"}, 1),
        ({"CUDA_VISIBLE_DEVICES": "5"}, 1),
        ({"NVIDIA_VISIBLE_DEVICES": "GPU-6b7c1e7a-0c1d-4d8e-9f00-1a2b3c4d5e6f"}, 1),
        ({"NVIDIA_VISIBLE_DEVICES": "all"}, 1),
        ({}, 1),
    ],
)
def test_one_gpu_trainer_runs_one_rank_on_its_gpu(devices: dict[str, str], gpus: int) -> None:
    base = inputs(PADDLE_NBEXT_PROCS="1", PADDLE_NBEXT_GPUS=str(gpus), **devices)
    assert launcher.process_count(base) == 1
    assert contract(launcher.build_env(base)) == {
        "PADDLE_GLOBAL_RANK": "1",
        "PADDLE_GLOBAL_SIZE": "2",
        "PADDLE_LOCAL_RANK": "0",
        "PADDLE_LOCAL_SIZE": "1",
        "PADDLE_NNODES": "2",
        "PADDLE_RANK_IN_NODE": "0",
        "PADDLE_TRAINER_ID": "1",
        "PADDLE_TRAINERS_NUM": "2",
        "PADDLE_TRAINER_ENDPOINTS": TRAINERS,
        "PADDLE_CURRENT_ENDPOINT": "job-trainer-1.job:6170",
        "FLAGS_selected_gpus": "0",
    }


@pytest.mark.parametrize(
    "devices",
    [
        {"NVIDIA_VISIBLE_DEVICES": "0,1"},
        {"NVIDIA_VISIBLE_DEVICES": "GPU-aaaa,GPU-bbbb"},
        {"CUDA_VISIBLE_DEVICES": "2,3"},
        # CUDA_VISIBLE_DEVICES narrows what the container runtime gave: it decides.
        {"NVIDIA_VISIBLE_DEVICES": "all", "CUDA_VISIBLE_DEVICES": "6,7"},
    ],
)
def test_two_gpu_trainer_runs_two_ranks_each_on_its_gpu(devices: dict[str, str]) -> None:
    base = inputs(PADDLE_NBEXT_PROCS="2", PADDLE_NBEXT_GPUS="2", **devices)
    assert launcher.process_count(base) == 2
    got = [contract(launcher.build_env(base, rank=rank)) for rank in range(2)]
    assert got == [
        {
            "PADDLE_GLOBAL_RANK": str(2 + rank),
            "PADDLE_GLOBAL_SIZE": "4",
            "PADDLE_LOCAL_RANK": str(rank),
            "PADDLE_LOCAL_SIZE": "2",
            "PADDLE_NNODES": "2",
            "PADDLE_RANK_IN_NODE": str(rank),
            "PADDLE_TRAINER_ID": str(2 + rank),
            "PADDLE_TRAINERS_NUM": "4",
            "PADDLE_TRAINER_ENDPOINTS": endpoints(2),
            "PADDLE_CURRENT_ENDPOINT": f"job-trainer-1.job:{6170 + rank}",
            "FLAGS_selected_gpus": str(rank),
        }
        for rank in range(2)
    ]


@pytest.mark.parametrize("variable", ["NVIDIA_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES"])
def test_eight_gpu_trainer_runs_eight_ranks(variable: str) -> None:
    base = inputs(PADDLE_NBEXT_INDEX="0", PADDLE_NBEXT_PROCS="8", PADDLE_NBEXT_GPUS="8", **{variable: ",".join(map(str, range(8, 16)))})
    assert launcher.process_count(base) == 8
    envs = [launcher.build_env(base, rank=rank) for rank in range(8)]
    assert [env["FLAGS_selected_gpus"] for env in envs] == [str(r) for r in range(8)]
    assert [env["PADDLE_GLOBAL_RANK"] for env in envs] == [str(r) for r in range(8)]
    assert [env["PADDLE_CURRENT_ENDPOINT"] for env in envs] == [f"job-trainer-0.job:{6170 + r}" for r in range(8)]
    assert {env["PADDLE_TRAINER_ENDPOINTS"] for env in envs} == {endpoints(8)}
    assert {(env["PADDLE_GLOBAL_SIZE"], env["PADDLE_LOCAL_SIZE"], env["PADDLE_NNODES"]) for env in envs} == {("16", "8", "2")}
    assert not [env for env in envs if "PADDLE_DISTRI_BACKEND" in env]


def test_gpu_ranks_never_get_gloo_even_without_cuda_visible_devices() -> None:
    """The held-out run's bug: the device plugin sets NVIDIA_VISIBLE_DEVICES only, and gloo moved
    the training to the CPU."""
    env = launcher.build_env(inputs(PADDLE_NBEXT_PROCS="1", PADDLE_NBEXT_GPUS="1", NVIDIA_VISIBLE_DEVICES="GPU-1"))
    assert "PADDLE_DISTRI_BACKEND" not in env
    assert "CUDA_VISIBLE_DEVICES" not in env
    assert env["FLAGS_selected_gpus"] == "0"


def test_cpu_ranks_use_gloo_whatever_gpus_the_machine_shows() -> None:
    base = inputs(PADDLE_NBEXT_PROCS="3", PADDLE_NBEXT_GPUS="0", CUDA_VISIBLE_DEVICES="0")
    envs = [launcher.build_env(base, rank=rank) for rank in range(3)]
    assert [contract(env) for env in envs] == [
        {
            "PADDLE_GLOBAL_RANK": str(3 + rank),
            "PADDLE_GLOBAL_SIZE": "6",
            "PADDLE_LOCAL_RANK": str(rank),
            "PADDLE_LOCAL_SIZE": "3",
            "PADDLE_NNODES": "2",
            "PADDLE_RANK_IN_NODE": str(rank),
            "PADDLE_TRAINER_ID": str(3 + rank),
            "PADDLE_TRAINERS_NUM": "6",
            "PADDLE_TRAINER_ENDPOINTS": endpoints(3),
            "PADDLE_CURRENT_ENDPOINT": f"job-trainer-1.job:{6170 + rank}",
            "PADDLE_DISTRI_BACKEND": "gloo",
        }
        for rank in range(3)
    ]


@pytest.mark.parametrize("none", ["none", "void", ""])
def test_cpu_trainer_with_no_visible_gpu_uses_gloo(none: str) -> None:
    env = launcher.build_env(inputs(PADDLE_NBEXT_GPUS="0", NVIDIA_VISIBLE_DEVICES=none))
    assert env["PADDLE_DISTRI_BACKEND"] == "gloo"
    assert "FLAGS_selected_gpus" not in env


@pytest.mark.parametrize(
    ("devices", "words"),
    [
        ({"NVIDIA_VISIBLE_DEVICES": "void"}, "asked for 2 GPUs but sees none (NVIDIA_VISIBLE_DEVICES='void')"),
        ({"CUDA_VISIBLE_DEVICES": ""}, "asked for 2 GPUs but sees none (CUDA_VISIBLE_DEVICES='')"),
        ({"NVIDIA_VISIBLE_DEVICES": "GPU-1"}, "runs 2 ranks, one per GPU, but sees 1 GPU (NVIDIA_VISIBLE_DEVICES='GPU-1')"),
    ],
)
def test_a_gpu_trainer_without_its_gpus_is_refused_in_words(devices: dict[str, str], words: str) -> None:
    with pytest.raises(launcher.LaunchError, match=words.replace("(", r"\(").replace(")", r"\)")):
        launcher.build_env(inputs(PADDLE_NBEXT_PROCS="2", PADDLE_NBEXT_GPUS="2", **devices))


def test_ps_trainer_ranks_are_trainers_to_the_pservers() -> None:
    common = {
        "PADDLE_NBEXT_MODE": "ps",
        "PADDLE_NBEXT_PSERVER_ENDPOINTS": "job-pserver-0.job:6174",
        "PADDLE_NBEXT_PROCS": "2",
        "PADDLE_NBEXT_GPUS": "2",
        "NVIDIA_VISIBLE_DEVICES": "all",
    }
    second = launcher.build_env(inputs(**common), rank=1)
    assert (second["TRAINING_ROLE"], second["PADDLE_TRAINER_ID"], second["PADDLE_TRAINERS_NUM"]) == ("TRAINER", "3", "4")
    assert (second["POD_IP"], second["PADDLE_PORT"], second["FLAGS_selected_gpus"]) == ("job-trainer-1.job", "6171", "1")
    pserver = launcher.build_env(inputs(**common, PADDLE_NBEXT_ROLE="pserver", PADDLE_NBEXT_INDEX="0"))
    assert launcher.process_count(inputs(**common, PADDLE_NBEXT_ROLE="pserver", PADDLE_NBEXT_INDEX="0")) == 1
    assert pserver["PADDLE_TRAINERS_NUM"] == "4"
    assert (pserver["POD_IP"], pserver["PADDLE_PORT"]) == ("job-pserver-0.job", "6174")
    assert "FLAGS_selected_gpus" not in pserver


def test_each_rank_reports_into_a_file_of_its_own(tmp_path: Path) -> None:
    base = inputs(PADDLE_NBEXT_PROCS="3", PADDLE_NBEXT_METRICS_DIR=str(tmp_path))
    files = [launcher.build_env(base, rank=rank)[launcher.METRICS_FILE_VAR] for rank in range(3)]
    assert files == [
        str(tmp_path / "trainer-1.metrics.jsonl"),
        str(tmp_path / "trainer-1.rank-1.metrics.jsonl"),
        str(tmp_path / "trainer-1.rank-2.metrics.jsonl"),
    ]
    assert [launcher.build_env(base, rank=rank)[launcher.RANK_VAR] for rank in range(3)] == ["0", "1", "2"]
    assert launcher.RANK_VAR not in launcher.build_env(inputs(PADDLE_NBEXT_METRICS_DIR=str(tmp_path)))


def test_a_launch_entry_point_gets_the_rendezvous_and_runs_once(tmp_path: Path) -> None:
    entry = "python -m paddle.distributed.launch --nproc_per_node 3 train.py"
    base = inputs(PADDLE_NBEXT_ENTRY=entry, PADDLE_NBEXT_GPUS="0", PADDLE_NBEXT_METRICS_DIR=str(tmp_path))
    assert launcher.process_count(base) == 1
    env = launcher.build_env(base)
    assert (env["PADDLE_MASTER"], env["PADDLE_NNODES"], env["PADDLE_RANK"]) == ("job-trainer-0.job:6170", "2", "1")
    assert env["POD_IP"] == "job-trainer-1.job"  # launch's --host: the address its ranks listen on
    assert env["PADDLE_LOG_DIR"] == str(tmp_path / "trainer-1.launch")
    # launch gives its ranks their contract, devices and gloo itself; none may leak from here.
    assert not {"FLAGS_selected_gpus", "PADDLE_DISTRI_BACKEND", "PADDLE_GLOBAL_RANK", "PADDLE_LOCAL_SIZE"} & set(env)
    # launch would take the node count from the hosts of PADDLE_TRAINER_ENDPOINTS (one, locally)
    assert not {"PADDLE_TRAINER_ENDPOINTS", "PADDLE_TRAINERS_NUM", "PADDLE_TRAINER_ID", "PADDLE_CURRENT_ENDPOINT"} & set(env)
    assert "PADDLE_LOG_DIR" not in launcher.build_env({**base, "PADDLE_NBEXT_ENTRY": entry + " --log_dir mine"})
    assert launcher.build_env({**base, "PADDLE_LOG_DIR": "/tmp/own"})["PADDLE_LOG_DIR"] == "/tmp/own"


@pytest.mark.parametrize(
    ("entry", "launch"),
    [
        ("python -m paddle.distributed.launch train.py", True),
        ("python3 -u -m paddle.distributed.launch --nnodes 2 train.py", True),
        ("/opt/conda/bin/python3.11 -mpaddle.distributed.launch train.py", True),
        ("OMP_NUM_THREADS=1 python -m paddle.distributed.launch train.py", True),
        ("fleetrun --nproc_per_node 2 train.py", True),
        ("python train.py", False),
        ("python -c 'import paddle.distributed.launch'", False),
        ("bash run.sh paddle.distributed.launch", False),
    ],
)
def test_launch_entry_points_are_recognised(entry: str, launch: bool) -> None:
    assert launch_entry(entry) is launch


def test_rank_env_refuses_what_cannot_be() -> None:
    with pytest.raises(ranks.RankError, match="rank 3 is out of range: the trainer runs 3"):
        ranks.rank_env(trainers=TWO, index=0, ranks=3, rank=3, devices=0, collective=True)
    with pytest.raises(ranks.RankError, match="trainer index 2 is out of range"):
        ranks.rank_env(trainers=TWO, index=2, ranks=1, rank=0, devices=0, collective=True)
    with pytest.raises(launcher.LaunchError, match="PADDLE_NBEXT_PROCS must be a whole number of at least 1, got '0'"):
        launcher.build_env(inputs(PADDLE_NBEXT_PROCS="0"))
