"""The one job model: `JobSpec`, used by the magic, the API, the widgets, the CLI and the server.

The class body of `JobSpec` is THE field table: each job field is a dataclass field whose
metadata (`spec_field(FieldInfo(...))`) gives its kind, label, help, group, CLI/magic flag,
modes, backends and the server limit that bounds it.  Everything else is derived from it:
`%%paddle_submit` and `paddle-nbext submit` flags (options.py), the ipywidgets form
(widgets/form.py), `PaddleJob`'s fields (api.py), the JSON Schema `/config` serves to the panel's
form and the OpenAPI request schema (schema.py, written into openapi.json by
`python -m paddle_nbext_server.codegen.openapi_gen`).

Validation lives here and in rules.py and nowhere else on the Python side: every row is parsed by
the parser of its kind, then the cross-field rule it names.  Every failure is a `SpecError`
naming the offending `field` and saying what is allowed.  The server is authoritative: it
validates again with its configured `Limits`.

Adding a field is one edit plus its tests:
1. add a row below (a dataclass field with `spec_field(FieldInfo(...))`), using an existing
   `kind`; its place in the class is its place in every form;
2. regenerate the contract files: `.venv/bin/python -m paddle_nbext_server.codegen.openapi_gen`;
3. add cases for it to tests/vectors/job_spec_validation.json (run by pytest against
   `JobSpec.check` and by vitest against the panel's validator) and, if a backend must act on
   it, a backend test.  A new *kind* needs a parser in rules.py and in labextension/src/logic/validate/fields.ts.
"""

from __future__ import annotations

import re
import secrets
import string
from collections.abc import Mapping
from dataclasses import MISSING, dataclass, field, fields
from typing import Any, ClassVar

from .contract import Mode
from .fields import FIELD_INFO, FieldInfo, JobField, spec_field
from .quantity import Quantity, format_bytes, format_cpu
from .rules import (
    NAME_MAX_LENGTH,
    RESERVED_ENV,
    RULES,
    Limits,
    SpecError,
    clip,
    parse_duration,
    parse_field,
    validate_name,
)

__all__ = [
    "JOB_FIELDS",
    "MODES",
    "NAME_MAX_LENGTH",
    "RESERVED_ENV",
    "JobSpec",
    "Limits",
    "SpecError",
    "generate_name",
    "job_field",
    "parse_duration",
    "validate_name",
]

MODES: tuple[str, ...] = tuple(mode.value for mode in Mode)
_NAME_ALPHABET = string.ascii_lowercase + string.digits
_PS_ONLY = (Mode.PS,)
_MODE_CHOICES = {Mode.PS.value: "parameter servers + trainers", Mode.COLLECTIVE.value: ""}
_ON_STALL_CHOICES = {
    "warn": "say so in the job's message and a notification",
    "restart": "restart the whole job from its latest checkpoint",
    "fail": "end the job as Failed",
}


def generate_name(prefix: str = "paddle") -> str:
    """`<prefix>-<5 random chars>`, a valid job name (DNS-1035 label) whatever the prefix was."""
    cleaned = re.sub(r"[^a-z0-9-]+", "-", prefix.lower()).lstrip("-0123456789").strip("-") or "paddle"
    cleaned = cleaned[: NAME_MAX_LENGTH - 6].rstrip("-") or "paddle"
    suffix = "".join(secrets.choice(_NAME_ALPHABET) for _ in range(5))
    return f"{cleaned}-{suffix}"


