"""scripts/set_version.py: the release's one command for the version, on copies of the files it
writes (the repository's own must agree, which tests/project/test_packaging.py checks too)."""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


def load_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("set_version", ROOT / "scripts" / "set_version.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def script(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """The script, pointed at copies of `__init__.py`, `package.json` and `package-lock.json`."""
    module = load_script()
    (tmp_path / "labextension").mkdir()
    shutil.copy(ROOT / "paddle_nbext" / "__init__.py", tmp_path / "__init__.py")
    for name in ("package.json", "package-lock.json"):
        shutil.copy(ROOT / "labextension" / name, tmp_path / "labextension" / name)
    monkeypatch.setattr(module, "INIT", tmp_path / "__init__.py")
    monkeypatch.setattr(module, "PANEL", tmp_path / "labextension")
    return module


def test_the_repository_agrees_with_itself(capsys: pytest.CaptureFixture[str]) -> None:
    assert load_script().main(["--check"]) == 0
    assert capsys.readouterr().out.startswith("paddle-nbext ")


def test_a_new_version_reaches_every_place_and_nothing_else(script: ModuleType, tmp_path: Path) -> None:
    lock_before = json.loads((tmp_path / "labextension" / "package-lock.json").read_text(encoding="utf-8"))
    assert script.main(["0.3.0rc1"]) == 0
    assert '__version__ = "0.3.0rc1"' in (tmp_path / "__init__.py").read_text(encoding="utf-8")
    assert set(script.panel_versions().values()) == {"0.3.0-rc.1"}
    lock_after = json.loads((tmp_path / "labextension" / "package-lock.json").read_text(encoding="utf-8"))
    lock_before["version"] = lock_before["packages"][""]["version"] = "0.3.0-rc.1"
    assert lock_after == lock_before  # the dependencies' entries are untouched


def test_npm_forms() -> None:
    npm_form = load_script().npm_form
    assert [npm_form(v) for v in ("0.2.0", "1.2", "1.2.0a2", "1.2.0b1", "1.2.0rc1", "1.2.0.dev3")] == [
        "0.2.0",
        "1.2.0",
        "1.2.0-alpha.2",
        "1.2.0-beta.1",
        "1.2.0-rc.1",
        "1.2.0-dev.3",
    ]


def test_a_version_npm_cannot_carry_is_refused_and_nothing_changes(
    script: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = (tmp_path / "__init__.py").read_text(encoding="utf-8")
    assert script.main(["0.2.0.post1"]) == 2
    assert "0.2.0.post1 has no npm form" in capsys.readouterr().err
    assert (tmp_path / "__init__.py").read_text(encoding="utf-8") == before


def test_a_panel_left_behind_fails_the_check_naming_the_file_and_the_command(
    script: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    package = tmp_path / "labextension" / "package.json"
    data = json.loads(package.read_text(encoding="utf-8"))
    data["version"] = "0.0.9"
    package.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    assert script.main(["--check"]) == 1
    err = capsys.readouterr().err
    assert "labextension/package.json says 0.0.9" in err
    assert "python scripts/set_version.py" in err
