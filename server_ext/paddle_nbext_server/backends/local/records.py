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

Files are written atomically and durably (`write_atomic`: a sibling temp file, fsync, rename,
fsync of the dir), so a crash or power loss leaves the old record or the new one, never a
truncated or empty file; and read without following symlinks, without blocking on a FIFO and
up to `MAX_RECORD_BYTES` (`read_text`).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import stat
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from paddle_nbext.model.contract import ROLES, Phase, ReplicaPhase
from paddle_nbext.model.status import JobStatus, ReplicaStatus, resumed_link

from ...runtime import paddle_nbext_job

T = TypeVar("T")
Converter = Callable[[Any], Any]

#: Names the job dir in every replica's environment (and so in all it starts), which is how the
#: backend finds a job's processes when its master is gone (`processes.marked_processes`).
JOB_DIR_VAR = "PADDLE_NBEXT_JOB_DIR"
#: The job dir's file naming its master's pid (`read_master_pid`).
MASTER_PID_FILE = "master.pid"


class RecordDamaged(ValueError):
    """The file is JSON but not a record this code can use (missing field, wrong type)."""


class NewerRecord(Exception):
    """A record written by a newer paddle-nbext than this one.

    Deliberately not a `ValueError`: a damaged file is skipped or falls back to Pending, while a
    newer one must reach the listing as the reason the job cannot be shown properly.  The few
    identity fields every version keeps (owner, created, phase) are taken best-effort, so the
    job still appears in its owner's listing, with this error as its message."""

    def __init__(self, kind: str, version: int, data: Mapping[str, Any]) -> None:
        self.kind = kind
        self.version = version
        self.owner = _text_or_empty(data.get("owner"))
        self.created = _text_or_empty(data.get("created"))
        phase = data.get("phase")
        self.phase = phase if isinstance(phase, str) and phase in set(Phase) else None
        super().__init__(self.message)

    @property
    def message(self) -> str:
        return (
            f"This job's {self.kind} was written by a newer paddle-nbext (record version {self.version}); "
            "upgrade the server to see and manage it."
        )


# ---------------------------------------------------------------------------- field converters
def _fail(what: str, value: Any) -> RecordDamaged:
    return RecordDamaged(f"{what} must be {value}")


def _text(value: Any) -> str:
    if not isinstance(value, str):
        raise _fail("a text field", "text")
    return value


