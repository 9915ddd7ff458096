"""Kernel-side performance: import cost and widget request rate.

    .venv/bin/python benchmarks/bench_kernel.py [--runs 7] [--intervals 10]

1. `import paddle_nbext` and `%load_ext paddle_nbext` wall time, each in fresh interpreters
   (median of `--runs`; IPython itself is imported first, as in any kernel).  Goal: < 300 ms
   together, with neither ipywidgets, jupyter_server, paddle nor the server side imported.
2. Requests per refresh interval of `job_list()` and of a job's live status view, against a real
   Jupyter server with the extension (local backend) and a running job: every HTTP request is
   timestamped, and the worst count in any window of one interval is reported.  Goal: <= 1.

Writes benchmarks/results/kernel.json and kernel.md.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from harness import machine_line, verdict, write_report  # noqa: E402
from support.jupyter_process import JupyterProcess, free_port  # noqa: E402

IMPORT_GOAL_MS = 300.0

_IMPORT_PROBE = """
import json, sys, time
import IPython
from IPython.core.interactiveshell import InteractiveShell
shell = InteractiveShell.instance()
t0 = time.perf_counter()
import paddle_nbext
t1 = time.perf_counter()
shell.run_line_magic("load_ext", "paddle_nbext")
t2 = time.perf_counter()
heavy = sorted({m.split(".")[0] for m in sys.modules} & {"ipywidgets", "jupyter_server", "paddle_nbext_server", "paddle", "requests"})
print(json.dumps({"import_ms": (t1 - t0) * 1000, "load_ext_ms": (t2 - t1) * 1000, "heavy_modules": heavy}))
"""


def measure_import(runs: int) -> dict[str, Any]:
    samples = []
    for _ in range(runs):
        out = subprocess.run([sys.executable, "-c", _IMPORT_PROBE], capture_output=True, text=True, check=True, cwd=tempfile.gettempdir())
        samples.append(json.loads(out.stdout.strip().splitlines()[-1]))
    imports = [s["import_ms"] for s in samples]
    loads = [s["load_ext_ms"] for s in samples]
    totals = [a + b for a, b in zip(imports, loads, strict=True)]
    heavy = sorted({m for s in samples for m in s["heavy_modules"]})
    return {
        "runs": runs,
        "import_ms_median": round(statistics.median(imports), 1),
        "load_ext_ms_median": round(statistics.median(loads), 1),
        "total_ms_median": round(statistics.median(totals), 1),
        "total_ms_max": round(max(totals), 1),
        "goal_ms": IMPORT_GOAL_MS,
        "meets_goal": statistics.median(totals) < IMPORT_GOAL_MS,
        "modules_loaded_that_must_not_be": [m for m in heavy if m != "requests"],
        "requests_loaded_by_load_ext": "requests" in heavy,
    }


class _Server:
    """A real Jupyter server with the extension, in a temporary home, on loopback."""

    def __enter__(self) -> _Server:
        self.tmp = tempfile.TemporaryDirectory(prefix="paddle-bench-")
        self.home = Path(self.tmp.name)
        port = free_port()
        self.token = secrets.token_hex(16)
        self.api = f"http://127.0.0.1:{port}/paddle/api/v1"
        env = {
            **os.environ,
            "HOME": str(self.home),
            "JUPYTER_RUNTIME_DIR": str(self.home / ".runtime"),
            "JUPYTER_CONFIG_DIR": str(self.home / ".jupyter"),
        }
        env.pop("PADDLE_NBEXT_API_URL", None)
        env.pop("PADDLE_NBEXT_TOKEN", None)
        self.jupyter = JupyterProcess(
            [
                str(Path(sys.executable).with_name("jupyter")),
                "server",
                "--allow-root",
                "--no-browser",
                "--ip=127.0.0.1",
                f"--port={port}",
                f"--ServerApp.token={self.token}",
                f"--ServerApp.root_dir={self.home}",
                "--ServerApp.port_retries=0",
                "--ServerApp.jpserver_extensions={'paddle_nbext_server': True}",
            ],
            url=f"http://127.0.0.1:{port}/",
            token=self.token,
            log_path=self.home / "server.log",
            env=env,
            cwd=self.home,
        )
        try:
            self.jupyter.start()
        except BaseException:
            self.tmp.cleanup()
            raise
        return self

    def __exit__(self, *exc: Any) -> None:
        self.jupyter.stop()
        self.tmp.cleanup()


def _timestamped(client: Any) -> list[float]:
    """Record the time of every request the client makes (wraps its one transport method)."""
    stamps: list[float] = []
    original = client._request

    def request(*args: Any, **kwargs: Any) -> Any:
        stamps.append(time.monotonic())
        return original(*args, **kwargs)

    client._request = request
    return stamps


def _worst_window(stamps: list[float], interval: float) -> int:
    # A window of one interval, closed on the left and open on the right, placed at every request.
    return max((sum(1 for t in stamps if start <= t < start + interval * 0.999) for start in stamps), default=0)


def measure_widgets(intervals: int, interval: float) -> dict[str, Any]:
    os.environ.pop("PADDLE_NBEXT_API_URL", None)
    from paddle_nbext import api
    from paddle_nbext.client import Client
    from paddle_nbext.widgets.job_list import JobListWidget
    from paddle_nbext.widgets.status import JobStatusView

    with _Server() as server:
        package = server.home / "bench"
        package.mkdir()
        submitter = Client(server.api, server.token)
        job = api.submit(
            'python -c "import time; time.sleep(600)"',
            job_name="bench-sleep",
            mode="collective",
            trainers=1,
            trainer_cpu="100m",
            trainer_package=str(package),
            client=submitter,
        )
        results = {}
        for label, build in (
            ("job_list", lambda c: JobListWidget(c, interval=interval)),
            ("status_view", lambda c: JobStatusView(api.Job(job.name, c, job.status()), interval=interval)),
        ):
            client = Client(server.api, server.token)
            stamps = _timestamped(client)
            start = time.monotonic()
            widget = build(client)
            time.sleep(interval * intervals)
            widget.close()
            elapsed = time.monotonic() - start
            closed_at = len(stamps)
            time.sleep(interval * 3)
            results[label] = {
                "interval_s": interval,
                "elapsed_intervals": round(elapsed / interval, 2),
                "requests": closed_at,
                "requests_per_interval": round(closed_at / (elapsed / interval), 3),
                "worst_requests_in_one_interval": _worst_window(stamps[:closed_at], interval),
                "requests_after_close": len(stamps) - closed_at,
            }
        job.cancel()
        job.delete()
    return results


def write(results: dict[str, Any]) -> str:
    """results/kernel.json and kernel.md; returns the Markdown."""
    imp = results["import"]
    lines = [
        "# Kernel-side benchmark",
        "",
        f"Measured {results['measured_at']} on {results['machine']}; command: `{results['command']}`.",
        "",
        "## `import paddle_nbext` + `%load_ext paddle_nbext` (fresh interpreter, IPython preloaded)",
        "",
        "| figure | value |",
        "|---|---|",
        f"| import, median of {imp['runs']} | {imp['import_ms_median']} ms |",
        f"| %load_ext, median | {imp['load_ext_ms_median']} ms |",
        f"| total, median (max) | {imp['total_ms_median']} ms ({imp['total_ms_max']} ms) |",
        f"| goal | < {imp['goal_ms']:.0f} ms: {verdict(imp['meets_goal'])} |",
        f"| ipywidgets / jupyter_server / server side / paddle imported | {', '.join(imp['modules_loaded_that_must_not_be']) or 'none'} |",
        "",
        "## Requests per refresh interval (real server, one running job)",
        "",
        "| widget | interval | intervals elapsed | requests | per interval | worst in any one interval | after close |",
        "|---|---|---|---|---|---|---|",
    ]
    for label, figures in results["widgets"].items():
        lines.append(
            f"| {label} | {figures['interval_s']} s | {figures['elapsed_intervals']} | {figures['requests']} | "
            f"{figures['requests_per_interval']} | {figures['worst_requests_in_one_interval']} | {figures['requests_after_close']} |"
        )
    lines += ["", "The list widget makes one synchronous request when created (so the table is never empty), then one per interval."]
    return write_report("kernel", results, "\n".join(lines) + "\n")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--intervals", type=int, default=10)
    parser.add_argument("--interval", type=float, default=0.5)
    args = parser.parse_args()
    results = {
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": machine_line(),
        "command": "python benchmarks/bench_kernel.py " + " ".join(sys.argv[1:]),
        "import": measure_import(args.runs),
        "widgets": measure_widgets(args.intervals, args.interval),
    }
    print(write(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
