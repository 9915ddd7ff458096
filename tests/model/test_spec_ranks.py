"""`procs_per_trainer` in the job model (rules.py `ranks_fit`) and in the local plan: which
combinations are refused, naming the field and the fix, and the ports each rank gets."""

from __future__ import annotations

import pytest

from paddle_nbext.model.spec import JobSpec, Limits, SpecError
from paddle_nbext_server.backends.local.plan import replica_plans
from paddle_nbext_server.backends.local.ports import HOST, free_ports, port_free
from paddle_nbext_server.backends.local.records import Capacity, Plan, ResourceRequest

LAUNCH = "python -m paddle.distributed.launch --nproc_per_node 3 train.py"


@pytest.mark.parametrize(
    ("fields", "ranks"),
    [
        ({}, 1),
        ({"procs_per_trainer": 3}, 3),
        ({"procs_per_trainer": "4"}, 4),
        ({"trainer_gpu": 8}, 8),
        ({"trainer_gpu": 8, "procs_per_trainer": 8}, 8),
        ({"trainer_gpu": 2, "pservers": 1}, 2),
        ({"procs_per_trainer": 2, "pservers": 2}, 2),  # PS trainers of several ranks
        ({"entry_point": LAUNCH}, 1),
        ({"entry_point": LAUNCH, "trainer_gpu": 8}, 1),  # launch starts one rank per GPU itself
    ],
)
def test_ranks_per_trainer(fields: dict[str, object], ranks: int) -> None:
    spec = JobSpec.from_dict({"entry_point": "python train.py", **fields})
    assert spec.ranks_per_trainer() == (ranks if not fields.get("entry_point") else spec.trainer_gpu or 1)
    assert JobSpec.from_dict(spec.to_dict()) == spec


@pytest.mark.parametrize(
    ("fields", "field", "message"),
    [
        (
            {"entry_point": LAUNCH, "procs_per_trainer": 3},
            "procs_per_trainer",
            "must be 1 when the entry point runs paddle.distributed.launch, which starts the ranks itself; "
            "set --nproc_per_node in the entry point instead of procs_per_trainer 3, "
            "or run the script itself (python train.py) with procs_per_trainer",
        ),
        (
            {"entry_point": LAUNCH, "pservers": 1},
            "entry_point",
            "paddle.distributed.launch runs collective jobs here; use mode 'collective', or run the script itself "
            "(python train.py) in ps mode, where every replica already gets its role",
        ),
        (
            {"trainer_gpu": 2, "procs_per_trainer": 3},
            "procs_per_trainer",
            "a trainer with GPUs runs one process per GPU (2); set procs_per_trainer to 1 or 2, or trainer_gpu to 3",
        ),
        ({"procs_per_trainer": 0}, "procs_per_trainer", "must be at least 1, got 0"),
        ({"procs_per_trainer": 65}, "procs_per_trainer", "must be at most 64 on this server, got 65"),
    ],
)
def test_combinations_that_cannot_run_are_refused_naming_the_field(fields: dict[str, object], field: str, message: str) -> None:
    with pytest.raises(SpecError) as caught:
        JobSpec.from_dict({"entry_point": "python train.py", **fields})
    assert (caught.value.field, caught.value.message) == (field, message)


def test_the_server_limit_bounds_ranks_from_gpus_too() -> None:
    limits = Limits(max_gpu_per_replica=16, max_procs_per_trainer=4)
    with pytest.raises(SpecError) as caught:
        JobSpec.from_dict({"entry_point": "python train.py", "trainer_gpu": 8}, limits=limits)
    assert (caught.value.field, caught.value.message) == ("trainer_gpu", "8 GPUs mean 8 processes per trainer; this server allows 4")


def test_the_field_reaches_flags_and_schema() -> None:
    from paddle_nbext.model.schema import job_schema
    from paddle_nbext.options import FIELD_FLAGS

    assert FIELD_FLAGS["procs_per_trainer"] == "--procs-per-trainer"
    schema = job_schema(Limits())["properties"]["procs_per_trainer"]
    assert (schema["x-kind"], schema["x-rule"], schema["minimum"], schema["maximum"]) == ("count", "ranks_fit", 1, 64)


def test_local_plan_gives_each_rank_a_port_of_its_trainers_block() -> None:
    spec = JobSpec.from_dict({"entry_point": "python train.py", "trainers": 2, "procs_per_trainer": 3})
    replicas = replica_plans(spec)
    assert [(r.role, r.index, r.ranks) for r in replicas] == [("trainer", 0, 3), ("trainer", 1, 3)]
    blocks = [set(r.ports) for r in replicas]
    assert [len(block) for block in blocks] == [3, 3] and not blocks[0] & blocks[1]
    assert all(port_free(HOST, port) for block in blocks for port in block)
    plan = Plan(
        job="ranks",
        mode="collective",
        entry_point="python train.py",
        workdir="/w",
        job_dir="/j",
        python="python3",
        launcher="/j/runtime/launcher.py",
        capacity=Capacity(cpu=2, memory=2**30, gpus=[]),
        request=ResourceRequest(cpu=2, memory=2**30, gpus=0),
        replicas=replicas,
    )
    env = plan.launcher_env(replicas[1], None)
    assert (env["PADDLE_NBEXT_PROCS"], env["PADDLE_NBEXT_GPUS"]) == ("3", "0")
    assert env["PADDLE_NBEXT_TRAINER_ENDPOINTS"] == ",".join(r.endpoint for r in replicas)
    assert plan.ports() == blocks[0] | blocks[1]
    assert Plan.from_json(plan.to_json()) == plan


def test_free_ports_finds_a_block_around_taken_ones() -> None:
    base = free_ports(HOST, 4)
    assert all(port_free(HOST, port) for port in range(base, base + 4))
    again = free_ports(HOST, 4, avoid={base + 2})
    assert not {base + 2} & set(range(again, again + 4))
