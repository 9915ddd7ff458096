"""The backend interface (docs/architecture.md, "Backends inside"); the errors every backend raises
are `paddle_nbext_server.errors`, importable from here too.

All methods are coroutines and must never block the event loop: blocking work (files,
processes, Kubernetes client calls) runs in a thread (`asyncio.to_thread`).  Every call names
the requesting `owner`; a job of another owner behaves exactly like a missing job
(`JobNotFound`), so names never leak between users.
"""

from __future__ import annotations

import abc
import asyncio
from collections.abc import AsyncGenerator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from traitlets import MetaHasTraits
from traitlets.config import LoggingConfigurable

from paddle_nbext.model.spec import JobSpec
from paddle_nbext.model.status import JobStatus

from ..errors import (  # the errors every backend raises, importable from here as in 0.2
    BackendError as BackendError,
)
from ..errors import (
    BackendForbidden as BackendForbidden,
)
from ..errors import (
    BackendUnavailable as BackendUnavailable,
)
from ..errors import (
    Forbidden as Forbidden,
)
from ..errors import (
    InvalidRequest as InvalidRequest,
)
from ..errors import (
    InvalidState as InvalidState,
)
from ..errors import (
    JobExists as JobExists,
)
from ..errors import (
    JobNotFound as JobNotFound,
)
from ..errors import (
    ReplicaNotFound as ReplicaNotFound,
)
from ..errors import (
    replica_not_found as replica_not_found,
)
from ..events import EventHub
from ..jobfiles.job_requirements import ENVS_DIR
from ..jobfiles.metrics import MetricsCache, MetricsFile
from ..jobfiles.package import HOME_JOBS_DIR
from ..runtime import environments
from ..runtime.paddle_nbext_job import CHECKPOINTS_SUBDIR


@dataclass(frozen=True)
class SubmitRequest:
    """A validated spec plus what only the server knows: who asks and where their home is."""

    spec: JobSpec
    owner: str
    home: Path  # the user's home; trainer_package must resolve inside it
    entry_script: str | None = None  # cell body from %%paddle_submit, written into the snapshot
    #: (the ended job, its checkpoint) a resumed job starts from: linked into the new job's
    #: checkpoint directory before any replica starts (`checkpoints.link_checkpoint`).
    resume: tuple[str, Path, int] | None = None

    @property
    def resumed_from(self) -> dict[str, Any] | None:
        """`JobStatus.resumed_from` of the job this request makes: `{"job", "step"}`, or None."""
        return None if self.resume is None else {"job": self.resume[0], "step": self.resume[2]}


class _BackendMeta(MetaHasTraits, abc.ABCMeta):
    """Traitlets' and abc's metaclasses combined (either alone refuses the other's base)."""


