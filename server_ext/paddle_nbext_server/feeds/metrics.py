"""Metric events on `/events`: while someone's event stream is open, their running jobs'
metrics files are looked at every `INTERVAL` seconds, and a job whose replicas reported new
points gets one `metrics` event (cursor, progress, latest values).  So a job produces at most
1/INTERVAL events a second however fast it reports, a job nobody watches costs nothing, and a
client fetches the points themselves with `GET /jobs/{name}/metrics?since=<cursor>`.

A job that just ended gets one last look, so its final points and 100 % are announced too.
"""

from __future__ import annotations

import asyncio
from typing import Any

from ..backends.base import Backend
from ..errors import BackendError
from ..events import METRICS, EventHub, JobEvent
from .ticker import JobTicker

#: Seconds between two looks (so at most two metric events a second per job).
INTERVAL = 0.5


class MetricsTicker(JobTicker):
    """The loop that turns new points into `metrics` events; `run` until cancelled."""

    doing = "looking for new metrics"

    def __init__(self, hub: EventHub, backend: Backend, interval: float = INTERVAL) -> None:
        super().__init__(hub, backend, interval)
        self._sent: dict[tuple[str, str], str] = {}  # (owner, job) -> cursor last announced

    def memories(self) -> list[dict[tuple[str, str], Any]]:
        return [self._sent]

    async def announce(self, owner: str, name: str) -> None:
        try:
            files = await self.backend.metrics_files(name, owner)
            summary = await asyncio.to_thread(self.backend.metrics.summary, name, files)
        except BackendError:
            return  # deleted meanwhile, or a backend without metrics
        if not summary["latest"] or summary["cursor"] == self._sent.get((owner, name)):
            return
        self._sent[(owner, name)] = summary["cursor"]
        self.hub.publish(JobEvent(METRICS, owner, name, summary))
