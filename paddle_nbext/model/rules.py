"""How each kind of job field is parsed and checked, and the cross-field rules.

One parser per `fields.Kind`; `JobSpec` runs the parser of each row of its table, then the row's
named `rule`.  The panel's logic/validate/ has the same parsers and rules with the same messages;
tests/vectors/job_spec_validation.json holds the cases both languages must agree on (the server
is authoritative: when they differ, the TypeScript side is fixed).

Every failure is a `SpecError` naming the field and saying what is allowed.  Digits are ASCII
only everywhere (Kubernetes and the browser accept nothing else).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from typing import Any

from .contract import PADDLE_CONTRACT_VARS, Mode, launch_entry
from .fields import JobField, Kind
from .progress_pattern import problem as pattern_problem
from .quantity import Quantity, QuantityError

__all__ = [
    "ENTRY_POINT_MAX_LENGTH",
    "ENTRY_SCRIPT_MAX_BYTES",
    "ENV_MAX_BYTES",
    "ENV_MAX_COUNT",
    "ENV_NAME_PATTERN",
    "IMAGE_MAX_LENGTH",
    "NAME_MAX_LENGTH",
    "PATH_MAX_LENGTH",
    "NAME_PATTERN",
    "REQUIREMENTS_MAX_LENGTH",
    "RESERVED_ENV",
    "RESERVED_ENV_PREFIX",
    "RULES",
    "Limits",
    "SpecError",
    "check_entry_script",
    "clip",
    "parse_duration",
    "parse_field",
    "validate_name",
]

NAME_MAX_LENGTH = 40
# A DNS-1035 label: the job's headless Service carries the name, and Services need a letter
# first on clusters without relaxed Service name validation.  Always matched whole (fullmatch),
# so a trailing newline never passes.
NAME_PATTERN = "[a-z]([-a-z0-9]*[a-z0-9])?"
ENV_NAME_PATTERN = "[A-Za-z_][A-Za-z0-9_]*"
DURATION_PATTERN = "(?:([0-9]+)d)?(?:([0-9]+)h)?(?:([0-9]+)m)?(?:([0-9]+)s)?"
IMAGE_MAX_LENGTH = 512
# Documented limits (docs/user-guide.md, "Limits of a job request").  Each keeps a request that
# could never run from being accepted: Linux refuses to exec with a single argument or variable
# over 128 KiB (E2BIG) and with more than about 2 MiB of arguments and environment together, and a
# path longer than PATH_MAX cannot be opened.
ENTRY_POINT_MAX_LENGTH = 8192
PATH_MAX_LENGTH = 4096
#: Characters of `requirements`, a path relative to the package directory (a file name's limit).
REQUIREMENTS_MAX_LENGTH = 255
ENV_MAX_COUNT = 256
#: UTF-8 bytes of all `NAME=value` entries of `env` together.
ENV_MAX_BYTES = 64 * 1024
#: UTF-8 bytes of `entry_script`, the cell body written into the snapshot (checked by the server).
ENTRY_SCRIPT_MAX_BYTES = 1024 * 1024
#: Characters of a quantity, count or duration given as text: no real amount needs more, and
#: Python refuses to turn more than 4300 digits into a number at all.
NUMBER_TEXT_MAX_LENGTH = 32
#: The most a quantity may be whatever a server's limits say: Kubernetes holds quantities as
#: 64-bit milli-units, and no machine has more.
QUANTITY_MAX = {"cpu": (2**63 - 1) // 1000, "memory": 2**63 - 1}
#: The longest duration (a signed 32-bit count of seconds, about 68 years: what deadlines hold).
DURATION_MAX_SECONDS = 2**31 - 1
#: Characters of a refused value that an error message repeats; the rest is left out.
SHOWN_MAX_LENGTH = 60
_NAME_RE = re.compile(NAME_PATTERN)
_ENV_NAME_RE = re.compile(ENV_NAME_PATTERN)
_DURATION_RE = re.compile(DURATION_PATTERN)
#: A whole number as typed; a sign is read so that "-1" is told "must be at least 1" (as the
#: widget's number box, which sends -1, is), not "must be a whole number".
_WHOLE_RE = re.compile(r"[+-]?[0-9]+")

#: Variables the launcher owns; letting users set them would break the Paddle contract.
RESERVED_ENV = frozenset(PADDLE_CONTRACT_VARS)
RESERVED_ENV_PREFIX = "PADDLE_NBEXT_"


def clip(text: str, limit: int = SHOWN_MAX_LENGTH) -> str:
    """`text` as an error message may repeat it: whole when short, else its start and its
    length, so a 10 MB value never comes back in (let alone twice in) an error body."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... ({len(text)} characters)"


