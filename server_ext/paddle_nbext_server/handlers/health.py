"""`GET /jobs/{name}/usage` (CPU and memory per replica beside request and limit, and the job's
goodput from its replicas' reported steps) and
`GET /jobs/{name}/timeline?since=SEQ` (what happened to the job, in order).

Ownership as everywhere: another user's job is a 404.  The backends read files or caches in
worker threads; nothing here blocks the event loop.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

from jupyter_server.auth.decorator import authorized
from tornado import web

from paddle_nbext.model.contract import parse_time

from ..backends.base import Backend
from ..jobfiles.goodput import job_goodput
from .base import PaddleAPIHandler


async def goodput_of(backend: Backend, name: str, owner: str) -> dict[str, Any] | None:
    """The job's goodput (`jobfiles.goodput`) from its status's times and its trainers' points
    (the files read in a thread)."""
    job = await backend.get_job(name, owner)
    files = await backend.metrics_files(name, owner)
    started, ended = parse_time(job.started), parse_time(job.finished)
    replicas = await asyncio.to_thread(backend.metrics.refreshed, name, files)
    return job_goodput(replicas, started.timestamp() if started else None, ended.timestamp() if ended else None, time.time())


class UsageHandler(PaddleAPIHandler):
    @web.authenticated
    @authorized
    async def get(self, name: str) -> None:
        backend = await self.backend()
        name = self.job_name(name)
        answer = await backend.usage(name, self.owner)
        answer["goodput"] = await goodput_of(backend, name, self.owner)
        self.set_header("Cache-Control", "no-cache")
        self.set_header("Content-Type", "application/json")
        self.finish(json.dumps(answer, separators=(",", ":")))


class TimelineHandler(PaddleAPIHandler):
    @web.authenticated
    @authorized
    async def get(self, name: str) -> None:
        since = self.query_int("since", 0)
        backend = await self.backend()
        answer = await backend.timeline(self.job_name(name), self.owner, since or 0)
        self.set_header("Cache-Control", "no-cache")
        self.set_header("Content-Type", "application/json")
        self.finish(json.dumps(answer, separators=(",", ":")))
