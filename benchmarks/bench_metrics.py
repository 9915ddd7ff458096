"""Metrics benchmark: run `python benchmarks/bench_metrics.py`.

1. `report()` overhead per call: the bundle's `paddle_nbext_job` imported the way a replica
   imports it (only `pylib/` on the path, the metrics file named in the environment), its writer
   thread running; batches of calls timed, the median per call over the batches.
2. `GET /jobs/{name}/metrics?points=500` against a real `jupyter server` (local backend) for a
   finished job of 8 trainers × 100,000 points each: the first request (every file parsed), then
   the p50/p99 of repeated requests (parsed files kept; what the panel and widgets ask for).
3. The panel's chart update in Chromium: `LineChart.setLines` (views/chart.ts, bundled with esbuild)
   with 8 lines of 500 points, then 8 × 2,000 (the most a line grows before the overview is
   fetched again); the longest of those tasks.

Figures go to benchmarks/results/metrics.json and metrics.md (goals from issue 14 beside them).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import requests

from paddle_nbext.model.status import JobStatus, ReplicaStatus
from paddle_nbext_server.backends.local.record_files import write_record
from paddle_nbext_server.backends.local.records import JobRecord, StatusRecord
from paddle_nbext_server.jobfiles.runtime_files import PYLIB, write_bundle

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))

from bench_server import Server  # noqa: E402
from harness import machine, percentile, write_report  # noqa: E402

LABEXTENSION = REPO / "labextension"
GOALS = {"report_median_us": 10.0, "metrics_p50_ms": 50.0, "chart_update_longest_ms": 20.0}
TRAINERS, POINTS = 8, 100_000

REPORT_SCRIPT = """
import json, sys, time
from paddle_nbext_job import report, flush
batch, batches = int(sys.argv[1]), int(sys.argv[2])
per_call = []
for _ in range(batches):
    start = time.perf_counter()
    for step in range(batch):
        report(step, total=batch, loss=0.5, acc=0.25)
    per_call.append((time.perf_counter() - start) / batch * 1e6)
    time.sleep(0.02)
