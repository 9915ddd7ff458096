"""A job's own requirements.txt on the real node (issue 25): the environment is built in the job's
image by the replicas' launchers, once (two jobs submitted at once, pods on one node sharing the
home), kept in the home under ``.paddle-jobs/envs`` and reused; uv where the image has it, pip
when the site says so; a requirement the index cannot satisfy fails the job in the installer's
words before any user code runs.

The index is a directory of tiny wheels made here, in the user's home (``pip_find_links`` with
``pip_no_index``, as an air-gapped site sets them), which every pod sees at the same path.  The
image is the Paddle image plus pip and uv (``installer_image.py``).  Modelled on the local
backend's tests (tests/paddle_jobs/test_local_requirements.py).
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from support.controlplane.installer_image import installers_image
from support.wheels import make_wheel

from cluster.k8s_objects import present
from cluster.test_real_node_jobs import Notebook, describe, open_notebook

if TYPE_CHECKING:
    from cluster.conftest import RealCluster

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(1200)]

USES_TINYTOK = '''"""Needs tinytok, which only the job's requirements provide; Paddle is the image's."""
import paddle
import tinytok

print("tinytok", tinytok.VERSION, "tokens", tinytok.tokens("a b c"), flush=True)
print("paddle from", paddle.__file__, flush=True)
'''


@pytest.fixture(scope="module")
def book(real_cluster: RealCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Notebook]:
    """A notebook server whose jobs run in the installers image, with the wheels in the home."""
    yield from installers_notebook(real_cluster, tmp_path_factory.mktemp("requirements-notebook-logs"))


def installers_notebook(real_cluster: RealCluster, log_dir: Path, home_for: Callable[[str], Path] | None = None) -> Iterator[Notebook]:
    """`open_notebook` with the installers image as the jobs' image and the wheels in the home
    (also the CephFS module's, with its `home_for`)."""
    site = real_cluster.node
    image = installers_image()
    present(site.node, "the real node (the suite's own control plane)")
    site.import_image(image)

    def with_wheels(home: Path, settings: dict[str, Any]) -> None:
        wheels = home / "wheels"
        make_wheel(wheels, "tinytok", "1.0", requires=("tinyutil>=1",), body="def tokens(text):\n    return text.split()\n")
        make_wheel(wheels, "tinyutil", "1.2")
        (home / "examples" / "uses_tinytok.py").write_text(USES_TINYTOK)
        for path in [wheels, *wheels.iterdir(), home / "examples" / "uses_tinytok.py"]:
            os.lchown(path, site.uid, site.gid)
        settings["PaddleNbext"].update(pip_no_index=True, pip_find_links=[str(wheels)])
        settings["KubernetesBackend"]["default_image"] = image.reference

    yield from open_notebook(real_cluster, log_dir, with_wheels, home_for)


def requirements(book: Notebook, folder: str, text: str) -> None:
    """A package of the user's: the example scripts plus `uses_tinytok.py` and `requirements.txt`."""
    target = book.home / folder
    if not target.exists():
        shutil.copytree(book.home / "examples", target)
        for path in [target, *target.rglob("*")]:
            os.lchown(path, book.cluster.node.uid, book.cluster.node.gid)
    book.write(f"{folder}/requirements.txt", text)


def environment(book: Notebook, name: str) -> dict[str, Any]:
    return dict(json.loads((book.home / ".paddle-jobs" / name / "logs" / "environment.json").read_text()))


def test_two_jobs_at_once_build_one_environment_with_uv_which_the_next_job_reuses(book: Notebook) -> None:
    requirements(book, "tok", "tinytok==1.0\n")
    for name in ("req-one", "req-two"):
        book.submit(name, trainer_package="tok", mode="collective", trainers=1, entry_point="python uses_tinytok.py")
    ends = [book.ended(name) for name in ("req-one", "req-two")]
    assert [end["phase"] for end in ends] == ["Succeeded", "Succeeded"], [describe(end) for end in ends]
    logs = [book.log(name) for name in ("req-one", "req-two")]
    assert all("tinytok 1.0 tokens ['a', 'b', 'c']" in log for log in logs), logs
    envs = book.home / ".paddle-jobs" / "envs"
    assert all(str(envs) not in next(line for line in log.splitlines() if line.startswith("paddle from")) for log in logs)
    statuses = [environment(book, name) for name in ("req-one", "req-two")]
    assert len({s["key"] for s in statuses}) == 1 and sorted(s["reused"] for s in statuses) == [False, True], statuses
    built = next(s for s in statuses if not s["reused"])
    assert built["installer"] == "uv", built
    info = json.loads((envs / built["key"] / "env.json").read_text())
    assert info["image"] == book.settings["KubernetesBackend"]["default_image"] and info["installed"] == ["tinytok==1.0", "tinyutil==1.2"]
    assert (envs / built["key"]).stat().st_uid == book.cluster.node.uid  # built as the user, in their home
    # The environment log of the job that built it is the installer's output, through the API.
    builder = "req-one" if statuses[0] is built else "req-two"
    answer = book.server.api("GET", f"jobs/{builder}/logs", params={"role": "environment"})
    assert answer.status_code == 200 and "tinytok" in answer.text, answer.text
    # A third job's dry run says the environment exists; it would install nothing.
    preview = book.server.api(
        "POST",
        "jobs",
        params={"dry_run": "true"},
        body={"job_name": "req-three", "trainer_package": "tok", "entry_point": "python uses_tinytok.py"},
    )
    assert preview.status_code == 200, preview.text
    assert preview.json()["plan"]["environment"]["environment"] == "exists", preview.json()["plan"]["environment"]


def test_a_requirement_the_index_cannot_satisfy_fails_the_job_before_user_code_in_the_installers_words(book: Notebook) -> None:
    requirements(book, "nosolution", "tinytok==9.9\n")
    book.submit(
        "req-bad", trainer_package="nosolution", mode="collective", trainers=2, entry_point="python uses_tinytok.py", max_restarts=2
    )
    ended = book.ended("req-bad")
    assert ended["phase"] == "Failed", describe(ended)
    message = ended["message"]
    assert message.startswith("The job's environment could not be built: ") and "tinytok==9.9" in message, message
    assert "(requirements.txt line 1)" in message, message
    assert all(r["restarts"] == 0 for r in ended["replicas"]), describe(ended)
    assert "paddle from" not in book.log("req-bad")


def test_the_pip_installer_builds_the_environment_when_the_site_chooses_it(book: Notebook) -> None:
    book.server.stop()
    book.settings["PaddleNbext"]["pip_installer"] = "pip"
    book.start_server()
    requirements(book, "withpip", "tinytok==1.0  # built by pip\n")
    book.submit("req-pip", trainer_package="withpip", mode="collective", trainers=1, entry_point="python uses_tinytok.py")
    ended = book.ended("req-pip")
    assert ended["phase"] == "Succeeded", describe(ended)
    assert "tinytok 1.0" in book.log("req-pip")
    status = environment(book, "req-pip")
    assert status["installer"] == "pip" and status["reused"] is False, status


def test_a_requirements_file_naming_paddle_is_refused_before_anything_is_created(book: Notebook) -> None:
    requirements(book, "ownpaddle", "paddlepaddle==2.6.2\n")
    answer = book.server.api("POST", "jobs", body={"job_name": "req-paddle", "trainer_package": "ownpaddle", "entry_point": "python x.py"})
    assert answer.status_code == 422, answer.text
    assert answer.json()["field"] == "requirements" and "requirements.txt line 1 names paddlepaddle==2.6.2" in answer.json()["message"]
    assert book.objects("req-paddle") == []
