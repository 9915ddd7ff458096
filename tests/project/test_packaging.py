"""What `pip install` delivers, built as a user builds it (docs/architecture.md, "Packages and dependency direction"): from a clean copy of the
tree (no node_modules, no prebuilt assets) the package build runs the panel's npm build, and the
wheel carries the panel, its install.json and the file that enables the server extension.  The
sdist carries the panel's sources and built assets, so a wheel built from it needs no Node; stale
assets are rebuilt, never shipped; and without Node and assets the build stops with one sentence.
`python -m build` makes both from a clone whose panel is built, and both install with no Node,
bringing the panel to where JupyterLab finds it (the notebook image installs that wheel).

Nothing here builds inside the working tree: other work may be running there."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest
from packaging.version import Version

import paddle_nbext

ROOT = Path(__file__).resolve().parents[2]
LAB_PREFIX = "share/jupyter/labextensions/paddle-nbext-labextension/"
NEEDS_NODE = (
    "paddle-nbext: building the JupyterLab panel needs Node.js 20+ and npm on PATH "
    "(or prebuilt, up-to-date assets in paddle_nbext/labextension); install Node.js or install "
    "paddle-nbext from a wheel"
)
SERVER_ENABLE = {"ServerApp": {"jpserver_extensions": {"paddle_nbext_server": True}}}


def copy_clean_tree(dest: Path) -> Path:
    """The files a fresh clone would have, with everyone's current edits: tracked files plus
    untracked files git does not ignore (so no node_modules, no built assets, no .venv)."""
    listing = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        check=True,
        capture_output=True,
    ).stdout.decode()
    for name in filter(None, listing.split("\0")):
        source = ROOT / name
        if source.is_file():  # a tracked file deleted in the working tree is gone in a clone too
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / name)
    return dest


def build_env() -> dict[str, str]:
    """The build's environment; npm may answer from its cache without asking the registry."""
    return {**os.environ, "npm_config_prefer_offline": "true", "PIP_NO_INPUT": "1"}


def env_without_node() -> dict[str, str]:
    """PATH holding only this interpreter's folder, which has no node and no npm."""
    path = str(Path(sys.executable).parent)
    assert shutil.which("node", path=path) is None and shutil.which("npm", path=path) is None
    return {**build_env(), "PATH": path}


def pip_wheel(source: Path, out: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """`pip wheel` as `pip install .` builds: in an isolated build environment, in the tree."""
    return subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-w", str(out), str(source)],
        cwd=out,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )


def the_wheel(out: Path) -> zipfile.ZipFile:
    (path,) = out.glob("paddle_nbext-*.whl")
    return zipfile.ZipFile(path)


def assert_ships_the_panel(wheel: zipfile.ZipFile) -> None:
    names = wheel.namelist()
    (manifest,) = [n for n in names if n.endswith(LAB_PREFIX + "package.json")]
    built = json.loads(wheel.read(manifest))
    load = built["jupyterlab"]["_build"]["load"]
    assert re.fullmatch(r"static/remoteEntry\.[0-9a-f]+\.js", load)
    assert any(n.endswith(LAB_PREFIX + load) for n in names), f"{load} named by package.json is missing"
    (install,) = [n for n in names if n.endswith(LAB_PREFIX + "install.json")]
    assert json.loads(wheel.read(install))["packageName"] == "paddle-nbext"
    assert not any(n.endswith("build-inputs.json") for n in names), "the build stamp is not an asset"
    assert not any(n.startswith("paddle_nbext/labextension/") for n in names), "assets belong in share/jupyter"


def npm_semver(version: str) -> str:
    """The npm form of a PEP 440 version: 1.2.0 -> 1.2.0, 1.2.0rc1 -> 1.2.0-rc.1, 1.2.0.dev3 -> 1.2.0-dev.3."""
    parsed = Version(version)
    assert not parsed.post and not parsed.local and parsed.epoch == 0, f"{version} has no npm form"
    release = ".".join(str(part) for part in (*parsed.release, 0, 0)[:3])
    if parsed.pre is not None:
        label = {"a": "alpha", "b": "beta", "rc": "rc"}[parsed.pre[0]]
        return f"{release}-{label}.{parsed.pre[1]}" + (f".dev.{parsed.dev}" if parsed.dev is not None else "")
    return f"{release}-dev.{parsed.dev}" if parsed.dev is not None else release


