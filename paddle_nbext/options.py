"""Command-line flags for the job fields, shared by `%%paddle_submit` and `paddle-nbext submit`.

The flags come from the job field table (`JobSpec`'s rows: flag, metavar, help), so the magic,
the CLI and their error messages always agree (`--trainer-mem` ↔ `trainer_mem`).  Parsing never
exits the process: argparse's exits are turned into `UsageError` (one line) or `HelpShown` (the
help text), which callers print.
"""

from __future__ import annotations

import argparse
from typing import Any, NoReturn

from .client import ApiError
from .model.fields import JobField
from .model.spec import JOB_FIELDS, JobSpec, Limits

__all__ = ["FIELD_FLAGS", "HelpShown", "Parser", "UsageError", "add_job_flags", "describe_error", "flag_for", "spec_from_args"]

#: job field -> its flag, from the table.
FIELD_FLAGS: dict[str, str] = {row.name: row.info.flag for row in JOB_FIELDS}
# Local pre-check: syntax only; the server applies its real limits.
_NO_LIMITS = Limits(max_pservers=10**9, max_trainers=10**9, max_gpu_per_replica=10**9, max_procs_per_trainer=10**9, max_restarts=10**9)


def flag_help(row: JobField) -> str:
    """The table's help plus what argparse users need: the default, and that --env repeats."""
    text = row.info.help
    if row.kind == "env":
        return f"{text} (repeatable)"
    if row.kind == "switch":
        return f"do not {text}" if row.default else text
    if row.default in (None, "", {}):
        return text
    modes = "" if set(row.info.modes) == {"ps", "collective"} else f"{'/'.join(row.info.modes)}: "
    return f"{text} [{modes}{row.default}]"


class UsageError(Exception):
    """Bad flags; `str()` is the one line to show."""


class HelpShown(Exception):
    """`--help` was given; `.text` is the help to print."""

    def __init__(self, text: str):
        super().__init__(text)
        self.text = text


class Parser(argparse.ArgumentParser):
    """ArgumentParser that raises instead of printing and exiting."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{self.prog}: {message} (see {self.prog} --help)")

    def exit(self, status: int = 0, message: str | None = None) -> NoReturn:
        if message:
            raise UsageError(message.strip())
        raise HelpShown(self.format_help())

    def print_help(self, file: Any = None) -> None:
        raise HelpShown(self.format_help())

    def print_usage(self, file: Any = None) -> None:
        raise HelpShown(self.format_usage())


def add_job_flags(parser: argparse.ArgumentParser, *, entry_help: str | None = None) -> None:
    """One flag per job field; a switch that defaults to on gets a `--no-...` flag."""
    group = parser.add_argument_group("job fields")
    for row in JOB_FIELDS:
        flag, help_text = row.info.flag, flag_help(row)
        if row.kind == "env":
            group.add_argument(flag, dest=row.name, metavar=row.info.metavar, action="append", help=help_text)
        elif row.kind == "switch":
            action = "store_false" if row.default else "store_true"
            group.add_argument(flag, dest=row.name, action=action, default=None, help=help_text)
        else:
            if row.name == "entry_point" and entry_help:
                help_text = entry_help
            group.add_argument(flag, dest=row.name, metavar=row.info.metavar, help=help_text)


def flag_for(field: str | None) -> str:
    if field and field in FIELD_FLAGS:
        return FIELD_FLAGS[field]
    return field or "job"


def spec_from_args(args: argparse.Namespace) -> dict[str, Any]:
    """The given job fields as a spec dict; raises `UsageError` naming the flag if one is invalid.

    Only what the user gave is sent, so the server's defaults apply to the rest."""
    spec: dict[str, Any] = {}
    for row in JOB_FIELDS:
        value = getattr(args, row.name, None)
        if value is None:
            continue
        if row.kind == "count" and isinstance(value, str) and value.strip().isascii() and value.strip().isdigit():
            value = int(value)
        spec[row.name] = value
    if "env" in spec:
        pairs = {}
        for item in spec["env"]:
            if "=" not in item:
                raise UsageError(f"--env: {item!r} is not K=V (e.g. --env EPOCHS=3)")
            key, _, val = item.partition("=")
            pairs[key] = val
        spec["env"] = pairs
    check_data = dict(spec)
    check_data.setdefault("entry_point", "python paddle_entry.py")
    errors = JobSpec.check(check_data, limits=_NO_LIMITS)
    if errors:
        field = next(iter(errors))
        raise UsageError(f"{flag_for(field)}: {errors[field]}")
    return spec


def describe_error(error: Exception) -> str:
    """One line for any kernel-side error, naming the flag when the server names a field."""
    if isinstance(error, ApiError) and error.field:
        return f"{flag_for(error.field)} ({error.field}): {error.message}"
    return str(error)