flush()
print(json.dumps({"per_call_us": per_call}))
"""


def bench_report(work: Path, batch: int = 10_000, batches: int = 50) -> dict[str, Any]:
    bundle = work / "bundle"
    write_bundle(bundle)
    target = work / "trainer-0.metrics.jsonl"
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": str(bundle / PYLIB), "PADDLE_NBEXT_METRICS_FILE": str(target)}
    result = subprocess.run(
        [sys.executable, "-c", REPORT_SCRIPT, str(batch), str(batches)], env=env, capture_output=True, text=True, check=True
    )
    per_call = json.loads(result.stdout)["per_call_us"]
    lines = sum(1 for _ in target.open())
    return {
        "calls": batch * batches,
        "lines_written": lines,
        "median_us": round(statistics.median(per_call), 3),
        "p90_us": round(percentile(per_call, 90), 3),
    }


def seed_metrics_job(home: Path, name: str, owner: str) -> None:
    """A finished 8-trainer collective job in the local backend's format, each trainer with a
    metrics file of `POINTS` points (a falling noisy loss and an accuracy)."""
    job_dir = home / ".paddle-jobs" / name
    (job_dir / "logs").mkdir(parents=True)
    stamp = datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    spec = {"job_name": name, "entry_point": "python train.py", "trainer_package": str(home), "mode": "collective", "trainers": TRAINERS}
    replicas = [ReplicaStatus("trainer", i, "Succeeded", None, 0, 0, stamp, stamp) for i in range(TRAINERS)]
    status = JobStatus(name, owner, "local", "Succeeded", "All trainers succeeded.", spec, stamp, stamp, stamp, replicas)
    write_record(job_dir, StatusRecord(status))
    write_record(job_dir, JobRecord(owner=owner, spec=spec, created=stamp, created_epoch=time.time(), package=str(home)))
    start = time.time() - POINTS * 0.01
    for index in range(TRAINERS):
        with open(job_dir / "logs" / f"trainer-{index}.metrics.jsonl", "w", encoding="utf-8") as handle:
            for step in range(1, POINTS + 1):
                loss = 2.0 / math.sqrt(step) + 0.05 * math.sin(step * 0.37 + index)
                handle.write(
                    f'{{"t":{start + step * 0.01:.3f},"step":{step},"total":{POINTS},"m":{{"loss":{loss!r},"acc":{1 - loss / 3:.6f}}}}}\n'
                )


def bench_metrics_api(work: Path, repeats: int = 40) -> dict[str, Any]:
    home = work / "home"
    home.mkdir()
    owner = os.environ.get("USER") or "bench"
    server = Server(home)
    try:
        whoami = requests.get(f"{server.api}/jobs", headers=server.headers, timeout=60)
        whoami.raise_for_status()
        # The server's owner for this token: submit nothing, read it off a dry run.
        dry = requests.post(
            f"{server.api}/jobs?dry_run=true",
            headers=server.headers,
            json={"entry_point": "python x.py", "trainer_package": ".", "mode": "collective"},
            timeout=60,
        )
        owner = dry.json().get("job", {}).get("owner") or owner
        seed_metrics_job(home, "curve-8x100k", owner)
        url = f"{server.api}/jobs/curve-8x100k/metrics"
        started = time.perf_counter()
        first = requests.get(url, params={"points": 500}, headers=server.headers, timeout=600)
        cold_ms = (time.perf_counter() - started) * 1000
        first.raise_for_status()
        body = first.json()
        assert len(body["replicas"]) == TRAINERS and all(r["count"] == POINTS for r in body["replicas"]), body["replicas"][0]
        kept = max(len(columns["step"]) for r in body["replicas"] for columns in r["series"].values())
        timings = []
        for _ in range(repeats):
            started = time.perf_counter()
            response = requests.get(url, params={"points": 500}, headers=server.headers, timeout=60)
            timings.append((time.perf_counter() - started) * 1000)
            response.raise_for_status()
        return {
            "trainers": TRAINERS,
            "points_per_trainer": POINTS,
            "metrics_per_point": 2,
            "points_kept_per_line": kept,
            "response_bytes": len(response.content),
            "first_request_ms": round(cold_ms, 1),
            "p50_ms": round(percentile(timings, 50), 2),
            "p99_ms": round(percentile(timings, 99), 2),
            "mean_ms": round(statistics.fmean(timings), 2),
            "n": repeats,
        }
    finally:
        server.stop()


CHART_PAGE = """<!doctype html><html><body><div id="host" style="width:800px"></div>
<script src="chart.js"></script></body></html>"""
CHART_ENTRY = """
import { LineChart } from '../src/views/chart';
function lines(count: number, points: number) {
  return Array.from({ length: count }, (_, n) => ({
    name: `trainer-${n}`,
    x: Array.from({ length: points }, (_, i) => i + 1),
    y: Array.from({ length: points }, (_, i) => 2 / Math.sqrt(i + 1) + 0.05 * Math.sin(i * 0.37 + n))
  }));
}
const chart = new LineChart('loss');
document.getElementById('host')!.appendChild(chart.node);
const timings: { [what: string]: number[] } = {};
for (const [what, points] of [['8x500', 500], ['8x2000', 2000]] as const) {
  const data = lines(8, points);
  timings[what] = [];
  for (let run = 0; run < 20; run++) {
    const start = performance.now();
    chart.setLines(data);
    chart.node.getBoundingClientRect(); // layout included
    timings[what].push(performance.now() - start);
  }
}
chart.setScale('log');
(window as any).chartTimings = timings;
"""


def bench_chart(work: Path) -> dict[str, Any]:
    from playwright.sync_api import sync_playwright

    folder = LABEXTENSION / ".bench-chart"
    folder.mkdir(exist_ok=True)
    try:
        (folder / "entry.ts").write_text(CHART_ENTRY)
        subprocess.run(
            [
                str(LABEXTENSION / "node_modules" / ".bin" / "esbuild"),
                str(folder / "entry.ts"),
                "--bundle",
                f"--outfile={work / 'chart.js'}",
            ],
            cwd=LABEXTENSION,
            check=True,
            capture_output=True,
        )
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    (work / "chart.html").write_text(CHART_PAGE)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox"], headless=True)
        try:
            page = browser.new_page()
            page.goto((work / "chart.html").as_uri())
            page.wait_for_function("window.chartTimings !== undefined", timeout=60_000)
            timings: dict[str, list[float]] = page.evaluate("window.chartTimings")
        finally:
            browser.close()
    figures: dict[str, Any] = {}
    for what, values in timings.items():
        figures[what] = {"median_ms": round(statistics.median(values), 2), "longest_ms": round(max(values[1:]), 2)}
    figures["longest_ms"] = max(item["longest_ms"] for item in figures.values() if isinstance(item, dict))
    return figures


def write(results: dict[str, Any]) -> str:
    """results/metrics.json and metrics.md; returns the Markdown."""
    report, api, chart = results.get("report"), results.get("api"), results.get("chart")
    lines = ["# Metrics benchmark (issue 14)", "", f"`python benchmarks/bench_metrics.py` on {results['machine']}", ""]
    lines += ["| figure | measured | goal |", "|---|---|---|"]
    if report:
        lines.append(
            f"| `report()` per call, median over {report['calls']:,} calls (p90) | {report['median_us']} µs ({report['p90_us']} µs) | < {GOALS['report_median_us']:g} µs |"
        )
    if api:
        lines.append(
            f"| `GET /metrics?points=500`, {api['trainers']} trainers × {api['points_per_trainer']:,} points, p50 (p99) | "
            f"{api['p50_ms']} ms ({api['p99_ms']} ms) | < {GOALS['metrics_p50_ms']:g} ms |"
        )
        lines.append(
            f"| the same, first request (all {api['trainers'] * api['points_per_trainer']:,} points parsed) | {api['first_request_ms']} ms | recorded |"
        )
    if chart:
        lines.append(
            f"| chart update, 8 lines × 500 / × 2,000 points, longest | {chart['8x500']['longest_ms']} / {chart['8x2000']['longest_ms']} ms | "
            f"< {GOALS['chart_update_longest_ms']:g} ms |"
        )
    lines += [""]
    if api:
        lines.append(
            f"Answer size: {api['response_bytes']:,} bytes, at most {api['points_kept_per_line']} points per line (first, last and extremes kept)."
        )
    return write_report("metrics", results, "\n".join(lines) + "\n", indent=1)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skip-chart", action="store_true", help="leave out the Chromium chart figure")
    args = parser.parse_args()
    results: dict[str, Any] = {"machine": machine(), "goals": GOALS}
    with tempfile.TemporaryDirectory(prefix="bench-metrics-") as folder:
        work = Path(folder)
        results["report"] = bench_report(work)
        print("report():", results["report"], flush=True)
        results["api"] = bench_metrics_api(work)
        print("GET /metrics:", results["api"], flush=True)
        if not args.skip_chart:
            results["chart"] = bench_chart(work)
            print("chart:", results["chart"], flush=True)
    print(write(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