@dataclass(frozen=True)
class JobSpec:
    """A validated, fully defaulted job description (field names from the original `PaddleJob`)."""

    # ---- Code
    job_name: str = field(
        metadata=spec_field(
            FieldInfo(
                kind="name",
                label="Job name",
                group="Code",
                flag="--job-name",
                metavar="NAME",
                help="DNS label: lower-case letters, digits and '-', at most 40 characters; generated when empty",
                placeholder="generated when empty",
            )
        )
    )
    entry_point: str = field(
        metadata=spec_field(
            FieldInfo(
                kind="command",
                label="Entry point",
                group="Code",
                flag="--entry",
                metavar="COMMAND",
                help="command to run in the package dir, e.g. 'python train.py --epochs 3'",
                placeholder="python train.py --epochs 3",
                required=True,
            )
        )
    )
    trainer_package: str = field(
        default="",
        metadata=spec_field(
            FieldInfo(
                kind="path",
                label="Package directory",
                group="Code",
                flag="--package",
                metavar="DIR",
                help="directory with the code, inside your home; the current directory when left out of a notebook or the CLI",
                placeholder="a directory in your home, e.g. work/mnist",
            )
        ),
    )
    requirements: str = field(
        default="",
        metadata=spec_field(
            FieldInfo(
                kind="path",
                label="Requirements file",
                group="Code",
                flag="--requirements",
                metavar="FILE",
                help="pip requirements file inside the package, installed once into a cached environment over the image's Python "
                "before the replicas start; empty: requirements.txt when the package has one",
                placeholder="requirements.txt when present",
                rule="requirements_in_package",
            )
        ),
    )
    image: str | None = field(
        default=None,
        metadata=spec_field(
            FieldInfo(
                kind="image",
                label="Image",
                group="Run",  # advanced: the server's default image is what most jobs want
                flag="--image",
                metavar="IMAGE",
                help="container image of every replica (Kubernetes backend); empty: the server default",
                placeholder="server default",
                backends=("kubernetes",),
                limit="allowed_images",
            )
        ),
    )
    # ---- Replicas
    mode: str = field(
        default=Mode.COLLECTIVE.value,  # when left out: ps if pservers >= 1 (rules.requested_mode)
        metadata=spec_field(
            FieldInfo(
                kind="choice",
                label="Mode",
                group="Replicas",
                flag="--mode",
                metavar="ps|collective",
                help="parameter servers + trainers, or collective (trainers only); default: ps when pservers are asked for, else collective",
                choices=_MODE_CHOICES,
            )
        ),
    )
    pservers: int = field(
        default=1,
        metadata=spec_field(
            FieldInfo(
                kind="count",
                label="Parameter servers",
                group="Replicas",
                flag="--pservers",
                metavar="N",
                help="parameter-server replicas",
                modes=_PS_ONLY,
                minimum=0,
                limit="max_pservers",
                rule="pservers_fit_mode",
            )
        ),
    )
    trainers: int = field(
        default=1,
        metadata=spec_field(
            FieldInfo(
                kind="count",
                label="Trainers",
                group="Replicas",
                flag="--trainers",
                metavar="N",
                help="trainer replicas",
                minimum=1,
                limit="max_trainers",
            )
        ),
    )
    # ---- Resources (per replica)
    pserver_cpu: str = field(
        default="1",
        metadata=spec_field(
            FieldInfo(
                kind="cpu",
                label="CPU per pserver",
                group="Resources",
                flag="--pserver-cpu",
                metavar="CPU",
                help="CPU per pserver, e.g. 500m, 2",
                modes=_PS_ONLY,
                limit="max_cpu_per_replica",
            )
        ),
    )
    pserver_mem: str = field(
        default="1Gi",
        metadata=spec_field(
            FieldInfo(
                kind="memory",
                label="Memory per pserver",
                group="Resources",
                flag="--pserver-mem",
                metavar="MEM",
                help="memory per pserver, e.g. 512Mi, 4Gi",
                modes=_PS_ONLY,
                limit="max_mem_per_replica",
            )
        ),
    )
    trainer_cpu: str = field(
        default="1",
        metadata=spec_field(
            FieldInfo(
                kind="cpu",
                label="CPU per trainer",
                group="Resources",
                flag="--trainer-cpu",
                metavar="CPU",
                help="CPU per trainer, e.g. 500m, 2",
                limit="max_cpu_per_replica",
            )
        ),
    )
    trainer_mem: str = field(
        default="1Gi",
        metadata=spec_field(
            FieldInfo(
                kind="memory",
                label="Memory per trainer",
                group="Resources",
                flag="--trainer-mem",
                metavar="MEM",
                help="memory per trainer, e.g. 512Mi, 4Gi",
                limit="max_mem_per_replica",
            )
        ),
    )
    trainer_gpu: int = field(
        default=0,
        metadata=spec_field(
            FieldInfo(
                kind="count",
                label="GPUs per trainer",
                group="Resources",
                flag="--trainer-gpu",
                metavar="N",
                help="GPUs per trainer",
                minimum=0,
                limit="max_gpu_per_replica",
                rule="gpus_per_job",
            )
        ),
    )
    procs_per_trainer: int = field(
        default=1,
        metadata=spec_field(
            FieldInfo(
                kind="count",
                label="Processes per trainer",
                group="Resources",
                flag="--procs-per-trainer",
                metavar="N",
                help="processes (ranks) each trainer runs, one per device as paddle.distributed.launch does; "
                "a GPU trainer runs one per GPU, so leave it 1 or set it to trainer_gpu",
                minimum=1,
                limit="max_procs_per_trainer",
                rule="ranks_fit",
            )
        ),
    )
    # ---- Run
    env: dict[str, str] = field(
        default_factory=dict,
        metadata=spec_field(
            FieldInfo(
                kind="env",
                label="Environment",
                group="Run",
                flag="--env",
                metavar="K=V",
                help="environment variables for every replica, NAME=value",
                placeholder="NAME=value, one per line",
            )
        ),
    )
    snapshot: bool = field(
        default=True,
        metadata=spec_field(
            FieldInfo(
                kind="switch",
                label="Snapshot the package at submit",
                group="Run",
                flag="--no-snapshot",
                help="copy the package into the job's own dir at submit",
            )
        ),
    )
    max_restarts: int = field(
        default=0,
        metadata=spec_field(
            FieldInfo(
                kind="count",
                label="Whole-job restarts",
                group="Run",
                flag="--max-restarts",
                metavar="N",
                help="times the whole job starts again after a trainer fails (from its latest checkpoint)",
                minimum=0,
                limit="max_restarts",
            )
        ),
    )
    keep_checkpoints: int = field(
        default=3,
        metadata=spec_field(
            FieldInfo(
                kind="count",
                label="Checkpoints kept",
                group="Run",
                flag="--keep-checkpoints",
                metavar="N",
                help="complete checkpoints kept in the job's checkpoint directory (paddle_nbext_job.save_checkpoint); 0 keeps all",
                minimum=0,
            )
        ),
    )
    timeout: int | None = field(
        default=None,
        metadata=spec_field(
            FieldInfo(
                kind="duration",
                label="Time limit",
                group="Run",
                flag="--timeout",
                metavar="DURATION",
                help="wall-clock limit, e.g. 600, 30m, 2h",
                placeholder="none (e.g. 30m, 2h)",
                limit="max_timeout",
            )
        ),
    )
    stall_timeout: int | None = field(
        default=600,
        metadata=spec_field(
            FieldInfo(
                kind="duration",
                label="Stall after",
                group="Run",
                flag="--stall-timeout",
                metavar="DURATION",
                help=(
                    "a running job whose trainer neither report()s nor logs for this long is marked stalled "
                    "(only once a trainer has reported), e.g. 600, 10m"
                ),
                placeholder="10m",
            )
        ),
    )
    on_stall: str = field(
        default="warn",
        metadata=spec_field(
            FieldInfo(
                kind="choice",
                label="Stall action",
                group="Run",
                flag="--on-stall",
                help="what follows a stall: warn, restart (the whole job, from its latest checkpoint; counts as a restart) or fail",
                choices=_ON_STALL_CHOICES,
            )
        ),
    )
    progress_pattern: str = field(
        default="",
        metadata=spec_field(
            FieldInfo(
                kind="pattern",
                label="Progress pattern",
                group="Run",
                flag="--progress-pattern",
                metavar="REGEX",
                help="regular expression for the trainers' own progress lines, with named groups step (required), "
                "total, epoch, loss and any metric; empty: Model.fit and common Paddle log lines are read by themselves",
                placeholder="e.g. step (?P<step>\\d+)/(?P<total>\\d+).*loss: (?P<loss>\\S+)",
            )
        ),
    )
    queue: str | None = field(
        default=None,
        metadata=spec_field(
            FieldInfo(
                kind="name",
                label="Queue",
                group="Run",
                flag="--queue",
                metavar="QUEUE",
                help="queue that admits the job on a shared cluster (Kubernetes backend: a Kueue LocalQueue, or a Volcano Queue with Volcano); empty: the server default",
                placeholder="server default",
                backends=("kubernetes",),
            )
        ),
    )

    #: The field names in table order (set from the table below the class).
    FIELDS: ClassVar[tuple[str, ...]]

    @classmethod
    def from_dict(
        cls,
        data: Mapping[str, Any],
        *,
        defaults: Mapping[str, Any] | None = None,
        limits: Limits | None = None,
        name_prefix: str = "paddle",
    ) -> JobSpec:
        """Validate and default `data`; raise one `SpecError` naming the first bad field (all
        bad fields are in `.errors`).  Unknown keys are refused so typos don't pass silently."""
        errors, values = cls._parse(data, defaults, limits or Limits())
        if errors:
            first = next(iter(errors))
            raise SpecError(first, errors[first], errors)
        if values["job_name"] is None:
            values["job_name"] = generate_name(name_prefix)
        return cls(**values)

    @classmethod
    def check(
        cls,
        data: Mapping[str, Any],
        *,
        defaults: Mapping[str, Any] | None = None,
        limits: Limits | None = None,
    ) -> dict[str, str]:
        """Every invalid field with its message (empty when valid); what forms show inline."""
        return cls._parse(data, defaults, limits or Limits())[0]

    @classmethod
    def _parse(cls, data: Any, defaults: Mapping[str, Any] | None, limits: Limits) -> tuple[dict[str, str], dict[str, Any]]:
        """(every error by field, every parsed value by field): each row's parser, then the rules
        whose fields all parsed."""
        if not isinstance(data, Mapping):
            return {"": "the job spec must be a JSON object"}, {}
        errors: dict[str, str] = {}
        for key in sorted(set(data) - set(cls.FIELDS), key=str):
            errors[clip(str(key))] = f"unknown field; allowed fields are: {', '.join(cls.FIELDS)}"
        merged = {**(defaults or {}), **{k: v for k, v in data.items() if v is not None and k in cls.FIELDS}}
        values: dict[str, Any] = {}
        for row in JOB_FIELDS:
            try:
                values[row.name] = parse_field(row, merged, limits)
            except SpecError as error:
                errors.setdefault(error.field or row.name, error.message)
        for row in JOB_FIELDS:
            if row.info.rule is None:
                continue
            reads, rule = RULES[row.info.rule]
            if all(name in values for name in reads):
                try:
                    rule(values, limits)
                except SpecError as error:
                    errors.setdefault(error.field or row.name, error.message)
        return errors, values

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe; `JobSpec.from_dict(spec.to_dict()) == spec`."""
        data = {name: getattr(self, name) for name in self.FIELDS}
        data["env"] = dict(self.env)
        return data

    def replace(self, **changes: Any) -> JobSpec:
        """A copy with some fields changed, validated again."""
        return JobSpec.from_dict({**self.to_dict(), **changes})

    # ---- derived figures shown by forms, panels and the Kubernetes backend
    def replicas(self, role: str) -> int:
        return self.pservers if role == "pserver" else self.trainers

    def ranks_per_trainer(self) -> int:
        """Processes each trainer runs: one per GPU when it has GPUs, else `procs_per_trainer`
        (the `ranks_fit` rule keeps the two from disagreeing)."""
        return self.trainer_gpu or self.procs_per_trainer

    def roles(self) -> tuple[str, ...]:
        return ("pserver", "trainer") if self.mode == "ps" and self.pservers else ("trainer",)

    def totals(self) -> dict[str, Any]:
        """Exact totals for the whole job: CPU cores, memory bytes and GPUs (as Fractions/ints)."""
        cpu = Quantity.parse(self.trainer_cpu) * self.trainers + Quantity.parse(self.pserver_cpu) * self.pservers
        mem = Quantity.parse(self.trainer_mem) * self.trainers + Quantity.parse(self.pserver_mem) * self.pservers
        return {"cpu": cpu.value, "memory": mem.value, "gpu": self.trainer_gpu * self.trainers}

    def summary(self) -> str:
        """One line for people, e.g. "2 pservers × 1 CPU + 4 trainers × 2 CPU = 10 CPU, 18Gi"."""
        parts = []
        if self.pservers:
            parts.append(
                f"{self.pservers} pserver{'s' if self.pservers != 1 else ''} × {format_cpu(Quantity.parse(self.pserver_cpu).value)} CPU"
            )
        gpu = f" + {self.trainer_gpu} GPU" if self.trainer_gpu else ""
        parts.append(
            f"{self.trainers} trainer{'s' if self.trainers != 1 else ''} × {format_cpu(Quantity.parse(self.trainer_cpu).value)} CPU{gpu}"
        )
        totals = self.totals()
        total = f"{format_cpu(totals['cpu'])} CPU, {format_bytes(totals['memory'])}"
        if totals["gpu"]:
            total += f", {totals['gpu']} GPU"
        return f"{' + '.join(parts)} = {total}"


def _rows() -> tuple[JobField, ...]:
    """The table: one `JobField` per dataclass field of `JobSpec`, in declaration order."""
    rows = []
    for declared in fields(JobSpec):
        if declared.default_factory is not MISSING:
            default: Any = declared.default_factory()
        else:
            default = None if declared.default is MISSING else declared.default
        rows.append(JobField(name=declared.name, default=default, info=declared.metadata[FIELD_INFO]))
    return tuple(rows)


#: Every job field with its default and table row, in form order.
JOB_FIELDS: tuple[JobField, ...] = _rows()
JobSpec.FIELDS = tuple(row.name for row in JOB_FIELDS)


def job_field(name: str) -> JobField:
    """The table row of one field (KeyError for a name that is not a job field)."""
    for row in JOB_FIELDS:
        if row.name == name:
            return row
    raise KeyError(name)
