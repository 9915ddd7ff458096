"""The one job model: `JobSpec`, used by the magic, the API, the widgets, the CLI and the server.

Validation lives here and nowhere else, so the form can show the same message inline that the
server would return.  Every failure is a `SpecError` naming the offending `field` and saying what
is allowed.  The server is authoritative: it validates again with its configured `Limits`.
"""
from __future__ import annotations

import re
import secrets
import string
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from .quantity import Quantity, QuantityError, format_bytes, format_cpu

__all__ = [
    "JobSpec",
    "Limits",
    "SpecError",
    "generate_name",
    "validate_name",
    "parse_duration",
    "RESERVED_ENV",
    "MODES",
    "NAME_MAX_LENGTH",
]

MODES = ("ps", "collective")
NAME_MAX_LENGTH = 40
# A DNS-1035 label: the job's headless Service carries the name, and Services need a letter
# first on clusters without relaxed Service name validation.  Matched with fullmatch (`$` would
# let a trailing newline through).
_NAME_RE = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
_ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_DURATION_RE = re.compile(r"^(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?$")
_NAME_ALPHABET = string.ascii_lowercase + string.digits

#: Variables the launcher owns (DESIGN §5); letting users set them would break the Paddle contract.
RESERVED_ENV = frozenset(
    {
        "TRAINING_ROLE",
        "PADDLE_TRAINER_ID",
        "PADDLE_TRAINERS_NUM",
        "PADDLE_PSERVERS_IP_PORT_LIST",
        "PADDLE_PORT",
        "POD_IP",
        "PADDLE_TRAINER_ENDPOINTS",
        "PADDLE_CURRENT_ENDPOINT",
        "PADDLE_JOB_NAME",
        "TRAINERS",
        "PSERVERS",
        "ENTRY",
        "TRAINER_PACKAGE",
    }
)
_RESERVED_ENV_PREFIX = "PADDLE_NBEXT_"


class SpecError(ValueError):
    """An invalid job field.  `field` names it (None for the body as a whole); `errors` maps
    every invalid field to its message, so a form can show them all at once."""

    def __init__(self, field: str | None, message: str, errors: Mapping[str, str] | None = None):
        super().__init__(f"{field}: {message}" if field else message)
        self.field = field
        self.message = message
        self.errors: dict[str, str] = dict(errors) if errors else ({field: message} if field else {})


@dataclass(frozen=True)
class Limits:
    """What the server allows; comes from the server extension's traitlets config."""

    max_pservers: int = 16
    max_trainers: int = 64
    max_gpu_per_replica: int = 8
    max_gpu_per_job: int | None = None
    max_cpu_per_replica: str | None = None
    max_mem_per_replica: str | None = None
    max_restarts: int = 10
    max_timeout: int | None = None
    allowed_images: tuple[str, ...] | None = None

    def to_dict(self) -> dict[str, Any]:
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        data["allowed_images"] = list(self.allowed_images) if self.allowed_images is not None else None
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "Limits":
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        if values.get("allowed_images") is not None:
            values["allowed_images"] = tuple(values["allowed_images"])
        return cls(**values)


def generate_name(prefix: str = "paddle") -> str:
    """`<prefix>-<5 random chars>`, a valid job name (DNS-1035 label) whatever the prefix was."""
    cleaned = re.sub(r"[^a-z0-9-]+", "-", prefix.lower()).lstrip("-0123456789").strip("-") or "paddle"
    cleaned = cleaned[: NAME_MAX_LENGTH - 6].rstrip("-") or "paddle"
    suffix = "".join(secrets.choice(_NAME_ALPHABET) for _ in range(5))
    return f"{cleaned}-{suffix}"


def validate_name(name: Any) -> str:
    """Return the name if it is a DNS-1035 label of at most 40 characters, else raise."""
    if not isinstance(name, str) or not name:
        raise SpecError("job_name", "must be a non-empty string (or leave it out to get a generated name)")
    if len(name) > NAME_MAX_LENGTH:
        raise SpecError("job_name", f"'{name}' is {len(name)} characters long; at most {NAME_MAX_LENGTH} are allowed")
    if not _NAME_RE.fullmatch(name):
        raise SpecError(
            "job_name",
            f"'{name}' is not allowed: use lower-case letters, digits and '-', "
            "starting with a letter and ending with a letter or digit (e.g. 'mnist-ps-1')",
        )
    return name


