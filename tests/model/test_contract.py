"""The shared words have one definition: `paddle_nbext/model/contract.py`.

A phase list, a terminal set, a Kubernetes label key or a time format written a second time is how
the parts drifted apart before (a phase spelled two ways is a job the panel never sees end), so
this reads every module of both packages and refuses second definitions.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CONTRACT = ROOT / "paddle_nbext" / "model" / "contract.py"
SOURCES = sorted(
    path
    for folder in (ROOT / "paddle_nbext", ROOT / "server_ext" / "paddle_nbext_server")
    for path in folder.rglob("*.py")
    if path != CONTRACT
)
#: Only the phase lists hold these words (Kubernetes' pod phases share the other four).
OWN_PHASE_WORDS = {"Cancelled", "Stopped"}
LABEL_KEY = re.compile(r"^(?:paddle-nbext/|app\.kubernetes\.io/managed-by$)")
TERMINAL_NAME = re.compile(r"TERMINAL", re.IGNORECASE)


def second_definitions(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, what) of every word of the contract that `tree` defines again."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            if node.value in OWN_PHASE_WORDS:
                found.append((node.lineno, f"the phase {node.value!r} (use contract.Phase / ReplicaPhase)"))
            elif LABEL_KEY.match(node.value):
                found.append((node.lineno, f"the label key {node.value!r} (use the contract's *_LABEL / *_ANNOTATION)"))
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in ("now_iso", "format_time", "parse_time"):
            found.append((node.lineno, f"def {node.name} (use contract.{node.name})"))
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                for name in ast.walk(target):
                    if isinstance(name, ast.Name) and TERMINAL_NAME.search(name.id):
                        found.append((node.lineno, f"a terminal set {name.id} (use contract.TERMINAL_PHASES / is_terminal)"))
    return found


def test_the_sources_are_found() -> None:
    names = {path.relative_to(ROOT).as_posix() for path in SOURCES}
    assert {"paddle_nbext/model/status.py", "server_ext/paddle_nbext_server/runtime/cluster_master.py"} <= names


@pytest.mark.parametrize("path", SOURCES, ids=lambda path: path.relative_to(ROOT).as_posix())
def test_no_module_defines_a_word_of_the_contract_again(path: Path) -> None:
    found = second_definitions(ast.parse(path.read_text(encoding="utf-8"), str(path)))
    assert not found, "\n".join(f"{path.relative_to(ROOT)}:{line}: defines {what} again" for line, what in found)


@pytest.mark.parametrize(
    "source",
    [
        'PHASES = ("Pending", "Running", "Succeeded", "Failed", "Cancelled")',
        'if replica["phase"] == "Stopped": pass',
        'JOB_LABEL = "paddle-nbext/job"',
        'SELECTOR = "app.kubernetes.io/managed-by"',
        "def now_iso() -> str: return ''",
        '_TERMINAL = frozenset({"Succeeded", "Failed"})',
        "terminal_phases: set[str] = set()",
    ],
)
def test_the_check_sees_each_kind_of_copy(source: str) -> None:
    assert second_definitions(ast.parse(source))


def test_the_contract_itself_passes_only_because_it_is_exempt() -> None:
    assert second_definitions(ast.parse(CONTRACT.read_text(encoding="utf-8")))
