"""Shared helpers for the local-backend end-to-end tests: a throw-away home with the examples in
it, backends pointed at that home, and waiting for jobs through the async API."""

from __future__ import annotations

import asyncio
import json
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from paddle_nbext.model.spec import JobSpec
from paddle_nbext.model.status import JobStatus
from paddle_nbext_server.backends.base import SubmitRequest
from paddle_nbext_server.backends.local import LocalBackend
from paddle_nbext_server.backends.local.master.process_table import ProcessTable
from paddle_nbext_server.backends.local.processes import pid_alive
from paddle_nbext_server.events import EventHub

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
OWNER = "alice"
TERMINAL = ("Succeeded", "Failed", "Cancelled")


def make_home(root: Path) -> Path:
    """A home dir holding the example scripts under `code/`."""
    home = root / "home"
    shutil.copytree(EXAMPLES, home / "code", ignore=shutil.ignore_patterns("*.ipynb", "__pycache__"))
    return home


def backend_for(home: Path, **config: Any) -> LocalBackend:
    return LocalBackend(events=EventHub(), jobs_dir=str(home / ".paddle-jobs"), **config)


def request(home: Path, entry_script: str | None = None, **fields: Any) -> SubmitRequest:
    fields.setdefault("trainer_package", "code")
    return SubmitRequest(spec=JobSpec.from_dict(fields), owner=OWNER, home=home, entry_script=entry_script)


async def wait_until(backend: LocalBackend, name: str, predicate: Callable[[JobStatus], bool], timeout: float = 240.0) -> JobStatus:
    """Poll the job until `predicate(status)` holds; fail the test with the last status if never."""
    deadline = time.monotonic() + timeout
    while True:
        status = await backend.get_job(name, OWNER)
        if predicate(status):
            return status
        if time.monotonic() > deadline:
            raise AssertionError(f"job {name} never reached the expected state; last status: {status.to_dict()}")
        await asyncio.sleep(0.2)


async def wait_terminal(backend: LocalBackend, name: str, timeout: float = 240.0) -> JobStatus:
    return await wait_until(backend, name, lambda s: s.phase in TERMINAL, timeout)


async def wait_for_log(backend: LocalBackend, name: str, role: str, index: int, text: str, timeout: float = 240.0) -> None:
    deadline = time.monotonic() + timeout
    while text not in await backend.read_logs(name, OWNER, role, index):
        status = await backend.get_job(name, OWNER)
        assert status.phase not in TERMINAL, f"job ended before its log showed {text!r}: {status.to_dict()}"
        assert time.monotonic() < deadline, f"{role} {index} never logged {text!r}"
        await asyncio.sleep(0.2)


def job_record(home: Path, name: str) -> dict[str, Any]:
    record: dict[str, Any] = json.loads((home / ".paddle-jobs" / name / "status.json").read_text())
    return record


def leftover_processes(home: Path, name: str, wait: float = 30.0) -> list[int]:
    """Pids (and process groups) of the job's record still alive once the master had time to exit."""
    record = job_record(home, name)
    master = int((home / ".paddle-jobs" / name / "master.pid").read_text())
    pids = [master, *record.get("pids", [])]
    assert record.get("pids"), "the job's record lists no replica processes"
    deadline = time.monotonic() + wait
    while True:
        groups = ProcessTable.read().groups
        alive = [pid for pid in pids if pid_alive(pid) or groups.get(pid)]
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.2)


def losses(log: str) -> list[float]:
    values: list[float] = []
    for line in log.splitlines():
        parts = line.split()
        if len(parts) == 4 and parts[0] == "step" and parts[2] == "loss":
            values.append(float(parts[3]))
    return values
