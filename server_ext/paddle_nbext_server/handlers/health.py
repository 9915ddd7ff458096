"""`GET /jobs/{name}/usage` (CPU and memory per replica beside request and limit) and
`GET /jobs/{name}/timeline?since=SEQ` (what happened to the job, in order).

Ownership as everywhere: another user's job is a 404.  The backends read files or caches in
worker threads; nothing here blocks the event loop.
"""

from __future__ import annotations

import json

from jupyter_server.auth.decorator import authorized
from tornado import web

from .base import PaddleAPIHandler


class UsageHandler(PaddleAPIHandler):
    @web.authenticated
    @authorized
    async def get(self, name: str) -> None:
        backend = await self.backend()
        answer = await backend.usage(self.job_name(name), self.owner)
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
