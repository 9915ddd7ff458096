"""paddle-nbext's settings from `jupyter_server_config.d/*.json` files too.

Jupyter Server reads the files of a `jupyter_server_config.d` directory only for the extensions
they enable (`ServerApp.jpserver_extensions`); every other setting there is silently ignored. Yet
that directory is where sites put a package's settings (Zero to JupyterHub's
`singleuser.extraFiles`, a ConfigMap mounted as a directory, an image layer that must not touch
the site's own `jupyter_server_config.py`). So the extension reads its own sections
(`PaddleNbext`, `KubernetesBackend`, `LocalBackend`) from those files itself, with the lowest
precedence: `jupyter_server_config.py`/`.json` and the command line win over them, and among the
files the same order as Jupyter's own (a directory earlier in the config path wins; in a
directory, files in name order, a later one winning).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from jupyter_core.paths import jupyter_config_path
from traitlets.config import Config

SECTIONS = ("PaddleNbext", "KubernetesBackend", "LocalBackend")
DIRECTORY = "jupyter_server_config.d"


def config_d_settings(paths: Iterable[str], log: logging.Logger | Any) -> Config:
    """Our sections of every `jupyter_server_config.d/*.json` under `paths` (highest precedence
    first, as Jupyter lists them), merged in precedence order.  A file that is not JSON is
    skipped with a warning naming it: it must not keep the server from starting."""
    merged = Config()
    for directory in reversed([Path(p) / DIRECTORY for p in paths]):
        if not directory.is_dir():
            continue
        for file in sorted(directory.glob("*.json")):
            try:
                data = json.loads(file.read_text(encoding="utf-8"))
            except (OSError, UnicodeDecodeError, ValueError) as error:
                log.warning("paddle-nbext: ignoring %s: %s", file, error)
                continue
            if not isinstance(data, dict):
                continue
            ours = {name: data[name] for name in SECTIONS if isinstance(data.get(name), dict)}
            if ours:
                merged.merge(Config(ours))
    return merged


def with_config_d(config: Config, paths: Iterable[str] | None, log: logging.Logger | Any) -> Config:
    """`config` over the `jupyter_server_config.d` settings (`config` wins)."""
    combined = config_d_settings(jupyter_config_path() if paths is None else paths, log)
    combined.merge(config)
    return combined