def test_npm_semver_form() -> None:
    assert npm_semver("0.1.0") == "0.1.0"
    assert npm_semver("1.2") == "1.2.0"
    assert npm_semver("1.2.0rc1") == "1.2.0-rc.1"
    assert npm_semver("1.2.0a2") == "1.2.0-alpha.2"
    assert npm_semver("1.2.0.dev3") == "1.2.0-dev.3"


def test_panel_version_is_the_package_version() -> None:
    """One version source (paddle_nbext.__version__); the panel's package.json says the same."""
    panel = json.loads((ROOT / "labextension" / "package.json").read_text(encoding="utf-8"))
    assert panel["version"] == npm_semver(paddle_nbext.__version__)


def test_build_without_node_or_assets_fails_with_one_sentence(tmp_path: Path) -> None:
    tree = copy_clean_tree(tmp_path / "tree")
    out = tmp_path / "out"
    out.mkdir()
    result = pip_wheel(tree, out, env_without_node())
    output = result.stdout + result.stderr
    assert result.returncode != 0, output
    assert output.count(NEEDS_NODE) == 1, output
    assert not list(out.glob("*.whl")), "a wheel without its panel was produced"


@dataclass(frozen=True)
class Built:
    """A clean copy of the tree after `pip wheel` built the panel in it, and that wheel."""

    tree: Path
    wheel: zipfile.ZipFile


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    tree = copy_clean_tree(tmp_path_factory.mktemp("clean") / "tree")
    out = tmp_path_factory.mktemp("wheel")
    result = pip_wheel(tree, out, build_env())
    assert result.returncode == 0, result.stdout + result.stderr
    return Built(tree, the_wheel(out))


@pytest.fixture(scope="module")
def sdist(built: Built, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("sdist")
    result = subprocess.run(
        [sys.executable, "-m", "build", "--sdist", "-o", str(out), str(built.tree)],
        env=env_without_node(),  # the assets are up to date: making the sdist needs no Node
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    (path,) = out.glob("paddle_nbext-*.tar.gz")
    return path


@pytest.mark.slow
def test_wheel_from_a_clean_tree_ships_the_panel(built: Built) -> None:
    assert_ships_the_panel(built.wheel)
    (manifest,) = [n for n in built.wheel.namelist() if n.endswith(LAB_PREFIX + "package.json")]
    assert json.loads(built.wheel.read(manifest))["version"] == npm_semver(paddle_nbext.__version__)


@pytest.mark.slow
def test_wheel_enables_the_server_extension(built: Built) -> None:
    names = built.wheel.namelist()
    (config,) = [n for n in names if n.endswith("etc/jupyter/jupyter_server_config.d/paddle_nbext_server.json")]
    assert json.loads(built.wheel.read(config)) == SERVER_ENABLE


@pytest.mark.slow
def test_wheel_installs_server_side_under_its_own_name(built: Built) -> None:
    names = built.wheel.namelist()
    assert "paddle_nbext_server/__init__.py" in names
    assert "paddle_nbext_server/runtime/launcher.py" in names
    assert "paddle_nbext_server/openapi.json" in names
    assert {"paddle_nbext/py.typed", "paddle_nbext_server/py.typed"} <= set(names), "both packages are marked typed (PEP 561)"
    assert not any(n.startswith("server_ext/") for n in names), "no generic top-level package may be installed"
    # Every module of the source tree is in the wheel (a forgotten sub-package breaks installs
    # that are not editable, while development never notices).
    for source_dir, package in (
        ("server_ext/paddle_nbext_server", "paddle_nbext_server"),
        ("paddle_nbext", "paddle_nbext"),
    ):
        for module in (built.tree / source_dir).rglob("*.py"):
            expected = f"{package}/{module.relative_to(built.tree / source_dir).as_posix()}"
            assert expected in names, f"{expected} is missing from the wheel"


@pytest.mark.slow
def test_sdist_carries_panel_sources_and_built_assets(sdist: Path) -> None:
    with tarfile.open(sdist) as archive:
        names = {name.split("/", 1)[1] for name in archive.getnames() if "/" in name}
    for needed in (
        "labextension/package.json",
        "labextension/package-lock.json",
        "labextension/tsconfig.json",
        "labextension/src/index.ts",
        "labextension/style/index.css",
        "labextension/schema/plugin.json",
        "paddle_nbext/labextension/package.json",
        "paddle_nbext/labextension/build-inputs.json",
        "install.json",
        "jupyter-config/jupyter_server_config.d/paddle_nbext_server.json",
    ):
        assert needed in names, f"{needed} is missing from the sdist"
    assert any(re.fullmatch(r"paddle_nbext/labextension/static/remoteEntry\.[0-9a-f]+\.js", n) for n in names)
    assert not any(n.startswith(("labextension/node_modules/", "labextension/lib/")) for n in names)


@pytest.mark.slow
def test_wheel_from_the_sdist_needs_no_node(sdist: Path, tmp_path: Path) -> None:
    result = pip_wheel(sdist, tmp_path, env_without_node())
    assert result.returncode == 0, result.stdout + result.stderr
    wheel = the_wheel(tmp_path)
    assert_ships_the_panel(wheel)
    names = wheel.namelist()
    assert any(n.endswith("etc/jupyter/jupyter_server_config.d/paddle_nbext_server.json") for n in names)


@pytest.mark.slow
def test_stale_assets_are_rebuilt_never_shipped(built: Built, tmp_path: Path) -> None:
    """Built assets beside the sources they were built from are used as they are (no Node);
    after a source edit they are stale, so without Node the build refuses instead."""
    tree = copy_clean_tree(tmp_path / "tree")
    shutil.copytree(built.tree / "paddle_nbext" / "labextension", tree / "paddle_nbext" / "labextension")
    current = tmp_path / "current"
    current.mkdir()
    result = pip_wheel(tree, current, env_without_node())
    assert result.returncode == 0, result.stdout + result.stderr
    assert_ships_the_panel(the_wheel(current))

    with (tree / "labextension" / "src" / "index.ts").open("a", encoding="utf-8") as source:
        source.write("// edited after the build\n")
    stale = tmp_path / "stale"
    stale.mkdir()
    result = pip_wheel(tree, stale, env_without_node())
    output = result.stdout + result.stderr
    assert result.returncode != 0, output
    assert output.count(NEEDS_NODE) == 1, output
    assert not list(stale.glob("*.whl"))


def pip_install_prefix(source: Path, prefix: Path) -> subprocess.CompletedProcess[str]:
    """`pip install` of a wheel or sdist into `prefix` (its own dependencies left out) with no
    Node on PATH, as a user without Node installs the release.  `--ignore-installed`: without it
    pip would first uninstall the test environment's own (editable) paddle-nbext."""
    return subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "--no-compile", "--ignore-installed", "--prefix", str(prefix), str(source)],
        env=env_without_node(),
        capture_output=True,
        text=True,
        check=False,
    )


