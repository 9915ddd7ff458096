"""Compiled bytecode for a job's runtime bundle, written beside it at submit.

Every local job gets its own copy of the runtime bundle (`runtime_files.write_bundle`), so
whatever imports a copy first compiles it: the job master, before it can fork its first launcher
(`master.forked`), and every trainer for `pylib/paddle_nbext_job.py` — about 25 ms of the master's start
on a 2-core machine, on the way to the pservers serving.  The server compiles each bundle file
once per process into a checked-hash `.pyc` (PEP 552: it stays valid for any copy of the same
source, whatever the copy's mtime) and writes it into the job's `runtime/__pycache__/` (and
`runtime/pylib/__pycache__/`) under the tag of its own interpreter.  Python hashes the source at
every import and compiles it again when it differs, so a `.pyc` never runs code that is not in the
file beside it; another interpreter (`c.LocalBackend.python` of another version) looks for its own
tag and compiles as before.  Written whatever `PYTHONDONTWRITEBYTECODE` says (the job's dir is
paddle-nbext's own and goes with the job); not written under `PYTHONPYCACHEPREFIX`, which would put
it outside the job's dir.  A file that cannot be compiled or written is left to be compiled at
import, as before.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import py_compile
import sys
import tempfile
import threading
from pathlib import Path

#: (file name, source hash) -> the checked-hash .pyc of that source, for this interpreter.
_COMPILED: dict[tuple[str, bytes], bytes] = {}
_LOCK = threading.Lock()


def _pyc(source: Path, text: bytes) -> bytes:
    key = (source.name, importlib.util.source_hash(text))
    with _LOCK:
        cached = _COMPILED.get(key)
    if cached is not None:
        return cached
    with tempfile.TemporaryDirectory(prefix="paddle-nbext-pyc-") as scratch:
        target = os.path.join(scratch, "compiled.pyc")
        py_compile.compile(str(source), cfile=target, doraise=True, invalidation_mode=py_compile.PycInvalidationMode.CHECKED_HASH)
        compiled = Path(target).read_bytes()
    with _LOCK:
        _COMPILED[key] = compiled
    return compiled


def prepare() -> None:
    """Compile the installed bundle files now (a started backend does, in a thread), so that
    the first submit only writes them."""
    from ...jobfiles import runtime_files

    for name in runtime_files.NAMES:
        with contextlib.suppress(OSError, py_compile.PyCompileError, ValueError):
            source = runtime_files.source_path(name)
            _pyc(source, source.read_bytes())


def write_bytecode(runtime: Path) -> list[Path]:
    """Write the `.pyc` of every `.py` in the bundle dir `runtime` and its `pylib/`; returns the
    files written (none under `PYTHONPYCACHEPREFIX`)."""
    if sys.pycache_prefix:
        return []
    written: list[Path] = []
    for source in sorted([*runtime.glob("*.py"), *runtime.glob("pylib/*.py")]):
        with contextlib.suppress(OSError, py_compile.PyCompileError, ValueError):
            compiled = _pyc(source, source.read_bytes())
            target = Path(importlib.util.cache_from_source(str(source)))
            target.parent.mkdir(exist_ok=True)
            target.write_bytes(compiled)
            written.append(target)
    return written
