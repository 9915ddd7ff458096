"""The notebook image JupyterHub spawns in the JupyterHub tests, built here like the job image.

``registry.local/paddle-notebook:<digest>``: what a site builds for its notebooks, over its Paddle
image (``images.paddle_image``): a layer with JupyterLab, JupyterHub's single-user server and this
project installed from a wheel of the clone, the user ``jovyan`` (uid 1000, gid 100, as Zero to
JupyterHub runs notebooks), and ``c.PaddleNbext.backend = "kubernetes"`` in its server config.
Tagged and cached by the digest of its inputs (the Paddle image, the wheel, the hub's version):
a changed wheel is a new tag, which the node has never cached under an old content.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sys
import tarfile
from pathlib import Path

from .derived_image import derived_image
from .images import IMAGE_PYTHON, PATH_ENV, SITE_PACKAGES, Image, paddle_image
from .images import _run_logged as run_logged


def _digest(*parts: bytes) -> str:
    sha = hashlib.sha256(Path(__file__).read_bytes())
    for part in parts:
        sha.update(len(part).to_bytes(8, "big") + part)
    return sha.hexdigest()[:12]


NOTEBOOK_REPOSITORY = "registry.local/paddle-notebook"
NOTEBOOK_UID, NOTEBOOK_GID = 1000, 100  # Zero to JupyterHub's jovyan / users
#: What the notebook layer installs beside the project's wheel (JupyterHub's single-user server
#: must be of the hub's major version).
NOTEBOOK_REQUIREMENTS = ("jupyterlab>=4.4,<5",)
#: The image's own server config: the backend every notebook of the site uses (what a site puts
#: in its image, or mounts through Zero to JupyterHub's singleuser.extraFiles).
NOTEBOOK_SERVER_CONFIG = {"PaddleNbext": {"backend": "kubernetes"}, "KubernetesBackend": {"home_volume": "auto"}}


def _passwd_with_jovyan(base_layer: Path) -> tuple[bytes, bytes]:
    """The base layer's /etc/passwd and /etc/group with the notebook user and its group added."""
    with tarfile.open(base_layer) as tar:
        files = {}
        for name in ("passwd", "group"):
            member = next(m for m in tar.getmembers() if m.name.lstrip("./") == f"etc/{name}")
            files[name] = tar.extractfile(member).read()  # type: ignore[union-attr]
    passwd = files["passwd"].rstrip(b"\n") + f"\njovyan:x:{NOTEBOOK_UID}:{NOTEBOOK_GID}::/home/jovyan:/bin/sh\n".encode()
    return passwd, files["group"]


def notebook_image(wheel: Path, hub_version: str, *, log: bool = True) -> Image:
    """The notebook image over the Paddle image (built first if missing), tagged by the inputs'
    digest so that a changed wheel is a new image the node has not cached under an old name."""
    paddle = paddle_image(log=log)
    digest = _digest(paddle.digest.encode(), wheel.read_bytes(), hub_version.encode(), repr(NOTEBOOK_REQUIREMENTS).encode())

    def fill(root: Path, work: Path, layers: list[Path], log_path: Path) -> dict[str, object]:
        installed = work / "pip-target"
        run_logged(
            [
                sys.executable,
                "-m",
                "pip",
                "install",
                "--disable-pip-version-check",
                "--no-input",
                "--only-binary=:all:",
                f"--python-version={IMAGE_PYTHON}",
                "--target",
                str(installed),
                *NOTEBOOK_REQUIREMENTS,
                f"jupyterhub=={hub_version}",
                str(wheel),
            ],
            log_path,
            "pip install of JupyterLab and paddle-nbext into the notebook image",
        )
        site = root / SITE_PACKAGES
        site.parent.mkdir(parents=True)
        shutil.rmtree(installed / "bin", ignore_errors=True)  # console scripts for the host's interpreter
        local = root / "usr/local"
        local.mkdir(parents=True)
        for data in ("share", "etc"):  # Jupyter finds /usr/local/share/jupyter and /usr/local/etc/jupyter
            if (installed / data).is_dir():
                shutil.move(str(installed / data), str(local / data))
        shutil.move(str(installed), str(site))
        config_dir = local / "etc/jupyter/jupyter_server_config.d"
        config_dir.mkdir(parents=True, exist_ok=True)
        (config_dir / "paddle_nbext_kubernetes.json").write_text(json.dumps(NOTEBOOK_SERVER_CONFIG, indent=2) + "\n")
        passwd, group = _passwd_with_jovyan(layers[0])
        (root / "etc").mkdir()
        (root / "etc/passwd").write_bytes(passwd)
        (root / "etc/group").write_bytes(group)
        (root / "home/jovyan").mkdir(parents=True)
        return {
            "Env": [PATH_ENV, "LANG=C.UTF-8", "PYTHONDONTWRITEBYTECODE=1", "HOME=/home/jovyan", "SHELL=/bin/sh"],
            "Cmd": ["python3", "-m", "jupyterhub.singleuser"],
            "WorkingDir": "/home/jovyan",
            "User": f"{NOTEBOOK_UID}:{NOTEBOOK_GID}",
        }

    what = f"JupyterLab, jupyterhub=={hub_version}, {wheel.name}"
    return derived_image(paddle, NOTEBOOK_REPOSITORY, digest, what, fill, log=log)
