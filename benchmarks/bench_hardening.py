"""Bounded work per request (issue 16): run `python benchmarks/bench_hardening.py`.

Starts a real `jupyter server` (local backend) in a temporary HOME and measures
1. `GET /jobs/<job>/logs?tail=100` on a 1 GiB log (`--log-mib`): latency p50/p90 and how much the server's
   peak resident memory (VmHWM) grew over all the requests;
2. `POST /jobs` (a real submit: snapshot, records, master) of a package of 20,000 files: time per
   submit and the server's peak memory growth.

Figures go to benchmarks/results/hardening.json and hardening.md (goals from issue 16 beside them).
"""

from __future__ import annotations

import argparse
import getpass
import tempfile
import time
from pathlib import Path
from typing import Any

import requests
from bench_server import Server, seed_jobs
from harness import latency_summary, machine_line, verdict, write_report

GOALS = {"log_tail_p50_ms": 20.0, "log_tail_memory_mib": 10.0}
MiB = 1024 * 1024


def peak_rss_kib(pid: int) -> int:
    """The process's peak resident set (VmHWM), in KiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise RuntimeError("no VmHWM in /proc status")


def write_log(path: Path, size: int) -> None:
    """`size` bytes of realistic training-log lines (one block written over and over)."""
    block = "".join(f"[trainer 0] epoch {i // 100} step {i} loss {1 / (i + 1):.6f} lr 0.001\n" for i in range(20_000)).encode()
    with open(path, "wb") as handle:
        written = 0
        while written < size:
            handle.write(block)
            written += len(block)


def measure_log_tail(server: Server, home: Path, requests_count: int, log_mib: int) -> dict[str, Any]:
    log = home / ".paddle-jobs" / "seed-0000" / "logs" / "trainer-0.log"
    write_log(log, log_mib * MiB)
    url = f"{server.api}/jobs/seed-0000/logs"
    pid = server.jupyter.process.pid  # type: ignore[union-attr]
    requests.get(url, headers=server.headers, params={"tail": "100"}, timeout=60).raise_for_status()  # warm up
    before = peak_rss_kib(pid)
    times = []
    for _ in range(requests_count):
        start = time.perf_counter()
        response = requests.get(url, headers=server.headers, params={"tail": "100"}, timeout=60)
        times.append((time.perf_counter() - start) * 1000)
        response.raise_for_status()
        assert response.text.count("\n") == 100, response.text[:200]
    return {
        "log_bytes": log.stat().st_size,
        "latency": latency_summary(times),
        "peak_rss_growth_mib": round((peak_rss_kib(pid) - before) / 1024, 2),
    }


def make_package(root: Path, files: int) -> Path:
    package = root / "many"
    for i in range(files):
        directory = package / f"d{i // 200:03d}"
        if i % 200 == 0:
            directory.mkdir(parents=True)
        (directory / f"f{i:05d}.py").write_text(f"VALUE_{i} = {i}\n" * 20)
    return package


def measure_submit(server: Server, home: Path, files: int, submits: int) -> dict[str, Any]:
    package = make_package(home, files)
    pid = server.jupyter.process.pid  # type: ignore[union-attr]
    before = peak_rss_kib(pid)
    times = []
    for i in range(submits):
        body = {"job_name": f"many-{i}", "entry_point": "python -c pass", "mode": "collective", "trainer_package": str(package)}
        start = time.perf_counter()
        response = requests.post(f"{server.api}/jobs", headers=server.headers, json=body, timeout=600)
        times.append((time.perf_counter() - start) * 1000)
        if response.status_code != 201:
            raise RuntimeError(response.text)
    copied = sum(1 for path in (home / ".paddle-jobs" / "many-0" / "package").rglob("*.py"))
    for i in range(submits):
        requests.delete(f"{server.api}/jobs/many-{i}", headers=server.headers, timeout=120)
    return {
        "files": files,
        "files_copied": copied,
        "package_bytes": sum(path.stat().st_size for path in package.rglob("*.py")),
        "latency": latency_summary(times),
        "peak_rss_growth_mib": round((peak_rss_kib(pid) - before) / 1024, 2),
    }


def write_results(results: dict[str, Any]) -> str:
    """results/hardening.json and hardening.md; returns the Markdown."""
    tail, submit = results["log_tail"], results["submit"]

    lines = [
        "# Hardening: bounded work per request (issue 16)",
        "",
        f"Command: `.venv/bin/python benchmarks/bench_hardening.py`; {results['machine']}.",
        "",
        "| measurement | figure | goal |",
        "|---|---|---|",
        f"| `logs?tail=100` on a {tail['log_bytes'] / MiB:.0f} MiB log, p50 ({tail['latency']['n']} requests) "
        f"| {tail['latency']['p50_ms']} ms (p90 {tail['latency']['p90_ms']} ms) "
        f"| < {GOALS['log_tail_p50_ms']:.0f} ms: {verdict(tail['latency']['p50_ms'] < GOALS['log_tail_p50_ms'])} |",
        f"| server peak memory growth over those requests | {tail['peak_rss_growth_mib']} MiB "
        f"| < {GOALS['log_tail_memory_mib']:.0f} MiB: {verdict(tail['peak_rss_growth_mib'] < GOALS['log_tail_memory_mib'])} |",
        f"| submit of a {submit['files']:,}-file package ({submit['package_bytes'] / MiB:.1f} MiB), per submit "
        f"| p50 {submit['latency']['p50_ms']} ms, max {submit['latency']['max_ms']} ms ({submit['latency']['n']} submits) | recorded |",
        f"| server peak memory growth over those submits | {submit['peak_rss_growth_mib']} MiB | recorded |",
        "",
        f"The snapshot copied {submit['files_copied']:,} of {submit['files']:,} files.",
        "",
    ]
    return write_report("hardening", results, "\n".join(lines))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=50, help="logs?tail=100 requests")
    parser.add_argument("--log-mib", type=int, default=1024, help="size of the log they read the tail of")
    parser.add_argument("--files", type=int, default=20_000, help="files in the submitted package")
    parser.add_argument("--submits", type=int, default=3, help="submits of that package")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="paddle-nbext-bench-hardening-") as tmp:
        home = Path(tmp)
        seed_jobs(home, 1, getpass.getuser())
        server = Server(home)
        try:
            results = {
                "machine": machine_line(),
                "goals": GOALS,
                "log_tail": measure_log_tail(server, home, args.requests, args.log_mib),
                "submit": measure_submit(server, home, args.files, args.submits),
            }
        finally:
            server.stop()
    print(write_results(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
