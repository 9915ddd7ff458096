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
import time
from pathlib import Path

# images.py stays as it is: its bytes are part of the Paddle image's digest (an edit would rebuild it).
from .images import IMAGE_PYTHON, PATH_ENV, SITE_PACKAGES, Image, images_dir, paddle_image
from .images import _run_logged as run_logged
from .images import _tar_tree as tar_tree
from .images import _write_archive as write_archive
from .notebook_image import _layers_of as layers_of

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
    digest = sha.hexdigest()[:12]
    reference = f"{REPOSITORY}:{digest}"
    target = images_dir() / f"paddle-installers-{digest}.tar"
    if target.is_file():
        return Image(reference, target, digest)
    work = target.with_name(target.name + ".work")
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    log_path = images_dir() / "build-installers.log"
    log_path.write_text("")
    started = time.monotonic()
    if log:
        print(f"images: building {reference} (Paddle image + pip + uv); log: {log_path}", file=sys.stderr)
    try:
        layers = layers_of(paddle.archive, work)
        root = work / "installers-root"
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
        layer = work / "installers.tar"
        tar_tree(root, layer)
        config = {"Env": [PATH_ENV, "LANG=C.UTF-8", "PYTHONDONTWRITEBYTECODE=1"], "Cmd": ["python3"], "WorkingDir": "/"}
        write_archive(reference, [*layers, layer], config, target)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if log:
        size = target.stat().st_size / 1e6
        print(f"images: built {reference} in {time.monotonic() - started:.0f} s ({size:.0f} MB)", file=sys.stderr)
    return Image(reference, target, digest)
