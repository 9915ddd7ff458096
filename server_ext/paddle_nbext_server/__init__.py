"""paddle-nbext server extension (see docs/architecture.md): the REST API under
`{base_url}paddle/api/v1`, the event stream, and the local / Kubernetes backends.

Enabled on install by `jupyter-config/jupyter_server_config.d/paddle_nbext_server.json`.
"""

from __future__ import annotations

from typing import Any

from .version import __version__

__all__ = ["__version__"]


def _jupyter_server_extension_points() -> list[dict[str, Any]]:
    from .app import PaddleNbextApp

    return [{"module": "paddle_nbext_server", "app": PaddleNbextApp}]


def _load_jupyter_server_extension(serverapp: Any) -> Any:
    """Load the extension into `serverapp` (jupyter_server calls the app's own loader; this is
    for loaders that look for the module-level function)."""
    from .app import PaddleNbextApp

    # jupyter_server leaves this classmethod unannotated.
    return PaddleNbextApp._load_jupyter_server_extension(serverapp)  # type: ignore[no-untyped-call]
