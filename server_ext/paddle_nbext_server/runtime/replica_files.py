"""Where a replica's files go: its attempt logs on the home volume (Kubernetes), its metrics files
for `report()`, and the bundle's `pylib/`.

Why a module of its own: the server reads the same files (`attempts`, `metrics_name`, `log_dir`)
as the launcher writes, so the names are defined once, here, and the server imports them without
the launcher's process code.

Standard library only: this file is shipped into every job beside the launcher.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

if __package__:  # imported from the installed package (the server, the local backend)
    from paddle_nbext.model import contract
else:  # a plain script: in a job's bundle, the contract shipped beside it (even where the image
    # has some other paddle-nbext installed); run from a source tree, the installed one
    try:
        import contract  # type: ignore[import-not-found,no-redef]
    except ImportError:
        from paddle_nbext.model import contract

#: Where the replica's output is also written.  Set: that directory ("" = nowhere).  Unset: on
#: Kubernetes, which the index coming from JOB_COMPLETION_INDEX (Indexed Jobs) tells,
#: `$HOME/.paddle-jobs/$PADDLE_NBEXT_JOB/logs` (the pod's HOME is the user's home, where the
#: snapshot is too); elsewhere nowhere, since the local runner captures the output itself.
LOG_DIR_VAR = "PADDLE_NBEXT_LOG_DIR"
JOBS_DIR = ".paddle-jobs"
LOGS_DIR = "logs"
_ATTEMPT = re.compile(rf"^(?P<role>{'|'.join(contract.ROLES)})-(?P<index>[0-9]+)\.attempt-(?P<attempt>[0-9]+)\.log$")


def attempt_name(role: str, index: int, attempt: int) -> str:
    """The file name of one attempt's output; the local backend's `<role>-<index>.log` plus the
    attempt, since on Kubernetes every retry is a pod of its own."""
    return f"{role}-{index}.attempt-{attempt}.log"


def attempt_number(name: str) -> int | None:
    """The attempt of an attempt file's name, None for any other name."""
    match = _ATTEMPT.match(name)
    return int(match["attempt"]) if match else None


def attempts(directory: str, role: str, index: int) -> list[tuple[int, str]]:
    """(attempt, file name) of every attempt file of one replica in `directory`, oldest first;
    none when the directory cannot be listed.  Shared with the server, which reads them."""
    try:
        names = os.listdir(directory)
    except OSError:
        return []
    found = []
    for name in names:
        match = _ATTEMPT.match(name)
        if match and match["role"] == role and int(match["index"]) == index:
            found.append((int(match["attempt"]), name))
    return sorted(found)


def log_dir(env: Mapping[str, str]) -> str | None:
    """The directory this replica's output is also written to, or None (see `LOG_DIR_VAR`)."""
    if LOG_DIR_VAR in env:
        return env[LOG_DIR_VAR].strip() or None
    if env.get("PADDLE_NBEXT_INDEX", "").strip() or not env.get("JOB_COMPLETION_INDEX", "").strip():
        return None
    home, job = env.get("HOME", "").strip(), env.get("PADDLE_NBEXT_JOB", "").strip()
    if not home or not job or "/" in job:
        return None
    return os.path.join(home, JOBS_DIR, job, LOGS_DIR)


#: The replica's metrics file for `paddle_nbext_job.report()` (that module's FILE_VAR).
METRICS_FILE_VAR = "PADDLE_NBEXT_METRICS_FILE"
#: Where metrics files go when set (the local backend: the job's logs/ dir); unset: `log_dir`.
METRICS_DIR_VAR = "PADDLE_NBEXT_METRICS_DIR"
METRICS_SUFFIX = ".metrics.jsonl"
#: The bundle's directory of modules for training code.
PYLIB = "pylib"


#: The rank of a process of a trainer that runs several (`paddle_nbext_job` writes it into each
#: point); unset for a replica of one process.
RANK_VAR = "PADDLE_NBEXT_RANK"


def metrics_name(role: str, index: int, rank: int | None = None) -> str:
    """The metrics file of one replica, beside its logs (shared with the server, which reads it).
    A trainer of several ranks: rank 0 writes the replica's file (its curve is the trainer's),
    rank r > 0 `<role>-<index>.rank-<r>.metrics.jsonl`."""
    if rank:
        return f"{role}-{index}.rank-{rank}{METRICS_SUFFIX}"
    return f"{role}-{index}{METRICS_SUFFIX}"


def metrics_dir(env: Mapping[str, str]) -> str | None:
    """The directory of the job's metrics files (`METRICS_DIR_VAR`, else the log dir), or None."""
    return env.get(METRICS_DIR_VAR, "").strip() or log_dir(env)


def metrics_file(env: Mapping[str, str], role: str, index: int, rank: int | None = None) -> str | None:
    """Where this process's `report()` calls go: `METRICS_DIR_VAR`, else the log dir
    (Kubernetes: the job's dir on the home volume); None: nowhere (`report()` is a no-op)."""
    directory = metrics_dir(env)
    return os.path.join(directory, metrics_name(role, index, rank)) if directory else None


def pylib_dir() -> str | None:
    """The bundle's `pylib/` beside this file (None when run from the installed package, where
    it is not: its other modules must not become top-level imports of the user's code)."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), PYLIB)
    return path if os.path.isdir(path) else None
