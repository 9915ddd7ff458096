"""The words every part of paddle-nbext shares: job and replica phases, roles, Kubernetes label
keys, and how times and sizes are written.

One module, so that the kernel side, the server, both backends, the panel's REST contract and
the code that runs inside job images cannot drift apart (a phase spelled two ways is a job the
panel never sees end). It sits at the bottom of the dependency graph and uses the standard
library only: the job runtime (launcher, policy, in-cluster master) imports it, and it is shipped
into every job beside those files (`paddle_nbext_server.jobfiles.runtime_files`), where it is imported as
the plain module `contract`.

The enums are `str` subclasses: a phase compares equal to its JSON text, serialises as that text
and formats as it (`f"{Phase.RUNNING}"` is `Running` on every Python 3.10+), so records written by
older versions and JSON from the API need no conversion.
"""

from __future__ import annotations

import os
import shlex
from datetime import datetime, timezone
from enum import Enum


class _Word(str, Enum):
    """A closed set of words that is also plain text wherever it is written or compared."""

    def __str__(self) -> str:
        return str(self.value)

    def __format__(self, spec: str) -> str:
        return str(self.value).__format__(spec)


class Phase(_Word):
    """Where a job is. `TERMINAL_PHASES` are the ends: a job there never changes again.

    `UNKNOWN` is a job whose recorded state cannot be read (a damaged file): shown as such, with
    the file named in its message, rather than guessed at; it is not an end, and only the file
    being written again (or the job deleted) changes it."""

    PENDING = "Pending"
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    CANCELLED = "Cancelled"
    UNKNOWN = "Unknown"


class ReplicaPhase(_Word):
    """Where one replica is. `STOPPED` is a replica the job runner ended on purpose (pservers after
    the trainers succeeded, everything on cancel or after another replica failed): a normal end,
    never reported as a failure."""

    PENDING = "Pending"
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    STOPPED = "Stopped"


class Role(_Word):
    """A replica's part in the job: parameter servers hold the parameters, trainers train."""

    PSERVER = "pserver"
    TRAINER = "trainer"


class Mode(_Word):
    """How a job trains: `ps` (parameter servers and trainers) or `collective` (trainers only)."""

    PS = "ps"
    COLLECTIVE = "collective"


TERMINAL_PHASES: frozenset[str] = frozenset({Phase.SUCCEEDED, Phase.FAILED, Phase.CANCELLED})
#: Roles in the order they start and are listed (pservers first: trainers connect to them).
ROLES: tuple[Role, ...] = (Role.PSERVER, Role.TRAINER)


def is_terminal(phase: str | None) -> bool:
    """True for a job phase that never changes again."""
    return phase in TERMINAL_PHASES


# Kubernetes label and annotation keys on every object a job owns. Label values are selectable;
# the owner's exact name goes in an annotation because a label value cannot hold every user name.
MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
MANAGER = "paddle-nbext"
JOB_LABEL = "paddle-nbext/job"
OWNER_LABEL = "paddle-nbext/owner"
ROLE_LABEL = "paddle-nbext/role"
#: On every pod: the uid of the record it was submitted under. A resubmit reuses the job's name
#: while pods of the deleted job may still be terminating; the uid tells them apart.
RECORD_UID_LABEL = "paddle-nbext/record-uid"
OWNER_ANNOTATION = "paddle-nbext/owner"
STATUS_ANNOTATION = "paddle-nbext/status"  # JSON: the final status, written once the job ends
CANCELLED_ANNOTATION = "paddle-nbext/cancelled"
#: On the record of a job that Resume started: JSON `{"job", "step"}` of the job and checkpoint it
#: resumed from (`JobStatus.resumed_from`), written at submit, so it lasts as long as the record.
RESUMED_FROM_ANNOTATION = "paddle-nbext/resumed-from"
#: On a Kubernetes job's replica Jobs and their pods: which whole-job attempt made them ("0" the
#: first).  A restart deletes every replica Job and makes them again with the next attempt, so
#: pods of an attempt that is being stopped never count for the one that replaces it.
ATTEMPT_LABEL = "paddle-nbext/attempt"
#: On the record: JSON of the job's whole restarts so far (`replicas.Restarts`).
RESTART_ANNOTATION = "paddle-nbext/restart"
#: The record ConfigMap's key holding the replica Jobs as submitted (JSON list), from which a
#: whole-job restart makes them again: the same spec, image, snapshot and resources.
REPLICA_JOBS_KEY = "replica-jobs.json"
#: The record ConfigMap's key holding the job's spec (`JobSpec.to_dict()` as JSON).
SPEC_KEY = "spec.json"
#: The record ConfigMap's key holding how many seconds a replica's image may fail to pull before
#: the job fails (the admin's `image_pull_seconds`, written at submit so the master reads it too).
IMAGE_PULL_KEY = "image-pull-seconds"

#: The launcher's exit code when the job's environment (its requirements file) cannot be built:
#: the job fails at once, never restarted, since every attempt would meet the same installer.
ENVIRONMENT_EXIT_CODE = 4
#: The launcher's exit code when it stopped its trainer for a stall (`on_stall` restart or fail,
#: runtime/replica_health.py); the stall's words are its container's termination message and its
#: last line, and the lifecycle policy restarts or fails the whole job by `on_stall`.
STALL_EXIT_CODE = 5
#: The name the job's environment step goes by in the logs API (`?role=environment`): the
#: installer's output, beside the replicas' logs.
ENVIRONMENT_LOG = "environment"


