"""The typed records the local backend and a job's master exchange through the job dir.

    job.json     `JobRecord`     who submitted what, when (written once, at submit)
    plan.json    `Plan`          what the master runs: replicas, ports, resources, interpreter
    status.json  `StatusRecord`  the job's `JobStatus` plus the master's own bookkeeping

Each record is a dataclass: its defaults are declared here once, and `from_json` fills what a
file leaves out from them, so no reader restates a default.  Each carries a `version`.  A file
without one was written before records were versioned and is read as version 1, so a job
submitted by the previous release keeps being listed and managed after an upgrade.  A file with
a version newer than this code knows is refused with `NewerRecord`, whose words the listing
shows as the job's message: guessing at a newer layout could misreport or mis-stop a job.
A file that is not a record at all (half written, hand edited, wrong types, a phase or role
this code does not know, a pid that names no single process) raises `RecordDamaged`, a
`ValueError`, exactly like unparsable JSON, so callers treat both alike: validation is complete
enough that a record which reads never fails later (listing, events, stopping its processes).
The store shows such a job as `Phase.UNKNOWN` with the file named in its message (`damaged_status`)
and never guesses an outcome in its place.

Here are the records' types and their codecs (`to_json`, `from_json`, built from the field checks
of `record_json`); `record_files` reads and writes their files.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from paddle_nbext.model.contract import ROLES, Phase, ReplicaPhase
from paddle_nbext.model.status import JobStatus, ReplicaStatus, resumed_link

from ...runtime import log_progress, paddle_nbext_job
from . import record_json
from .record_json import NewerRecord

#: Names the job dir in every replica's environment (and so in all it starts), which is how the
#: backend finds a job's processes when its master is gone (`processes.marked_processes`).
JOB_DIR_VAR = "PADDLE_NBEXT_JOB_DIR"


# ---------------------------------------------------------------------------- job.json
@dataclass
class JobRecord:
    """job.json: written once by the backend at submit; `owner` decides who sees the job."""

    VERSION: ClassVar[int] = 1
    KIND: ClassVar[str] = "job.json"

    owner: str = ""
    spec: dict[str, Any] = field(default_factory=dict)
    created: str = ""
    created_epoch: float = 0.0  # time.time() at submit: how long a master may take to appear
    package: str = ""  # the trainer package as resolved at submit (before any snapshot)
    #: `{"job", "step"}` of the ended job a Resume started this one from (`JobStatus.resumed_from`).
    resumed_from: dict[str, Any] | None = None
    version: int = VERSION

    def to_json(self) -> str:
        data = asdict(self)
        if self.resumed_from is None:
            del data["resumed_from"]
        return json.dumps(data, indent=1)

    @classmethod
    def from_json(cls, text: str) -> JobRecord:
        data = record_json.versioned(cls.KIND, cls.VERSION, text)
        return record_json.build(
            cls,
            data,
            {
                "owner": record_json.text,
                "spec": record_json.status_spec,
                "created": record_json.text,
                "created_epoch": record_json.number,
                "package": record_json.text,
                "resumed_from": resumed_link,
            },
        )


# ---------------------------------------------------------------------------- plan.json
@dataclass
class Capacity:
    """What this machine offers local jobs: requested cores (max_cpu × overcommit), memory
    bytes and the GPU ids of the pool."""

    cpu: float
    memory: int
    gpus: list[int] = field(default_factory=list)

    @classmethod
    def from_data(cls, data: Any) -> Capacity:
        return record_json.build(cls, data, {"cpu": record_json.number, "memory": record_json.integer, "gpus": record_json.integers})


@dataclass
class ResourceRequest:
    """What a whole job asks for: cores, memory bytes and a number of GPUs."""

    cpu: float
    memory: int
    gpus: int = 0

    @classmethod
    def from_data(cls, data: Any) -> ResourceRequest:
        return record_json.build(cls, data, {"cpu": record_json.number, "memory": record_json.integer, "gpus": record_json.integer})


@dataclass
class Admitted:
    """The resources an admitted job holds until it ends: cores, memory and the GPU ids it was
    given; other masters of the same jobs dir add these up before admitting their own job."""

    cpu: float = 0.0
    memory: int = 0
    gpus: list[int] = field(default_factory=list)

    @classmethod
    def from_data(cls, data: Any) -> Admitted:
        return record_json.build(cls, data, {"cpu": record_json.number, "memory": record_json.integer, "gpus": record_json.integers})


@dataclass
class ReplicaPlan:
    """One replica to run: where it listens and what it may use (`memory` 0: not watched)."""

    role: str
    index: int
    endpoint: str  # host:port, picked free at submit and re-checked at admission
    cpu: float  # cores: the launcher sets thread counts from it
    memory: int = 0
    memory_text: str = ""  # the memory as the user wrote it, for the MemoryLimitExceeded reason
    gpus: int = 0
    #: Processes (ranks) it runs; it listens on `ranks` consecutive ports from the endpoint's.
    ranks: int = 1

    @property
    def ports(self) -> range:
        """Every port the replica's ranks listen on (`ranks` from the endpoint's)."""
        port = self.host_port[1]
        return range(port, port + max(1, self.ranks))

    @property
    def key(self) -> str:
        """The replica's name in log file names and in `StatusRecord.processes`."""
        return f"{self.role}-{self.index}"

    @property
    def host_port(self) -> tuple[str, int]:
        host, _, port = self.endpoint.rpartition(":")
        return host, int(port)

    @classmethod
    def from_data(cls, data: Any) -> ReplicaPlan:
        return record_json.build(
            cls,
            data,
            {
                "role": record_json.text,
                "index": record_json.integer,
                "endpoint": record_json.text,
                "cpu": record_json.number,
                "memory": record_json.integer,
                "memory_text": record_json.text,
                "gpus": record_json.integer,
                "ranks": record_json.integer,
            },
        )


