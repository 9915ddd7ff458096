"""The loop behind the periodic events on `/events` (`metrics`, `usage`, `timeline`): while
someone's event stream is open, each of their active jobs is looked at every `interval` seconds,
and a job that just ended gets one last look, so its final state is announced too.  A job nobody
watches costs nothing.  Subclasses say which phases are active, what one look announces, and
what they remember per job (forgotten once the job is neither watched nor active).
"""

from __future__ import annotations

import abc
import asyncio
import logging
from typing import Any

from paddle_nbext.model.contract import Phase, is_terminal

from ..backends.base import Backend
from ..events import EventHub

log = logging.getLogger(__name__)

JobKey = tuple[str, str]  # (owner, job name)


class JobTicker(abc.ABC):
    """Looks at every watched owner's active jobs; `run` until cancelled."""

    #: The phases in which a job is looked at every tick.
    active_phases: frozenset[str] = frozenset({Phase.RUNNING})
    #: What the log says when a tick fails ("looking for new metrics").
    doing = "looking at jobs"

    def __init__(self, hub: EventHub, backend: Backend, interval: float) -> None:
        self.hub = hub
        self.backend = backend
        self.interval = interval
        self._running: set[JobKey] = set()

    def memories(self) -> list[dict[JobKey, Any]]:
        """What the subclass remembers per job (pruned after each tick)."""
        return []

    @abc.abstractmethod
    async def announce(self, owner: str, name: str) -> None:
        """One look at one job: publish what is new."""

    async def tick(self) -> None:
        """One look at every watched owner's active jobs (and those that just ended)."""
        watched: set[JobKey] = set()
        for owner in self.hub.owners():
            for job in await self.backend.list_jobs(owner):
                key = (owner, job.name)
                active = job.phase in self.active_phases
                ended_now = is_terminal(job.phase) and key in self._running
                if active:
                    self._running.add(key)
                elif ended_now:
                    self._running.discard(key)
                if active or ended_now:
                    watched.add(key)
                    await self.announce(owner, job.name)
        for memory in self.memories():
            for key in list(memory):
                if key not in watched and key not in self._running:
                    del memory[key]

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
                log.exception("paddle-nbext: %s failed; trying again", self.doing)