def parse_duration(raw: Any, field_name: str = "timeout") -> int | None:
    """Seconds from `600`, `"600"`, `"90s"`, `"30m"`, `"2h"`, `"1h30m"`, `"1d"`; None stays None."""
    if raw is None or raw == "":
        return None
    if isinstance(raw, bool):
        raise SpecError(field_name, "must be a number of seconds or a duration such as '30m' or '2h'")
    if isinstance(raw, int):
        seconds = raw
    elif isinstance(raw, float) and raw.is_integer():
        seconds = int(raw)
    elif isinstance(raw, str) and raw.strip().isdigit():
        seconds = int(raw.strip())
    elif isinstance(raw, str) and raw.strip() and (match := _DURATION_RE.match(raw.strip())):
        days, hours, minutes, secs = (int(part) if part else 0 for part in match.groups())
        seconds = ((days * 24 + hours) * 60 + minutes) * 60 + secs
    else:
        raise SpecError(field_name, f"'{raw}' is not a duration: use seconds (600) or units like '90s', '30m', '2h', '1h30m'")
    if seconds <= 0:
        raise SpecError(field_name, "must be positive (or leave it out for no limit)")
    return seconds


def _integer(data: Mapping[str, Any], name: str, default: int, lowest: int, highest: int | None) -> int:
    raw = data.get(name, default)
    if raw is None:
        raw = default
    if isinstance(raw, bool) or not isinstance(raw, (int, str, float)):
        raise SpecError(name, f"must be a whole number, got {raw!r}")
    try:
        value = int(raw) if not isinstance(raw, float) or raw.is_integer() else None
    except ValueError:
        value = None
    if value is None or (isinstance(raw, str) and not raw.strip().lstrip("+").isdigit()):
        raise SpecError(name, f"must be a whole number, got {raw!r}")
    if value < lowest:
        raise SpecError(name, f"must be at least {lowest}, got {value}")
    if highest is not None and value > highest:
        raise SpecError(name, f"must be at most {highest} on this server, got {value}")
    return value


def _quantity(data: Mapping[str, Any], name: str, default: str, *, allow_zero: bool, most: str | None) -> str:
    raw = data.get(name, default)
    if raw is None or raw == "":
        raw = default
    try:
        quantity = Quantity.parse(raw)
    except QuantityError as error:
        raise SpecError(name, str(error)) from None
    if quantity.value < 0 or (quantity.value == 0 and not allow_zero):
        raise SpecError(name, f"must be {'zero or ' if allow_zero else ''}positive, got '{raw}'")
    if most is not None and quantity > Quantity.parse(most):
        raise SpecError(name, f"'{raw}' is more than this server allows per replica ({most})")
    if name.endswith("_cpu") and quantity.value * 1000 != int(quantity.value * 1000):
        raise SpecError(name, f"'{raw}' is finer than a millicore; use e.g. '500m' or '1.5'")
    if name.endswith("_mem") and quantity.value.denominator != 1:
        raise SpecError(name, f"'{raw}' is not a whole number of bytes; use e.g. '512Mi' or '4Gi'")
    return str(raw).strip() if isinstance(raw, str) else quantity.canonical()


def _env(raw: Any) -> dict[str, str]:
    if raw is None:
        return {}
    if isinstance(raw, (list, tuple)):
        pairs: dict[str, Any] = {}
        for item in raw:
            if not isinstance(item, str) or "=" not in item:
                raise SpecError("env", f"{item!r} is not KEY=VALUE")
            key, _, value = item.partition("=")
            pairs[key] = value
        raw = pairs
    if not isinstance(raw, Mapping):
        raise SpecError("env", "must be a mapping of NAME to value (or a list of 'NAME=value')")
    env: dict[str, str] = {}
    for key, value in raw.items():
        if not isinstance(key, str) or not _ENV_NAME_RE.match(key):
            raise SpecError("env", f"{key!r} is not a valid variable name: letters, digits and '_', not starting with a digit")
        if key in RESERVED_ENV or key.startswith(_RESERVED_ENV_PREFIX):
            raise SpecError("env", f"{key} is set by the launcher for each replica and cannot be overridden")
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            raise SpecError("env", f"the value of {key} must be a string or number")
        env[key] = str(value)
    return env


