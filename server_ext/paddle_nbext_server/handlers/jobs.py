"""`/jobs`, `/jobs/{name}`, `/jobs/{name}/cancel`: submit, list, inspect, cancel, delete.

The spec is validated here against the server's limits and defaults (the server is
authoritative), then handed to the backend with the caller as owner.
"""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path
from typing import Any

from jupyter_server.auth.decorator import authorized
from tornado import web

from paddle_nbext.model.contract import Phase
from paddle_nbext.model.rules import check_entry_script
from paddle_nbext.model.spec import JobSpec
from paddle_nbext.model.status import JobStatus

from ..backends.base import SubmitRequest
from ..errors import InvalidState
from ..jobfiles.checkpoints import describe, keep_aside, link_checkpoint
from ..jobfiles.package import ENTRY_SCRIPT_NAME as ENTRY_SCRIPT
from ..runtime import paddle_nbext_job
from .base import PaddleAPIHandler


def newest_first(jobs: list[JobStatus]) -> list[dict[str, Any]]:
    return [job.to_dict() for job in sorted(jobs, key=lambda job: (job.created or "", job.name), reverse=True)]


def render_job_list(jobs: list[JobStatus]) -> str:
    """The `GET /jobs` body, encoded afresh (see `JobListRenderer` for the cached path)."""
    return json.dumps({"jobs": newest_first(jobs)})


