"""The two long-lived responses: `GET /events` (Server-Sent Events) and
`GET /jobs/{name}/logs?follow=true` (chunked text).

Both are plain coroutines on the server's event loop: no thread per client.  Each waits on
three things at once — the next item, the client going away, the server shutting down — so a
closed browser tab or a stopping server ends the stream at once instead of holding it open.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable
from typing import Any, TypeVar

from jupyter_server.auth.decorator import authorized
from tornado import web
from tornado.iostream import StreamClosedError

from paddle_nbext.contract import ROLES, Role

from ..events import DELETED, RESYNC, UPDATED, JobEvent
from .base import PaddleAPIHandler, RequestError
from .jobs import newest_first

T = TypeVar("T")


class _Stop(Exception):
    """The client went away or the server is shutting down."""


class StreamingHandler(PaddleAPIHandler):
    """Adds `next_or_stop`: await something unless the stream must end first."""

    _closed: asyncio.Event
    _watchers: tuple[asyncio.Task[Any], ...] = ()

    def initialize(self, **kwargs: Any) -> None:
        super().initialize(**kwargs)
        self._closed = asyncio.Event()

    def on_connection_close(self) -> None:
        self._closed.set()

    def release(self) -> None:
        """Cancel the watcher tasks (call when the stream is over, however it ended)."""
        for task in self._watchers:
            task.cancel()
        self._watchers = ()

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
    """First `snapshot` (the caller's jobs), then `job` / `deleted` / `resync` as they happen,
    with `: ping` comments in between so proxies keep the connection open."""

    CONTENT_TYPE = "text/event-stream; charset=utf-8"

    @web.authenticated
    @authorized
    async def get(self) -> None:
        backend = await self.backend()
        owner = self.owner
        ping = self.state.settings.stream_ping_interval
        # Subscribe before listing, so no change between the two is lost.
        async with self.state.hub.subscribe() as queue:
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
        if role not in ROLES:
            raise RequestError(f"role must be 'pserver' or 'trainer', got {role!r}", field="role")
        index = self.query_int("index", 0)
        tail = self.query_int("tail", None)
        follow = self.query_bool("follow")
        previous = self.query_bool("previous")
        if follow and previous:
            raise RequestError("previous logs are complete; use either follow or previous", field="previous")
        backend = await self.backend()
        name, owner = self.job_name(name), self.owner
        assert index is not None  # it has a default
        if not follow:
            text = await backend.read_logs(name, owner, role, index, tail=tail, previous=previous)
            self.set_header("Cache-Control", "no-cache")
            self.finish(text, set_content_type=self.CONTENT_TYPE)
            return
        # Let the backend check job and replica before the 200 goes out, so errors are JSON bodies.
        await backend.read_logs(name, owner, role, index, tail=0)
        self.set_header("Content-Type", self.CONTENT_TYPE)
        self.set_header("Cache-Control", "no-cache")
        self.set_header("X-Accel-Buffering", "no")
        chunks: AsyncIterator[str] = backend.follow_logs(name, owner, role, index, tail=tail).__aiter__()
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
            aclose = getattr(chunks, "aclose", None)
            if aclose is not None:
                try:
                    await aclose()
                except (RuntimeError, asyncio.CancelledError):
                    pass
        self.end(self.CONTENT_TYPE)
