"""What the server knows of its jobs, shared by the backend's parts: the watch-backed cache, each job's
pods and status, and the background tasks the parts start (stopped together with the backend).

The reconciler (lifecycle/reconcile.py) fills it from watch events; the other parts (admission, log
reading, resource usage, the notes read from the home) only read it.  Every map is keyed by the
job's object name (`manifests.object_name`: `<job>-<owner tag>`), the record's name and the pods'
job label, so that two owners' jobs of one name never mix.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any

from paddle_nbext.model.status import JobStatus

from .build import manifests
from .client.cache import WatchCache


class JobView:
    """The cache, the pods and statuses by job, and the parts' background tasks."""

    def __init__(self) -> None:
        self.cache: WatchCache | None = None
        self.pods_by_job: dict[str, dict[str, dict[str, Any]]] = {}
        self.statuses: dict[str, JobStatus] = {}
        self.keys: dict[tuple[str, str], str] = {}  # (owner, job name) -> object name
        self.tasks: set[asyncio.Task[Any]] = set()

    def spawn(self, work: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        """Run `work` in the background, kept (and cancelled at stop) until it ends."""
        task = asyncio.create_task(work)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)
        return task

    def store(self, kind: str) -> dict[str, dict[str, Any]]:
        """The cached objects of `kind` by name (none before the cache exists)."""
        return self.cache.stores[kind] if self.cache is not None else {}

    def pods(self, job: str) -> list[dict[str, Any]]:
        """The job's pods the cache holds, of every attempt."""
        return list(self.pods_by_job.get(job, {}).values())

    def key(self, status: JobStatus) -> str:
        """The object name of a job the cache holds (its record's name: `<job>-<owner tag>`, or
        the bare job name for a job submitted before names were per owner)."""
        return self.keys.get((status.owner, status.name)) or manifests.object_name(status.name, status.owner)

    def name_of(self, key: str) -> str:
        """The user's name of the job whose objects are named `key`."""
        status = self.statuses.get(key)
        return status.name if status is not None else key