class JobListRenderer:
    """Renders `GET /jobs` bodies, reusing each job's JSON text while its status is unchanged.

    Encoding a thousand jobs costs tens of milliseconds per request, yet between two listings
    almost none of them changed.  A backend that answers from memory (the local one) hands back
    the very same `JobStatus` object until the job changes, so object identity is the status
    version: a fragment is reused only for that object (it is kept referenced, so its id cannot be
    reused).  Backends that build new objects each time simply never hit.  Entries are per owner
    and replaced by each listing, so deleted jobs drop out.  Runs in worker threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_owner: dict[str, dict[str, tuple[JobStatus, str]]] = {}

    def render(self, owner: str, jobs: list[JobStatus]) -> str:
        with self._lock:
            previous = self._by_owner.get(owner, {})
        current: dict[str, tuple[JobStatus, str]] = {}
        parts = []
        for job in sorted(jobs, key=lambda job: (job.created or "", job.name), reverse=True):
            hit = previous.get(job.name)
            text = hit[1] if hit is not None and hit[0] is job else json.dumps(job.to_dict())
            current[job.name] = (job, text)
            parts.append(text)
        with self._lock:
            self._by_owner[owner] = current
        # the same text json.dumps({"jobs": [...]}) gives
        return '{"jobs": [' + ", ".join(parts) + "]}"


RENDERER_KEY = "paddle_nbext_job_list_renderer"  # web-app settings key: one renderer per server


class JobsHandler(PaddleAPIHandler):
    @web.authenticated
    @authorized
    async def get(self) -> None:
        backend = await self.backend()
        owner = self.owner
        jobs = await backend.list_jobs(owner)
        renderer = self.settings.setdefault(RENDERER_KEY, JobListRenderer())
        self.finish(await asyncio.to_thread(renderer.render, owner, jobs))

    @web.authenticated
    @authorized
    async def post(self) -> None:
        dry_run = self.query_bool("dry_run")
        body = self.json_body()
        entry_script = check_entry_script(body.pop("entry_script", None))
        settings = self.state.settings
        spec = JobSpec.from_dict(body, defaults=settings.job_defaults(), limits=settings.limits())
        backend = await self.backend()
        request = SubmitRequest(spec=spec, owner=self.owner, home=settings.home(), entry_script=entry_script)
        result = await backend.submit(request, dry_run=dry_run)
        if dry_run:
            self.write_json(result, status=200)
            return
        self.set_header("Location", f"{self.request.path.rstrip('/')}/{spec.job_name}")
        self.write_json(result, status=201)


class JobHandler(PaddleAPIHandler):
    @web.authenticated
    @authorized
    async def get(self, name: str) -> None:
        backend = await self.backend()
        job = await backend.get_job(self.job_name(name), self.owner)
        self.write_json(job.to_dict())

    @web.authenticated
    @authorized
    async def delete(self, name: str) -> None:
        """204; with `?keep_checkpoints=true` the job's checkpoints are first moved to
        `~/paddle-checkpoints/<job>-<time>/` and the answer is 200 `{"kept": path, "size": bytes}`."""
        backend = await self.backend()
        name = self.job_name(name)
        kept: Path | None = None
        if self.query_bool("keep_checkpoints"):
            job = await backend.get_job(name, self.owner)  # another user's job: 404 before anything moves
            directory = await backend.checkpoint_dir(name, self.owner)
            if not job.terminal:
                await backend.cancel(name, self.owner)  # no replica may save into what moves
            kept = await asyncio.to_thread(keep_aside, directory, name, self.state.settings.home())
        await backend.delete(name, self.owner)
        if kept is None:
            self.set_status(204)
            self.finish()
            return
        self.write_json({"kept": str(kept), "size": await asyncio.to_thread(paddle_nbext_job.tree_size, kept)})


class CancelHandler(PaddleAPIHandler):
    @web.authenticated
    @authorized
    async def post(self, name: str) -> None:
        backend = await self.backend()
        job = await backend.cancel(self.job_name(name), self.owner)
        self.write_json(job.to_dict())


#: Phases a job can be resumed from: it ended without finishing.
RESUMABLE = (Phase.CANCELLED, Phase.FAILED)


class ResumeHandler(PaddleAPIHandler):
    """`POST /jobs/{name}/resume`: a Cancelled or Failed job of the caller's starts again as a new
    job from its latest checkpoint.  The body (optional) changes fields of the ended job's spec,
    `job_name` too (default: a new name from the old one); the cell body of a `%%paddle_submit`
    job is taken from the ended job's snapshot; the code is snapshotted again from the package."""

    @web.authenticated
    @authorized
    async def post(self, name: str) -> None:
        name = self.job_name(name)
        changes = self.json_body() if (self.request.body or b"").strip() else {}
        backend = await self.backend()
        owner = self.owner
        ended = await backend.get_job(name, owner)
        if ended.phase not in RESUMABLE:
            raise InvalidState(f"job '{name}' is {ended.phase}; only a Cancelled or Failed job can be resumed", "name")
        directory = await backend.checkpoint_dir(name, owner)
        latest = await asyncio.to_thread(paddle_nbext_job.latest, directory)
        if latest is None:
            raise InvalidState(
                f"no checkpoint to resume from: job '{name}' saved none (training code saves them with paddle_nbext_job.save_checkpoint)",
                "name",
            )
        entry_script = await asyncio.to_thread(_cell_body, directory.parent, ended.spec)
        settings = self.state.settings
        data = {**ended.spec, **changes}
        if "job_name" not in changes:
            data["job_name"] = None  # a new name from the old one
        spec = JobSpec.from_dict(data, defaults=settings.job_defaults(), limits=settings.limits(), name_prefix=name)
        request = SubmitRequest(
            spec=spec, owner=owner, home=settings.home(), entry_script=entry_script, resume=(name, Path(latest.path), latest.step)
        )
        result = await backend.submit(request)
        # A backend that does not link at submit (the local one does, before its master starts):
        # link now, before its replicas can have started and looked.
        target = await backend.checkpoint_dir(spec.job_name, owner)
        body = {**result, "resumed_from": {"job": name, "step": latest.step}}
        try:
            await asyncio.to_thread(link_checkpoint, latest, target, name)
        except OSError as error:  # the job exists now: say what went wrong rather than fail the call
            body["warning"] = (
                f"the checkpoint of step {latest.step} could not be linked into {target} "
                f"({error.strerror or error}); the new job starts from scratch"
            )
        self.set_header("Location", f"{self.request.path.rstrip('/').rsplit('/', 2)[0]}/{spec.job_name}")
        self.write_json(body, status=201)


def _cell_body(job_dir: Path, spec: dict[str, Any]) -> str | None:
    """The ended job's `%%paddle_submit` cell body, from its snapshot, when its entry point runs it."""
    script = job_dir / "package" / ENTRY_SCRIPT
    if ENTRY_SCRIPT not in str(spec.get("entry_point", "")) or not script.is_file():
        return None
    try:
        return script.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None


class CheckpointsHandler(PaddleAPIHandler):
    """`GET /jobs/{name}/checkpoints`: the job's complete checkpoints (step, time, size), the
    size of its checkpoint directory and of the whole job dir (what a delete frees), and the job
    it was resumed from."""

    @web.authenticated
    @authorized
    async def get(self, name: str) -> None:
        backend = await self.backend()
        name = self.job_name(name)
        directory = await backend.checkpoint_dir(name, self.owner)

        def answer() -> dict[str, Any]:
            body = describe(directory)
            body["job_size"] = paddle_nbext_job.tree_size(directory.parent)
            return body

        self.write_json({"name": name, **await asyncio.to_thread(answer)})
