"""Server-extension benchmark: run `python benchmarks/bench_server.py`.

Starts a real `jupyter server` (default settings but 128 streams a user, local backend) in a temporary HOME and measures
1. `GET /jobs` p50/p99 with 1,000 jobs in the store (finished jobs written in the local
   backend's on-disk format, as a long-used server would have them);
2. the delay from a job's status change (the `started`/`finished` stamps the job master writes)
   to the matching `event: job` at a connected `/events` client, over real short jobs;
3. `GET /api/status` p99 while 50 log-follow and 50 event streams are open.

Figures go to benchmarks/results/server.json and server.md (goals from issue 3 beside them).
"""

from __future__ import annotations

import argparse
import asyncio
import getpass
import json
import os
import shutil
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

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from harness import latency_summary, machine, verdict, write_report  # noqa: E402
from support.jupyter_process import JupyterProcess, free_port  # noqa: E402

ENABLE_FILE = REPO / "jupyter-config" / "jupyter_server_config.d" / "paddle_nbext_server.json"
TOKEN = "bench-token"
GOALS = {"jobs_list_p50_ms": 20.0, "event_delay_p50_ms": 200.0, "status_p99_ms_with_streams": 50.0}


# ---------------------------------------------------------------- the server under test
class Server:
    def __init__(self, home: Path) -> None:
        self.port = free_port()
        self.home = home
        self.base = f"http://127.0.0.1:{self.port}/"
        self.api = f"{self.base}paddle/api/v1"
        self.headers = {"Authorization": f"token {TOKEN}"}
        config_dir = home / ".jupyter"
        (config_dir / "jupyter_server_config.d").mkdir(parents=True, exist_ok=True)
        shutil.copy(ENABLE_FILE, config_dir / "jupyter_server_config.d" / ENABLE_FILE.name)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("JUPYTER", "PADDLE_NBEXT_"))}
        env.update(
            HOME=str(home),
            JUPYTER_CONFIG_DIR=str(config_dir),
            JUPYTER_DATA_DIR=str(home / ".jdata"),
            JUPYTER_RUNTIME_DIR=str(home / ".jruntime"),
            JUPYTER_PLATFORM_DIRS="1",
        )
        self.jupyter = JupyterProcess(
            [
                sys.executable,
                "-m",
                "jupyter_server",
                "--ip=127.0.0.1",
                f"--port={self.port}",
                "--port-retries=0",
                "--no-browser",
                "--allow-root",
                f"--ServerApp.root_dir={home}",
                f"--IdentityProvider.token={TOKEN}",
                # One user holds all 100 streams of the status-under-streams measure; the default
                # (32 a user) would refuse the 33rd with 429.
                "--PaddleNbext.max_streams_per_user=128",
            ],
            url=self.base,
            token=TOKEN,
            log_path=home / "jupyter.log",
            env=env,
            stop_grace=60,
        ).start()

    def stop(self) -> None:
        self.jupyter.stop()


