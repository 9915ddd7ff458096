"""Run the benchmarks of paddle-nbext, one after another, and collect their figures.

    .venv/bin/python benchmarks/run_all.py [--cluster] [--only a,b] [--skip a,b] [--list] [--results DIR]

Runs every benchmark of `catalog.py` that this machine can run, in a fixed order (cheap first),
and says for each one it skips which and why (what the machine lacks, or that it starts a
cluster and `--cluster` was not given) with the command that runs it.  The ones that start a
Kubernetes control plane (and real nodes, as root) run only with `--cluster`.  Each writes
`<results>/<name>.json` and `<name>.md`; the Markdown reports there are joined into
`<results>/SUMMARY.md`.  Benchmarks are never part of the test suite: their goals are about speed
on a given machine, and the test suite asserts only behaviour.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

from catalog import BENCHMARKS, HERE, ROOT, Benchmark, by_name
from harness import RESULTS_ENV, results_dir


def names(text: str) -> list[str]:
    """`a,b` as names, each checked against the catalog (KeyError naming the known ones)."""
    chosen = [name.strip() for name in text.split(",") if name.strip()]
    for name in chosen:
        by_name(name)
    return chosen


def plan(args: argparse.Namespace) -> tuple[list[Benchmark], list[tuple[Benchmark, str]]]:
    """What runs, and what is skipped with the reason, in the catalog's order."""
    only, skip = names(args.only), names(args.skip)
    runs: list[Benchmark] = []
    skipped: list[tuple[Benchmark, str]] = []
    for benchmark in BENCHMARKS:
        if (only and benchmark.name not in only) or benchmark.name in skip:
            continue  # not asked for: no word about it
        if benchmark.cluster and not args.cluster and not only:
            skipped.append((benchmark, "starts a Kubernetes control plane (and maybe real nodes); run it with --cluster"))
            continue
        lacking = benchmark.lacking()
        if lacking:
            skipped.append((benchmark, "needs " + "; ".join(lacking)))
            continue
        runs.append(benchmark)
    return runs, skipped


def summarise(folder: Path) -> Path:
    """The Markdown reports in `folder`, in the catalog's order, joined into SUMMARY.md."""
    parts = ["# paddle-nbext benchmark results\n"]
    for benchmark in BENCHMARKS:
        report = folder / f"{benchmark.name}.md"
        if report.exists():
            parts.append(report.read_text(encoding="utf-8").strip() + "\n")
    summary = folder / "SUMMARY.md"
    summary.write_text("\n".join(parts), encoding="utf-8")
    return summary


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--only", default="", help="comma-separated names: run just these (a cluster one too), e.g. 'kernel,server'")
    parser.add_argument("--skip", default="", help="comma-separated names to leave out")
    parser.add_argument("--cluster", action="store_true", help="also run the benchmarks that start a control plane")
    parser.add_argument("--list", action="store_true", help="say what would run and what would be skipped, run nothing")
    parser.add_argument("--results", type=Path, help=f"write the figures here, not to benchmarks/results/ (sets {RESULTS_ENV})")
    args = parser.parse_args()
    try:
        runs, skipped = plan(args)
    except KeyError as error:
        print(f"run_all: {error.args[0]}", file=sys.stderr)
        return 2
    for benchmark, reason in skipped:
        print(f"run_all: skipping {benchmark.name}: {reason} (`{benchmark.command}`)", flush=True)
    if args.list:
        for benchmark in runs:
            print(f"run_all: would run {benchmark.name}: `{benchmark.command}`")
        return 0
    if args.results:
        os.environ[RESULTS_ENV] = str(args.results.resolve())  # the benchmarks inherit it
    failed: list[str] = []
    for benchmark in runs:
        print(f"== {benchmark.name}: {benchmark.command}", flush=True)
        started = time.monotonic()
        code = subprocess.call([sys.executable, str(HERE / benchmark.script), *benchmark.args], cwd=ROOT)
        print(f"== {benchmark.name}: exit {code} after {time.monotonic() - started:.0f} s", flush=True)
        if code:
            failed.append(benchmark.name)
    print(f"figures: {summarise(results_dir())}; ran {len(runs)} of {len(runs) + len(skipped)} asked for, skipped {len(skipped)}")
    if failed:
        print(f"run_all: failed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
