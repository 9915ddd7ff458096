"""Fan-out of job changes from a backend to every connected event stream.

Each subscriber gets its own bounded queue; a slow client never blocks the backend or other
clients.  When a subscriber's queue is full its oldest event is dropped and it is told to
resynchronise (`resync`), so no client silently keeps a stale view.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

UPDATED, DELETED, RESYNC = "updated", "deleted", "resync"
#: New points of a running job (`job` holds `MetricsCache.summary`), at most a few per second.
METRICS = "metrics"
#: A running job's latest resource use (`feeds.health`), at most once per sample.
USAGE = "usage"
#: New entries of a job's timeline (`feeds.health`).
TIMELINE = "timeline"


@dataclass(frozen=True)
class JobEvent:
    kind: str  # "updated" | "deleted" | "resync" | "metrics" | "usage" | "timeline"
    owner: str
    name: str
    job: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.kind, "name": self.name, "job": self.job}


class EventHub:
    def __init__(self, queue_size: int = 1000) -> None:
        self._queue_size = queue_size
        self._subscribers: set[asyncio.Queue[JobEvent]] = set()
        self._owners: dict[asyncio.Queue[JobEvent], str] = {}

    @property
    def subscriber_count(self) -> int:
        return len(self._subscribers)

    def owners(self) -> set[str]:
        """Whose streams are open (what metric events are worth producing for)."""
        return set(self._owners.values())

    def publish(self, event: JobEvent) -> None:
        """Deliver to every subscriber; never blocks, never raises. Call on the event loop."""
        for queue in list(self._subscribers):
            if queue.full():
                try:
                    queue.get_nowait()
                except asyncio.QueueEmpty:
                    pass
                queue.put_nowait(JobEvent(RESYNC, event.owner, ""))
                continue
            queue.put_nowait(event)

    @asynccontextmanager
    async def subscribe(self, owner: str | None = None) -> AsyncIterator[asyncio.Queue[JobEvent]]:
        queue: asyncio.Queue[JobEvent] = asyncio.Queue(self._queue_size)
        self._subscribers.add(queue)
        if owner is not None:
            self._owners[queue] = owner
        try:
            yield queue
        finally:
            self._subscribers.discard(queue)
            self._owners.pop(queue, None)
