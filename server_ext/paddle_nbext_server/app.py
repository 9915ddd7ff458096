"""The Jupyter Server extension: loads the settings, builds the backend, mounts the routes,
tells kernels where the API is, and shuts everything down with the server.

Nothing here may break JupyterLab: a bad `c.PaddleNbext` value or a backend that cannot be
built or started leaves the extension loaded, every job route answering 503 with the cause, and
`GET /config` reporting `backend.ok = false` with the same message.
"""

from __future__ import annotations

import os
from typing import Any

from jupyter_server.extension.application import ExtensionApp
from jupyter_server.utils import url_path_join
from traitlets import TraitError

from .config import PaddleNbext
from .config_files import with_config_d
from .handlers import API_BASE, routes
from .state import STATE_KEY, ExtensionState

ENV_URL, ENV_TOKEN = "PADDLE_NBEXT_API_URL", "PADDLE_NBEXT_TOKEN"
_WILDCARD_OR_LOCAL = {"", "0.0.0.0", "*", "localhost", "127.0.0.1", "::", "::1"}


def load_settings(parent: Any) -> tuple[PaddleNbext, str | None]:
    """`c.PaddleNbext` checked; on a bad value the defaults plus the message naming the trait."""
    try:
        config = with_config_d(parent.config, getattr(parent, "config_file_paths", None), parent.log)
        settings = PaddleNbext(parent=parent, config=config)
        settings.check_consistency()
        return settings, None
    except TraitError as error:
        message = f"invalid configuration: {error}"
        parent.log.error("paddle-nbext: %s", message)
        return PaddleNbext(), message


def api_url(serverapp: Any) -> str | None:
    """The API base as a kernel on this machine reaches it (None on a Unix socket)."""
    if getattr(serverapp, "sock", ""):
        return None
    ip = serverapp.ip or ""
    if ip in _WILDCARD_OR_LOCAL:
        host = "[::1]" if ip == "::1" else "127.0.0.1"
    else:
        host = f"[{ip}]" if ":" in ip else ip
    scheme = "https" if serverapp.certfile else "http"
    return f"{scheme}://{host}:{serverapp.port}{url_path_join(serverapp.base_url, API_BASE)}"


def export_kernel_env(serverapp: Any) -> None:
    """Kernels inherit the server's environment: put the API URL and a token there."""
    url = api_url(serverapp)
    if url:
        os.environ[ENV_URL] = url
    else:
        os.environ.pop(ENV_URL, None)
    token = getattr(serverapp.identity_provider, "token", "") or os.environ.get("JUPYTERHUB_API_TOKEN", "")
    if token:
        os.environ[ENV_TOKEN] = token
    else:
        os.environ.pop(ENV_TOKEN, None)


class PaddleNbextApp(ExtensionApp):
    """paddle-nbext's REST API inside Jupyter Server (an ExtensionApp for its shutdown hook)."""

    name = "paddle_nbext"
    description = "Run distributed PaddlePaddle jobs from Jupyter"
    load_other_extensions = True

    state: ExtensionState | None = None

    def initialize_settings(self) -> None:
        settings, error = load_settings(self)
        self.state = ExtensionState(settings, error)
        self.settings[STATE_KEY] = self.state
        assert self.serverapp is not None
        export_kernel_env(self.serverapp)
        status = "ok" if self.state.error is None else f"NOT usable: {self.state.error}"
        self.log.info("paddle-nbext: %s backend, API at %s (%s)", settings.backend_name, os.environ.get(ENV_URL), status)

    def initialize_handlers(self) -> None:
        self.handlers.extend(routes())

    async def _start_jupyter_server_extension(self, serverapp: Any) -> None:
        # The port is final now (the server may have moved off a busy one): export again.
        export_kernel_env(serverapp)
        if self.state is not None:
            self.state.server_url = str(getattr(serverapp, "connection_url", "") or "")
            await self.state.try_start()

    async def stop_extension(self) -> None:
        if self.state is not None:
            await self.state.stop()
