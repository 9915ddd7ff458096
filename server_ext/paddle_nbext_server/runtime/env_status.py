"""The files an environment step leaves for others to read: the job's environment status (what
the server shows as the job's message while the environment is built), each built environment's
record, and the JSON helpers that write them atomically.

Why apart from the build: the server reads these files (`read_status`, `phase_message`, the
listing of built environments for housekeeping) and must not need the installer's code to do
it; the replicas that build and those that wait write and read the same files.

Standard library only: this file is shipped into every job beside the launcher.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import tempfile
import time
from collections.abc import Mapping
from typing import Any

#: In the job's logs dir: what the environment step is doing (the server shows it as the job's
#: message) and the installer's output (shown as the job's `environment` log).
STATUS_FILE = "environment.json"
LOG_FILE = "environment.log"
#: In an environment's directory.
INFO_FILE = "env.json"
INSTALL_LOG = "install.log"
LAST_USED_FILE = "last-used"
_KEY = re.compile(r"^[0-9a-f]{16}$")


def write_json(path: str, data: Mapping[str, Any]) -> None:
    """Write atomically (a reader never sees half a file); errors are the caller's."""
    directory = os.path.dirname(path) or "."
    handle, temporary = tempfile.mkstemp(prefix=".", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            json.dump(data, out)
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


def read_json(path: str) -> dict[str, Any] | None:
    """A JSON object file, None when missing or unreadable."""
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def read_status(logs_dir: str) -> dict[str, Any] | None:
    """The job's environment status (`STATUS_FILE`), for the server: None when the job has none."""
    return read_json(os.path.join(logs_dir, STATUS_FILE))


def phase_message(status: Mapping[str, Any]) -> str | None:
    """The job's message while its environment is being prepared; None once it is ready or failed."""
    if status.get("state") != "building":
        return None
    packages, requirements = status.get("packages"), status.get("requirements")
    if isinstance(packages, int):  # resolved: what will be installed
        what = f"{packages} package{'s' if packages != 1 else ''}"
    elif isinstance(requirements, int):  # before the resolver has answered: the file's lines
        what = f"{requirements} requirement{'s' if requirements != 1 else ''}"
    else:
        what = "requirements"
    by = status.get("by")
    waiting = f", built by job {by}" if isinstance(by, str) and by and by != status.get("job") else ""
    installer = status.get("installer")
    by_what = f" ({installer})" if isinstance(installer, str) and installer else ""
    return f"Preparing environment: {what}{by_what}{waiting}"


def write_status(logs_dir: str | None, job: str, data: Mapping[str, Any]) -> None:
    """Write the job's environment status (`STATUS_FILE`) into its logs dir, when it has one;
    never raises: the status is what users see, never a condition of the build."""
    if logs_dir:
        with contextlib.suppress(OSError):
            os.makedirs(logs_dir, exist_ok=True)
            write_json(os.path.join(logs_dir, STATUS_FILE), {"job": job, "time": time.time(), **data})


def environments(envs_dir: str) -> list[dict[str, Any]]:
    """Every built environment's record (`INFO_FILE`) plus its path and when it was last used."""
    found = []
    try:
        names = sorted(os.listdir(envs_dir))
    except OSError:
        return []
    for name in names:
        if not _KEY.match(name):
            continue
        path = os.path.join(envs_dir, name)
        info = read_json(os.path.join(path, INFO_FILE))
        if info is None:
            continue
        try:
            last_used = os.stat(os.path.join(path, LAST_USED_FILE)).st_mtime
        except OSError:
            last_used = float(info.get("built") or 0)
        found.append({**info, "path": path, "last_used": last_used})
    return found
