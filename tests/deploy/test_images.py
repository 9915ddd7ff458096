"""The two images a site builds from our Dockerfiles (deploy/images), built as an admin builds them
(``buildah bud --build-arg BASE=...``) over the suite's Debian base, and looked at from inside:
what a job pod and a user's notebook pod get.  The same archives are what the real-node and hub
tests import into the node (``controlplane/images.py``, ``controlplane/notebook_image.py``), so
these tests and the cluster suite share one build of each image (a lock makes the second wait).

Needs root, buildah and mmdebstrap (``bash scripts/setup.sh`` installs them) and, on a cold cache,
Debian's mirror and the package index."""

from __future__ import annotations

import json
import tarfile
import zipfile
from pathlib import Path

import pytest
from support.controlplane.build import cache_dir
from support.controlplane.dockerfile_build import buildah, in_storage
from support.controlplane.images import PADDLE_IMAGE, paddle_image
from support.controlplane.images_cache import Image
from support.controlplane.notebook_image import notebook_image
from support.hub_site import clone_wheel, hub_version

pytestmark = pytest.mark.timeout(1800)  # a cold build: the Debian base, Paddle, JupyterLab


@pytest.fixture(scope="module")
def job() -> Image:
    return in_storage(paddle_image())


@pytest.fixture(scope="module")
def wheel() -> Path:
    """The wheel of this clone the hub tests build their notebook image from."""
    folder = cache_dir() / "hub"
    folder.mkdir(parents=True, exist_ok=True)
    return clone_wheel(folder)


@pytest.fixture(scope="module")
def notebook(wheel: Path) -> Image:
    return in_storage(notebook_image(wheel, hub_version()))


def run_in(image: Image, *argv: str, user: str = "") -> str:
    """What ``argv`` prints in a container of ``image`` (as its own user unless ``user``); fails
    the test with the output when it exits non-zero."""
    done = buildah().exec_in(image.reference, argv, user=user)
    assert done.returncode == 0, f"{' '.join(argv)} in {image.reference} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def archive_config(image: Image) -> dict[str, object]:
    """The image config the node's containerd reads from the archive (``ctr images import``)."""
    with tarfile.open(image.archive) as archive:
        manifest_file = archive.extractfile("manifest.json")
        assert manifest_file is not None
        (manifest,) = json.load(manifest_file)
        assert manifest["RepoTags"] == [image.reference], "the node would list the image under another name"
        config_file = archive.extractfile(manifest["Config"])
        assert config_file is not None
        config: dict[str, object] = json.load(config_file)["config"]
        return config


def test_the_job_image_is_the_one_the_real_node_tests_run(job: Image) -> None:
    assert job.reference == PADDLE_IMAGE
    assert archive_config(job)["Cmd"] == ["python3"]


def test_a_job_of_any_user_imports_paddle_in_the_job_image(job: Image) -> None:
    """Job pods run as the notebook user's uid (1000 here), not root: Paddle and its runtime
    library (libgomp, loaded at import) must be there for any user."""
    printed = run_in(job, "python3", "-c", "import paddle; print(paddle.__version__)", user="1000:100")
    assert printed.strip().splitlines()[-1] == "3.0.0"


def test_the_notebook_runs_as_jovyan_with_the_home_of_zero_to_jupyterhub(notebook: Image) -> None:
    config = archive_config(notebook)
    assert config["User"] == "1000:100"
    assert config["WorkingDir"] == "/home/jovyan"
    assert config["Cmd"] == ["python3", "-m", "jupyterhub.singleuser"]
    assert run_in(notebook, "id").split() == ["uid=1000(jovyan)", "gid=100(users)", "groups=100(users)"]
    assert run_in(notebook, "stat", "-c", "%u:%g", "/home/jovyan").strip() == "1000:100"


def test_the_notebook_has_the_project_from_the_wheel_and_paddle(notebook: Image, wheel: Path) -> None:
    version = wheel.name.split("-")[1]
    printed = run_in(notebook, "python3", "-c", "import paddle, paddle_nbext, paddle_nbext_server; print(paddle_nbext.__version__)")
    assert printed.strip().splitlines()[-1] == version


def test_the_single_user_server_is_of_the_hubs_version(notebook: Image) -> None:
    printed = run_in(notebook, "python3", "-c", "import jupyterhub; print(jupyterhub.__version__)")
    assert printed.strip() == hub_version()


def test_jupyterlab_in_the_notebook_loads_the_panel_and_the_server_extension(notebook: Image, wheel: Path) -> None:
    """What the user sees: the panel enabled in JupyterLab and the server extension enabled, from
    the files the wheel installs (the panel's assets ship in the wheel: no Node in the image)."""
    labextensions = run_in(notebook, "sh", "-c", "jupyter labextension list 2>&1")  # it prints to stderr
    line = next((each for each in labextensions.splitlines() if "paddle-nbext-labextension" in each), "")
    assert "enabled" in line and "OK" in line, labextensions
    with zipfile.ZipFile(wheel) as built:
        assert any(name.endswith("labextensions/paddle-nbext-labextension/package.json") for name in built.namelist())
    assert "node" not in run_in(notebook, "sh", "-c", "command -v node npm || true")
    servers = run_in(notebook, "sh", "-c", "jupyter server extension list 2>&1")
    assert any("paddle_nbext_server" in each and "enabled" in each for each in servers.splitlines()), servers


def test_every_notebook_of_the_image_uses_the_kubernetes_backend(notebook: Image) -> None:
    """The image's own server config; the site's settings come from the ConfigMap the hub mounts
    at /etc/jupyter, which the image leaves empty so that the mount hides nothing of it."""
    started = run_in(notebook, "sh", "-c", "jupyter server --show-config 2>&1")  # loads the extensions, serves nothing
    assert "paddle-nbext: kubernetes backend" in started, started
    assert run_in(notebook, "sh", "-c", "ls -A /etc/jupyter/jupyter_server_config.d 2>/dev/null || true").strip() == ""
