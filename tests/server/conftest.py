"""Fixtures for the server-extension suite: a real Jupyter server (pytest-jupyter) with the
extension, the real local backend in a temporary home, and two users told apart by token."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, Protocol

import pytest
from jupyter_server.auth.identity import IdentityProvider, User

# pytest-jupyter's fixtures and async-test hooks, for this directory only (`pytest_plugins` is
# only allowed in the top-level conftest).
from pytest_jupyter.jupyter_server import *  # noqa: E402,F401,F403
from tornado.httpclient import HTTPClientError
from traitlets.config import Config

ALICE_TOKEN, BOB_TOKEN = "alice-secret-token", "bob-secret-token"
API = "paddle/api/v1"


class TwoUserIdentityProvider(IdentityProvider):
    """Like JupyterHub: each token is a different, named user."""

    users = {ALICE_TOKEN: "alice", BOB_TOKEN: "bob"}

    async def get_user(self, handler: Any) -> User | None:
        username = self.users.get(self.get_token(handler) or "")
        if username is None:
            return None
        handler._token_authenticated = True  # token requests need no XSRF cookie
        return User(username=username)


@pytest.fixture(autouse=True)
def _restore_kernel_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """The extension exports the API URL and token into os.environ (for kernels); put the
    test process's environment back afterwards so other suites don't see a dead server."""
    for name in ("PADDLE_NBEXT_API_URL", "PADDLE_NBEXT_TOKEN"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def paddle_config() -> dict[str, Any]:
    """Per-test `c.PaddleNbext` values (override in a test module to change them)."""
    return {}


@pytest.fixture
def local_config() -> dict[str, Any]:
    """Per-test `c.LocalBackend` values added to the defaults below."""
    return {}


def _server_config(jp_home_dir: Path, paddle_config: dict[str, Any], local_config: dict[str, Any]) -> Config:
    return Config(
        {
            "ServerApp": {
                "jpserver_extensions": {"paddle_nbext_server": True},
                "identity_provider_class": TwoUserIdentityProvider,
            },
            "IdentityProvider": {"token": ALICE_TOKEN},
            "PaddleNbext": paddle_config,
            "LocalBackend": {
                "jobs_dir": str(jp_home_dir / ".paddle-jobs"),
                "poll_interval": 0.05,
                "grace_period": 2.0,
                **local_config,
            },
        }
    )


# Overrides pytest-jupyter's fixture of this name: rebinding the star-imported name (rather than a
# second `def`) keeps one fixture of that name in the module for pytest and is no redefinition.
jp_server_config = pytest.fixture(_server_config, name="jp_server_config")


@pytest.fixture
def package(jp_home_dir: Path) -> Path:
    """A trainer package inside the user's home."""
    pkg = jp_home_dir / "work"
    pkg.mkdir(exist_ok=True)
    (pkg / "sleep.py").write_text("import time, sys\nprint('started', flush=True)\ntime.sleep(float(sys.argv[1]))\n")
    return pkg


Fetch = Callable[..., Awaitable[Any]]


class Api(Protocol):
    """The `api` fixture's call: (HTTP status, parsed JSON body or text)."""

    def __call__(
        self,
        method: str,
        path: str,
        *,
        user: str = ...,
        body: Any = ...,
        raw: bytes | None = ...,
        params: dict[str, Any] | None = ...,
        token: str | None = ...,
        **kwargs: Any,
    ) -> Awaitable[tuple[int, Any]]: ...


@pytest.fixture
def api(jp_fetch: Fetch) -> Api:
    """`await api("GET", "jobs", user="bob", body={...}, params={...})` -> (status, json-or-text).

    Errors come back as values, not exceptions, so tests assert on status and error body."""

    async def call(
        method: str,
        path: str,
        *,
        user: str = "alice",
        body: Any = None,
        raw: bytes | None = None,
        params: dict[str, Any] | None = None,
        token: str | None = "default",
        **kwargs: Any,
    ) -> tuple[int, Any]:
        headers = {"Authorization": ""}  # jp_fetch would add the server token otherwise
        if token == "default":
            headers["Authorization"] = f"token {ALICE_TOKEN if user == 'alice' else BOB_TOKEN}"
        elif token is not None:
            headers["Authorization"] = f"token {token}"
        if body is not None:
            raw = json.dumps(body).encode()
        if method in ("POST", "PUT", "PATCH") and raw is None:
            raw = b""
        try:
            response = await jp_fetch(
                *API.split("/"),
                *[p for p in path.split("/") if p],
                method=method,
                body=raw,
                params=params or {},
                headers=headers,
                allow_nonstandard_methods=True,
                **kwargs,
            )
        except HTTPClientError as error:
            response = error.response
            assert response is not None, error
        text = response.body.decode() if response.body else ""
        if response.headers.get("Content-Type", "").startswith("application/json") and text:
            return response.code, json.loads(text)
        return response.code, text

    return call


def python_cmd(script: str, *args: str) -> str:
    return " ".join([sys.executable, script, *args])


class StreamAborted(Exception):
    """Raised from the streaming callback: the client hangs up, like a closed browser tab."""


class Stream:
    """A client of a streaming route (`/events` or `/logs?follow=true`) over real HTTP.

    `events` yields parsed SSE events; `text` accumulates plain text; `hang_up()` makes the
    client drop the connection at the next chunk."""

    task: asyncio.Future[Any]  # the request, set by `open_stream` as it starts it

    def __init__(self) -> None:
        self.events: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
        self.text = ""
        self._buffer = ""
        self._abort = False

    def feed(self, chunk: bytes) -> None:
        if self._abort:
            raise StreamAborted()
        piece = chunk.decode()
        self.text += piece
        self._buffer += piece
        while "\n\n" in self._buffer:
            block, self._buffer = self._buffer.split("\n\n", 1)
            kind, data = None, []
            for line in block.splitlines():
                if line.startswith("event:"):
                    kind = line[6:].strip()
                elif line.startswith("data:"):
                    data.append(line[5:].strip())
                elif line.startswith(":"):
                    kind = kind or "comment"
            if kind:
                self.events.put_nowait((kind, json.loads("\n".join(data)) if data else None))

    async def next_event(self, kinds: tuple[str, ...] = ("snapshot", "job", "deleted", "resync")) -> tuple[str, Any]:
        while True:
            kind, data = await self.events.get()
            if kind in kinds:
                return kind, data

    def hang_up(self) -> None:
        self._abort = True


class OpenStream(Protocol):
    """The `open_stream` fixture's call."""

    def __call__(self, path: str, *, user: str = ..., params: dict[str, Any] | None = ...) -> Stream: ...


@pytest.fixture
def open_stream(jp_fetch: Fetch) -> Iterator[OpenStream]:
    """Start a streaming GET in the background: `open_stream("events", user="bob")`."""
    streams: list[Stream] = []

    def start(path: str, *, user: str = "alice", params: dict[str, Any] | None = None) -> Stream:
        stream = Stream()
        token = ALICE_TOKEN if user == "alice" else BOB_TOKEN
        stream.task = asyncio.ensure_future(
            jp_fetch(
                *API.split("/"),
                *path.split("/"),
                params=params or {},
                headers={"Authorization": f"token {token}"},
                streaming_callback=stream.feed,
                request_timeout=600,
            )
        )
        streams.append(stream)
        return stream

    yield start
    for stream in streams:
        if not stream.task.done():
            stream.task.cancel()