@dataclass
class Plan:
    """plan.json: everything the master needs to run the job, decided by the backend at submit.

    `launcher` is the job's own copy of the launcher (`<job_dir>/runtime/launcher.py`, written at
    submit), run with `python`; the master rewrites the file only to move a replica whose planned
    port was taken while the job waited for admission."""

    VERSION: ClassVar[int] = 1
    KIND: ClassVar[str] = "plan.json"

    job: str
    mode: str
    entry_point: str
    workdir: str
    job_dir: str
    python: str
    launcher: str
    capacity: Capacity
    request: ResourceRequest
    replicas: list[ReplicaPlan] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    max_restarts: int = 0
    timeout: int | None = None  # seconds of wall clock from admission (the spec's timeout)
    wait_timeout: float = 300.0
    grace_period: float = 5.0
    poll_interval: float = 0.1
    # Kernel memory limits (`master.limits`); a plan of a release without them has none.
    memory_headroom: int = 0  # bytes of address space beyond a replica's memory (RLIMIT_AS); 0: none
    cgroup_root: str = ""  # a delegated cgroup v2 dir for per-replica memory.max; "": none
    keep_checkpoints: int = paddle_nbext_job.DEFAULT_KEEP  # the spec's; publishes keep this many
    # Training health (`master.training_health`); a plan of a release without them watches nothing.
    stall_timeout: int | None = None  # the spec's: seconds without progress that make a stall
    on_stall: str = "warn"  # the spec's: warn, restart or fail
    usage_interval: float = 0.0  # seconds between resource-use samples (usage.json); 0: none
    memory_warn_after: float = 5.0  # seconds above 90 % of the limit before the warning
    progress_pattern: str = ""  # the spec's: trainers' printed progress lines (runtime/log_progress.py)
    version: int = VERSION

    @property
    def checkpoint_dir(self) -> Path:
        """The job's checkpoint directory (`paddle_nbext_job.CHECKPOINT_DIR_VAR`)."""
        return Path(self.job_dir) / paddle_nbext_job.CHECKPOINTS_SUBDIR

    def endpoints(self, role: str) -> str:
        """The role's endpoints in index order, as the launcher takes them (`host:port,...`)."""
        return ",".join(r.endpoint for r in sorted(self.replicas, key=lambda r: r.index) if r.role == role)

    def ranks_per_trainer(self) -> int:
        """Processes every trainer runs (1 in plans of releases without ranks)."""
        return max((r.ranks for r in self.replicas if r.role == "trainer"), default=1)

    def ports(self) -> set[int]:
        """Every port the job's replicas listen on."""
        return {port for replica in self.replicas for port in replica.ports}

    def launcher_env(self, replica: ReplicaPlan, gpus: list[int] | None) -> dict[str, str]:
        """The launcher inputs of one replica (docs/architecture.md "Launcher").  The master
        starts replicas with exactly this and the backend's dry run shows it, so a preview is
        what runs.  `gpus` is the assignment made at admission (None in a preview)."""
        env = dict(self.env)
        env.update(
            PADDLE_NBEXT_JOB=self.job,
            PADDLE_NBEXT_MODE=self.mode,
            PADDLE_NBEXT_ROLE=replica.role,
            PADDLE_NBEXT_INDEX=str(replica.index),
            PADDLE_NBEXT_PSERVER_ENDPOINTS=self.endpoints("pserver"),
            PADDLE_NBEXT_TRAINER_ENDPOINTS=self.endpoints("trainer"),
            PADDLE_NBEXT_ENTRY=self.entry_point,
            PADDLE_NBEXT_WORKDIR=self.workdir,
            # A plain number, not people's `500m`: the launcher turns it into thread counts.
            PADDLE_NBEXT_CPU=f"{replica.cpu:g}",
            PADDLE_NBEXT_WAIT_TIMEOUT=str(self.wait_timeout),
            # Ranks per trainer (pservers count every rank as a trainer) and this replica's GPUs.
            PADDLE_NBEXT_PROCS=str(self.ranks_per_trainer()),
            PADDLE_NBEXT_GPUS=str(replica.gpus),
            # report() writes beside the replica's log (runtime/paddle_nbext_job.py).
            PADDLE_NBEXT_METRICS_DIR=str(Path(self.job_dir) / "logs"),
        )
        # Checkpoints (`paddle_nbext_job.save_checkpoint`): the job's dir, the same every attempt.
        env[paddle_nbext_job.CHECKPOINT_DIR_VAR] = str(self.checkpoint_dir)
        env[paddle_nbext_job.KEEP_VAR] = str(self.keep_checkpoints)
        env[JOB_DIR_VAR] = self.job_dir
        if self.progress_pattern:
            env[log_progress.PATTERN_VAR] = self.progress_pattern
        if self.capacity.gpus:
            # The pool is managed: replicas without an assignment must not grab any GPU.
            env["CUDA_VISIBLE_DEVICES"] = ",".join(str(g) for g in (gpus or []))
        return env

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1)

    @classmethod
    def from_json(cls, text: str) -> Plan:
        data = record_json.versioned(cls.KIND, cls.VERSION, text)
        return record_json.build(
            cls,
            data,
            {
                "job": record_json.text,
                "mode": record_json.text,
                "entry_point": record_json.text,
                "workdir": record_json.text,
                "job_dir": record_json.text,
                "python": record_json.text,
                "launcher": record_json.text,
                "capacity": Capacity.from_data,
                "request": ResourceRequest.from_data,
                "replicas": record_json.each(ReplicaPlan.from_data),
                "env": record_json.texts_by_name,
                "max_restarts": record_json.integer,
                "timeout": record_json.optional_integer,
                "wait_timeout": record_json.number,
                "grace_period": record_json.number,
                "poll_interval": record_json.number,
                "memory_headroom": record_json.integer,
                "cgroup_root": record_json.text,
                "keep_checkpoints": record_json.integer,
                "stall_timeout": record_json.optional_integer,
                "on_stall": record_json.word(("warn", "restart", "fail"), "on_stall"),
                "usage_interval": record_json.number,
                "memory_warn_after": record_json.number,
                "progress_pattern": record_json.text,
            },
        )


