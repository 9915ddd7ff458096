"""A notebook user's real ``jupyter server`` with the ``kubernetes`` backend, as a site runs one.

The server runs as the notebook's uid and gid (``setpriv``; the suite itself runs as root), with
``$HOME`` the user's home (the directory the job pods mount), ``$USER`` the user's name (the
owner of its jobs and the ``{username}`` of ``claim-{username}``), the extension enabled by the
file the wheel ships, and the admin's settings in ``jupyter_server_config.json``.  Its
kubeconfig holds the notebook ServiceAccount's token under the shipped Role, outside the home
(a notebook pod has it in its service account mount, never in the home the jobs see).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

import requests

from support.jupyter_process import JupyterProcess, free_port

REPO = Path(__file__).resolve().parents[2]
ENABLE_FILE = REPO / "jupyter-config" / "jupyter_server_config.d" / "paddle_nbext_server.json"
TOKEN = "real-node-token"


def _chown_tree(path: Path, uid: int, gid: int) -> None:
    os.chown(path, uid, gid)
    for child in path.rglob("*"):
        os.lchown(child, uid, gid)


class NotebookServer:
    """``start()`` returns once the server answers; ``api(method, path, ...)`` calls its REST API."""

    def __init__(self, home: Path, settings: dict[str, Any], *, user: str, uid: int, gid: int, log_dir: Path) -> None:
        self.home = home
        self.user = user
        self.uid = uid
        self.gid = gid
        config_dir = home / ".jupyter"
        (config_dir / "jupyter_server_config.d").mkdir(parents=True, exist_ok=True)
        shutil.copy(ENABLE_FILE, config_dir / "jupyter_server_config.d" / ENABLE_FILE.name)
        (config_dir / "jupyter_server_config.json").write_text(json.dumps(settings, indent=2))
        _chown_tree(config_dir, uid, gid)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("JUPYTER", "PADDLE_NBEXT_", "KUBECONFIG"))}
        env.update(
            HOME=str(home),
            USER=user,
            LOGNAME=user,
            JUPYTER_CONFIG_DIR=str(config_dir),
            JUPYTER_DATA_DIR=str(home / ".local/share/jupyter"),
            JUPYTER_RUNTIME_DIR=str(home / ".local/share/jupyter/runtime"),
            JUPYTER_PLATFORM_DIRS="1",
        )
        port = free_port()
        command = [
            "setpriv",
            f"--reuid={uid}",
            f"--regid={gid}",
            "--clear-groups",
            "--",
            sys.executable,
            "-m",
            "jupyter_server",
            "--ip=127.0.0.1",
            f"--port={port}",
            "--port-retries=0",
            "--no-browser",
            f"--ServerApp.root_dir={home}",
            f"--IdentityProvider.token={TOKEN}",
        ]
        self.jupyter = JupyterProcess(
            command, url=f"http://127.0.0.1:{port}/", token=TOKEN, log_path=log_dir / f"jupyter-{port}.log", env=env, cwd=home
        )
        self.base = f"http://127.0.0.1:{port}/paddle/api/v1"

    def start(self) -> NotebookServer:
        self.jupyter.start()
        return self

    def stop(self) -> None:
        self.jupyter.stop()

    @property
    def log(self) -> Path:
        return self.jupyter.log_path

    def api(
        self, method: str, path: str, *, body: Any = None, params: dict[str, Any] | None = None, timeout: float = 60
    ) -> requests.Response:
        return requests.request(
            method, f"{self.base}/{path.lstrip('/')}", json=body, params=params, headers=self.jupyter.headers, timeout=timeout
        )