def _text_or_empty(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _optional_text(value: Any) -> str | None:
    return None if value is None else _text(value)


def _integer(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise _fail("a count", "a whole number")
    return value


def _optional_integer(value: Any) -> int | None:
    return None if value is None else _integer(value)


def _pid(value: Any) -> int:
    """A process id the runner may signal: above 1 (0 and negative numbers name process groups,
    1 is init), so a damaged record can never make the backend signal its own group or all."""
    pid = _integer(value)
    if pid <= 1:
        raise _fail("a process id", "a whole number above 1")
    return pid


def _optional_pid(value: Any) -> int | None:
    return None if value is None else _pid(value)


def _pids(value: Any) -> list[int]:
    if not isinstance(value, list):
        raise _fail("a list of process ids", "a list")
    return [_pid(item) for item in value]


def _pids_by_name(value: Any) -> dict[str, int]:
    return {_text(key): _pid(item) for key, item in _object(value).items()}


def _word(words: Any, what: str) -> Converter:
    known = frozenset(str(word) for word in words)

    def convert(value: Any) -> str:
        if not isinstance(value, str) or value not in known:
            raise RecordDamaged(f"{what} must be one of {', '.join(sorted(known))}, not {value!r}")
        return value

    return convert


#: The spec counts the status model computes with (`role_counts`, `replica_ended`).
_SPEC_COUNTS = ("pservers", "trainers", "max_restarts")


def _status_spec(value: Any) -> dict[str, Any]:
    spec = _object(value)
    for key in _SPEC_COUNTS:
        if spec.get(key) is not None:
            _integer(spec[key])
    return spec


def _number(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _fail("an amount", "a number")
    return float(value)


def _integers(value: Any) -> list[int]:
    if not isinstance(value, list):
        raise _fail("a list of ids", "a list")
    return [_integer(item) for item in value]


def _object(value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _fail("a mapping", "a JSON object")
    return value


def _texts_by_name(value: Any) -> dict[str, str]:
    return {_text(key): _text(item) for key, item in _object(value).items()}


def _each(convert: Callable[[Any], T]) -> Callable[[Any], list[T]]:
    def convert_all(value: Any) -> list[T]:
        if not isinstance(value, list):
            raise _fail("a list of records", "a list")
        return [convert(item) for item in value]

    return convert_all


def _optional(convert: Callable[[Any], T]) -> Callable[[Any], T | None]:
    return lambda value: None if value is None else convert(value)


def _build(cls: Callable[..., T], data: Any, converters: Mapping[str, Converter]) -> T:
    """`cls` from the keys of `data` it declares: absent keys take the dataclass's defaults, a
    missing required one or a value of the wrong type is `RecordDamaged`, unknown keys are
    ignored (a later release of the same version may add optional fields)."""
    mapping = _object(data)
    names = {item.name for item in fields(cls)}  # type: ignore[arg-type]
    values = {name: converters.get(name, _identity)(mapping[name]) for name in names if name in mapping}
    try:
        return cls(**values)
    except TypeError as error:
        raise RecordDamaged(f"incomplete record: {error}") from None


def _identity(value: Any) -> Any:
    return value


def _versioned(kind: str, supported: int, text: str) -> dict[str, Any]:
    """The record's JSON object, refused if a newer release wrote it (no version: version 1)."""
    try:
        parsed = json.loads(text)
    except RecursionError:
        raise RecordDamaged(f"{kind} is nested too deeply to be a record") from None
    data = _object(parsed)
    version = data.get("version", 1)
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise RecordDamaged(f"{kind} has an unreadable version {version!r}")
    if version > supported:
        raise NewerRecord(kind, version, data)
    return data


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
        data = _versioned(cls.KIND, cls.VERSION, text)
        return _build(
            cls,
            data,
            {
                "owner": _text,
                "spec": _status_spec,
                "created": _text,
                "created_epoch": _number,
                "package": _text,
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
        return _build(cls, data, {"cpu": _number, "memory": _integer, "gpus": _integers})


@dataclass
class ResourceRequest:
    """What a whole job asks for: cores, memory bytes and a number of GPUs."""

    cpu: float
    memory: int
    gpus: int = 0

    @classmethod
    def from_data(cls, data: Any) -> ResourceRequest:
        return _build(cls, data, {"cpu": _number, "memory": _integer, "gpus": _integer})


@dataclass
class Admitted:
    """The resources an admitted job holds until it ends: cores, memory and the GPU ids it was
    given; other masters of the same jobs dir add these up before admitting their own job."""

    cpu: float = 0.0
    memory: int = 0
    gpus: list[int] = field(default_factory=list)

    @classmethod
    def from_data(cls, data: Any) -> Admitted:
        return _build(cls, data, {"cpu": _number, "memory": _integer, "gpus": _integers})


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
        return _build(
            cls,
            data,
            {
                "role": _text,
                "index": _integer,
                "endpoint": _text,
                "cpu": _number,
                "memory": _integer,
                "memory_text": _text,
                "gpus": _integer,
                "ranks": _integer,
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
    # Kernel memory limits (`limits`); a plan of a release without them has none.
    memory_headroom: int = 0  # bytes of address space beyond a replica's memory (RLIMIT_AS); 0: none
    cgroup_root: str = ""  # a delegated cgroup v2 dir for per-replica memory.max; "": none
    keep_checkpoints: int = paddle_nbext_job.DEFAULT_KEEP  # the spec's; publishes keep this many
    # Training health (`health`, `usage`); a plan of a release without them watches nothing.
    stall_timeout: int | None = None  # the spec's: seconds without progress that make a stall
    on_stall: str = "warn"  # the spec's: warn, restart or fail
    usage_interval: float = 0.0  # seconds between resource-use samples (usage.json); 0: none
    memory_warn_after: float = 5.0  # seconds above 90 % of the limit before the warning
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
        if self.capacity.gpus:
            # The pool is managed: replicas without an assignment must not grab any GPU.
            env["CUDA_VISIBLE_DEVICES"] = ",".join(str(g) for g in (gpus or []))
        return env

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1)

    @classmethod
    def from_json(cls, text: str) -> Plan:
        data = _versioned(cls.KIND, cls.VERSION, text)
        return _build(
            cls,
            data,
            {
                "job": _text,
                "mode": _text,
                "entry_point": _text,
                "workdir": _text,
                "job_dir": _text,
                "python": _text,
                "launcher": _text,
                "capacity": Capacity.from_data,
                "request": ResourceRequest.from_data,
                "replicas": _each(ReplicaPlan.from_data),
                "env": _texts_by_name,
                "max_restarts": _integer,
                "timeout": _optional_integer,
                "wait_timeout": _number,
                "grace_period": _number,
                "poll_interval": _number,
                "memory_headroom": _integer,
                "cgroup_root": _text,
                "keep_checkpoints": _integer,
                "stall_timeout": _optional_integer,
                "on_stall": _word(("warn", "restart", "fail"), "on_stall"),
                "usage_interval": _number,
                "memory_warn_after": _number,
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
        data = _versioned(cls.KIND, cls.VERSION, text)
        status = _build(
            JobStatus,
            data,
            {
                "name": _text,
                "owner": _text,
                "backend": _text,
                "phase": _word(Phase, "the job's phase"),
                "message": _text,
                "spec": _status_spec,
                "created": _text,
                "started": _optional_text,
                "finished": _optional_text,
                "replicas": _each(_replica_status),
                "resumed_from": resumed_link,
            },
        )
        return _build(
            cls,
            {**data, "status": status},
            {
                "status": _identity,
                "master_pid": _optional_pid,
                "processes": _pids_by_name,
                "admitted": _optional(Admitted.from_data),
                "pids": _pids,
                "version": _integer,
            },
        )


def _replica_status(data: Any) -> ReplicaStatus:
    return _build(
        ReplicaStatus,
        data,
        {
            "role": _word(ROLES, "a replica's role"),
            "index": _integer,
            "phase": _word(ReplicaPhase, "a replica's phase"),
            "reason": _optional_text,
            "exit_code": _optional_integer,
            "restarts": _integer,
            "started": _optional_text,
            "finished": _optional_text,
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


# ---------------------------------------------------------------------------- files
Record = TypeVar("Record", JobRecord, Plan, StatusRecord)

#: Records are small (a spec, a few hundred replicas); a bigger file is damage, not a record.
MAX_RECORD_BYTES = 32 << 20


def read_text(path: Path) -> str:
    """A record file's text.  OSError when absent or not a regular file (a symlink is not
    followed, a FIFO is not waited on), `RecordDamaged` when larger than `MAX_RECORD_BYTES`,
    UnicodeDecodeError (a ValueError) when not UTF-8."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise OSError(f"{path.name} is not a regular file")
        data = handle.read(MAX_RECORD_BYTES + 1)
    if len(data) > MAX_RECORD_BYTES:
        raise RecordDamaged(f"it is larger than {MAX_RECORD_BYTES >> 20} MiB")
    return data.decode("utf-8")


def read_master_pid(job_dir: Path) -> int | None:
    """The pid in the job's `master.pid` (written when its master starts); None when the file is
    absent, unreadable (`read_text`: no symlink, no FIFO) or names no pid above 1."""
    try:
        pid = int(read_text(job_dir / MASTER_PID_FILE).strip())
    except (OSError, ValueError):
        return None
    return pid if pid > 1 else None


def read_record(kind: type[Record], job_dir: Path) -> Record:
    """The record of type `kind` in `job_dir` (its file is `kind.KIND`).  OSError when absent,
    `RecordDamaged`/ValueError when unreadable, `NewerRecord` when too new."""
    return kind.from_json(read_text(job_dir / kind.KIND))


def write_record(job_dir: Path, record: JobRecord | Plan | StatusRecord) -> None:
    """Write `record` to its file in `job_dir` (`write_atomic`)."""
    write_atomic(job_dir / record.KIND, record.to_json())


def write_atomic(path: Path, text: str) -> None:
    """Replace `path` by `text` so that readers, a crash and a power loss only ever leave the old
    file or the new one: a sibling temp file is written and fsynced, renamed over `path`, and the
    dir fsynced so the rename itself is on disk.  The temp file is removed if anything fails.

    The new file's mtime is later than the old one's, even when the clock has not moved on
    (coarse timestamps, a clock stepped back): readers tell versions apart by (mtime, size,
    inode) without reading (`store.signature`), and file systems reuse the inode of the version
    before last, so an equal mtime and size would hide a change, such as a job's end."""
    try:
        before = os.stat(path).st_mtime_ns
    except OSError:
        before = 0
    stamp = max(time.time_ns(), before + 1)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(text.encode("utf-8"))
            handle.flush()
            os.utime(handle.fileno(), ns=(stamp, stamp))
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    _fsync_dir(path.parent)


def _fsync_dir(directory: Path) -> None:
    """Make a rename in `directory` durable (best effort: some file systems refuse it)."""
    try:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
