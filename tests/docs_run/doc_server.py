"""A fresh home and a real Jupyter server with the local backend, as a reader of the docs has.

The home is what the documents may rely on (tests/docs_run/test_code_blocks.py's docstring says
it to the writers): `~/examples` is a copy of the repository's `examples/` (notebooks included,
`__pycache__` and `.ipynb_checkpoints` left out) and `~/.paddle-jobs` the local backend's jobs
dir.  The server's `c.PaddleNbext.home_dir` and `$HOME` are that home, so `~` means the same in
a trainer package, in a kernel and in a shell.  Kernels and shells get the variables a kernel
started by the server gets (`PADDLE_NBEXT_API_URL`, `PADDLE_NBEXT_TOKEN`) and the venv's `bin`
first on `PATH`, so `paddle-nbext` and `jupyter` are this checkout's.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import sys
import time
from pathlib import Path
from types import TracebackType
from typing import Any

import requests
from support.jupyter_process import JupyterProcess, free_port

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
VENV_BIN = Path(sys.executable).parent
TERMINAL_PHASES = ("Succeeded", "Failed", "Cancelled", "Unknown")


def make_home(root: Path) -> Path:
    """`root/home` holding `examples/` (a copy of the repository's) and nothing else."""
    home = root / "home"
    shutil.copytree(EXAMPLES, home / "examples", ignore=shutil.ignore_patterns("__pycache__", ".ipynb_checkpoints"))
    return home


def clean_environment() -> dict[str, str]:
    """This process's environment without anything that would point a kernel or the server at
    another Jupyter or paddle-nbext than the one started here."""
    return {k: v for k, v in os.environ.items() if not k.startswith(("JUPYTER", "PADDLE_NBEXT_", "JPY_"))}


class DocServer:
    """`with DocServer(root) as server:` a server on 127.0.0.1 whose home is `server.home`;
    leaving the block deletes every job (their runners are detached and would outlive the
    server) and stops the server."""

    def __init__(self, root: Path) -> None:
        self.home = make_home(root)
        self.runtime_dir = self.home / ".local/share/jupyter/runtime"
        config_dir = root / "jupyter-config"
        config_dir.mkdir(parents=True)
        settings = {
            "ServerApp": {"jpserver_extensions": {"paddle_nbext_server": True}},
            "PaddleNbext": {"home_dir": str(self.home)},
            "LocalBackend": {"jobs_dir": str(self.home / ".paddle-jobs")},
        }
        (config_dir / "jupyter_server_config.json").write_text(json.dumps(settings, indent=2))
        port, self.token = free_port(), secrets.token_hex(16)
        env = {
            **clean_environment(),
            "HOME": str(self.home),
            "JUPYTER_CONFIG_DIR": str(config_dir),
            "JUPYTER_RUNTIME_DIR": str(self.runtime_dir),
            "PYTHONUNBUFFERED": "1",
        }
        command = [
            str(VENV_BIN / "jupyter"),
            "server",
            "--allow-root",
            "--no-browser",
            "--ip=127.0.0.1",
            f"--port={port}",
            "--ServerApp.port_retries=0",
            f"--IdentityProvider.token={self.token}",
            f"--ServerApp.root_dir={self.home}",
        ]
        self.jupyter = JupyterProcess(
            command, url=f"http://127.0.0.1:{port}/", token=self.token, log_path=root / "jupyter-server.log", env=env, cwd=self.home
        )
        self.api_url = f"{self.jupyter.url}paddle/api/v1"

    def __enter__(self) -> DocServer:
        self.jupyter.start()
        try:
            answer = self.call("GET", "/version")
            if answer.status_code != 200:
                raise RuntimeError(f"the server has no paddle-nbext API ({answer.status_code}):\n{self.jupyter.log_tail()}")
        except BaseException:
            self.jupyter.stop()
            raise
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None) -> None:
        try:
            self.delete_every_job()
        finally:
            self.jupyter.stop()

    def call(self, method: str, path: str, timeout: float = 60) -> requests.Response:
        return requests.request(method, f"{self.api_url}{path}", headers=self.jupyter.headers, timeout=timeout)

    def jobs(self) -> dict[str, dict[str, Any]]:
        """Every job of the home by name, as `GET /jobs` lists it (phase, message, ...)."""
        answer = self.call("GET", "/jobs")
        answer.raise_for_status()
        return {job["name"]: job for job in answer.json().get("jobs", [])}

    def wait_for_ends(self, names: set[str], seconds: float) -> dict[str, dict[str, Any]]:
        """The jobs `names` once each has ended or `seconds` passed (whichever first), as listed
        then; a job deleted meanwhile is missing from the answer."""
        deadline = time.monotonic() + seconds
        while True:
            listed = {name: job for name, job in self.jobs().items() if name in names}
            if all(job.get("phase") in TERMINAL_PHASES for job in listed.values()) or time.monotonic() > deadline:
                return listed
            time.sleep(0.5)

    def delete_every_job(self) -> None:
        try:
            for name in self.jobs():
                self.call("DELETE", f"/jobs/{name}")
        except (requests.RequestException, ValueError):
            pass  # the server is going away: its log says why

    def reader_environment(self) -> dict[str, str]:
        """What a kernel started by this server, or a terminal of it, sees."""
        return {
            **clean_environment(),
            "HOME": str(self.home),
            "PATH": f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}",
            "PADDLE_NBEXT_API_URL": self.api_url,
            "PADDLE_NBEXT_TOKEN": self.token,
            "JUPYTER_RUNTIME_DIR": str(self.runtime_dir),
            "PYTHONUNBUFFERED": "1",
        }
