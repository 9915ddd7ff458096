"""How a record's JSON is checked as it is read: the field converters each record's `from_json`
is built from (`build`), the version every record carries (`versioned`), and the two errors a file
that is not a usable record raises.

A file that is not a record at all (half written, hand edited, wrong types, a phase or role this
code does not know, a pid that names no single process) raises `RecordDamaged`, a `ValueError`,
exactly like unparsable JSON; a file with a version newer than this code knows raises
`NewerRecord` (`records` says why each is handled as it is).  It knows no record: the records
(`records`) and their files (`record_files`) build on it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import fields
from typing import Any, TypeVar

from paddle_nbext.model.contract import Phase

T = TypeVar("T")
Converter = Callable[[Any], Any]


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
        self.owner = text_or_empty(data.get("owner"))
        self.created = text_or_empty(data.get("created"))
        phase = data.get("phase")
        self.phase = phase if isinstance(phase, str) and phase in set(Phase) else None
        super().__init__(self.message)

    @property
    def message(self) -> str:
        return (
            f"This job's {self.kind} was written by a newer paddle-nbext (record version {self.version}); "
            "upgrade the server to see and manage it."
        )


def _fail(what: str, value: Any) -> RecordDamaged:
    return RecordDamaged(f"{what} must be {value}")


def text(value: Any) -> str:
    if not isinstance(value, str):
        raise _fail("a text field", "text")
    return value


def text_or_empty(value: Any) -> str:
    return value if isinstance(value, str) else ""


def optional_text(value: Any) -> str | None:
    return None if value is None else text(value)


def integer(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise _fail("a count", "a whole number")
    return value


def optional_integer(value: Any) -> int | None:
    return None if value is None else integer(value)


def pid(value: Any) -> int:
    """A process id the runner may signal: above 1 (0 and negative numbers name process groups,
    1 is init), so a damaged record can never make the backend signal its own group or all."""
    found = integer(value)
    if found <= 1:
        raise _fail("a process id", "a whole number above 1")
    return found


def optional_pid(value: Any) -> int | None:
    return None if value is None else pid(value)


def pids(value: Any) -> list[int]:
    if not isinstance(value, list):
        raise _fail("a list of process ids", "a list")
    return [pid(item) for item in value]


def pids_by_name(value: Any) -> dict[str, int]:
    return {text(key): pid(item) for key, item in json_object(value).items()}


def word(words: Any, what: str) -> Converter:
    known = frozenset(str(item) for item in words)

    def convert(value: Any) -> str:
        if not isinstance(value, str) or value not in known:
            raise RecordDamaged(f"{what} must be one of {', '.join(sorted(known))}, not {value!r}")
        return value

    return convert


#: The spec counts the status model computes with (`role_counts`, `replica_ended`).
_SPEC_COUNTS = ("pservers", "trainers", "max_restarts")


def status_spec(value: Any) -> dict[str, Any]:
    spec = json_object(value)
    for key in _SPEC_COUNTS:
        if spec.get(key) is not None:
            integer(spec[key])
    return spec


def number(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _fail("an amount", "a number")
    return float(value)


def integers(value: Any) -> list[int]:
    if not isinstance(value, list):
        raise _fail("a list of ids", "a list")
    return [integer(item) for item in value]


def json_object(value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _fail("a mapping", "a JSON object")
    return value


def texts_by_name(value: Any) -> dict[str, str]:
    return {text(key): text(item) for key, item in json_object(value).items()}


def each(convert: Callable[[Any], T]) -> Callable[[Any], list[T]]:
    def convert_all(value: Any) -> list[T]:
        if not isinstance(value, list):
            raise _fail("a list of records", "a list")
        return [convert(item) for item in value]

    return convert_all


def optional(convert: Callable[[Any], T]) -> Callable[[Any], T | None]:
    return lambda value: None if value is None else convert(value)


def build(cls: Callable[..., T], data: Any, converters: Mapping[str, Converter]) -> T:
    """`cls` from the keys of `data` it declares: absent keys take the dataclass's defaults, a
    missing required one or a value of the wrong type is `RecordDamaged`, unknown keys are
    ignored (a later release of the same version may add optional fields)."""
    mapping = json_object(data)
    names = {item.name for item in fields(cls)}  # type: ignore[arg-type]
    values = {name: converters.get(name, identity)(mapping[name]) for name in names if name in mapping}
    try:
        return cls(**values)
    except TypeError as error:
        raise RecordDamaged(f"incomplete record: {error}") from None


def identity(value: Any) -> Any:
    return value


def versioned(kind: str, supported: int, document: str) -> dict[str, Any]:
    """The record's JSON object, refused if a newer release wrote it (no version: version 1)."""
    try:
        parsed = json.loads(document)
    except RecursionError:
        raise RecordDamaged(f"{kind} is nested too deeply to be a record") from None
    data = json_object(parsed)
    version = data.get("version", 1)
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise RecordDamaged(f"{kind} has an unreadable version {version!r}")
    if version > supported:
        raise NewerRecord(kind, version, data)
    return data
