"""The benchmarks stay one harness that says what it runs: every `bench_*.py` is in
`benchmarks/catalog.py` (what `run_all.py` runs or says it skips) or is a named helper,
`benchmarks/README.md`'s table has a row for each with its command and results file (the list
docs/development.md points to), and no benchmark keeps its own copy of what
`benchmarks/harness.py` holds (the machine description, percentiles)."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]
BENCHMARKS = ROOT / "benchmarks"


def load_catalog() -> ModuleType:
    spec = importlib.util.spec_from_file_location("benchmarks_catalog", BENCHMARKS / "catalog.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up while they are made
    spec.loader.exec_module(module)
    return module


def test_every_benchmark_script_is_in_the_catalog() -> None:
    catalog = load_catalog()
    listed = {benchmark.script for benchmark in catalog.BENCHMARKS}
    scripts = {path.name for path in BENCHMARKS.glob("bench_*.py")}
    assert scripts - listed == set(catalog.HELPERS), "bench_*.py neither in catalog.BENCHMARKS nor a helper"
    assert listed <= scripts, f"the catalog names scripts that are not there: {sorted(listed - scripts)}"
    names = [benchmark.name for benchmark in catalog.BENCHMARKS]
    assert len(names) == len(set(names)), names


def test_the_readme_lists_every_benchmark_with_its_command_and_results() -> None:
    catalog = load_catalog()
    rows = [line for line in (BENCHMARKS / "README.md").read_text(encoding="utf-8").splitlines() if line.startswith("| `")]
    named = [re.match(r"\| `(\w+)`", row).group(1) for row in rows]  # type: ignore[union-attr]
    assert named == [benchmark.name for benchmark in catalog.BENCHMARKS], "README table out of step with catalog.py"
    for row, benchmark in zip(rows, catalog.BENCHMARKS, strict=True):
        assert f"`{benchmark.command}`" in row, f"{benchmark.name}: the README gives another command than {benchmark.command!r}"
        assert f"`results/{benchmark.name}.md`" in row, f"{benchmark.name}: results file missing from its row"
        assert row.count(" | ") == 4, f"{benchmark.name}: a row has five cells (command, measures, goals, results, needs)"


def test_no_benchmark_keeps_its_own_machine_description_or_percentile() -> None:
    own = re.compile(r"^import platform$|^def (percentile|machine|machine_line)\(|statistics\.quantiles\(", re.MULTILINE)
    found = {path.name: own.findall(path.read_text(encoding="utf-8")) for path in sorted(BENCHMARKS.glob("*.py"))}
    copies = {name: hits for name, hits in found.items() if hits and name != "harness.py"}
    assert not copies, f"use benchmarks/harness.py instead: {copies}"