def assert_installed_the_panel(prefix: Path) -> None:
    """Where JupyterLab and Jupyter Server look under the install prefix: the panel's assets and the
    file that enables the server extension."""
    assets = prefix / LAB_PREFIX
    built = json.loads((assets / "package.json").read_text(encoding="utf-8"))
    assert (assets / built["jupyterlab"]["_build"]["load"]).is_file(), "the panel's entry point is not installed"
    enable = prefix / "etc/jupyter/jupyter_server_config.d/paddle_nbext_server.json"
    assert json.loads(enable.read_text(encoding="utf-8")) == SERVER_ENABLE


@pytest.mark.slow
def test_python_m_build_makes_a_release_that_installs_with_no_node(built: Built, tmp_path: Path) -> None:
    """`python -m build` in a clone whose panel is built (what a release or the notebook image's
    Dockerfile starts from): the sdist, and the wheel built from that sdist, with no Node on
    PATH; the wheel installs with no Node and brings the panel."""
    out = tmp_path / "dist"
    result = subprocess.run(
        [sys.executable, "-m", "build", "-o", str(out), str(built.tree)],
        env=env_without_node(),
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    (wheel,) = out.glob("paddle_nbext-*.whl")
    assert len(list(out.glob("paddle_nbext-*.tar.gz"))) == 1
    assert_ships_the_panel(zipfile.ZipFile(wheel))
    installed = pip_install_prefix(wheel, tmp_path / "prefix")
    assert installed.returncode == 0, installed.stdout + installed.stderr
    assert_installed_the_panel(tmp_path / "prefix")


@pytest.mark.slow
def test_the_sdist_installs_with_no_node_and_brings_the_panel(sdist: Path, tmp_path: Path) -> None:
    installed = pip_install_prefix(sdist, tmp_path / "prefix")
    assert installed.returncode == 0, installed.stdout + installed.stderr
    assert_installed_the_panel(tmp_path / "prefix")
