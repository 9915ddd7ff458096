"""Build entry for paddle-nbext.

`server_ext/paddle_nbext_server/` is the server package (folder = import name), so no generic
top-level name lands in site-packages.  The prebuilt JupyterLab assets (built from
`labextension/` into `paddle_nbext/labextension/`) and the file that enables the server
extension are shipped as data files, so installing never needs node.
"""
from __future__ import annotations

from pathlib import Path

from setuptools import find_packages, setup

HERE = Path(__file__).parent
LAB_NAME = "paddle-nbext-labextension"
LAB_BUILD = HERE / "paddle_nbext" / "labextension"


def labextension_data_files() -> list[tuple[str, list[str]]]:
    """Map every prebuilt asset to share/jupyter/labextensions/<name>/..., keeping folders."""
    if not LAB_BUILD.is_dir():
        return []
    grouped: dict[str, list[str]] = {}
    for path in sorted(LAB_BUILD.rglob("*")):
        if path.is_file():
            rel_dir = path.parent.relative_to(LAB_BUILD).as_posix()
            target = f"share/jupyter/labextensions/{LAB_NAME}"
            if rel_dir != ".":
                target = f"{target}/{rel_dir}"
            grouped.setdefault(target, []).append(path.relative_to(HERE).as_posix())
    files = sorted(grouped.items())
    files.append((f"share/jupyter/labextensions/{LAB_NAME}", ["install.json"]))
    return files


setup(
    # Every sub-package is found, so a new one can never be left out of the wheel (the editable
    # install used in development would hide such an omission).
    packages=[
        *find_packages(include=["paddle_nbext", "paddle_nbext.*"]),
        *find_packages(where="server_ext", include=["paddle_nbext_server", "paddle_nbext_server.*"]),
    ],
    package_dir={
        "paddle_nbext": "paddle_nbext",
        "paddle_nbext_server": "server_ext/paddle_nbext_server",
    },
    package_data={
        "paddle_nbext_server": ["openapi.json"],
        "paddle_nbext_server.runtime": ["*.py"],
    },
    data_files=[
        (
            "etc/jupyter/jupyter_server_config.d",
            ["jupyter-config/jupyter_server_config.d/paddle_nbext_server.json"],
        ),
        *labextension_data_files(),
    ],
    zip_safe=False,
)
