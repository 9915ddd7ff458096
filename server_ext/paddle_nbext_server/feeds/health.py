"""Health events on `/events`: while someone's event stream is open, their running jobs' resource
use and timelines are looked at every `INTERVAL` seconds; a new usage sample becomes one `usage`
event (the latest figures per replica, without the history a client fetches once with
`GET /jobs/{name}/usage`), and new timeline entries one `timeline` event (`{"name", "entries"}`,
each entry with its `seq`, so a client that also fetched `GET /jobs/{name}/timeline` drops what it
has).  A job nobody watches costs nothing; a job that just ended gets one last look, so its end
and its peaks are announced too.
"""

from __future__ import annotations

from typing import Any

from paddle_nbext.model.contract import Phase

from ..backends.base import Backend
from ..errors import BackendError
from ..events import TIMELINE, USAGE, EventHub, JobEvent
from .ticker import JobTicker

INTERVAL = 1.0

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


class HealthTicker(JobTicker):
    """The loop that turns new samples and timeline entries into events; `run` until cancelled."""

    active_phases = frozenset({Phase.RUNNING, Phase.PENDING})
    doing = "looking at jobs' health"

    def __init__(self, hub: EventHub, backend: Backend, interval: float = INTERVAL) -> None:
        super().__init__(hub, backend, interval)
        self._sampled: dict[tuple[str, str], Any] = {}  # (owner, job) -> `sampled` last announced
        self._seq: dict[tuple[str, str], int] = {}  # (owner, job) -> last timeline entry announced

    def memories(self) -> list[dict[tuple[str, str], Any]]:
        return [self._sampled, self._seq]

    async def announce(self, owner: str, name: str) -> None:
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
