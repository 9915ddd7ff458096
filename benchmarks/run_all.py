"""Run every benchmark of paddle-nbext, one after another, and collect their figures.

    .venv/bin/python benchmarks/run_all.py [--only local,server,...]

Each `bench_<name>.py` writes `results/<name>.json` and `results/<name>.md`; this command runs
them in a fixed order (cheap first) and joins the Markdown reports into `results/SUMMARY.md`.
Benchmarks are never part of the test suite: their goals are about speed on a given machine,
and the test suite asserts only behaviour.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
ORDER = ("kernel", "k8s", "server", "hardening", "local", "ranks", "panel", "metrics", "checkpoint", "health")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="comma-separated names, e.g. 'kernel,server'")
    args = parser.parse_args()
    names = [n for n in args.only.split(",") if n] or [n for n in ORDER if (HERE / f"bench_{n}.py").exists()]
    failed: list[str] = []
    for name in names:
        script = HERE / f"bench_{name}.py"
        if not script.exists():
            print(f"run_all: no benchmark named {name!r} ({script.name} missing)", file=sys.stderr)
            return 2
        print(f"== {name}", flush=True)
        started = time.monotonic()
        code = subprocess.call([sys.executable, str(script)], cwd=HERE.parent)
        print(f"== {name}: exit {code} after {time.monotonic() - started:.0f} s", flush=True)
        if code:
            failed.append(name)
    parts = ["# paddle-nbext benchmark results\n"]
    for name in ORDER:
        report = RESULTS / f"{name}.md"
        if report.exists():
            parts.append(report.read_text(encoding="utf-8").strip() + "\n")
    (RESULTS / "SUMMARY.md").write_text("\n".join(parts), encoding="utf-8")
    print(f"figures: {RESULTS}/SUMMARY.md")
    if failed:
        print(f"run_all: failed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
