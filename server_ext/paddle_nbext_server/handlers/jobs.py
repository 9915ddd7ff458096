"""`/jobs`, `/jobs/{name}`, `/jobs/{name}/cancel`: submit, list, inspect, cancel, delete.

The spec is validated here against the server's limits and defaults (the server is
authoritative), then handed to the backend with the caller as owner.
"""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any

from jupyter_server.auth.decorator import authorized
from tornado import web

from paddle_nbext.rules import check_entry_script
from paddle_nbext.spec import JobSpec
from paddle_nbext.status import JobStatus

from ..backends.base import SubmitRequest
from .base import PaddleAPIHandler


def newest_first(jobs: list[JobStatus]) -> list[dict[str, Any]]:
    return [job.to_dict() for job in sorted(jobs, key=lambda job: (job.created or "", job.name), reverse=True)]


def render_job_list(jobs: list[JobStatus]) -> str:
    """The `GET /jobs` body, encoded afresh (see `JobListRenderer` for the cached path)."""
    return json.dumps({"jobs": newest_first(jobs)})


class JobListRenderer:
    """Renders `GET /jobs` bodies, reusing each job's JSON text while its status is unchanged.

    Encoding a thousand jobs costs tens of milliseconds per request, yet between two listings
    almost none of them changed.  A backend that answers from memory (the local one) hands back
    the very same `JobStatus` object until the job changes, so object identity is the status
    version: a fragment is reused only for that object (it is kept referenced, so its id cannot be
    reused).  Backends that build new objects each time simply never hit.  Entries are per owner
    and replaced by each listing, so deleted jobs drop out.  Runs in worker threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_owner: dict[str, dict[str, tuple[JobStatus, str]]] = {}

    def render(self, owner: str, jobs: list[JobStatus]) -> str:
        with self._lock:
            previous = self._by_owner.get(owner, {})
        current: dict[str, tuple[JobStatus, str]] = {}
        parts = []
        for job in sorted(jobs, key=lambda job: (job.created or "", job.name), reverse=True):
            hit = previous.get(job.name)
            text = hit[1] if hit is not None and hit[0] is job else json.dumps(job.to_dict())
            current[job.name] = (job, text)
            parts.append(text)
        with self._lock:
            self._by_owner[owner] = current
        # the same text json.dumps({"jobs": [...]}) gives
        return '{"jobs": [' + ", ".join(parts) + "]}"


RENDERER_KEY = "paddle_nbext_job_list_renderer"  # web-app settings key: one renderer per server


class JobsHandler(PaddleAPIHandler):
    @web.authenticated
    @authorized
    async def get(self) -> None:
        backend = await self.backend()
        owner = self.owner
        jobs = await backend.list_jobs(owner)
        renderer = self.settings.setdefault(RENDERER_KEY, JobListRenderer())
        self.finish(await asyncio.to_thread(renderer.render, owner, jobs))

    @web.authenticated
    @authorized
    async def post(self) -> None:
        dry_run = self.query_bool("dry_run")
        body = self.json_body()
        entry_script = check_entry_script(body.pop("entry_script", None))
        settings = self.state.settings
        spec = JobSpec.from_dict(body, defaults=settings.job_defaults(), limits=settings.limits())
        backend = await self.backend()
        request = SubmitRequest(spec=spec, owner=self.owner, home=settings.home(), entry_script=entry_script)
        result = await backend.submit(request, dry_run=dry_run)
        if dry_run:
            self.write_json(result, status=200)
            return
        self.set_header("Location", f"{self.request.path.rstrip('/')}/{spec.job_name}")
        self.write_json(result, status=201)


class JobHandler(PaddleAPIHandler):
    @web.authenticated
    @authorized
    async def get(self, name: str) -> None:
        backend = await self.backend()
        job = await backend.get_job(self.job_name(name), self.owner)
        self.write_json(job.to_dict())

    @web.authenticated
    @authorized
    async def delete(self, name: str) -> None:
        backend = await self.backend()
        await backend.delete(self.job_name(name), self.owner)
        self.set_status(204)
        self.finish()


class CancelHandler(PaddleAPIHandler):
    @web.authenticated
    @authorized
    async def post(self, name: str) -> None:
        backend = await self.backend()
        job = await backend.cancel(self.job_name(name), self.owner)
        self.write_json(job.to_dict())
