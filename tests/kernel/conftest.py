"""Fixtures for the kernel-side suite: ONE real Jupyter server (subprocess, loopback, token auth,
the paddle-nbext extension with the local backend) for the whole session, a home dir for it, and
the environment a kernel started by that server would have (`PADDLE_NBEXT_API_URL`/`_TOKEN`)."""

from __future__ import annotations

import os
import secrets
import shutil
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import pytest
import requests
from support.jupyter_process import JupyterProcess, free_port
from support.waiting import eventually

if TYPE_CHECKING:
    from paddle_nbext.client import Client

T = TypeVar("T")
ROOT = Path(__file__).resolve().parents[2]
TRAIN_SCRIPT = Path(__file__).with_name("ps_cell.py")
JUPYTER = Path(sys.executable).with_name("jupyter")


class LiveServer:
    def __init__(self, url: str, token: str, home: Path, log: Path):
        self.url = url
        self.token = token
        self.home = home
        self.log = log
        self.api = f"{url}paddle/api/v1"

    def env(self) -> dict[str, str]:
        return {**os.environ, "PADDLE_NBEXT_API_URL": self.api, "PADDLE_NBEXT_TOKEN": self.token, "HOME": str(self.home)}


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    home = tmp_path_factory.mktemp("home")
    port = free_port()
    token = secrets.token_hex(16)
    log_path = home.parent / "jupyter-server.log"
    env = {
        **os.environ,
        "HOME": str(home),
        "JUPYTER_RUNTIME_DIR": str(home / ".runtime"),
        "JUPYTER_CONFIG_DIR": str(home / ".jupyter"),
        "PYTHONUNBUFFERED": "1",
    }
    for key in ("PADDLE_NBEXT_API_URL", "PADDLE_NBEXT_TOKEN"):
        env.pop(key, None)
    command = [
        str(JUPYTER),
        "server",
        "--allow-root",
        "--no-browser",
        "--ip=127.0.0.1",
        f"--port={port}",
        f"--ServerApp.token={token}",
        f"--ServerApp.root_dir={home}",
        "--ServerApp.port_retries=0",
        # explicit, so the suite does not depend on the install having placed the enable file
        "--ServerApp.jpserver_extensions={'paddle_nbext_server': True}",
    ]
    jupyter = JupyterProcess(command, url=f"http://127.0.0.1:{port}/", token=token, log_path=log_path, env=env, cwd=home)
    live = LiveServer(jupyter.url, token, home, log_path)
    jupyter.start()
    try:
        response = requests.get(f"{live.api}/version", headers=jupyter.headers, timeout=30)
        if response.status_code != 200:
            pytest.fail(f"the server runs without the paddle-nbext API ({response.status_code}):\n{jupyter.log_tail()}")
        yield live
    finally:
        # Jobs outlive the server by design (detached job runners), so a test that failed half-way
        # must not leave one running: delete whatever is left through the API first.
        try:
            for job in requests.get(f"{live.api}/jobs", headers=jupyter.headers, timeout=30).json().get("jobs", []):
                requests.delete(f"{live.api}/jobs/{job['name']}", headers=jupyter.headers, timeout=60)
        except (requests.RequestException, ValueError):
            pass
        jupyter.stop()  # the server and everything it started in its session


@pytest.fixture(scope="session")
def workdir(server: LiveServer) -> Path:
    """A project dir inside the server's home (packages must live in the home) with the scripts."""
    path = server.home / "project"
    path.mkdir(exist_ok=True)
    shutil.copy(TRAIN_SCRIPT, path / "ps_train_small.py")
    return path


@pytest.fixture
def kernel_env(server: LiveServer, workdir: Path, monkeypatch: pytest.MonkeyPatch) -> LiveServer:
    """This process looks like a kernel started by the server: env vars set, cwd in the home."""
    monkeypatch.setenv("PADDLE_NBEXT_API_URL", server.api)
    monkeypatch.setenv("PADDLE_NBEXT_TOKEN", server.token)
    monkeypatch.chdir(workdir)
    import paddle_nbext.api

    monkeypatch.setattr(paddle_nbext.api, "_default_client", None)
    return server


@pytest.fixture
def client(kernel_env: LiveServer) -> Client:
    from paddle_nbext.client import Client

    return Client(kernel_env.api, kernel_env.token)


def wait_until(predicate: Callable[[], T], timeout: float = 120.0, interval: float = 0.2, what: str = "condition") -> T:
    """Poll `predicate` until truthy (returns its value); fail naming `what` after `timeout`."""
    return eventually(predicate, what, timeout, interval)


def disabled(button: Any) -> object:
    """The widget button's `disabled` value as it is now: the form's callbacks change it between
    two asserts, which a type checker narrowing `form.submit_button.disabled` cannot see."""
    return button.disabled
