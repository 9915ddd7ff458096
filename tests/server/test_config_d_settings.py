"""Settings in `jupyter_server_config.d/*.json` reach paddle-nbext, as sites put them there
(Zero to JupyterHub's singleuser.extraFiles, a ConfigMap mounted as a directory); Jupyter Server
itself reads those files only for the extensions they enable."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import requests
from traitlets.config import Config

from paddle_nbext_server.config_files import config_d_settings, with_config_d

from .real_server import start_server


def write(directory: Path, name: str, data: object) -> None:
    (directory / "jupyter_server_config.d").mkdir(parents=True, exist_ok=True)
    (directory / "jupyter_server_config.d" / name).write_text(json.dumps(data) if not isinstance(data, str) else data)


def test_a_config_d_file_sets_the_limits_a_real_server_reports(tmp_path: Path) -> None:
    write(tmp_path / ".jupyter", "paddle_nbext_site.json", {"PaddleNbext": {"max_trainers": 3, "max_pservers": 2}})
    server = start_server(tmp_path)
    try:
        config = requests.get(f"{server.api}/config", headers=server.headers(), timeout=30).json()
    finally:
        server.stop()
    assert (config["limits"]["max_trainers"], config["limits"]["max_pservers"]) == (3, 2), config["limits"]


def test_precedence_a_higher_directory_then_the_later_file_then_the_regular_config(tmp_path: Path) -> None:
    user, system = tmp_path / "user", tmp_path / "system"
    write(system, "10-site.json", {"PaddleNbext": {"max_trainers": 4, "max_pservers": 4}, "ServerApp": {"port": 1}})
    write(system, "20-site.json", {"PaddleNbext": {"max_pservers": 5}})
    write(user, "mine.json", {"KubernetesBackend": {"namespace": "team-a"}, "PaddleNbext": {"max_trainers": 6}})
    write(user, "broken.json", "{not json")
    merged = config_d_settings([str(user), str(system)], logging.getLogger("test"))
    assert merged.PaddleNbext.max_trainers == 6  # the user's directory comes first in the path: it wins
    assert merged.PaddleNbext.max_pservers == 5  # a later file of one directory wins over an earlier one
    assert merged.KubernetesBackend.namespace == "team-a"
    assert "ServerApp" not in merged  # Jupyter's own sections stay Jupyter's

    regular = Config({"PaddleNbext": {"max_trainers": 9}})
    combined = with_config_d(regular, [str(user), str(system)], logging.getLogger("test"))
    assert combined.PaddleNbext.max_trainers == 9 and combined.PaddleNbext.max_pservers == 5