def _well_formed(text: str) -> bool:
    """Valid Unicode: JSON lets a request carry lone surrogates, which no file or process takes."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


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
    max_procs_per_trainer: int = 64
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
    def from_dict(cls, data: Mapping[str, Any]) -> Limits:
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        if values.get("allowed_images") is not None:
            values["allowed_images"] = tuple(values["allowed_images"])
        return cls(**values)

    def bound(self, name: str | None) -> Any:
        """The limit a table row names (None when the row names none or the server sets none)."""
        return getattr(self, name) if name else None


def validate_name(name: Any, field: str = "job_name") -> str:
    """Return the name if it is a DNS-1035 label of at most 40 characters, else raise (naming `field`)."""
    if not isinstance(name, str) or not name:
        raise SpecError(
            field,
            "must be a non-empty string (or leave it out to get a generated name)"
            if field == "job_name"
            else "must be a non-empty string (or leave it out)",
        )
    if len(name) > NAME_MAX_LENGTH:
        raise SpecError(field, f"'{clip(name)}' is {len(name)} characters long; at most {NAME_MAX_LENGTH} are allowed")
    if not _NAME_RE.fullmatch(name):
        raise SpecError(
            field,
            f"'{clip(name)}' is not allowed: use lower-case letters, digits and '-', "
            "starting with a letter and ending with a letter or digit (e.g. 'mnist-ps-1')",
        )
    return name


def check_entry_script(raw: Any) -> str | None:
    """The cell body `%%paddle_submit` sends (`entry_script`, not a table field: it is written
    into the snapshot as `paddle_entry.py`), or None; SpecError unless it is valid Unicode
    Python source without NUL of at most `ENTRY_SCRIPT_MAX_BYTES`."""
    if raw is None:
        return None
    if not isinstance(raw, str):
        raise SpecError("entry_script", "must be a string of Python source (the cell body)")
    if not _well_formed(raw):
        raise SpecError("entry_script", "must be valid Unicode text (it holds a lone surrogate)")
    if "\x00" in raw:
        raise SpecError("entry_script", "must not contain a NUL character (Python source cannot)")
    size = len(raw.encode("utf-8"))
    if size > ENTRY_SCRIPT_MAX_BYTES:
        raise SpecError("entry_script", f"is {size} bytes; a cell body is at most {ENTRY_SCRIPT_MAX_BYTES} bytes (1 MiB)")
    return raw


def parse_duration(raw: Any, field_name: str = "timeout", default: int | None = None) -> int | None:
    """Seconds from `600`, `"600"`, `"90s"`, `"30m"`, `"2h"`, `"1h30m"`, `"1d"`; None stays None."""
    if raw is None or raw == "":
        return None
    if isinstance(raw, bool):
        raise SpecError(field_name, "must be a number of seconds or a duration such as '30m' or '2h'")
    text = raw.strip() if isinstance(raw, str) else ""
    if len(text) > NUMBER_TEXT_MAX_LENGTH:
        raise SpecError(field_name, f"is {len(text)} characters long; a duration is at most {NUMBER_TEXT_MAX_LENGTH}")
    if isinstance(raw, int):
        seconds = raw
    elif isinstance(raw, float) and raw.is_integer():
        seconds = int(raw)
    elif text and text.isascii() and text.isdigit():
        seconds = int(text)
    elif text and (match := _DURATION_RE.fullmatch(text)):
        days, hours, minutes, secs = (int(part) if part else 0 for part in match.groups())
        seconds = ((days * 24 + hours) * 60 + minutes) * 60 + secs
    else:
        raise SpecError(field_name, f"'{clip(str(raw))}' is not a duration: use seconds (600) or units like '90s', '30m', '2h', '1h30m'")
    if seconds <= 0:
        fallback = "no limit" if default is None else f"the default, {default}s"
        raise SpecError(field_name, f"must be positive (or leave it out for {fallback})")
    if seconds > DURATION_MAX_SECONDS:
        raise SpecError(field_name, f"{seconds}s is longer than any job runs (at most {DURATION_MAX_SECONDS}s)")
    return seconds


# ---- one parser per kind: (row, the merged request, limits) -> the field's value


def requested_mode(data: Mapping[str, Any]) -> str:
    """The mode a request asks for: the one it names, else `ps` when it asks for parameter
    servers and `collective` when it does not, so a plain script just runs as trainers and a
    request for pservers gets a mode that has them."""
    mode = data.get("mode")
    if mode not in (None, ""):
        return str(mode)
    pservers = data.get("pservers")
    if pservers in (None, ""):
        return Mode.COLLECTIVE.value
    try:
        return Mode.PS.value if int(str(pservers).strip()) > 0 else Mode.COLLECTIVE.value
    except ValueError:
        return Mode.PS.value  # not a count: let the pservers rule name the field


def _raw(row: JobField, data: Mapping[str, Any]) -> Any:
    value = data.get(row.name)
    if value is None:
        return requested_mode(data) if row.name == "mode" else row.default_for(requested_mode(data))
    return value


def _text(row: JobField, data: Mapping[str, Any]) -> str | None:
    raw = data.get(row.name)
    if raw is None:
        return row.default  # type: ignore[no-any-return]
    if not isinstance(raw, str):
        raise SpecError(row.name, f"must be a string, got {type(raw).__name__}")
    if not _well_formed(raw):
        raise SpecError(row.name, "must be valid Unicode text (it holds a lone surrogate)")
    return raw.strip()


def _name(row: JobField, data: Mapping[str, Any], limits: Limits) -> str | None:
    raw = data.get(row.name)
    return None if raw in (None, "") else validate_name(raw, row.name)


def _command(row: JobField, data: Mapping[str, Any], limits: Limits) -> str:
    value = _text(row, data)
    if not value:
        raise SpecError(row.name, f"is required: the {row.info.help}")
    if len(value) > ENTRY_POINT_MAX_LENGTH:
        raise SpecError(row.name, f"is {len(value)} characters long; at most {ENTRY_POINT_MAX_LENGTH} are allowed")
    if "\x00" in value or "\n" in value or "\r" in value:
        raise SpecError(row.name, "must be a single-line command")
    return value


def _path(row: JobField, data: Mapping[str, Any], limits: Limits) -> str:
    value = _text(row, data) or ""
    if "\x00" in value:
        raise SpecError(row.name, "must be a path")
    if "\n" in value or "\r" in value:
        raise SpecError(row.name, "must be a path on one line (it holds a line break)")
    if len(value) > PATH_MAX_LENGTH:
        raise SpecError(row.name, f"is {len(value)} characters long; a path is at most {PATH_MAX_LENGTH}")
    return value


def _image(row: JobField, data: Mapping[str, Any], limits: Limits) -> str | None:
    value = _text(row, data) or None
    if value is not None and (any(c.isspace() for c in value) or len(value) > IMAGE_MAX_LENGTH):
        raise SpecError(row.name, f"'{clip(value, 2 * IMAGE_MAX_LENGTH)}' is not an image reference (e.g. 'registry/paddle:3.0.0')")
    allowed = limits.bound(row.info.limit)
    if value is not None and allowed is not None and value not in allowed:
        raise SpecError(row.name, f"'{clip(value)}' is not allowed on this server; allowed images: {', '.join(allowed) or 'none'}")
    return value


def choice_message(row: JobField, raw: Any) -> str:
    """`'mpi' is not a mode: use 'ps' (parameter servers + trainers) or 'collective'`."""
    options = [f"'{value}' ({meaning})" if meaning else f"'{value}'" for value, meaning in row.info.choices.items()]
    listed = ", ".join(options[:-1]) + f" or {options[-1]}" if len(options) > 1 else options[0]
    return f"{clip(repr(raw))} is not a {row.info.label.lower()}: use {listed}"


def _choice(row: JobField, data: Mapping[str, Any], limits: Limits) -> str:
    raw = _raw(row, data)
    if not isinstance(raw, str) or raw not in row.info.choices:
        raise SpecError(row.name, choice_message(row, raw))
    return raw


def _count(row: JobField, data: Mapping[str, Any], limits: Limits) -> int:
    raw = _raw(row, data)
    if isinstance(raw, bool) or not isinstance(raw, (int, str, float)):
        raise SpecError(row.name, f"must be a whole number, got {clip(repr(raw))}")
    if isinstance(raw, str) and len(raw.strip()) > NUMBER_TEXT_MAX_LENGTH:
        raise SpecError(row.name, f"is {len(raw.strip())} characters long; a count is at most {NUMBER_TEXT_MAX_LENGTH}")
    if isinstance(raw, float):
        value = int(raw) if raw.is_integer() else None
    elif isinstance(raw, str):
        value = int(raw.strip()) if _WHOLE_RE.fullmatch(raw.strip()) else None
    else:
        value = raw
    if value is None:
        raise SpecError(row.name, f"must be a whole number, got {clip(repr(raw))}")
    lowest = row.info.minimum if row.info.minimum is not None else 0
    if value < lowest:
        raise SpecError(row.name, f"must be at least {lowest}, got {value}")
    highest = limits.bound(row.info.limit)
    if highest is not None and value > highest:
        raise SpecError(row.name, f"must be at most {highest} on this server, got {value}")
    return value


def _quantity(row: JobField, data: Mapping[str, Any], limits: Limits) -> str:
    raw = data.get(row.name)
    if raw is None or raw == "":
        raw = row.default
    if isinstance(raw, str) and len(raw.strip()) > NUMBER_TEXT_MAX_LENGTH:
        raise SpecError(row.name, f"is {len(raw.strip())} characters long; a quantity is at most {NUMBER_TEXT_MAX_LENGTH}")
    try:
        quantity = Quantity.parse(raw)
    except QuantityError as error:
        raise SpecError(row.name, clip(str(error), 400)) from None
    if quantity.value <= 0:
        raise SpecError(row.name, f"must be positive, got '{raw}'")
    ceiling = QUANTITY_MAX[row.kind]
    if quantity.value > ceiling:
        unit = "CPU cores" if row.kind == "cpu" else "bytes"
        raise SpecError(row.name, f"'{raw}' is more than any machine has (at most {ceiling} {unit})")
    most = limits.bound(row.info.limit)
    if most is not None and quantity > Quantity.parse(most):
        raise SpecError(row.name, f"'{raw}' is more than this server allows per replica ({most})")
    if row.kind == "cpu" and (quantity.value * 1000).denominator != 1:
        raise SpecError(row.name, f"'{raw}' is finer than a millicore; use e.g. '500m' or '1.5'")
    if row.kind == "memory" and quantity.value.denominator != 1:
        raise SpecError(row.name, f"'{raw}' is not a whole number of bytes; use e.g. '512Mi' or '4Gi'")
    return str(raw).strip() if isinstance(raw, str) else quantity.canonical()


def _env(row: JobField, data: Mapping[str, Any], limits: Limits) -> dict[str, str]:
    raw = data.get(row.name)
    if raw is None:
        return {}
    if isinstance(raw, (list, tuple)):
        pairs: dict[str, Any] = {}
        for item in raw:
            if not isinstance(item, str) or "=" not in item:
                raise SpecError(row.name, f"{clip(repr(item))} is not KEY=VALUE")
            key, _, value = item.partition("=")
            pairs[key] = value
        raw = pairs
    if not isinstance(raw, Mapping):
        raise SpecError(row.name, "must be a mapping of NAME to value (or a list of 'NAME=value')")
    if len(raw) > ENV_MAX_COUNT:
        raise SpecError(row.name, f"has {len(raw)} variables; at most {ENV_MAX_COUNT} are allowed")
    env: dict[str, str] = {}
    size = 0
    for key, value in raw.items():
        if not isinstance(key, str) or not _ENV_NAME_RE.fullmatch(key):
            raise SpecError(row.name, f"{clip(repr(key))} is not a valid variable name: letters, digits and '_', not starting with a digit")
        if key in RESERVED_ENV or key.startswith(RESERVED_ENV_PREFIX):
            raise SpecError(row.name, f"{key} is set by the launcher for each replica and cannot be overridden")
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            raise SpecError(row.name, f"the value of {key} must be a string or number")
        if isinstance(value, str) and "\x00" in value:
            raise SpecError(row.name, f"the value of {key} must not contain a NUL character")
        if isinstance(value, str) and not _well_formed(value):
            raise SpecError(row.name, f"the value of {key} must be valid Unicode text (it holds a lone surrogate)")
        env[key] = str(value)
        size += len(key.encode()) + len(env[key].encode()) + 2  # NAME=value and its NUL, as exec counts them
        if size > ENV_MAX_BYTES:
            raise SpecError(row.name, f"holds more than {ENV_MAX_BYTES // 1024} KiB of NAME=value text; put large values in a file")
    return env


def _switch(row: JobField, data: Mapping[str, Any], limits: Limits) -> bool:
    raw = _raw(row, data)
    if isinstance(raw, bool):
        return raw
    if isinstance(raw, str) and raw.lower() in ("true", "false", "1", "0", "yes", "no"):
        return raw.lower() in ("true", "1", "yes")
    raise SpecError(row.name, f"must be true or false, got {clip(repr(raw))}")


def _duration(row: JobField, data: Mapping[str, Any], limits: Limits) -> int | None:
    raw = data.get(row.name)
    value = parse_duration(row.default if raw is None or raw == "" else raw, row.name, row.default)
    most = limits.bound(row.info.limit)
    if value is not None and most is not None and value > most:
        raise SpecError(row.name, f"{value}s is longer than this server allows ({most}s)")
    return value


def _pattern(row: JobField, data: Mapping[str, Any], limits: Limits) -> str:
    value = _text(row, data) or ""
    wrong = pattern_problem(value) if value else None
    if wrong is not None:
        raise SpecError(row.name, wrong)
    return value


_PARSERS: dict[Kind, Callable[[JobField, Mapping[str, Any], Limits], Any]] = {
    "name": _name,
    "command": _command,
    "path": _path,
    "image": _image,
    "choice": _choice,
    "count": _count,
    "cpu": _quantity,
    "memory": _quantity,
    "env": _env,
    "switch": _switch,
    "duration": _duration,
    "pattern": _pattern,
}


def parse_field(row: JobField, data: Mapping[str, Any], limits: Limits) -> Any:
    """The field's value from the merged request (its default when left out), or SpecError."""
    return _PARSERS[row.kind](row, data, limits)


