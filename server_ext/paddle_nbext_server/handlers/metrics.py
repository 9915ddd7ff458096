"""`GET /jobs/{name}/metrics`: what the job's replicas `report()`ed, per replica and metric,
downsampled to a `points` budget and limited to what came after a `since` cursor.

Ownership as for logs: another user's job is a 404.  Parsing and downsampling run in a thread
(`paddle_nbext_server.jobfiles.metrics`), never on the event loop.
"""

from __future__ import annotations

import asyncio
import json

from jupyter_server.auth.decorator import authorized
from tornado import web

from ..jobfiles.metrics import MetricsCursorError, parse_cursor
from .base import PaddleAPIHandler, RequestError

#: The largest `points` budget a request may ask for (per replica and metric).
MAX_POINTS = 100_000


class MetricsHandler(PaddleAPIHandler):
    @web.authenticated
    @authorized
    async def get(self, name: str) -> None:
        points = self.query_int("points", None, lowest=1)
        if points is not None and points > MAX_POINTS:
            raise RequestError(f"points must be at most {MAX_POINTS}, got {points}", field="points")
        since = self.get_query_argument("since", None) or None
        try:
            parse_cursor(since)
        except MetricsCursorError as error:
            raise RequestError(str(error), field="since") from None
        backend = await self.backend()
        name = self.job_name(name)
        files = await backend.metrics_files(name, self.owner)
        body = await asyncio.to_thread(lambda: json.dumps(backend.metrics.read(name, files, since, points), separators=(",", ":")))
        self.set_header("Cache-Control", "no-cache")
        self.set_header("Content-Type", "application/json")
        self.finish(body)
