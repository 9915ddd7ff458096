"""The benchmarks' shared harness (not a benchmark itself): how every `bench_<name>.py` describes
the machine, summarises its samples, words its goals and writes its figures down.

Every benchmark writes `results/<name>.json` (its figures) and `results/<name>.md` (the readable
report that `run_all.py` joins into `results/SUMMARY.md`); `write_report` does both.  The folder
is `benchmarks/results/` unless `PADDLE_NBEXT_BENCH_RESULTS` names another (`run_all.py
--results DIR`), so a quick or trial run need not overwrite the figures kept in the repo.

One copy of each piece, so that two reports never describe the same machine, percentile or goal
in two ways.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

#: The folder the figures kept in the repo live in.
DEFAULT_RESULTS = Path(__file__).resolve().parent / "results"
#: Names another folder for a run's figures (a quick run's, say); unset: `DEFAULT_RESULTS`.
RESULTS_ENV = "PADDLE_NBEXT_BENCH_RESULTS"


def results_dir() -> Path:
    """Where this run writes its figures: `$PADDLE_NBEXT_BENCH_RESULTS`, else `benchmarks/results/`."""
    chosen = os.environ.get(RESULTS_ENV)
    return Path(chosen) if chosen else DEFAULT_RESULTS


def write_report(name: str, figures: Mapping[str, Any], markdown: str, *, indent: int = 2) -> str:
    """`figures` as `<results>/<name>.json` (indented by `indent`, a newline at the end) and
    `markdown` as `<results>/<name>.md`, exactly as given; returns `markdown`, for printing."""
    folder = results_dir()
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.json").write_text(json.dumps(figures, indent=indent) + "\n", encoding="utf-8")
    (folder / f"{name}.md").write_text(markdown, encoding="utf-8")
    return markdown


# ------------------------------------------------------------------------------ the machine
def load_average() -> list[float]:
    """The 1-, 5- and 15-minute load averages, to two decimals (the machine may be shared)."""
    return [round(value, 2) for value in os.getloadavg()]


def machine() -> dict[str, Any]:
    """The machine as a figure: CPUs, Python, platform and the load average now."""
    return {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform(), "load": load_average()}


def machine_line() -> str:
    """The machine in one phrase: CPUs, architecture, system and Python."""
    return f"{os.cpu_count()} CPUs, {platform.machine()}, {platform.system()}, Python {platform.python_version()}"


# ------------------------------------------------------------------------------ goals
def verdict(met: bool) -> str:
    """How a report says whether a goal was met."""
    return "met" if met else "NOT met"


def goal(target: str, met: bool) -> str:
    """A goal and whether it was met, as every report words it: `goal <= 1.05: met`."""
    return f"goal {target}: {verdict(met)}"


# ------------------------------------------------------------------------------ samples
def percentile(values: Sequence[float], q: float) -> float:
    """The `q`-th percentile (0-100) of `values` by nearest rank: always one of the samples."""
    ordered = sorted(values)
    rank = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[rank]


def latency_summary(milliseconds: Sequence[float]) -> dict[str, float]:
    """Request latencies (ms): how many, p50, p90, p99, mean and the most, to two decimals."""
    return {
        "n": len(milliseconds),
        "p50_ms": round(percentile(milliseconds, 50), 2),
        "p90_ms": round(percentile(milliseconds, 90), 2),
        "p99_ms": round(percentile(milliseconds, 99), 2),
        "mean_ms": round(statistics.fmean(milliseconds), 2),
        "max_ms": round(max(milliseconds), 2),
    }


def spread(values: Sequence[float]) -> dict[str, float]:
    """Samples as they are (unrounded, in their own unit): how many, the least, the median, the most."""
    return {"n": len(values), "min": min(values), "p50": statistics.median(values), "max": max(values)}


def min_median_max(values: Sequence[float]) -> dict[str, float]:
    """Seconds of the rounds: the least, the median and the most, to two decimals."""
    return {"min": round(min(values), 2), "median": round(statistics.median(values), 2), "max": round(max(values), 2)}


def median_range(figure: Mapping[str, float]) -> str:
    """A `min_median_max` figure as a table cell: `median (min-max)`."""
    return f"{figure['median']} ({figure['min']}-{figure['max']})"
