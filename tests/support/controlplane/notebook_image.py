"""The notebook image JupyterHub spawns in the JupyterHub tests: the one a site builds from our
``deploy/images/notebook/Dockerfile``, over the job image, with a wheel of this clone.

``registry.local/paddle-notebook:<digest>``: JupyterLab, JupyterHub's single-user server of the
hub's own version and paddle-nbext from the wheel; user ``jovyan`` (uid 1000, gid 100, as Zero to
JupyterHub runs notebooks); ``c.PaddleNbext.backend = "kubernetes"`` in its server config (the
site's job settings come from the site ConfigMap the hub mounts).  Tagged and cached by the digest
of its inputs (the job image, the Dockerfile's folder, the wheel, the hub's version): a changed
wheel is a new tag, which the node has never cached under an old content.
"""

from __future__ import annotations

from pathlib import Path

from .dockerfile_build import Recipe, dockerfile_image, shipped_context
from .images import DOCKERFILES, paddle_image
from .images_cache import Image

NOTEBOOK_REPOSITORY = "registry.local/paddle-notebook"
NOTEBOOK_UID, NOTEBOOK_GID = 1000, 100  # Zero to JupyterHub's jovyan / users (the Dockerfile's)


def notebook_image(wheel: Path, hub_version: str, *, log: bool = True) -> Image:
    """The notebook image over the job image (built first if missing), with ``wheel`` in its build
    context as the Dockerfile's comment tells an admin, for a hub of ``hub_version``."""
    context = {**shipped_context(DOCKERFILES / "notebook"), wheel.name: wheel}
    recipe = Recipe(NOTEBOOK_REPOSITORY, "", context, paddle_image(log=log), {"JUPYTERHUB_VERSION": hub_version})
    return dockerfile_image(recipe, f"deploy/images/notebook/Dockerfile, {wheel.name}, jupyterhub {hub_version}", log=log)
