"""A real `jupyter server` process for tests that need one outside pytest's event loop (server
restarts, the stock identity provider, the shipped enable-file)."""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import requests

REPO = Path(__file__).resolve().parents[2]
ENABLE_FILE = REPO / "jupyter-config" / "jupyter_server_config.d" / "paddle_nbext_server.json"
START_TIMEOUT = 120.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


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
    process: subprocess.Popen[bytes]
    url: str  # http://127.0.0.1:PORT/base/
    token: str
    log: Path

    @property
    def api(self) -> str:
        return f"{self.url}paddle/api/v1"

    def headers(self) -> dict[str, str]:
        return {"Authorization": f"token {self.token}"}

    def stop(self) -> None:
        """SIGTERM (Jupyter's clean shutdown), then SIGKILL if it hangs."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def start_server(home: Path, *, token: str = "test-token", base_url: str = "/jh/", extra: list[str] | None = None) -> RealServer:
    port = free_port()
    log = home / f"jupyter-{port}.log"
    command = [
        sys.executable, "-m", "jupyter_server",
        "--ip=127.0.0.1", f"--port={port}", "--port-retries=0", "--no-browser", "--allow-root",
        f"--ServerApp.base_url={base_url}", f"--ServerApp.root_dir={home}", f"--IdentityProvider.token={token}",
        "--LocalBackend.poll_interval=0.05", "--LocalBackend.grace_period=2",
        *(extra or []),
    ]  # fmt: skip
    with open(log, "wb") as out:
        process = subprocess.Popen(command, env=server_env(home), stdout=out, stderr=subprocess.STDOUT)
    server = RealServer(process, f"http://127.0.0.1:{port}{base_url}", token, log)
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"jupyter server exited with {process.returncode}:\n{log.read_text()}")
        try:
            if requests.get(f"{server.url}api/status", headers=server.headers(), timeout=2).status_code == 200:
                return server
        except requests.RequestException:
            pass
        time.sleep(0.2)
    server.stop()
    raise RuntimeError(f"jupyter server did not answer within {START_TIMEOUT}s:\n{log.read_text()}")
