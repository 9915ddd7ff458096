"""Build entry for paddle-nbext.

`server_ext/paddle_nbext_server/` is the server package (folder = import name), so no generic
top-level name lands in site-packages.

The package build builds the JupyterLab panel, as JupyterLab extensions do: `build` (which
`pip install .`, editable installs and wheels run) and `sdist` first run `build_labextension`,
which runs `npm ci` + `npm run build:prod` in `labextension/` unless the assets in
`paddle_nbext/labextension/` are up to date, then checks the targets the panel needs exist.
"Up to date" is decided by content, not by file times: the build writes a stamp holding a digest
of every input under `labextension/` and of the built `package.json`, so a wheel built from an
sdist (which carries sources, assets and stamp) needs no Node, while an edited source, a dev
build or assets from elsewhere are rebuilt.  Without Node the build stops with one sentence;
a wheel without its panel is never produced.  The assets and the file that enables the server
extension are installed as data files.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
from collections.abc import Callable, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any, ClassVar

from setuptools import Command, find_packages, setup
from setuptools.command.build import build
from setuptools.command.sdist import sdist
from setuptools.errors import ExecError, PlatformError

HERE = Path(__file__).resolve().parent
LAB_NAME = "paddle-nbext-labextension"
LAB_SOURCE = HERE / "labextension"
LAB_BUILD = HERE / "paddle_nbext" / "labextension"
LAB_TARGET = f"share/jupyter/labextensions/{LAB_NAME}"
STAMP = LAB_BUILD / "build-inputs.json"
# Files in the build folder that are not assets: the stamp, and the install.json that pip writes
# through the symlink `jupyter-builder develop` makes (the shipped one is the top-level file).
NOT_ASSETS = frozenset({STAMP.name, "install.json"})
# Top-level entries of labextension/ that the build writes or caches, never reads as sources.
GENERATED = frozenset({"node_modules", "lib", "tsconfig.tsbuildinfo", ".eslintcache"})
NODE_MAJOR = 20
NEEDS_NODE = (
    f"paddle-nbext: building the JupyterLab panel needs Node.js {NODE_MAJOR}+ and npm on PATH "
    "(or prebuilt, up-to-date assets in paddle_nbext/labextension); install Node.js or install "
    "paddle-nbext from a wheel"
)


def lab_inputs() -> list[Path]:
    """Every file the panel build reads (sources, styles, schema, npm and tsc config), sorted."""
    files: list[Path] = []
    for entry in sorted(LAB_SOURCE.iterdir()):
        if entry.name in GENERATED:
            continue
        candidates = sorted(entry.rglob("*")) if entry.is_dir() else [entry]
        files.extend(p for p in candidates if p.is_file() and "node_modules" not in p.parts)
    return files


def file_digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def inputs_digest() -> str:
    """One digest over the inputs' paths and contents: equal digests mean an equal build."""
    digest = hashlib.sha256()
    for path in lab_inputs():
        digest.update(path.relative_to(LAB_SOURCE).as_posix().encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()


def built_entry() -> Path | None:
    """The remoteEntry.*.js the built package.json loads, when both exist."""
    manifest = LAB_BUILD / "package.json"
    if not manifest.is_file():
        return None
    load = json.loads(manifest.read_text(encoding="utf-8")).get("jupyterlab", {}).get("_build", {}).get("load")
    if not isinstance(load, str) or not re.fullmatch(r"static/remoteEntry\.[0-9a-f]+\.js", load):
        return None
    entry = LAB_BUILD / load
    return entry if entry.is_file() else None


def current_stamp() -> dict[str, str]:
    return {"inputs": inputs_digest(), "package.json": file_digest(LAB_BUILD / "package.json")}


def assets_up_to_date() -> bool:
    """True when the built assets are complete and were built from exactly today's inputs."""
    if built_entry() is None or not STAMP.is_file():
        return False
    try:
        recorded = json.loads(STAMP.read_text(encoding="utf-8"))
    except ValueError:
        return False
    return bool(recorded == current_stamp())


def node_is_usable() -> bool:
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        return False
    version = subprocess.run([node, "--version"], capture_output=True, text=True, check=False).stdout
    match = re.match(r"v(\d+)\.", version.strip())
    return match is not None and int(match.group(1)) >= NODE_MAJOR


def node_modules_current() -> bool:
    """npm's own record of the last install is newer than what it installed from."""
    installed = LAB_SOURCE / "node_modules" / ".package-lock.json"
    if not installed.is_file():
        return False
    stamp = installed.stat().st_mtime
    return all(stamp >= (LAB_SOURCE / name).stat().st_mtime for name in ("package.json", "package-lock.json"))


def builder_bin_dir() -> str:
    """Where the `jupyter-builder` command that `npm run build:prod` calls lives."""
    try:
        files = metadata.distribution("jupyter_builder").files or []
    except metadata.PackageNotFoundError:
        files = []
    for file in files:
        if Path(str(file)).name in ("jupyter-builder", "jupyter-builder.exe"):
            return os.path.dirname(os.path.normpath(file.locate()))
    found = shutil.which("jupyter-builder")
    if found is None:
        raise PlatformError(
            "paddle-nbext: building the JupyterLab panel needs the jupyter_builder package "
            "(a build requirement in pyproject.toml); build with build isolation or install it"
        )
    return str(Path(found).parent)


def run_npm(args: list[str], env: dict[str, str]) -> None:
    npm = shutil.which("npm", path=env["PATH"])
    if npm is None:
        raise PlatformError(NEEDS_NODE)
    result = subprocess.run([npm, *args], cwd=LAB_SOURCE, env=env, check=False)
    if result.returncode != 0:
        raise ExecError(f"paddle-nbext: `npm {' '.join(args)}` in labextension/ exited with {result.returncode} (output above)")


def build_panel() -> None:
    """npm ci (when node_modules is not from today's lockfile) + npm run build:prod, checked."""
    if not node_is_usable():
        raise PlatformError(NEEDS_NODE)
    env = {**os.environ, "PATH": os.pathsep.join([builder_bin_dir(), os.environ.get("PATH", "")])}
    if not node_modules_current():
        run_npm(["ci", "--no-audit", "--no-fund", "--loglevel=error"], env)
    run_npm(["run", "build:prod"], env)
    if built_entry() is None:
        raise ExecError(
            "paddle-nbext: `npm run build:prod` wrote no paddle_nbext/labextension/package.json loading a static/remoteEntry.*.js"
        )
    STAMP.write_text(json.dumps(current_stamp(), indent=2) + "\n", encoding="utf-8")


def asset_data_files() -> list[tuple[str, list[str]]]:
    """Map every built asset to share/jupyter/labextensions/<name>/..., keeping folders."""
    grouped: dict[str, list[str]] = {LAB_TARGET: ["install.json"]}
    for path in sorted(LAB_BUILD.rglob("*")):
        if path.is_file() and not (path.parent == LAB_BUILD and path.name in NOT_ASSETS):
            rel_dir = path.parent.relative_to(LAB_BUILD).as_posix()
            target = LAB_TARGET if rel_dir == "." else f"{LAB_TARGET}/{rel_dir}"
            grouped.setdefault(target, []).append(path.relative_to(HERE).as_posix())
    return sorted(grouped.items())


# What is installed outside site-packages; build_labextension appends the panel's assets once built.
DATA_FILES: list[tuple[str, Sequence[str]]] = [
    ("etc/jupyter/jupyter_server_config.d", ["jupyter-config/jupyter_server_config.d/paddle_nbext_server.json"]),
]


class build_labextension(Command):
    """Makes sure the panel's assets are built from today's sources and installs them as data."""

    description = "build the JupyterLab panel from labextension/ when its assets are missing or stale"
    user_options: ClassVar[list[tuple[str, str | None, str]]] = []

    def initialize_options(self) -> None:
        self.added = False
        # Set by setuptools' editable_wheel on every build sub-command that has it.
        self.editable_mode = False

    def finalize_options(self) -> None:
        pass

    def run(self) -> None:
        if assets_up_to_date():
            print("paddle-nbext: the JupyterLab panel's assets are up to date")
        else:
            build_panel()
        if not self.added:
            # The distribution's own list, which install_data reads later (wheel, editable, sdist).
            DATA_FILES.extend(asset_data_files())
            self.added = True
        if self.editable_mode:
            # setuptools' editable wheels skip data files (it looks for `has_data`, which no
            # Distribution has); install them into the wheel's .data so `pip install -e .` enables
            # the server extension and places the panel as `pip install .` does.  run_command
            # runs a command once, so a setuptools that fixes this does not copy twice.
            self.run_command("install_data")

    def get_source_files(self) -> list[str]:
        """What sdist carries for the panel: its sources and the built assets with their stamp."""
        assets = [HERE / source for _, sources in asset_data_files() for source in sources]
        return [p.relative_to(HERE).as_posix() for p in [*lab_inputs(), *assets, STAMP] if p.is_file()]

    def get_outputs(self) -> list[str]:
        return []

    def get_output_mapping(self) -> dict[str, str]:
        return {}


class build_with_panel(build):
    sub_commands: ClassVar[list[tuple[str, Callable[[Any], bool] | None]]] = [
        ("build_labextension", None),
        *build.sub_commands,
    ]


class sdist_with_panel(sdist):
    """An sdist always carries up-to-date assets, so installing from it needs no Node."""

    def run(self) -> None:
        self.run_command("build_labextension")
        super().run()


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
        "paddle_nbext": ["py.typed"],  # typed packages (PEP 561): mypy users see our annotations
        "paddle_nbext_server": ["openapi.json", "py.typed"],
        "paddle_nbext_server.runtime": ["*.py"],
    },
    # The sdist lists paddle_nbext/labextension/; it belongs in share/jupyter, not site-packages.
    include_package_data=False,
    data_files=DATA_FILES,
    cmdclass={
        "build": build_with_panel,
        "build_labextension": build_labextension,
        "sdist": sdist_with_panel,
    },
    zip_safe=False,
)