class Backend(LoggingConfigurable, metaclass=_BackendMeta):
    """One substrate that runs jobs.  Subclasses are traitlets-configurable
    (`c.LocalBackend.*`, `c.KubernetesBackend.*`)."""

    name: str = ""

    def __init__(self, *, events: EventHub, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.events = events
        self.metrics = MetricsCache()  # parsed metrics files, read by `GET /jobs/{name}/metrics`

    async def start(self) -> None:
        """Begin watching jobs (called once when the server extension loads)."""

    async def stop(self) -> None:
        """Release watches, tasks and connections (server shutdown).  Jobs keep running."""

    def describe(self) -> dict[str, Any]:
        """Backend facts for `GET /config` (no secrets)."""
        return {"name": self.name}

    def environments_dir(self, home: Path) -> Path:
        """Where the jobs of the user whose home is `home` keep their Python environments
        (`runtime/environments.py`), as this server sees it: `<home>/.paddle-jobs/envs`, where
        their launchers build them.  A backend that keeps jobs elsewhere answers its own."""
        return home / HOME_JOBS_DIR / ENVS_DIR

    @abc.abstractmethod
    async def submit(self, request: SubmitRequest, *, dry_run: bool = False) -> dict[str, Any]:
        """Create the job, or with `dry_run` return what would be created (and create nothing).

        Returns the job's status dict, or for a dry run `{"dry_run": true, "job": ..., "plan": ...}`
        where `plan` is backend specific (manifests for Kubernetes, processes for local).
        All or nothing: on failure whatever was created is removed again."""

    @abc.abstractmethod
    async def list_jobs(self, owner: str) -> list[JobStatus]: ...

    @abc.abstractmethod
    async def get_job(self, name: str, owner: str) -> JobStatus: ...

    @abc.abstractmethod
    async def read_logs(self, name: str, owner: str, role: str, index: int, *, tail: int | None = None, previous: bool = False) -> str: ...

    @abc.abstractmethod
    def follow_logs(self, name: str, owner: str, role: str, index: int, *, tail: int | None = None) -> AsyncGenerator[str, None]:
        """Yield log text as it is written; end when the replica has ended and all is sent.  An
        async generator, so the stream handler can close it (and what it holds) when the client
        goes."""

    async def metrics_files(self, name: str, owner: str) -> list[MetricsFile]:
        """Where each replica of the owner's job writes what it `report()`s (metrics.py reads
        them); `JobNotFound` for anyone else's job, like every call."""
        raise InvalidState(f"the {self.name or 'configured'} backend keeps no metrics")

    async def checkpoint_dir(self, name: str, owner: str) -> Path:
        """The owner's job's checkpoint directory as this server sees it (it need not exist):
        `checkpoints/` beside the `logs/` that hold the job's metrics files, in the home on both
        backends; `JobNotFound` for anyone else's job, like every call."""
        files = await self.metrics_files(name, owner)
        if not files:
            raise InvalidState(f"job '{name}' has no replica that could save checkpoints")
        return files[0].path.parent.parent / CHECKPOINTS_SUBDIR

    async def environment_log(self, name: str, owner: str) -> Path:
        """The owner's job's environment log (its requirements' installer output), beside the
        replicas' logs in the home on both backends; 404 when the job has no requirements file
        or its replicas have not started to prepare it yet."""
        files = await self.metrics_files(name, owner)
        logs_dir = files[0].path.parent if files else None
        if logs_dir is None or not await asyncio.to_thread(
            _any_file, logs_dir / environments.STATUS_FILE, logs_dir / environments.LOG_FILE
        ):
            raise JobNotFound(
                f"job '{name}' has no environment log: it has no requirements file, or its replicas have not started preparing it yet"
            )
        return logs_dir / environments.LOG_FILE

    async def usage(self, name: str, owner: str) -> dict[str, Any]:
        """CPU and memory in use per replica beside request and limit, with peaks and recent
        history (`GET /jobs/{name}/usage`); `available: false` with the `reason` in words when
        this backend cannot say.  `JobNotFound` for anyone else's job, like every call."""
        await self.get_job(name, owner)
        return {
            "name": name,
            "available": False,
            "reason": f"the {self.name or 'configured'} backend does not measure resource use",
            "sampled": None,
            "interval": None,
            "replicas": [],
        }

    async def timeline(self, name: str, owner: str, since: int = 0) -> dict[str, Any]:
        """What happened to the job, oldest first, the entries after `since`
        (`GET /jobs/{name}/timeline`; `paddle_nbext_server.jobfiles.timeline`)."""
        await self.get_job(name, owner)
        return {
            "name": name,
            "available": False,
            "reason": f"the {self.name or 'configured'} backend keeps no timeline",
            "entries": [],
            "last": since,
        }

    @abc.abstractmethod
    async def cancel(self, name: str, owner: str) -> JobStatus:
        """Stop every replica, keep the record and logs; phase becomes Cancelled.  Cancelling a
        finished job is a no-op that returns its status."""

    @abc.abstractmethod
    async def delete(self, name: str, owner: str) -> None:
        """Stop the job if running, then remove it and everything it created."""


def _any_file(*paths: Path) -> bool:
    return any(path.is_file() for path in paths)
