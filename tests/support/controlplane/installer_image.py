"""The job image with the package installers a site's Paddle image has, for the requirements
tests on the real node (issue 25).

The suite's Paddle image is Debian minbase with python3 and paddlepaddle only: no pip, no uv.
A site's image (Paddle's own images, an image built `FROM python`) has pip, and may have uv.
``registry.local/paddle-installers:<digest>`` is the Paddle image plus one small layer: pip in
the image's dist-packages and uv's static binary in /usr/local/bin, both the ones this machine's
test environment has (uv from the ``uv`` test dependency, pip downloaded for the image's Python).
Tagged by the digest of its inputs, like the other images built here.
"""

from __future__ import annotations

import hashlib
import shutil
import sys
from pathlib import Path

from .derived_image import derived_image
from .images import IMAGE_PYTHON, PATH_ENV, SITE_PACKAGES, Image, paddle_image
from .images import _run_logged as run_logged

REPOSITORY = "registry.local/paddle-installers"


def uv_binary() -> Path:
    """The uv of this test environment (the `uv` test dependency installs it beside Python)."""
    found = Path(sys.executable).parent / "uv"
    if not found.is_file():
        located = shutil.which("uv")
        if located is None:
            raise FileNotFoundError("uv is not installed in the test environment: pip install -e '.[test]' installs it")
        found = Path(located)
    return found


def installers_image(*, log: bool = True) -> Image:
    """The Paddle image with pip and uv (built first if missing)."""
    paddle = paddle_image(log=log)
    uv = uv_binary()
    sha = hashlib.sha256(Path(__file__).read_bytes() + paddle.digest.encode())
    sha.update(hashlib.sha256(uv.read_bytes()).digest())

    def fill(root: Path, work: Path, layers: list[Path], log_path: Path) -> dict[str, object]:
        site = root / SITE_PACKAGES
        site.parent.mkdir(parents=True)
        pip_args = ["install", "--disable-pip-version-check", "--no-input", "--only-binary=:all:"]
        run_logged(
            [sys.executable, "-m", "pip", *pip_args, f"--python-version={IMAGE_PYTHON}", "--target", str(site), "pip"],
            log_path,
            "pip install of pip into the installers image",
        )
        shutil.rmtree(site / "bin", ignore_errors=True)  # console scripts for the host's interpreter
        binaries = root / "usr/local/bin"
        binaries.mkdir(parents=True)
        shutil.copy2(uv, binaries / "uv")
        return {"Env": [PATH_ENV, "LANG=C.UTF-8", "PYTHONDONTWRITEBYTECODE=1"], "Cmd": ["python3"], "WorkingDir": "/"}

    return derived_image(paddle, REPOSITORY, sha.hexdigest()[:12], "pip + uv", fill, log=log)
