"""A backend holding many finished jobs in memory, for `bench_panel.py` only.

The panel benchmark needs 1,000 jobs and a 10,000-line log; running that many real Paddle jobs
would measure the machine, not the panel.  Everything else stays real: the server extension,
its REST routes and `/events` stream, the event hub, JupyterLab and Chromium.  The benchmark
selects it as any site plugs in a backend of its own, through the public setting
`c.PaddleNbext.backend_class = "bench_backend.BenchBackend"` (this folder on the server's path).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncGenerator
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from typing import Any

from paddle_nbext.model.spec import JobSpec
from paddle_nbext.model.status import JobStatus, ReplicaStatus
from paddle_nbext_server.backends.base import Backend, SubmitRequest
from paddle_nbext_server.errors import JobNotFound
from paddle_nbext_server.events import DELETED, UPDATED, JobEvent

JOBS = int(os.environ.get("PADDLE_BENCH_JOBS", "1000"))
LOG_LINES = int(os.environ.get("PADDLE_BENCH_LOG_LINES", "10000"))
PHASES = ("Succeeded", "Failed", "Running", "Pending", "Cancelled")


def _iso(moment: datetime) -> str:
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _job(owner: str, number: int, now: datetime) -> JobStatus:
    phase = PHASES[number % len(PHASES)]
    spec = JobSpec.from_dict(
        {"job_name": f"bench-{number:04d}", "entry_point": "python ps_train.py", "pservers": 1, "trainers": 2}
    ).to_dict()
    replica_phase = {"Cancelled": "Stopped"}.get(phase, phase)
    replicas = [
        ReplicaStatus(role, index, replica_phase, None, 0 if phase == "Succeeded" else None, 0, _iso(now), None)
        for role, count in (("pserver", 1), ("trainer", 2))
        for index in range(count)
    ]
    created = now - timedelta(minutes=number)
    return JobStatus(
        f"bench-{number:04d}", owner, "bench", phase, f"{phase} (benchmark job)", spec, _iso(created), _iso(created), None, replicas
    )


def _log_line(number: int) -> str:
    return f"step {number} loss {1.0 / (1 + number):.6f} lr 0.001 samples/s 1234.5 (benchmark line)\n"


class BenchBackend(Backend):
    name = "bench"

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._jobs: dict[str, dict[str, JobStatus]] = {}

    def _owned(self, owner: str) -> dict[str, JobStatus]:
        if owner not in self._jobs:
            now = datetime.now(timezone.utc)
            self._jobs[owner] = {job.name: job for job in (_job(owner, n, now) for n in range(JOBS))}
        return self._jobs[owner]

    def _get(self, name: str, owner: str) -> JobStatus:
        try:
            return self._owned(owner)[name]
        except KeyError:
            raise JobNotFound(f"job '{name}' not found") from None

    async def submit(self, request: SubmitRequest, *, dry_run: bool = False) -> dict[str, Any]:
        raise JobNotFound("the benchmark backend does not run jobs")

    async def list_jobs(self, owner: str) -> list[JobStatus]:
        return list(self._owned(owner).values())

    async def get_job(self, name: str, owner: str) -> JobStatus:
        return self._get(name, owner)

    async def read_logs(self, name: str, owner: str, role: str, index: int, *, tail: int | None = None, previous: bool = False) -> str:
        self._get(name, owner)
        lines = [_log_line(n) for n in range(LOG_LINES)]
        return "".join(lines[-tail:] if tail else lines) if tail != 0 else ""

    async def follow_logs(self, name: str, owner: str, role: str, index: int, *, tail: int | None = None) -> AsyncGenerator[str, None]:
        """10,000 lines in 200 chunks of 50, as fast as a busy trainer writes them."""
        for start in range(0, LOG_LINES, 50):
            yield "".join(_log_line(n) for n in range(start, min(start + 50, LOG_LINES)))
            await asyncio.sleep(0.002)

    async def cancel(self, name: str, owner: str) -> JobStatus:
        """Flip the job's phase (Running <-> Cancelled) and publish it: one `job` event."""
        job = self._get(name, owner)
        phase = "Running" if job.phase == "Cancelled" else "Cancelled"
        job = replace(job, phase=phase, message=f"{phase} (benchmark toggle)")
        self._owned(owner)[name] = job
        self.events.publish(JobEvent(UPDATED, owner, name, job.to_dict()))
        return job

    async def delete(self, name: str, owner: str) -> None:
        self._owned(owner).pop(name, None)
        self.events.publish(JobEvent(DELETED, owner, name))
