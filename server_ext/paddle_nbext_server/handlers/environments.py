"""`/environments`: the user's jobs' Python environments (issue 25), listed with their size, last
use and the running jobs that use them; `/environments/prune` removes those unused for N days,
`DELETE /environments/{key}` one of them (`env_housekeeping` does the file work, in a thread).

Which environment a job uses is what its launcher wrote in `logs/environment.json` beside its
replica logs; the jobs looked at are the caller's jobs that have not ended.
"""

from __future__ import annotations

import asyncio
from typing import Any

from jupyter_server.auth.decorator import authorized
from tornado import web

from paddle_nbext.model.rules import clip

from ..backends.base import Backend
from ..errors import BackendError, InvalidRequest
from ..jobfiles import env_housekeeping as housekeeping
from ..runtime import environments
from .base import PaddleAPIHandler, RequestError

#: The most days `unused_days` may say (a hundred years: "never used" is any larger number).
MAX_UNUSED_DAYS = 36500
_PRUNE_FIELDS = ("unused_days", "dry_run", "cache")


async def usage(backend: Backend, owner: str) -> tuple[dict[str, list[str]], set[str]]:
    """(environment key -> names of the owner's running jobs that use it, all the owner's job names)."""
    jobs = await backend.list_jobs(owner)
    in_use: dict[str, list[str]] = {}
    for job in jobs:
        if job.terminal:
            continue
        try:
            files = await backend.metrics_files(job.name, owner)
        except BackendError:  # deleted meanwhile, or its record unreadable: it uses nothing
            continue
        if not files:
            continue
        status = await asyncio.to_thread(environments.read_status, str(files[0].path.parent))
        key = status.get("key") if status else None
        if isinstance(key, str):
            in_use.setdefault(key, []).append(job.name)
    return in_use, {job.name for job in jobs}


class EnvironmentsHandler(PaddleAPIHandler):
    @web.authenticated
    @authorized
    async def get(self) -> None:
        backend = await self.backend()
        envs_dir = backend.environments_dir(self.state.settings.home())
        in_use, names = await usage(backend, self.owner)
        self.write_json(await asyncio.to_thread(housekeeping.describe, envs_dir, in_use, names))


def _prune_options(body: dict[str, Any]) -> tuple[int, bool, bool]:
    unknown = sorted(set(body) - set(_PRUNE_FIELDS))
    if unknown:
        raise InvalidRequest(f"unknown field {clip(repr(unknown[0]))}; the fields are {', '.join(_PRUNE_FIELDS)}", clip(unknown[0]))
    days = body.get("unused_days", housekeeping.DEFAULT_UNUSED_DAYS)
    if not isinstance(days, int) or isinstance(days, bool) or not 0 <= days <= MAX_UNUSED_DAYS:
        raise InvalidRequest(
            f"unused_days must be a whole number of days from 0 to {MAX_UNUSED_DAYS}, got {clip(repr(days))}", "unused_days"
        )
    flags = []
    for name in ("dry_run", "cache"):
        value = body.get(name, False)
        if not isinstance(value, bool):
            raise InvalidRequest(f"{name} must be true or false, got {clip(repr(value))}", name)
        flags.append(value)
    return days, flags[0], flags[1]


class PruneHandler(PaddleAPIHandler):
    @web.authenticated
    @authorized
    async def post(self) -> None:
        body = self.json_body() if (self.request.body or b"").strip() else {}
        days, dry_run, cache = _prune_options(body)
        backend = await self.backend()
        envs_dir = backend.environments_dir(self.state.settings.home())
        in_use, _ = await usage(backend, self.owner)
        answer = await asyncio.to_thread(housekeeping.prune, envs_dir, in_use, unused_days=days, dry_run=dry_run, cache=cache)
        self.write_json(answer)


class EnvironmentHandler(PaddleAPIHandler):
    @web.authenticated
    @authorized
    async def delete(self, key: str) -> None:
        if not housekeeping.KEY.match(key):
            raise RequestError(
                f"an environment key is 16 hexadecimal digits (as `GET /environments` lists them), got {clip(repr(key))}", "key"
            )
        backend = await self.backend()
        envs_dir = backend.environments_dir(self.state.settings.home())
        in_use, _ = await usage(backend, self.owner)
        self.write_json(await asyncio.to_thread(housekeeping.remove, envs_dir, key, in_use))
