"""`GET /compare?jobs=a,b,c`: runs side by side, for the panel's comparison view and
`paddle_nbext.compare()` alike: what differs in the jobs' specs and code, each job's final and
best metrics, its progress and its colour (`jobfiles/comparison.py` has the rules).

Only the caller's jobs: a name that is not one of theirs is a 404 naming it, as for every
route.  Reading metrics files and hashing snapshots runs in a thread, never on the event loop;
a snapshot is hashed once (`code_manifest.ManifestCache`), so a live view asking again every few
seconds costs a stat per job and the metrics appended since.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from jupyter_server.auth.decorator import authorized
from tornado import web

from paddle_nbext.model.rules import clip
from paddle_nbext.model.spec import SpecError, validate_name
from paddle_nbext.model.status import JobStatus

from ..backends.base import Backend
from ..errors import JobNotFound
from ..jobfiles import comparison
from ..jobfiles.code_manifest import ManifestCache
from ..jobfiles.metrics import MetricsFile, progress
from .base import PaddleAPIHandler, RequestError

#: The snapshots' manifests, shared by every request of this server (a snapshot never changes).
MANIFESTS = ManifestCache()
_SNAPSHOT_DIR = "package"


def requested_names(values: list[str]) -> list[str]:
    """The job names of `jobs=a,b` (or `jobs=a&jobs=b`), each once, in the order given; a 400
    naming `jobs` unless there are 2 to `MAX_COMPARED`."""
    names: list[str] = []
    for value in values:
        names.extend(name.strip() for name in value.split(",") if name.strip() and name.strip() not in names)
    if len(names) < 2:
        got = f"only {clip(repr(names[0]))}" if names else "none"
        raise RequestError(f"jobs must name at least two jobs to compare, separated by commas (jobs=a,b); got {got}", field="jobs")
    if len(names) > comparison.MAX_COMPARED:
        raise RequestError(f"jobs names {len(names)} jobs; compare at most {comparison.MAX_COMPARED} at once", field="jobs")
    return names


def _unknown(name: str) -> JobNotFound:
    return JobNotFound(f"no job named {clip(repr(name))}: jobs must name jobs of yours (see GET /jobs)", field="jobs")


async def _job(backend: Backend, name: str, owner: str) -> tuple[JobStatus, list[MetricsFile]]:
    try:
        validate_name(name)
        status = await backend.get_job(name, owner)
        files = await backend.metrics_files(name, owner)
    except (SpecError, JobNotFound):
        raise _unknown(name) from None
    return status, files


def _code_of(status: JobStatus, files: list[MetricsFile]) -> tuple[Path | None, str | None]:
    """Where the job's snapshot is, or why there is none to compare."""
    if status.spec.get("snapshot") is False:
        return None, "ran without a snapshot (snapshot: false): its code is the live folder, not compared"
    if not files:
        return None, "has no replica, so no job folder to read its snapshot from"
    return files[0].path.parent.parent / _SNAPSHOT_DIR, None


def compare(backend: Backend, jobs: list[tuple[JobStatus, list[MetricsFile]]]) -> dict[str, Any]:
    """The answer (blocking: metrics files and snapshots are read here)."""
    names = [status.name for status, _ in jobs]
    colours = comparison.colours_of(names)
    runs, manifests, summaries = [], {}, {}
    for status, files in jobs:
        replicas = backend.metrics.refreshed(status.name, files)
        summaries[status.name] = comparison.metric_summaries(replicas)
        root, reason = _code_of(status, files)
        manifest = MANIFESTS.manifest(root) if root is not None else None
        if root is not None and manifest is None:
            reason = "has no package snapshot in its folder (deleted, or never written)"
        manifests[status.name] = manifest
        runs.append(
            {
                "name": status.name,
                "phase": status.phase,
                "message": status.message,
                "created": status.created,
                "started": status.started,
                "finished": status.finished,
                "colour": colours[status.name],
                "progress": progress(replicas),
                "code": {"files": None if manifest is None else len(manifest), "reason": reason},
                "metrics": summaries[status.name],
            }
        )
    return {
        "jobs": names,
        "runs": runs,
        "metrics": comparison.metric_names(summaries),
        "spec": comparison.spec_differences({status.name: status.spec for status, _ in jobs}),
        "code": comparison.code_differences(manifests),
    }


class CompareHandler(PaddleAPIHandler):
    @web.authenticated
    @authorized
    async def get(self) -> None:
        names = requested_names(self.get_query_arguments("jobs"))
        backend = await self.backend()
        owner = self.owner
        jobs = await asyncio.gather(*(_job(backend, name, owner) for name in names))
        body = await asyncio.to_thread(lambda: json.dumps(compare(backend, list(jobs)), separators=(",", ":")))
        self.set_header("Cache-Control", "no-cache")
        self.set_header("Content-Type", "application/json")
        self.finish(body)
