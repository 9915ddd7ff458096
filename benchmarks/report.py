"""What the benchmarks share in writing their figures down (not a benchmark itself).

Every `bench_<name>.py` writes `results/<name>.json` (its figures) and `results/<name>.md` (the
readable report that `run_all.py` joins into `results/SUMMARY.md`); `write_report` does both.
The rest are the small pieces several reports word the same way.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
from collections.abc import Mapping
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"


def write_report(name: str, figures: Mapping[str, Any], markdown: str, *, indent: int = 2) -> str:
    """`figures` as `results/<name>.json` (indented by `indent`, a newline at the end) and
    `markdown` as `results/<name>.md`, exactly as given; returns `markdown`, for printing."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{name}.json").write_text(json.dumps(figures, indent=indent) + "\n", encoding="utf-8")
    (RESULTS / f"{name}.md").write_text(markdown, encoding="utf-8")
    return markdown


def machine_line() -> str:
    """The machine in one phrase: CPUs, architecture, system and Python."""
    return f"{os.cpu_count()} CPUs, {platform.machine()}, {platform.system()}, Python {platform.python_version()}"


def verdict(met: bool) -> str:
    """How a report says whether a goal was met."""
    return "met" if met else "NOT met"


def min_median_max(values: list[float]) -> dict[str, float]:
    """Seconds of the rounds: the least, the median and the most, to two decimals."""
    return {"min": round(min(values), 2), "median": round(statistics.median(values), 2), "max": round(max(values), 2)}


def median_range(figure: Mapping[str, float]) -> str:
    """A `min_median_max` figure as a table cell: `median (min-max)`."""
    return f"{figure['median']} ({figure['min']}-{figure['max']})"
