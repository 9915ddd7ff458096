"""The bytecode the server writes beside a job's runtime bundle (`backends/local/bytecode.py`):
checked-hash `.pyc` files that the job's interpreter loads instead of compiling the bundle again,
and never runs once the source beside it changed."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

from paddle_nbext_server.backends.local import bytecode
from paddle_nbext_server.jobfiles import runtime_files

#: The `.pyc` flags word of a checked-hash file (PEP 552): hash-based, checked.
CHECKED_HASH = 0b11


def bundle(tmp_path: Path) -> Path:
    runtime = tmp_path / "runtime"
    runtime_files.write_bundle(runtime)
    return runtime


def test_every_bundle_file_gets_a_checked_hash_pyc_for_this_interpreter(tmp_path: Path) -> None:
    runtime = bundle(tmp_path)
    written = bytecode.write_bytecode(runtime)
    sources = sorted([*runtime.glob("*.py"), *runtime.glob("pylib/*.py")])
    assert sorted(written) == sorted(Path(importlib.util.cache_from_source(str(source))) for source in sources)
    for pyc in written:
        header = pyc.read_bytes()[:16]
        assert header[:4] == importlib.util.MAGIC_NUMBER
        assert int.from_bytes(header[4:8], "little") == CHECKED_HASH


def test_the_job_loads_the_written_bytecode_and_never_a_stale_one(tmp_path: Path) -> None:
    runtime = bundle(tmp_path)
    bytecode.write_bytecode(runtime)
    env = {"PATH": "/usr/bin:/bin", "PYTHONDONTWRITEBYTECODE": "1"}
    code = f"import sys; sys.path.insert(0, {str(runtime)!r}); import launcher, contract; print(getattr(contract, 'EDITED', 'no'))"
    loaded = subprocess.run([sys.executable, "-v", "-c", code], env=env, capture_output=True, text=True, timeout=60, check=True)
    assert f"code object from '{runtime}/__pycache__/launcher." in loaded.stderr
    assert loaded.stdout.strip() == "no"
    with open(runtime / "contract.py", "a", encoding="utf-8") as source:
        source.write("\nEDITED = 'yes'\n")
    edited = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60, check=True)
    assert edited.stdout.strip() == "yes"


def test_nothing_is_written_where_a_pycache_prefix_puts_bytecode_elsewhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    runtime = bundle(tmp_path)
    monkeypatch.setattr(sys, "pycache_prefix", str(tmp_path / "elsewhere"))
    assert bytecode.write_bytecode(runtime) == []
    assert not list(tmp_path.rglob("*.pyc"))


def test_the_installed_files_compiled_at_start_serve_every_later_job(tmp_path: Path) -> None:
    bytecode.prepare()
    first = bytecode.write_bytecode(bundle(tmp_path / "a"))
    second = bytecode.write_bytecode(bundle(tmp_path / "b"))
    assert [pyc.read_bytes() for pyc in first] == [pyc.read_bytes() for pyc in second]
