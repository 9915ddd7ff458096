"""The job runtime bundle (`runtime_files.py`) holds every module of `runtime/`, and every module a
bundle file imports by its plain name: a job runs only what its bundle holds, so a module split
off without being added would break every job (on Kubernetes from the release's ConfigMap, locally
from the job's own copy) while the tests that import the installed package pass.  The local
backend's forked launchers check the same siblings (`forked.BUNDLE_SIBLINGS`)."""

from __future__ import annotations

import ast
from pathlib import Path

from paddle_nbext_server.backends.local.master import forked
from paddle_nbext_server.jobfiles import runtime_files

RUNTIME = Path(runtime_files.__file__).parent / "runtime"


def plain_imports(text: str) -> set[str]:
    """The top-level module names a file imports (`import x`, `from x import y`), wherever."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
    return found


def test_every_runtime_module_is_in_the_bundle() -> None:
    modules = {path.name for path in RUNTIME.glob("*.py") if path.name != "__init__.py"}
    shipped = {name.rsplit("/", 1)[-1] for name in runtime_files.NAMES}
    assert modules - shipped == set()


def test_every_module_a_bundle_file_imports_by_name_is_beside_it() -> None:
    bundle = runtime_files.read_bundle()
    for directory in ("", f"{runtime_files.PYLIB}/"):
        files = {name[len(directory) :] for name in bundle if name.startswith(directory) and "/" not in name[len(directory) :]}
        names = {file.removesuffix(".py") for file in files}
        for file in files:
            wanted = {name for name in plain_imports(bundle[directory + file]) if name in names or (RUNTIME / f"{name}.py").is_file()}
            assert wanted <= names, f"{directory}{file} imports {sorted(wanted - names)}, which its bundle directory lacks"


def test_the_forked_launcher_checks_every_sibling_the_launcher_imports() -> None:
    bundle = runtime_files.read_bundle()
    names = {name.removesuffix(".py") for name in bundle if "/" not in name}
    reached: set[str] = set()
    todo = ["launcher"]
    while todo:
        module = todo.pop()
        for name in plain_imports(bundle[f"{module}.py"]) & names:
            if name not in reached:
                reached.add(name)
                todo.append(name)
    assert set(forked.BUNDLE_SIBLINGS) == reached - {"launcher"}
