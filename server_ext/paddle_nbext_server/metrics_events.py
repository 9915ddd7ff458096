"""Metric events on `/events`: while someone's event stream is open, their running jobs'
metrics files are looked at every `INTERVAL` seconds, and a job whose replicas reported new
points gets one `metrics` event (cursor, progress, latest values).  So a job produces at most
1/INTERVAL events a second however fast it reports, a job nobody watches costs nothing, and a
client fetches the points themselves with `GET /jobs/{name}/metrics?since=<cursor>`.

A job that just ended gets one last look, so its final points and 100 % are announced too.
"""

from __future__ import annotations

import asyncio
import logging

from paddle_nbext.model.contract import Phase, is_terminal

from .backends.base import Backend, BackendError
from .events import METRICS, EventHub, JobEvent

#: Seconds between two looks (so at most two metric events a second per job).
INTERVAL = 0.5

log = logging.getLogger(__name__)


class MetricsTicker:
    """The loop that turns new points into `metrics` events; `run` until cancelled."""

    def __init__(self, hub: EventHub, backend: Backend, interval: float = INTERVAL) -> None:
        self.hub = hub
        self.backend = backend
        self.interval = interval
        self._sent: dict[tuple[str, str], str] = {}  # (owner, job) -> cursor last announced
        self._running: set[tuple[str, str]] = set()

    async def tick(self) -> None:
        """One look at every watched owner's running jobs."""
        watched: set[tuple[str, str]] = set()
        for owner in self.hub.owners():
            for job in await self.backend.list_jobs(owner):
                key = (owner, job.name)
                running = job.phase == Phase.RUNNING
                ended_now = is_terminal(job.phase) and key in self._running
                if running:
                    self._running.add(key)
                elif ended_now:
                    self._running.discard(key)
                if running or ended_now:
                    watched.add(key)
                    await self._announce(owner, job.name)
        for key in list(self._sent):
            if key not in watched and key not in self._running:
                del self._sent[key]

    async def _announce(self, owner: str, name: str) -> None:
        try:
            files = await self.backend.metrics_files(name, owner)
            summary = await asyncio.to_thread(self.backend.metrics.summary, name, files)
        except BackendError:
            return  # deleted meanwhile, or a backend without metrics
        if not summary["latest"] or summary["cursor"] == self._sent.get((owner, name)):
            return
        self._sent[(owner, name)] = summary["cursor"]
        self.hub.publish(JobEvent(METRICS, owner, name, summary))

    async def run(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            if not self.hub.owners():
                continue
            try:
                await self.tick()
            except asyncio.CancelledError:
                raise
            except Exception:  # one bad job or a backend hiccup must not end the events for all
                log.exception("paddle-nbext: looking for new metrics failed; trying again")
