"""The job image with the package installers a site's Paddle image may have, for the requirements
tests on the real node (issue 25).

The job image (``deploy/images/job/Dockerfile``) has Debian's pip (23.0) and no uv.  A site's
image (Paddle's own images, an image built ``FROM python``) may have a current pip, and uv.
``registry.local/paddle-installers:<digest>`` is the job image built further by the suite's own
Dockerfile (``installers/Dockerfile``): a current pip from the index and the static uv binary of
this test environment (the ``uv`` test dependency).  Tagged by the digest of its inputs, like the
other images built here.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from .dockerfile_build import Recipe, dockerfile_image
from .images import paddle_image
from .images_cache import Image

REPOSITORY = "registry.local/paddle-installers"
DOCKERFILE = Path(__file__).resolve().parent / "installers" / "Dockerfile"


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
    """The job image with a current pip and uv (built first if missing)."""
    recipe = Recipe(REPOSITORY, "", {"Dockerfile": DOCKERFILE, "uv": uv_binary()}, paddle_image(log=log), {})
    return dockerfile_image(recipe, "tests/support/controlplane/installers/Dockerfile", log=log)