# ---- cross-field rules, named by table rows; run once every field parsed


def _pservers_fit_mode(values: Mapping[str, Any], limits: Limits) -> None:
    if values["mode"] == Mode.PS and values["pservers"] < 1:
        raise SpecError("pservers", "ps mode needs at least 1 parameter server")
    if values["mode"] == Mode.COLLECTIVE and values["pservers"] != 0:
        raise SpecError("pservers", "collective mode has no parameter servers; set pservers to 0 or use mode 'ps'")


def _gpus_per_job(values: Mapping[str, Any], limits: Limits) -> None:
    trainers, gpus = values["trainers"], values["trainer_gpu"]
    if limits.max_gpu_per_job is not None and trainers * gpus > limits.max_gpu_per_job:
        raise SpecError(
            "trainer_gpu",
            f"{trainers} trainers x {gpus} GPU = {trainers * gpus} GPUs; this server allows {limits.max_gpu_per_job} per job",
        )


def _ranks_fit(values: Mapping[str, Any], limits: Limits) -> None:
    """A trainer runs one process per rank: one per GPU when it has GPUs, else
    `procs_per_trainer`.  A `paddle.distributed.launch` entry point starts its ranks itself, so
    the job runs one of it per trainer, and it runs collective jobs only."""
    procs, gpus, entry = values["procs_per_trainer"], values["trainer_gpu"], values["entry_point"]
    launch = launch_entry(entry)
    if launch and values["mode"] == Mode.PS:
        raise SpecError(
            "entry_point",
            "paddle.distributed.launch runs collective jobs here; use mode 'collective', or run the script itself "
            "(python train.py) in ps mode, where every replica already gets its role",
        )
    if launch and procs > 1:
        raise SpecError(
            "procs_per_trainer",
            f"must be 1 when the entry point runs paddle.distributed.launch, which starts the ranks itself; "
            f"set --nproc_per_node in the entry point instead of procs_per_trainer {procs}, "
            "or run the script itself (python train.py) with procs_per_trainer",
        )
    if gpus and procs not in (1, gpus):
        raise SpecError(
            "procs_per_trainer",
            f"a trainer with GPUs runs one process per GPU ({gpus}); set procs_per_trainer to 1 or {gpus}, or trainer_gpu to {procs}",
        )
    if gpus > limits.max_procs_per_trainer:
        raise SpecError(
            "trainer_gpu",
            f"{gpus} GPUs mean {gpus} processes per trainer; this server allows {limits.max_procs_per_trainer}",
        )


