"""One real Jupyter server (or JupyterLab) subprocess on loopback, for tests and benchmarks.

Every suite that needs a real server outside pytest's event loop does the same four things:
pick a free port, start a command that binds it, wait until `/api/status` answers with the
token, and stop it so that nothing it started outlives the run.  This module does those once;
each caller keeps its own command line, environment and config, which is where they really
differ.

The process runs in a new session (its own process group) so that `stop()` can end the server
and whatever it started in that group; detached job runners, which start their own sessions on
purpose, are not touched and must be deleted through the API by the caller first.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import IO

import requests

# A cold server on a CI machine whose 2 cores are shared can take a long time to import its
# extensions; the wait only costs time when it is slow, so it is generous.
START_TIMEOUT = 120.0
# SIGTERM is Jupyter's clean shutdown (kernels and terminals closed); past this, SIGKILL.
STOP_GRACE = 30.0
_POLL_INTERVAL = 0.25
_LOG_TAIL_CHARS = 5000


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now (the OS picks it)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class JupyterStartError(RuntimeError):
    """The server exited, or never answered `/api/status`; the message ends with its log tail."""


class JupyterProcess:
    """A Jupyter server subprocess: `start()` returns once `{url}api/status` answers 200 with
    `token`; `stop()` (or leaving the `with` block) ends it.

    `url` is the server's base URL ending in '/' (including any base_url), as the caller built
    it into `command`; the command's output goes to `log_path`."""

    def __init__(
        self,
        command: Sequence[str],
        *,
        url: str,
        token: str,
        log_path: Path,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
        name: str = "jupyter server",
        start_timeout: float = START_TIMEOUT,
        stop_grace: float = STOP_GRACE,
    ) -> None:
        if not url.endswith("/"):
            raise ValueError(f"url must end with '/' (the server's base URL), got {url!r}")
        self.command = list(command)
        self.url = url
        self.token = token
        self.log_path = log_path
        self.env = dict(env) if env is not None else None
        self.cwd = cwd
        self.name = name
        self.start_timeout = start_timeout
        self.stop_grace = stop_grace
        self.process: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    @property
    def headers(self) -> dict[str, str]:
        """The token as an Authorization header, as API clients send it."""
        return {"Authorization": f"token {self.token}"}

    def log_tail(self, chars: int = _LOG_TAIL_CHARS) -> str:
        """The end of the server's output, for error messages."""
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except OSError as error:
            return f"(no log at {self.log_path}: {error})"

    def start(self) -> JupyterProcess:
        """Start the command and wait until it answers; on failure it is stopped and
        JupyterStartError names the cause and shows the log tail."""
        if self.process is not None:
            raise RuntimeError(f"{self.name} was already started")
        self._log = self.log_path.open("wb")
        self.process = subprocess.Popen(
            self.command, env=self.env, cwd=self.cwd, stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True
        )
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_ready(self) -> None:
        assert self.process is not None
        deadline = time.monotonic() + self.start_timeout
        while True:
            if self.process.poll() is not None:
                raise JupyterStartError(f"{self.name} exited with {self.process.returncode}:\n{self.log_tail()}")
            try:
                if requests.get(f"{self.url}api/status", headers=self.headers, timeout=5).status_code == 200:
                    return
            except requests.RequestException:
                pass
            if time.monotonic() > deadline:
                raise JupyterStartError(
                    f"{self.name} did not answer {self.url}api/status within {self.start_timeout:.0f} s:\n{self.log_tail()}"
                )
            time.sleep(_POLL_INTERVAL)

    def stop(self) -> None:
        """SIGTERM to the server's process group, SIGKILL after `stop_grace` seconds; then wait
        for it and close the log.  Safe to call twice or after the server exited."""
        process = self.process
        if process is not None and process.poll() is None:
            _signal_group(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=self.stop_grace)
            except subprocess.TimeoutExpired:
                _signal_group(process.pid, signal.SIGKILL)
                process.wait()
        if self._log is not None:
            self._log.close()
            self._log = None

    def __enter__(self) -> JupyterProcess:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None) -> None:
        self.stop()


def _signal_group(pid: int, signum: int) -> None:
    # The leader may have exited between poll() and here: nothing left to signal then.
    try:
        os.killpg(pid, signum)
    except ProcessLookupError:
        pass
