"""Health events on `/events`: while someone's event stream is open, their running jobs' resource
use and timelines are looked at every `INTERVAL` seconds; a new usage sample becomes one `usage`
event (the latest figures per replica, without the history a client fetches once with
`GET /jobs/{name}/usage`), and new timeline entries one `timeline` event (`{"name", "entries"}`,
each entry with its `seq`, so a client that also fetched `GET /jobs/{name}/timeline` drops what it
has).  A job nobody watches costs nothing; a job that just ended gets one last look, so its end
and its peaks are announced too.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from paddle_nbext.model.contract import Phase, is_terminal

from .backends.base import Backend, BackendError
from .events import TIMELINE, USAGE, EventHub, JobEvent

INTERVAL = 1.0

log = logging.getLogger(__name__)

#: The per-replica figures a `usage` event carries (no history).
_LIVE_KEYS = (
    "role",
    "index",
    "phase",
    "cpu",
    "memory",
    "processes",
    "peak_cpu",
    "peak_memory",
    "cpu_request",
    "cpu_limit",
    "memory_request",
    "memory_limit",
)


def live_usage(answer: dict[str, Any]) -> dict[str, Any]:
    """A usage answer without each replica's history: what a `usage` event carries."""
    replicas = [
        {key: replica.get(key) for key in _LIVE_KEYS} | ({"ranks": replica["ranks"]} if "ranks" in replica else {})
        for replica in answer.get("replicas", [])
        if isinstance(replica, dict)
    ]
    return {**answer, "replicas": replicas}


class HealthTicker:
    """The loop that turns new samples and timeline entries into events; `run` until cancelled."""

    def __init__(self, hub: EventHub, backend: Backend, interval: float = INTERVAL) -> None:
        self.hub = hub
        self.backend = backend
        self.interval = interval
        self._sampled: dict[tuple[str, str], Any] = {}  # (owner, job) -> `sampled` last announced
        self._seq: dict[tuple[str, str], int] = {}  # (owner, job) -> last timeline entry announced
        self._running: set[tuple[str, str]] = set()

    async def tick(self) -> None:
        watched: set[tuple[str, str]] = set()
        for owner in self.hub.owners():
            for job in await self.backend.list_jobs(owner):
                key = (owner, job.name)
                running = job.phase in (Phase.RUNNING, Phase.PENDING)
                ended_now = is_terminal(job.phase) and key in self._running
                if running:
                    self._running.add(key)
                elif ended_now:
                    self._running.discard(key)
                if running or ended_now:
                    watched.add(key)
                    await self._announce(owner, job.name)
        for memory in (self._sampled, self._seq):
            for key in list(memory):
                if key not in watched and key not in self._running:
                    del memory[key]

    async def _announce(self, owner: str, name: str) -> None:
        key = (owner, name)
        try:
            seen = self._seq.get(key)
            timeline = await self.backend.timeline(name, owner, seen or 0)
            answer = await self.backend.usage(name, owner)
        except BackendError:
            return  # deleted meanwhile
        entries = timeline.get("entries") or []
        if entries:
            self._seq[key] = int(timeline.get("last") or 0)
            if seen is not None:  # the first look only learns where the list is
                self.hub.publish(JobEvent(TIMELINE, owner, name, {"name": name, "entries": entries}))
        elif seen is None:
            self._seq[key] = 0
        if answer.get("available") and answer.get("sampled") != self._sampled.get(key):
            self._sampled[key] = answer.get("sampled")
            self.hub.publish(JobEvent(USAGE, owner, name, live_usage(answer)))

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
                log.exception("paddle-nbext: looking at jobs' health failed; trying again")
