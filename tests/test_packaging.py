"""What `pip install` delivers: the wheel enables the server extension and ships the panel's
prebuilt assets, so installing never needs node (DESIGN §2, jupyter-build.md)."""
from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> zipfile.ZipFile:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(ROOT)],
        check=True,
        cwd=out,
    )
    (path,) = out.glob("paddle_nbext-*.whl")
    return zipfile.ZipFile(path)


def test_wheel_enables_the_server_extension(wheel: zipfile.ZipFile) -> None:
    names = wheel.namelist()
    (config,) = [n for n in names if n.endswith("etc/jupyter/jupyter_server_config.d/paddle_nbext_server.json")]
    assert json.loads(wheel.read(config)) == {"ServerApp": {"jpserver_extensions": {"paddle_nbext_server": True}}}


def test_wheel_installs_server_side_under_its_own_name(wheel: zipfile.ZipFile) -> None:
    names = wheel.namelist()
    assert "paddle_nbext_server/__init__.py" in names
    assert "paddle_nbext_server/runtime/launcher.py" in names
    assert "paddle_nbext_server/openapi.json" in names
    assert not any(n.startswith("server_ext/") for n in names), "no generic top-level package may be installed"
    # Every module of the source tree is in the wheel (a forgotten sub-package breaks installs
    # that are not editable, while development never notices).
    for source_dir, package in (("server_ext/paddle_nbext_server", "paddle_nbext_server"), ("paddle_nbext", "paddle_nbext")):
        for module in (ROOT / source_dir).rglob("*.py"):
            if "labextension" in module.parts:
                continue
            expected = f"{package}/{module.relative_to(ROOT / source_dir).as_posix()}"
            assert expected in names, f"{expected} is missing from the wheel"


def test_wheel_ships_prebuilt_panel_assets(wheel: zipfile.ZipFile) -> None:
    if not (ROOT / "paddle_nbext" / "labextension" / "package.json").exists():
        pytest.fail("the panel is not built: run scripts/setup.sh (npm ci && npm run build:prod in labextension/)")
    names = wheel.namelist()
    prefix = "share/jupyter/labextensions/paddle-nbext-labextension/"
    shipped = [n for n in names if prefix in n]
    assert any(n.endswith(prefix + "package.json") for n in shipped)
    assert any(n.endswith(prefix + "install.json") for n in shipped)
    assert any("/static/" in n and n.endswith(".js") for n in shipped)
