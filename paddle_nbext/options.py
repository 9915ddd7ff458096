"""Command-line flags for the job fields, shared by `%%paddle_submit` and `paddle-nbext submit`.

One table maps every job field to its flag, so the magic, the CLI and their error messages always
agree (`--trainer-mem` ↔ `trainer_mem`).  Parsing never exits the process: argparse's exits are
turned into `UsageError` (one line) or `HelpShown` (the help text), which callers print.
"""
from __future__ import annotations

import argparse
from typing import Any, NoReturn

from .client import ApiError
from .spec import JobSpec, Limits

__all__ = ["UsageError", "HelpShown", "Parser", "add_job_flags", "spec_from_args", "flag_for", "describe_error", "FIELD_FLAGS"]

#: job field -> (flag, metavar, help)
FIELD_FLAGS: dict[str, tuple[str, str, str]] = {
    "job_name": ("--job-name", "NAME", "job name (DNS label, <= 40 chars); generated when omitted"),
    "mode": ("--mode", "ps|collective", "parameter servers + trainers, or collective [ps]"),
    "pservers": ("--pservers", "N", "parameter-server replicas [ps: 1]"),
    "trainers": ("--trainers", "N", "trainer replicas [1]"),
    "pserver_cpu": ("--pserver-cpu", "CPU", "CPU per pserver, e.g. 500m, 2"),
    "pserver_mem": ("--pserver-mem", "MEM", "memory per pserver, e.g. 1Gi"),
    "trainer_cpu": ("--trainer-cpu", "CPU", "CPU per trainer, e.g. 500m, 2"),
    "trainer_mem": ("--trainer-mem", "MEM", "memory per trainer, e.g. 4Gi"),
    "trainer_gpu": ("--trainer-gpu", "N", "GPUs per trainer [0]"),
    "image": ("--image", "IMAGE", "container image (Kubernetes backend)"),
    "trainer_package": ("--package", "DIR", "directory with the code [the current directory]"),
    "env": ("--env", "K=V", "environment variable for every replica (repeatable)"),
    "entry_point": ("--entry", "COMMAND", "command to run in the package dir, e.g. 'python train.py'"),
    "max_restarts": ("--max-restarts", "N", "restarts allowed per replica [0]"),
    "timeout": ("--timeout", "DURATION", "wall-clock limit, e.g. 600, 30m, 2h"),
}
_INT_FIELDS = ("pservers", "trainers", "trainer_gpu", "max_restarts")
# Local pre-check: syntax only; the server applies its real limits.
_NO_LIMITS = Limits(max_pservers=10**9, max_trainers=10**9, max_gpu_per_replica=10**9, max_restarts=10**9)


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
    group = parser.add_argument_group("job fields")
    for name, (flag, metavar, help_text) in FIELD_FLAGS.items():
        if name == "env":
            group.add_argument(flag, dest=name, metavar=metavar, action="append", help=help_text)
        else:
            group.add_argument(flag, dest=name, metavar=metavar, help=entry_help if name == "entry_point" and entry_help else help_text)
    group.add_argument("--no-snapshot", dest="snapshot", action="store_false", default=None, help="run in the package dir itself instead of a copy")


def flag_for(field: str | None) -> str:
    if field and field in FIELD_FLAGS:
        return FIELD_FLAGS[field][0]
    return field or "job"


def spec_from_args(args: argparse.Namespace) -> dict[str, Any]:
    """The given job fields as a spec dict; raises `UsageError` naming the flag if one is invalid.

    Only what the user gave is sent, so the server's defaults apply to the rest."""
    spec: dict[str, Any] = {}
    for name in (*FIELD_FLAGS, "snapshot"):
        value = getattr(args, name, None)
        if value is None:
            continue
        if name in _INT_FIELDS and isinstance(value, str) and value.strip().isdigit():
            value = int(value)
        spec[name] = value
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