# ---------------------------------------------------------------------------- status.json
@dataclass
class StatusRecord:
    """status.json: the job's `JobStatus` (what every client sees) plus what only the runner
    needs: the master's pid, the process-group ids of live replicas by `ReplicaPlan.key`, the
    resources the job holds while admitted, and every replica pid it ever started."""

    VERSION: ClassVar[int] = 1
    KIND: ClassVar[str] = "status.json"

    status: JobStatus
    master_pid: int | None = None
    processes: dict[str, int] = field(default_factory=dict)
    admitted: Admitted | None = None
    pids: list[int] = field(default_factory=list)
    version: int = VERSION

    @property
    def terminal(self) -> bool:
        return self.status.terminal

    def replica(self, role: str, index: int) -> ReplicaStatus | None:
        return next((r for r in self.status.replicas if r.role == role and r.index == index), None)

    def replica_ended(self, role: str, index: int) -> bool:
        """No more output will come from this replica: the job ended, or the replica ended and
        will not be restarted (it succeeded, was stopped, or failed with no retries left)."""
        if self.terminal:
            return True
        replica = self.replica(role, index)
        if replica is None:
            return False
        if replica.phase in (ReplicaPhase.SUCCEEDED, ReplicaPhase.STOPPED):
            return True
        max_restarts = self.status.spec.get("max_restarts") or 0
        return replica.phase == ReplicaPhase.FAILED and replica.restarts >= int(max_restarts)

    def to_json(self) -> str:
        data = asdict(self.status)
        if data.get("resumed_from") is None:
            data.pop("resumed_from", None)
        data.update(
            master_pid=self.master_pid,
            processes=dict(self.processes),
            admitted=asdict(self.admitted) if self.admitted is not None else None,
            pids=list(self.pids),
            version=self.version,
        )
        return json.dumps(data, indent=1, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> StatusRecord:
        data = record_json.versioned(cls.KIND, cls.VERSION, text)
        status = record_json.build(
            JobStatus,
            data,
            {
                "name": record_json.text,
                "owner": record_json.text,
                "backend": record_json.text,
                "phase": record_json.word(Phase, "the job's phase"),
                "message": record_json.text,
                "spec": record_json.status_spec,
                "created": record_json.text,
                "started": record_json.optional_text,
                "finished": record_json.optional_text,
                "replicas": record_json.each(_replica_status),
                "resumed_from": resumed_link,
            },
        )
        return record_json.build(
            cls,
            {**data, "status": status},
            {
                "status": record_json.identity,
                "master_pid": record_json.optional_pid,
                "processes": record_json.pids_by_name,
                "admitted": record_json.optional(Admitted.from_data),
                "pids": record_json.pids,
                "version": record_json.integer,
            },
        )


def _replica_status(data: Any) -> ReplicaStatus:
    return record_json.build(
        ReplicaStatus,
        data,
        {
            "role": record_json.word(ROLES, "a replica's role"),
            "index": record_json.integer,
            "phase": record_json.word(ReplicaPhase, "a replica's phase"),
            "reason": record_json.optional_text,
            "exit_code": record_json.optional_integer,
            "restarts": record_json.integer,
            "started": record_json.optional_text,
            "finished": record_json.optional_text,
        },
    )


def pending_status(name: str, job: JobRecord, backend: str, message: str) -> StatusRecord:
    """What a job dir shows before its master wrote a status (or while status.json is damaged):
    Pending, with the spec and times of job.json."""
    return StatusRecord(JobStatus(name, job.owner, backend, Phase.PENDING, message, job.spec, job.created))


def refused_status(name: str, job: JobRecord | None, backend: str, error: NewerRecord) -> StatusRecord:
    """The listing's entry for a job whose records a newer release wrote: its owner still sees it,
    with the phase it last recorded when that is a phase this code knows (else Pending) and the
    reason in words as its message, instead of the listing failing."""
    owner = job.owner if job is not None else error.owner
    created = job.created if job is not None and job.created else error.created
    spec = job.spec if job is not None else {}
    return StatusRecord(JobStatus(name, owner, backend, error.phase or Phase.PENDING, error.message, spec, created))


def damaged_status(name: str, job: JobRecord, backend: str, message: str) -> StatusRecord:
    """The listing's entry for a job whose job.json or status.json cannot be read: phase Unknown
    with the file named in `message`, never an outcome guessed in place of the recorded one."""
    return StatusRecord(JobStatus(name, job.owner, backend, Phase.UNKNOWN, message, job.spec, job.created))


def damage_message(path: Path, error: BaseException) -> str:
    """What is wrong with a record file, in words naming it, and what the user can do."""
    if isinstance(error, json.JSONDecodeError):
        detail = "it is empty" if not error.doc.strip() else f"it is not complete JSON ({error.msg} at char {error.pos})"
    elif isinstance(error, UnicodeDecodeError):
        detail = "it is not UTF-8 text"
    elif isinstance(error, OSError):
        detail = error.strerror or str(error)
    else:
        detail = str(error)
    return f"{path} cannot be read: {detail}. The job's state is unknown; delete the job, or restore the file."


_OWNER_FIELD = re.compile(r'"owner"\s*:\s*("(?:[^"\\]|\\.)*")')


def owner_hint(text: str) -> str:
    """The owner a damaged job.json still names (job.json writes it first, so even a file cut
    short usually has it); "" when it names none."""
    match = _OWNER_FIELD.search(text)
    if match is None:
        return ""
    try:
        owner = json.loads(match.group(1))
    except ValueError:
        return ""
    return owner if isinstance(owner, str) else ""