def seed_jobs(home: Path, count: int, owner: str) -> None:
    """`count` finished 1-pserver + 2-trainer jobs in the local backend's job-dir format."""
    root = home / ".paddle-jobs"
    root.mkdir(parents=True, exist_ok=True)
    for i in range(count):
        name = f"seed-{i:04d}"
        created = datetime(2026, 1, 1, tzinfo=timezone.utc).timestamp() + i * 60
        stamp = datetime.fromtimestamp(created, timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")
        spec: dict[str, Any] = {
            "job_name": name,
            "entry_point": "python ps_train.py",
            "trainer_package": str(home),
            "image": None,
            "mode": "ps",
            "pservers": 1,
            "trainers": 2,
            "pserver_cpu": "1",
            "pserver_mem": "1Gi",
            "trainer_cpu": "1",
            "trainer_mem": "1Gi",
            "trainer_gpu": 0,
            "env": {},
            "snapshot": True,
            "max_restarts": 0,
            "timeout": None,
        }
        replicas = [
            ReplicaStatus(
                role, index, "Stopped" if role == "pserver" else "Succeeded", None, None if role == "pserver" else 0, 0, stamp, stamp
            )
            for role, index in (("pserver", 0), ("trainer", 0), ("trainer", 1))
        ]
        status = JobStatus(name, owner, "local", "Succeeded", "All 2 trainers succeeded.", spec, stamp, stamp, stamp, replicas)
        job_dir = root / name
        (job_dir / "logs").mkdir(parents=True)
        write_record(job_dir, JobRecord(owner=owner, spec=spec, created=stamp, created_epoch=created))
        write_record(job_dir, StatusRecord(status))


# ---------------------------------------------------------------- streaming clients (no threads)
async def open_stream(port: int, path: str) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: token {TOKEN}\r\n\r\n".encode())
    await writer.drain()
    head = await reader.readuntil(b"\r\n\r\n")
    if b" 200 " not in head.split(b"\r\n", 1)[0]:
        raise RuntimeError(head.decode(errors="replace"))
    return reader, writer


async def drain(reader: asyncio.StreamReader) -> None:
    while await reader.read(65536):
        pass


def parse_iso(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


async def measure_event_delay(server: Server, jobs: int) -> list[float]:
    """Submit short real jobs one by one; for each, the delay between the master's Running and
    Succeeded stamps and the arrival of the event carrying them."""
    reader, writer = await open_stream(server.port, "/paddle/api/v1/events")
    delays: list[float] = []
    buffer = b""
    try:
        for i in range(jobs):
            name = f"tick-{i:03d}"
            body = {
                "job_name": name,
                "mode": "collective",
                "entry_point": 'python -c "import time; time.sleep(0.3)"',
                "trainer_cpu": "100m",
            }
            response = await asyncio.to_thread(requests.post, f"{server.api}/jobs", json=body, headers=server.headers, timeout=60)
            response.raise_for_status()
            seen: set[str] = set()
            while "Succeeded" not in seen and "Failed" not in seen:
                while b"\n\n" not in buffer:
                    buffer += await asyncio.wait_for(reader.read(65536), timeout=120)
                block, buffer = buffer.split(b"\n\n", 1)
                arrived = time.time()
                text = block.decode()
                if not text.lstrip("0123456789abcdef\r\n").startswith("event: job") and "event: job" not in text:
                    continue
                data = json.loads(text.split("data: ", 1)[1].splitlines()[0])
                if data["name"] != name or data["phase"] in seen:
                    continue
                seen.add(data["phase"])
                stamp = (
                    data["started"]
                    if data["phase"] == "Running"
                    else data["finished"]
                    if data["phase"] in ("Succeeded", "Failed")
                    else None
                )
                if stamp:
                    delays.append((arrived - parse_iso(stamp)) * 1000)
            await asyncio.to_thread(requests.delete, f"{server.api}/jobs/{name}", headers=server.headers, timeout=60)
    finally:
        writer.close()
    return delays


def timed_gets(url: str, headers: dict[str, str], count: int) -> list[float]:
    session = requests.Session()
    session.get(url, headers=headers, timeout=60).raise_for_status()  # warm up the connection
    samples = []
    for _ in range(count):
        started = time.perf_counter()
        response = session.get(url, headers=headers, timeout=60)
        samples.append((time.perf_counter() - started) * 1000)
        response.raise_for_status()
    return samples


async def measure_status_under_streams(server: Server, follows: int, events: int, samples: int) -> list[float]:
    (server.home / "ticker.py").write_text("import time\nfor i in range(100000):\n    print('tick', i, flush=True)\n    time.sleep(0.2)\n")
    body = {"job_name": "ticker", "mode": "collective", "entry_point": "python ticker.py", "trainer_cpu": "100m"}
    requests.post(f"{server.api}/jobs", json=body, headers=server.headers, timeout=60).raise_for_status()
    streams = []
    try:
        while "tick" not in requests.get(f"{server.api}/jobs/ticker/logs", headers=server.headers, timeout=60).text:
            await asyncio.sleep(0.2)
        for _ in range(follows):
            streams.append(await open_stream(server.port, "/paddle/api/v1/jobs/ticker/logs?follow=true"))
        for _ in range(events):
            streams.append(await open_stream(server.port, "/paddle/api/v1/events"))
        drains = [asyncio.create_task(drain(reader)) for reader, _ in streams]
        await asyncio.sleep(1.0)
        result = await asyncio.to_thread(timed_gets, f"{server.base}api/status", server.headers, samples)
        for task in drains:
            task.cancel()
        return result
    finally:
        for _, writer in streams:
            writer.close()
        requests.delete(f"{server.api}/jobs/ticker", headers=server.headers, timeout=120)


def list_breakdown(home: Path, owner: str, samples: int = 20) -> dict[str, Any]:
    """Where `GET /jobs` time goes, measured in this process on the same store and the way a
    running server does it: a started local backend (answering from its in-memory map) and the
    handler's `JobListRenderer` (reusing unchanged jobs' JSON)."""
    from paddle_nbext_server.backends.local import LocalBackend
    from paddle_nbext_server.events import EventHub
    from paddle_nbext_server.handlers.jobs import JobListRenderer

    async def measure() -> tuple[list[float], list[float], int]:
        backend = LocalBackend(events=EventHub(), jobs_dir=str(home / ".paddle-jobs"))
        await backend.start()
        renderer = JobListRenderer()
        listing, rendering, size = [], [], 0
        try:
            for _ in range(samples):
                started = time.perf_counter()
                jobs = await backend.list_jobs(owner)
                middle = time.perf_counter()
                size = len(renderer.render(owner, jobs))
                listing.append((middle - started) * 1000)
                rendering.append((time.perf_counter() - middle) * 1000)
        finally:
            await backend.stop()
        return listing, rendering, size

    listing, rendering, size = asyncio.run(measure())
    return {"backend_list_jobs": latency_summary(listing), "render_json": latency_summary(rendering), "body_bytes": size}


def write_results(results: dict[str, Any]) -> None:
    """results/server.json and server.md."""
    lines = [
        "# Server extension benchmark",
        "",
        f"Run {results['when']} on {results['machine']['cpus']} CPUs (load average {results['machine']['load']}), "
        f"Python {results['machine']['python']}, local backend with default settings but `max_streams_per_user` 128 (one user holds all the streams). Command: `python benchmarks/bench_server.py`.",
        "",
        "| measure | p50 ms | p99 ms | n | goal | met |",
        "|---|---|---|---|---|---|",
    ]
    rows = [
        (
            "`GET /jobs` with 1,000 jobs",
            results["jobs_list"],
            f"p50 < {GOALS['jobs_list_p50_ms']:.0f} ms",
            results["goals_met"]["jobs_list_p50"],
        ),
        (
            "status change → event at client",
            results["event_delay"],
            f"p50 < {GOALS['event_delay_p50_ms']:.0f} ms",
            results["goals_met"]["event_delay_p50"],
        ),
        (
            "`GET /api/status` with 50 log + 50 event streams",
            results["status_with_streams"],
            f"p99 < {GOALS['status_p99_ms_with_streams']:.0f} ms",
            results["goals_met"]["status_p99"],
        ),
        ("`GET /api/status` idle (reference)", results["status_idle"], "", ""),
    ]
    for label, figures, goal, met in rows:
        lines.append(
            f"| {label} | {figures['p50_ms']} | {figures['p99_ms']} | {figures['n']} | {goal} | {'' if met == '' else verdict(met)} |"
        )
    breakdown = results["jobs_list_breakdown"]
    lines += [
        "",
        f"`GET /jobs` breakdown (in process, same store): the local backend's `list_jobs` p50 "
        f"{breakdown['backend_list_jobs']['p50_ms']} ms (started backend, answering from memory), "
        f"rendering the {breakdown['body_bytes'] // 1024} KiB JSON body p50 {breakdown['render_json']['p50_ms']} ms (JobListRenderer, unchanged jobs' JSON reused; in a worker thread).",
    ]
    lines += ["", "The machine is shared (other test runs), so figures vary between runs; see server.json for p90/mean/max."]
    write_report("server", results, "\n".join(lines) + "\n")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=1000, help="jobs in the store for the list benchmark")
    parser.add_argument("--list-samples", type=int, default=200)
    parser.add_argument("--event-jobs", type=int, default=10, help="short real jobs whose events are timed")
    parser.add_argument("--status-samples", type=int, default=300)
    args = parser.parse_args()

    home = Path(tempfile.mkdtemp(prefix="paddle-nbext-bench-"))
    seed_jobs(home, args.jobs, getpass.getuser())
    breakdown = list_breakdown(home, getpass.getuser())
    server = Server(home)
    try:
        listed = requests.get(f"{server.api}/jobs", headers=server.headers, timeout=60).json()["jobs"]
        assert len(listed) == args.jobs, len(listed)
        jobs_list = timed_gets(f"{server.api}/jobs", server.headers, args.list_samples)
        status_idle = timed_gets(f"{server.base}api/status", server.headers, args.status_samples)
        event_delay = asyncio.run(measure_event_delay(server, args.event_jobs))
        status_streams = asyncio.run(measure_status_under_streams(server, 50, 50, args.status_samples))
    finally:
        server.stop()
        shutil.rmtree(home, ignore_errors=True)

    results: dict[str, Any] = {
        "when": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "machine": machine(),
        "jobs_in_store": args.jobs,
        "jobs_list": latency_summary(jobs_list),
        "jobs_list_breakdown": breakdown,
        "event_delay": latency_summary(event_delay),
        "status_idle": latency_summary(status_idle),
        "status_with_streams": {**latency_summary(status_streams), "log_follow_streams": 50, "event_streams": 50},
        "goals": GOALS,
    }
    results["goals_met"] = {
        "jobs_list_p50": results["jobs_list"]["p50_ms"] < GOALS["jobs_list_p50_ms"],
        "event_delay_p50": results["event_delay"]["p50_ms"] < GOALS["event_delay_p50_ms"],
        "status_p99": results["status_with_streams"]["p99_ms"] < GOALS["status_p99_ms_with_streams"],
    }
    write_results(results)
    print(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
