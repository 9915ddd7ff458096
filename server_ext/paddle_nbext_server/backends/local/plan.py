"""What a submitted job will use and run: the machine's capacity, the check that a job fits it
at all, the `Plan` its master follows and the status it starts with.

Pure decisions from the spec and the backend's settings (no files are written here), so the dry
run previews exactly what a submit would run.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from paddle_nbext.model.contract import Phase, Role, format_bytes
from paddle_nbext.model.quantity import Quantity, format_cpu
from paddle_nbext.model.spec import JobSpec, job_field
from paddle_nbext.model.status import JobStatus, ReplicaStatus

from ..base import InvalidRequest, SubmitRequest
from .ports import HOST, free_ports
from .records import Capacity, Plan, ReplicaPlan, ResourceRequest, StatusRecord
from .store import BACKEND_NAME

#: The smallest poll interval a master honours: below it the master only burns a core.
MIN_MASTER_POLL = 0.05


@dataclass(frozen=True)
class PlanSettings:
    """The backend's configuration a plan is made from (`c.LocalBackend.*`)."""

    python: str
    capacity: Capacity
    wait_timeout: float
    grace_period: float
    poll_interval: float
    memory_headroom: int
    cgroup_root: str
    usage_interval: float = 0.0
    memory_warn_after: float = 5.0


def largest_share(spec: JobSpec, resource: str) -> str:
    """The field to name when a job asks for too much `resource` ("cpu" or "mem") in total:
    the one whose replicas ask for the most of it (`pserver_mem` when 1 pserver wants 100Ti and
    the trainers 1Gi), the trainers' on a tie."""
    trainers = Quantity.parse(getattr(spec, f"trainer_{resource}")) * spec.trainers
    pservers = Quantity.parse(getattr(spec, f"pserver_{resource}")) * spec.pservers
    return f"pserver_{resource}" if pservers > trainers else f"trainer_{resource}"


def _label(name: str) -> str:
    """A field as the forms label it ("Memory per trainer"): what the user sees and changes,
    where the API's name ("trainer_mem") means nothing to them; the answer's `field` names it."""
    return f'"{job_field(name).info.label}"'


def check_fits_at_all(spec: JobSpec, capacity: Capacity) -> ResourceRequest:
    """A job bigger than the whole machine would wait forever: refuse it, naming the field."""
    totals = spec.totals()
    request = ResourceRequest(cpu=float(totals["cpu"]), memory=int(totals["memory"]), gpus=int(totals["gpu"]))
    cpu_field, memory_field = largest_share(spec, "cpu"), largest_share(spec, "mem")
    if request.gpus and not capacity.gpus:
        raise InvalidRequest(
            f"this server's local backend hands out no GPUs (c.LocalBackend.gpu_pool is empty); set {_label('trainer_gpu')} to 0",
            "trainer_gpu",
        )
    if request.gpus > len(capacity.gpus):
        raise InvalidRequest(
            f"{spec.trainers} trainers × {spec.trainer_gpu} GPU = {request.gpus} GPUs, but the local GPU pool has "
            f"{len(capacity.gpus)}; lower {_label('trainer_gpu')} or {_label('trainers')}",
            "trainer_gpu",
        )
    if request.cpu > capacity.cpu + 1e-9:
        raise InvalidRequest(
            f"the job requests {format_cpu(totals['cpu'])} CPU in total but local jobs may use at most "
            f"{capacity.cpu:g} (c.LocalBackend.max_cpu × cpu_overcommit); lower {_label(cpu_field)} or the replica counts",
            cpu_field,
        )
    if request.memory > capacity.memory:
        raise InvalidRequest(
            f"the job requests {format_bytes(request.memory)} of memory in total but local jobs may use at most "
            f"{format_bytes(capacity.memory)}; lower {_label(memory_field)} or the replica counts",
            memory_field,
        )
    return request


def replica_plans(spec: JobSpec) -> list[ReplicaPlan]:
    """Every replica of the spec, pservers first, each on its own free port of 127.0.0.1; a
    trainer of several ranks on a block of consecutive free ports, one per rank."""
    taken: set[int] = set()
    replicas = []
    for role in spec.roles():
        cpu = spec.pserver_cpu if role == Role.PSERVER else spec.trainer_cpu
        memory = spec.pserver_mem if role == Role.PSERVER else spec.trainer_mem
        ranks = spec.ranks_per_trainer() if role == Role.TRAINER else 1
        for index in range(spec.replicas(role)):
            port = free_ports(HOST, ranks, avoid=taken)
            taken.update(range(port, port + ranks))
            replicas.append(
                ReplicaPlan(
                    role=role,
                    index=index,
                    endpoint=f"{HOST}:{port}",
                    cpu=float(Quantity.parse(cpu).value),
                    memory=int(Quantity.parse(memory).value),
                    memory_text=memory,
                    gpus=spec.trainer_gpu if role == Role.TRAINER else 0,
                    ranks=ranks,
                )
            )
    return replicas


def build_plan(spec: JobSpec, job_dir: Path, workdir: Path, launcher: Path, resources: ResourceRequest, settings: PlanSettings) -> Plan:
    """The plan the job's master follows; `launcher` is the job's own copy of the runtime's."""
    return Plan(
        job=spec.job_name,
        mode=spec.mode,
        entry_point=spec.entry_point,
        workdir=str(workdir),
        job_dir=str(job_dir),
        python=settings.python,
        launcher=str(launcher),
        capacity=settings.capacity,
        request=resources,
        replicas=replica_plans(spec),
        env=dict(spec.env),
        max_restarts=spec.max_restarts,
        keep_checkpoints=spec.keep_checkpoints,
        timeout=spec.timeout,
        wait_timeout=settings.wait_timeout,
        grace_period=settings.grace_period,
        poll_interval=max(settings.poll_interval, MIN_MASTER_POLL),
        memory_headroom=settings.memory_headroom,
        cgroup_root=settings.cgroup_root,
        stall_timeout=spec.stall_timeout,
        on_stall=spec.on_stall,
        usage_interval=settings.usage_interval,
        memory_warn_after=settings.memory_warn_after,
        progress_pattern=spec.progress_pattern,
    )


def initial_status(request: SubmitRequest, created: str, message: str) -> StatusRecord:
    """The job as listed before its master wrote anything: Pending, every replica Pending."""
    spec = request.spec
    replicas = [ReplicaStatus(role=role, index=index) for role in spec.roles() for index in range(spec.replicas(role))]
    status = JobStatus(
        name=spec.job_name,
        owner=request.owner,
        backend=BACKEND_NAME,
        phase=Phase.PENDING,
        message=message,
        spec=spec.to_dict(),
        created=created,
        replicas=replicas,
        resumed_from=request.resumed_from,
    )
    return StatusRecord(status)