_REQUIREMENTS_ADVICE = "give a path relative to the package directory, e.g. requirements.txt"


def _requirements_in_package(values: Mapping[str, Any], limits: Limits) -> None:
    """`requirements` names a file inside the package: relative, without a '..' component and
    short.  Whether the file exists is the backend's business (it reads the snapshot)."""
    path = values["requirements"]
    if not path:
        return  # requirements.txt when the package has one
    if len(path) > REQUIREMENTS_MAX_LENGTH:
        raise SpecError(
            "requirements",
            f"is {len(path)} characters long; at most {REQUIREMENTS_MAX_LENGTH} are allowed for a path relative to the package "
            "directory, e.g. requirements.txt",
        )
    if path.startswith("/"):
        raise SpecError("requirements", f"'{clip(path)}' is an absolute path; {_REQUIREMENTS_ADVICE}")
    if ".." in path.split("/"):
        raise SpecError("requirements", f"'{clip(path)}' leaves the package directory ('..'); {_REQUIREMENTS_ADVICE}")


#: rule name -> check over the parsed values of the fields it reads (`reads`), given the limits.
RULES: dict[str, tuple[tuple[str, ...], Callable[[Mapping[str, Any], Limits], None]]] = {
    "pservers_fit_mode": (("mode", "pservers"), _pservers_fit_mode),
    "gpus_per_job": (("trainers", "trainer_gpu"), _gpus_per_job),
    "ranks_fit": (("mode", "entry_point", "trainer_gpu", "procs_per_trainer"), _ranks_fit),
    "requirements_in_package": (("requirements",), _requirements_in_package),
}