def _bool(data: Mapping[str, Any], name: str, default: bool) -> bool:
    raw = data.get(name, default)
    if raw is None:
        return default
    if isinstance(raw, bool):
        return raw
    if isinstance(raw, str) and raw.lower() in ("true", "false", "1", "0", "yes", "no"):
        return raw.lower() in ("true", "1", "yes")
    raise SpecError(name, f"must be true or false, got {raw!r}")


def _text(data: Mapping[str, Any], name: str, default: str | None) -> str | None:
    raw = data.get(name, default)
    if raw is None:
        return default
    if not isinstance(raw, str):
        raise SpecError(name, f"must be a string, got {type(raw).__name__}")
    return raw.strip()


@dataclass(frozen=True)
class JobSpec:
    """A validated, fully defaulted job description (field names from the original `PaddleJob`)."""

    job_name: str
    entry_point: str
    trainer_package: str = ""
    image: str | None = None
    mode: str = "ps"
    pservers: int = 1
    trainers: int = 1
    pserver_cpu: str = "1"
    pserver_mem: str = "1Gi"
    trainer_cpu: str = "1"
    trainer_mem: str = "1Gi"
    trainer_gpu: int = 0
    env: dict[str, str] = field(default_factory=dict)
    snapshot: bool = True
    max_restarts: int = 0
    timeout: int | None = None

    FIELDS = (
        "job_name", "entry_point", "trainer_package", "image", "mode", "pservers", "trainers",
        "pserver_cpu", "pserver_mem", "trainer_cpu", "trainer_mem", "trainer_gpu", "env",
        "snapshot", "max_restarts", "timeout",
    )  # fmt: skip

    @classmethod
    def from_dict(
        cls,
        data: Mapping[str, Any],
        *,
        defaults: Mapping[str, Any] | None = None,
        limits: Limits | None = None,
        name_prefix: str = "paddle",
    ) -> "JobSpec":
        """Validate and default `data`; raise one `SpecError` naming the first bad field (all
        bad fields are in `.errors`).  Unknown keys are refused so typos don't pass silently."""
        errors = cls.check(data, defaults=defaults, limits=limits)
        if errors:
            first = next(iter(errors))
            raise SpecError(first, errors[first], errors)
        return cls._build({**(defaults or {}), **{k: v for k, v in data.items() if v is not None}}, limits or Limits(), name_prefix)

    @classmethod
    def check(
        cls,
        data: Mapping[str, Any],
        *,
        defaults: Mapping[str, Any] | None = None,
        limits: Limits | None = None,
    ) -> dict[str, str]:
        """Every invalid field with its message (empty when valid); what forms show inline."""
        if not isinstance(data, Mapping):
            return {"": "the job spec must be a JSON object"}
        errors: dict[str, str] = {}
        unknown = sorted(set(data) - set(cls.FIELDS))
        for key in unknown:
            errors[str(key)] = f"unknown field; allowed fields are: {', '.join(cls.FIELDS)}"
        merged = {**(defaults or {}), **{k: v for k, v in data.items() if v is not None and k in cls.FIELDS}}
        limits = limits or Limits()
        for name in cls.FIELDS:
            try:
                cls._build_field(merged, name, limits)
            except SpecError as error:
                errors.setdefault(error.field or name, error.message)
        if not errors:
            try:
                cls._cross_check(merged, limits)
            except SpecError as error:
                errors[error.field or ""] = error.message
        return errors

    @classmethod
    def _build_field(cls, data: Mapping[str, Any], name: str, limits: Limits) -> Any:
        mode = data.get("mode", "ps")
        if name == "job_name":
            return validate_name(data["job_name"]) if data.get("job_name") not in (None, "") else None
        if name == "entry_point":
            value = _text(data, name, "")
            if not value:
                raise SpecError(name, "is required: the command to run in the package dir, e.g. 'python train.py --epochs 3'")
            if "\x00" in value or "\n" in value:
                raise SpecError(name, "must be a single-line command")
            return value
        if name == "trainer_package":
            value = _text(data, name, "") or ""
            if "\x00" in value:
                raise SpecError(name, "must be a path")
            return value
        if name == "image":
            value = _text(data, name, None) or None
            if value is not None and (any(c.isspace() for c in value) or len(value) > 512):
                raise SpecError(name, f"'{value}' is not an image reference (e.g. 'registry/paddle:3.0.0')")
            if value is not None and limits.allowed_images is not None and value not in limits.allowed_images:
                raise SpecError(name, f"'{value}' is not allowed on this server; allowed images: {', '.join(limits.allowed_images) or 'none'}")
            return value
        if name == "mode":
            if mode not in MODES:
                raise SpecError(name, f"{mode!r} is not a mode: use 'ps' (parameter servers + trainers) or 'collective'")
            return mode
        if name == "pservers":
            default = 1 if mode == "ps" else 0
            value = _integer(data, name, default, 0, limits.max_pservers)
            if mode == "ps" and value < 1:
                raise SpecError(name, "ps mode needs at least 1 parameter server")
            if mode == "collective" and value != 0:
                raise SpecError(name, "collective mode has no parameter servers; set pservers to 0 or use mode 'ps'")
            return value
        if name == "trainers":
            return _integer(data, name, 1, 1, limits.max_trainers)
        if name in ("pserver_cpu", "trainer_cpu"):
            return _quantity(data, name, "1", allow_zero=False, most=limits.max_cpu_per_replica)
        if name in ("pserver_mem", "trainer_mem"):
            return _quantity(data, name, "1Gi", allow_zero=False, most=limits.max_mem_per_replica)
        if name == "trainer_gpu":
            return _integer(data, name, 0, 0, limits.max_gpu_per_replica)
        if name == "env":
            return _env(data.get("env"))
        if name == "snapshot":
            return _bool(data, name, True)
        if name == "max_restarts":
            return _integer(data, name, 0, 0, limits.max_restarts)
        if name == "timeout":
            value = parse_duration(data.get("timeout"))
            if value is not None and limits.max_timeout is not None and value > limits.max_timeout:
                raise SpecError(name, f"{value}s is longer than this server allows ({limits.max_timeout}s)")
            return value
        raise SpecError(name, "unknown field")

    @classmethod
    def _cross_check(cls, data: Mapping[str, Any], limits: Limits) -> None:
        if limits.max_gpu_per_job is not None:
            trainers = int(data.get("trainers", 1))
            gpus = int(data.get("trainer_gpu", 0) or 0)
            if trainers * gpus > limits.max_gpu_per_job:
                raise SpecError(
                    "trainer_gpu",
                    f"{trainers} trainers x {gpus} GPU = {trainers * gpus} GPUs; this server allows {limits.max_gpu_per_job} per job",
                )

    @classmethod
    def _build(cls, data: Mapping[str, Any], limits: Limits, name_prefix: str) -> "JobSpec":
        values = {name: cls._build_field(data, name, limits) for name in cls.FIELDS}
        if values["job_name"] is None:
            values["job_name"] = generate_name(name_prefix)
        return cls(**values)

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe; `JobSpec.from_dict(spec.to_dict()) == spec`."""
        data = {name: getattr(self, name) for name in self.FIELDS}
        data["env"] = dict(self.env)
        return data

    def replace(self, **changes: Any) -> "JobSpec":
        """A copy with some fields changed, validated again."""
        return JobSpec.from_dict({**self.to_dict(), **changes})

    # ---- derived figures shown by forms, panels and the Kubernetes backend
    def replicas(self, role: str) -> int:
        return self.pservers if role == "pserver" else self.trainers

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
            parts.append(f"{self.pservers} pserver{'s' if self.pservers != 1 else ''} × {format_cpu(Quantity.parse(self.pserver_cpu).value)} CPU")
        gpu = f" + {self.trainer_gpu} GPU" if self.trainer_gpu else ""
        parts.append(f"{self.trainers} trainer{'s' if self.trainers != 1 else ''} × {format_cpu(Quantity.parse(self.trainer_cpu).value)} CPU{gpu}")
        totals = self.totals()
        total = f"{format_cpu(totals['cpu'])} CPU, {format_bytes(totals['memory'])}"
        if totals["gpu"]:
            total += f", {totals['gpu']} GPU"
        return f"{' + '.join(parts)} = {total}"