#: The environment variables of the Paddle contract, which the launcher sets per replica (role,
#: ids, endpoints; docs/paddle-facts.md). A job's `env` may not set them, and the launcher drops
#: inherited values first, so a stale one from the notebook never leaks into another role.
PADDLE_CONTRACT_VARS: tuple[str, ...] = (
    "TRAINING_ROLE",
    "PADDLE_TRAINER_ID",
    "PADDLE_TRAINERS_NUM",
    "PADDLE_PSERVERS_IP_PORT_LIST",
    "PADDLE_PSERVER_ID",
    "PADDLE_PORT",
    "POD_IP",
    "PADDLE_TRAINER_ENDPOINTS",
    "PADDLE_CURRENT_ENDPOINT",
    "PADDLE_JOB_NAME",
    "TRAINERS",
    "PSERVERS",
    "ENTRY",
    "TRAINER_PACKAGE",
    # One process per rank (runtime/ranks.py): the names paddle.distributed.launch sets.
    "PADDLE_GLOBAL_RANK",
    "PADDLE_GLOBAL_SIZE",
    "PADDLE_LOCAL_RANK",
    "PADDLE_LOCAL_SIZE",
    "PADDLE_NNODES",
    "PADDLE_RANK_IN_NODE",
    "FLAGS_selected_gpus",
    # What a `python -m paddle.distributed.launch` entry point reads to rendezvous.
    "PADDLE_MASTER",
    "PADDLE_RANK",
)

#: How an entry point that runs Paddle's own launcher starts: `python -m paddle.distributed.launch`
#: (any python, `python3.11`, a path to one) or its console script `fleetrun`.  Such an entry point
#: starts its ranks itself; the job runner gives it the master, node count and node rank.
_LAUNCH_MODULES = frozenset({"paddle.distributed.launch", "paddle.distributed.launch.main"})


def launch_entry(entry: str) -> bool:
    """True when `entry` runs `paddle.distributed.launch` (or `fleetrun`) as its command: the
    first command word, after any `NAME=value` assignments and an `env`, is a Python with
    `-m paddle.distributed.launch`, or `fleetrun`.  Word splitting is the shell's plain one
    (`shlex`); an entry that cannot be split is not one."""
    try:
        words = shlex.split(entry)
    except ValueError:
        return False
    while words and (words[0] == "env" or ("=" in words[0] and not words[0].startswith("="))):
        words = words[1:]
    if not words:
        return False
    program = os.path.basename(words[0])
    if program == "fleetrun":
        return True
    if not program.startswith("python"):
        return False
    rest = words[1:]
    while rest and rest[0].startswith("-") and rest[0] != "-m" and not rest[0].startswith("-m"):
        rest = rest[1:]  # interpreter options such as -u or -X dev
    if rest and rest[0] == "-m" and len(rest) > 1:
        return rest[1] in _LAUNCH_MODULES
    return bool(rest) and rest[0].startswith("-m") and rest[0][2:] in _LAUNCH_MODULES


def now_iso() -> str:
    """This instant as the API writes times: UTC, milliseconds, `Z` (`2026-12-01T11:00:00.000Z`)."""
    return format_time(datetime.now(timezone.utc))


def format_time(moment: datetime) -> str:
    """`moment` in the API's time format (naive datetimes are taken as UTC)."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return moment.astimezone(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def parse_time(text: str | None) -> datetime | None:
    """An API time (or any ISO 8601 time, `Z` or offset) as an aware datetime; None if absent or
    unreadable, because a damaged record must never break a listing."""
    if not text:
        return None
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)


_BINARY_UNITS = (("Ei", 2**60), ("Pi", 2**50), ("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10))


def format_bytes(value: float) -> str:
    """Bytes as people write Kubernetes memory: the largest binary unit, at most two decimals,
    trailing zeros dropped (`17179869184` -> `16Gi`, `1610612736` -> `1.5Gi`, `512` -> `512`)."""
    magnitude = abs(value)
    for unit, size in _BINARY_UNITS:
        if magnitude >= size:
            return f"{_two_decimals(value / size)}{unit}"
    return _two_decimals(value)


def format_cores(value: float) -> str:
    """CPU cores for people: whole numbers bare, fractions below one in millicores, else at most
    three decimals (`8`, `250m`, `1.5`)."""
    if value == int(value):
        return str(int(value))
    if abs(value) < 1 and round(value * 1000, 9) == int(round(value * 1000)):
        return f"{int(round(value * 1000))}m"
    return f"{value:.3f}".rstrip("0").rstrip(".")


def format_duration(seconds: float) -> str:
    """A span for people, two units at most: `45s`, `3m 20s`, `2h 5m`, `3d 4h`."""
    total = max(0, int(seconds))
    days, rest = divmod(total, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}d {hours}h" if hours else f"{days}d"
    if hours:
        return f"{hours}h {minutes}m" if minutes else f"{hours}h"
    if minutes:
        return f"{minutes}m {secs}s" if secs else f"{minutes}m"
    return f"{secs}s"


def _two_decimals(value: float) -> str:
    text = f"{value:.2f}".rstrip("0").rstrip(".")
    return "0" if text in ("", "-0") else text
