"""The packages' import graph has no circles: every module can be understood (and imported) after
the ones it uses, and a change low in the graph never needs one high in it. Function-level imports
count too: a lazy import that closes a circle is still a circle for the reader."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = {"paddle_nbext": ROOT / "paddle_nbext", "paddle_nbext_server": ROOT / "server_ext" / "paddle_nbext_server"}


def modules() -> dict[str, Path]:
    found = {}
    for package, directory in PACKAGES.items():
        for path in directory.rglob("*.py"):
            if "labextension" in path.parts:
                continue
            parts = [package, *path.relative_to(directory).with_suffix("").parts]
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join(parts)] = path
    return found


def imports_of(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    used = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            used |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:
                used.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base)
    return {target for target in used if target in known and target != name}


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph[node]):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_import_circles() -> None:
    known = modules()
    graph = {name: imports_of(name, path, known) for name, path in known.items()}
    # A package's __init__ importing its own submodules is how packages export names; a submodule
    # importing a sibling through the package is not a circle through __init__'s body.
    for name in graph:
        graph[name] = {target for target in graph[name] if not (name.startswith(target + ".") and known[target].name == "__init__.py")}
    assert circles(graph) == []


def test_the_kernel_side_never_imports_the_server_side() -> None:
    known = modules()
    offenders = {
        name: sorted(t for t in imports_of(name, path, known) if t.startswith("paddle_nbext_server"))
        for name, path in known.items()
        if name.startswith("paddle_nbext.") or name == "paddle_nbext"
    }
    assert {name: targets for name, targets in offenders.items() if targets} == {}


def test_the_job_runtime_imports_only_the_contract_and_its_siblings() -> None:
    known = modules()
    runtime = {name: path for name, path in known.items() if name.startswith("paddle_nbext_server.runtime.")}
    # The model modules a job's bundle ships beside the runtime (runtime_files.py): stdlib only.
    bundled = {"paddle_nbext.model.contract", "paddle_nbext.model.paddle_noise", "paddle_nbext.model.progress_pattern"}
    allowed = bundled | {"paddle_nbext.model", "paddle_nbext"} | set(runtime) | {"paddle_nbext_server.runtime"}
    bad = {name: sorted(imports_of(name, path, known) - allowed) for name, path in runtime.items()}
    assert {name: targets for name, targets in bad.items() if targets} == {}


def test_the_shared_model_imports_only_itself() -> None:
    """`paddle_nbext.model` is what both sides share; it never reaches the kernel's UI modules."""
    known = modules()
    model = {name: path for name, path in known.items() if name.startswith("paddle_nbext.model")}
    shared = ("contract", "spec", "rules", "fields", "schema", "quantity", "status", "quota")
    assert set(model) >= {f"paddle_nbext.model.{name}" for name in shared}
    bad = {name: sorted(t for t in imports_of(name, path, known) if not t.startswith("paddle_nbext.model")) for name, path in model.items()}
    assert {name: targets for name, targets in bad.items() if targets} == {}


def test_the_server_side_imports_only_the_shared_model_of_the_kernel_package() -> None:
    """The package itself is allowed too: its `__init__` holds `__version__` and loads nothing."""
    known = modules()
    server = {name: path for name, path in known.items() if name.startswith("paddle_nbext_server")}
    kernel_only = {
        name: sorted(t for t in imports_of(name, path, known) if t.startswith("paddle_nbext.") and not t.startswith("paddle_nbext.model"))
        for name, path in server.items()
    }
    assert {name: targets for name, targets in kernel_only.items() if targets} == {}


def test_the_local_backend_is_split_by_the_process_that_runs_it() -> None:
    """`backends.local.master` is what runs in a job's detached master process: the server starts
    it by module name and only reads what it records, so no other module imports it; and the
    master uses of the local backend only what both processes share, never the server's side."""
    known = modules()
    local = "paddle_nbext_server.backends.local"
    master = f"{local}.master"
    shared = {f"{local}.{name}" for name in ("records", "record_json", "record_files", "usage", "pending_end", "processes", "ports")}
    assert shared <= set(known)

    def in_master(name: str) -> bool:
        return name == master or name.startswith(master + ".")

    into_master = {
        name: sorted(t for t in imports_of(name, path, known) if in_master(t)) for name, path in known.items() if not in_master(name)
    }
    assert {name: targets for name, targets in into_master.items() if targets} == {}
    server_side = {
        name: sorted(t for t in imports_of(name, path, known) if t.startswith(local + ".") and not in_master(t) and t not in shared)
        for name, path in known.items()
        if in_master(name)
    }
    assert {name: targets for name, targets in server_side.items() if targets} == {}


#: The server package's parts from the top floor down (docs/architecture.md, "Packages"): a part
#: imports only parts on lower floors (or its own); the generators are imported by nothing.
SERVER_FLOORS: list[set[str]] = [
    {"app"},
    {"handlers"},
    {"state"},
    {"feeds", "notify"},
    {"backends"},
    {"jobfiles"},
    {"runtime", "config", "config_files", "errors", "events", "identity", "credentials", "version"},
]


def server_part(name: str) -> str | None:
    parts = name.split(".")
    return parts[1] if parts[0] == "paddle_nbext_server" and len(parts) > 1 else None


def test_the_server_parts_stand_in_floors() -> None:
    known = modules()
    floor_of = {part: level for level, parts in enumerate(SERVER_FLOORS) for part in parts}
    parts = {server_part(name) for name in known} - {None}
    assert parts == set(floor_of) | {"codegen"}, "a new part of paddle_nbext_server: give it its floor here and in docs/architecture.md"
    upward: dict[str, list[str]] = {}
    for name, path in known.items():
        part = server_part(name)
        if part is None:
            continue
        for target in imports_of(name, path, known):
            target_part = server_part(target)
            if target_part is None or target_part == part:
                continue
            if target_part == "codegen" or (part != "codegen" and floor_of[target_part] <= floor_of[part]):
                upward.setdefault(name, []).append(target)
    assert upward == {}
