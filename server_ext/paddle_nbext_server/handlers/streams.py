"""The two long-lived responses: `GET /events` (Server-Sent Events) and
`GET /jobs/{name}/logs?follow=true` (chunked text).

Both are plain coroutines on the server's event loop: no thread per client.  Each waits on
three things at once — the next item, the client going away, the server shutting down — so a
closed browser tab or a stopping server ends the stream at once instead of holding it open.
Each user may hold `c.PaddleNbext.max_streams_per_user` of them at once; one more is a 429.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import AsyncGenerator, Awaitable
from typing import Any, TypeVar

from jupyter_server.auth.decorator import authorized
from tornado import web
from tornado.iostream import StreamClosedError

from paddle_nbext.model.contract import ENVIRONMENT_LOG, ROLES, Role, is_terminal

from ..backends.base import Backend
from ..errors import BackendError
from ..events import DELETED, METRICS, RESYNC, TIMELINE, UPDATED, USAGE, JobEvent
from ..jobfiles import job_requirements
from .base import PaddleAPIHandler, RequestError
from .jobs import newest_first

T = TypeVar("T")


#: Web-app settings key of the open streams per owner (one count per server).
OPEN_STREAMS_KEY = "paddle_nbext_open_streams"


class _Stop(Exception):
    """The client went away or the server is shutting down."""


class TooManyStreams(BackendError):
    """The user holds `max_streams_per_user` streams already (429)."""

    status = 429
    code = "too_many"


class StreamingHandler(PaddleAPIHandler):
    """Adds `next_or_stop`: await something unless the stream must end first."""

    _closed: asyncio.Event
    _watchers: tuple[asyncio.Task[Any], ...] = ()
    _stream_owner: str | None = None

    def initialize(self, **kwargs: Any) -> None:
        super().initialize(**kwargs)
        self._closed = asyncio.Event()

    def on_connection_close(self) -> None:
        self._closed.set()

    def claim_stream(self, owner: str) -> None:
        """Count this stream against the owner's `max_streams_per_user`, or refuse it (429)."""
        open_streams: Counter[str] = self.settings.setdefault(OPEN_STREAMS_KEY, Counter())
        limit = self.state.settings.max_streams_per_user
        if open_streams[owner] >= limit:
            raise TooManyStreams(
                f"you have {open_streams[owner]} event and log streams open, the most this server allows per user "
                f"(c.PaddleNbext.max_streams_per_user = {limit}); close another tab or log follow first"
            )
        open_streams[owner] += 1
        self._stream_owner = owner

    def _release_stream(self) -> None:
        owner, self._stream_owner = self._stream_owner, None
        if owner is not None:
            open_streams: Counter[str] = self.settings.setdefault(OPEN_STREAMS_KEY, Counter())
            open_streams[owner] -= 1
            if open_streams[owner] <= 0:
                del open_streams[owner]

    def on_finish(self) -> None:
        self._release_stream()  # however the request ended, its stream no longer counts

    def release(self) -> None:
        """Cancel the watcher tasks and stop counting the stream (call when the stream is over,
        however it ended)."""
        for task in self._watchers:
            task.cancel()
        self._watchers = ()
        self._release_stream()

    async def next_or_stop(self, awaitable: Awaitable[T], timeout: float | None = None) -> T | None:
        """The awaitable's result; None when `timeout` passed first; `_Stop` when the client
        disconnected or the server is stopping (the awaitable is then cancelled)."""
        if not self._watchers:
            self._watchers = (
                asyncio.ensure_future(self._closed.wait()),
                asyncio.ensure_future(self.state.shutting_down.wait()),
            )
        item = asyncio.ensure_future(awaitable)
        done, _ = await asyncio.wait({item, *self._watchers}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        if item in done:
            return item.result()
        item.cancel()
        try:
            await item
        except (asyncio.CancelledError, StopAsyncIteration):
            pass
        if done:
            raise _Stop()
        return None

    async def send(self, text: str) -> None:
        """Write and flush; `_Stop` if the client has gone."""
        if self._closed.is_set():
            raise _Stop()
        self.write(text)
        try:
            await self.flush()
        except StreamClosedError:
            raise _Stop() from None

    def end(self, content_type: str) -> None:
        """Release the watchers and complete the response (also after a hang-up, so tornado
        logs and cleans up the request)."""
        self.release()
        if self._finished:
            return
        try:
            self.finish(set_content_type=content_type)
        except StreamClosedError:
            pass


def _sse(event: str, data: Any) -> str:
    return f"event: {event}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n"


class EventsHandler(StreamingHandler):
    """First `snapshot` (the caller's jobs), then `job` / `deleted` / `resync` / `metrics` / `usage` /
    `timeline` as they happen,
    with `: ping` comments in between so proxies keep the connection open."""

    CONTENT_TYPE = "text/event-stream; charset=utf-8"

    @web.authenticated
    @authorized
    async def get(self) -> None:
        backend = await self.backend()
        owner = self.owner
        ping = self.state.settings.stream_ping_interval
        self.claim_stream(owner)
        # Subscribe before listing, so no change between the two is lost.
        async with self.state.hub.subscribe(owner) as queue:
            jobs = await backend.list_jobs(owner)
            snapshot = await asyncio.to_thread(lambda: _sse("snapshot", {"jobs": newest_first(jobs)}))
            self.set_header("Content-Type", self.CONTENT_TYPE)
            self.set_header("Cache-Control", "no-cache")
            self.set_header("X-Accel-Buffering", "no")
            try:
                await self.send("retry: 3000\n" + snapshot)
                while True:
                    event: JobEvent | None = await self.next_or_stop(queue.get(), timeout=ping)
                    if event is None:
                        await self.send(": ping\n\n")
                    elif event.kind == RESYNC:
                        await self.send(_sse("resync", {}))
                    elif event.owner != owner:
                        continue
                    elif event.kind == UPDATED:
                        await self.send(_sse("job", event.job))
                    elif event.kind == DELETED:
                        await self.send(_sse("deleted", {"name": event.name}))
                    elif event.kind in (METRICS, USAGE, TIMELINE):
                        await self.send(_sse(event.kind, event.job))
            except _Stop:
                pass
            finally:
                self.release()
        self.end(self.CONTENT_TYPE)


class LogsHandler(StreamingHandler):
    """One replica's log as text; with `follow=true` it streams until the replica has ended."""

    CONTENT_TYPE = "text/plain; charset=utf-8"

    @web.authenticated
    @authorized
    async def get(self, name: str) -> None:
        role = self.get_query_argument("role", Role.TRAINER.value) or Role.TRAINER.value
        if role not in ROLES and role != ENVIRONMENT_LOG:
            raise RequestError(f"role must be 'pserver', 'trainer' or '{ENVIRONMENT_LOG}', got {role!r}", field="role")
        index = self.query_int("index", 0)
        tail = self.query_int("tail", None)
        follow = self.query_bool("follow")
        previous = self.query_bool("previous")
        if follow and previous:
            raise RequestError("previous logs are complete; use either follow or previous", field="previous")
        backend = await self.backend()
        name, owner = self.job_name(name), self.owner
        assert index is not None  # it has a default
        if role == ENVIRONMENT_LOG:
            await self._environment_log(backend, name, owner, tail, follow, previous)
            return
        if not follow:
            text = await backend.read_logs(name, owner, role, index, tail=tail, previous=previous)
            self.set_header("Cache-Control", "no-cache")
            self.finish(text, set_content_type=self.CONTENT_TYPE)
            return
        # Let the backend check job and replica before the 200 goes out, so errors are JSON bodies.
        await backend.read_logs(name, owner, role, index, tail=0)
        self.claim_stream(owner)
        self.set_header("Content-Type", self.CONTENT_TYPE)
        self.set_header("Cache-Control", "no-cache")
        self.set_header("X-Accel-Buffering", "no")
        await self._stream(backend.follow_logs(name, owner, role, index, tail=tail))

    async def _environment_log(self, backend: Backend, name: str, owner: str, tail: int | None, follow: bool, previous: bool) -> None:
        """The job's environment log (`?role=environment`): its requirements' installer output."""
        if previous:
            raise RequestError("the environment log has no earlier attempts; leave out previous", field="previous")
        path = await backend.environment_log(name, owner)
        if not follow:
            text = await asyncio.to_thread(job_requirements.read_log, path, tail)
            self.set_header("Cache-Control", "no-cache")
            self.finish(text, set_content_type=self.CONTENT_TYPE)
            return

        async def job_ended() -> bool:
            return is_terminal((await backend.get_job(name, owner)).phase)

        self.claim_stream(owner)
        self.set_header("Content-Type", self.CONTENT_TYPE)
        self.set_header("Cache-Control", "no-cache")
        self.set_header("X-Accel-Buffering", "no")
        await self._stream(job_requirements.follow_log(path, tail, job_ended))

    async def _stream(self, chunks: AsyncGenerator[str, None]) -> None:
        """Send what `chunks` yields until it ends or the client goes; the stream is claimed."""
        try:
            await self.send("")
            while True:
                try:
                    chunk = await self.next_or_stop(chunks.__anext__())
                except StopAsyncIteration:
                    break
                if chunk:
                    await self.send(chunk)
        except _Stop:
            pass
        finally:
            self.release()
            try:
                await chunks.aclose()
            except (RuntimeError, asyncio.CancelledError):
                pass
        self.end(self.CONTENT_TYPE)
