"""A real `jupyter server` process for tests that need one outside pytest's event loop (server
restarts, the stock identity provider, the shipped enable-file)."""

from __future__ import annotations

import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

from support.jupyter_process import JupyterProcess, free_port

REPO = Path(__file__).resolve().parents[2]
ENABLE_FILE = REPO / "jupyter-config" / "jupyter_server_config.d" / "paddle_nbext_server.json"


def server_env(home: Path) -> dict[str, str]:
    """HOME and Jupyter dirs inside `home`; the extension enabled by the file the wheel ships."""
    config_dir = home / ".jupyter"
    (config_dir / "jupyter_server_config.d").mkdir(parents=True, exist_ok=True)
    shutil.copy(ENABLE_FILE, config_dir / "jupyter_server_config.d" / ENABLE_FILE.name)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JUPYTER", "PADDLE_NBEXT_"))}
    env.update(
        HOME=str(home),
        JUPYTER_CONFIG_DIR=str(config_dir),
        JUPYTER_DATA_DIR=str(home / ".local/share/jupyter"),
        JUPYTER_RUNTIME_DIR=str(home / ".local/share/jupyter/runtime"),
        JUPYTER_PLATFORM_DIRS="1",
    )
    return env


@dataclass
class RealServer:
    url: str  # http://127.0.0.1:PORT/base/
    token: str
    log: Path
    jupyter: JupyterProcess

    @property
    def api(self) -> str:
        return f"{self.url}paddle/api/v1"

    def headers(self) -> dict[str, str]:
        return self.jupyter.headers

    def stop(self) -> None:
        """SIGTERM (Jupyter's clean shutdown), then SIGKILL if it hangs."""
        self.jupyter.stop()


def start_server(home: Path, *, token: str = "test-token", base_url: str = "/jh/", extra: list[str] | None = None) -> RealServer:
    port = free_port()
    command = [
        sys.executable,
        "-m",
        "jupyter_server",
        "--ip=127.0.0.1",
        f"--port={port}",
        "--port-retries=0",
        "--no-browser",
        "--allow-root",
        f"--ServerApp.base_url={base_url}",
        f"--ServerApp.root_dir={home}",
        f"--IdentityProvider.token={token}",
        "--LocalBackend.poll_interval=0.05",
        "--LocalBackend.grace_period=2",
        *(extra or []),
    ]
    jupyter = JupyterProcess(
        command,
        url=f"http://127.0.0.1:{port}{base_url}",
        token=token,
        log_path=home / f"jupyter-{port}.log",
        env=server_env(home),
        stop_grace=60,
    )
    return RealServer(jupyter.url, token, jupyter.log_path, jupyter.start())
