"""The notebook image JupyterHub spawns in the JupyterHub tests: the one a site builds from our
``deploy/images/notebook/Dockerfile``, over the job image, with a wheel of this clone.

Its folder, tag and build arguments are the admin guide's install step 2's
(``support/admin_guide.py``).  ``registry.local/paddle-notebook:<digest>``: JupyterLab, JupyterHub's single-user server of the
hub's own version and paddle-nbext from the wheel; user ``jovyan`` (uid 1000, gid 100, as Zero to
JupyterHub runs notebooks); ``c.PaddleNbext.backend = "kubernetes"`` in its server config (the
site's job settings come from the site ConfigMap the hub mounts).  Tagged and cached by the digest
of its inputs (the job image, the Dockerfile's folder, the wheel, the hub's version): a changed
wheel is a new tag, which the node has never cached under an old content.
"""

from __future__ import annotations

from pathlib import Path

from support import admin_guide

from .dockerfile_build import Recipe, dockerfile_image, shipped_context
from .images import PADDLE_IMAGE, REGISTRY, REPO, paddle_image
from .images_cache import Image

#: The tag an image built here gets in place of the guide's $VERSION: the digest of its inputs.
BY_DIGEST = "by-digest"
NOTEBOOK_UID, NOTEBOOK_GID = 1000, 100  # Zero to JupyterHub's jovyan / users (the Dockerfile's)


def notebook_image(wheel: Path, hub_version: str, *, log: bool = True) -> Image:
    """The notebook image over the job image (built first if missing), with ``wheel`` in its build
    context as the Dockerfile's comment tells an admin, for a hub of ``hub_version``."""
    build = notebook_build(hub_version)
    repository, _, tag = build.tag.rpartition(":")
    if tag != BY_DIGEST or build.build_args.get("BASE") != PADDLE_IMAGE:
        raise admin_guide.GuideError(f"the guide's notebook build is tagged {build.tag} over {build.build_args.get('BASE')}")
    context = {**shipped_context(REPO / build.folder), wheel.name: wheel}
    args = {name: value for name, value in build.build_args.items() if name != "BASE"}  # BASE: the job image
    recipe = Recipe(repository, "", context, paddle_image(log=log), args)
    return dockerfile_image(recipe, f"{build.folder}/Dockerfile, {wheel.name}, jupyterhub {hub_version}", log=log)


def notebook_build(hub_version: str) -> admin_guide.ImageBuild:
    """The notebook image's build as the admin guide's install step 2 writes it, for a hub of
    ``hub_version``."""
    values = {"REGISTRY": REGISTRY, "VERSION": BY_DIGEST, "JUPYTERHUB_VERSION": hub_version}
    return admin_guide.image_build("deploy/images/notebook", values)
