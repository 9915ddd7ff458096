"""Benchmark: a collective job of 2 trainers x 3 CPU (gloo) ranks (examples/collective_train.py,
60 steps) run three ways, interleaved, on this machine:

* `procs`   - through `LocalBackend` with `procs_per_trainer: 3` (the launcher starts the ranks);
* `launch`  - through `LocalBackend` with the entry point `python -m paddle.distributed.launch
              --nproc_per_node 3 ...` (one launch per trainer, rendezvous from the job);
* `raw`     - `python -m paddle.distributed.launch --nproc_per_node 3` started by hand twice, as
              two "nodes" (two process groups on this machine) with `--master`, `--nnodes 2` and
              `--rank`, the same script; no paddle-nbext code involved.

Wall time is from "go" to the job ended (`procs`, `launch`: submit to a terminal status, job dir,
snapshot and master included) or both launches exited (`raw`).  Writes
benchmarks/results/ranks.json and ranks.md.

    .venv/bin/python benchmarks/bench_ranks.py [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from harness import goal, machine, write_report

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "collective_train.py"
PYTHON = sys.executable
SCRIPT = ["collective_train.py", "--steps", "60"]
LAUNCH = [PYTHON, "-m", "paddle.distributed.launch", "--nproc_per_node", "3"]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def run_raw(workdir: Path, round_number: int) -> float:
    """Two launches by hand, one per "node", as a user would start them on two machines."""
    master = f"127.0.0.1:{free_port()}"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "CPU_NUM": "1"}
    start = time.monotonic()
    launches = [
        subprocess.Popen(
            [*LAUNCH, "--master", master, "--nnodes", "2", "--rank", str(rank), "--log_dir", f"raw-{round_number}-{rank}", *SCRIPT],
            cwd=workdir,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for rank in range(2)
    ]
    codes = [launch.wait(timeout=600) for launch in launches]
    elapsed = time.monotonic() - start
    if codes != [0, 0]:
        raise RuntimeError(f"the raw launches ended with {codes}")
    return elapsed


def run_local(home: Path, name: str, entry: list[str], procs: int) -> float:
    from paddle_nbext.model.spec import JobSpec
    from paddle_nbext_server.backends.base import SubmitRequest
    from paddle_nbext_server.backends.local import LocalBackend
    from paddle_nbext_server.events import EventHub

    async def scenario() -> float:
        backend = LocalBackend(events=EventHub(), jobs_dir=str(home / ".paddle-jobs"))
        spec = JobSpec.from_dict(
            {
                "job_name": name,
                "entry_point": " ".join(entry),
                "trainer_package": "code",
                "mode": "collective",
                "trainers": 2,
                "procs_per_trainer": procs,
                "trainer_cpu": "500m",
                "trainer_mem": "3Gi",
            }
        )
        start = time.monotonic()
        await backend.submit(SubmitRequest(spec=spec, owner="bench", home=home))
        while True:
            status = await backend.get_job(name, "bench")
            if status.terminal:
                break
            await asyncio.sleep(0.05)
        elapsed = time.monotonic() - start
        if status.phase != "Succeeded":
            raise RuntimeError(f"local job {name} ended {status.phase}: {status.message}")
        return elapsed

    return asyncio.run(scenario())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-ranks-"))
    home = work / "home"
    (home / "code").mkdir(parents=True)
    shutil.copy(EXAMPLE, home / "code" / EXAMPLE.name)
    shutil.copy(EXAMPLE, work / EXAMPLE.name)
    times: dict[str, list[float]] = {"procs": [], "launch": [], "raw": []}
    order = list(times)
    try:
        for round_number in range(args.rounds):
            for variant in order[round_number % 3 :] + order[: round_number % 3]:  # rotate so no variant always goes first
                if variant == "procs":
                    elapsed = run_local(home, f"procs-{round_number}", ["python", *SCRIPT], 3)
                elif variant == "launch":
                    entry = ["python", "-m", "paddle.distributed.launch", "--nproc_per_node", "3", *SCRIPT]
                    elapsed = run_local(home, f"launch-{round_number}", entry, 1)
                else:
                    elapsed = run_raw(work, round_number)
                times[variant].append(elapsed)
                print(f"round {round_number} {variant}: {elapsed:.2f}s", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    medians = {k: statistics.median(v) for k, v in times.items()}
    result: dict[str, Any] = {
        "job": "collective, 2 trainers x 3 gloo ranks, examples/collective_train.py --steps 60",
        "machine": machine(),
        "rounds": args.rounds,
        "wall_seconds": times,
        "median_seconds": medians,
        "ratio_procs_vs_raw_launch": medians["procs"] / medians["raw"],
        "ratio_launch_entry_vs_raw_launch": medians["launch"] / medians["raw"],
        "goals": {"ratio_procs_vs_raw_launch": "<= 1.0"},
    }
    md = [
        "# Ranks per trainer: local job vs paddle.distributed.launch on two process groups",
        "",
        f"{result['job']}; {args.rounds} interleaved rounds on {result['machine']['cpus']} CPUs (Python {result['machine']['python']}).",
        "",
        "| way | median wall (s) | runs (s) |",
        "|---|---|---|",
        *(f"| {k} | {medians[k]:.2f} | {', '.join(f'{t:.2f}' for t in v)} |" for k, v in times.items()),
        "",
        "`procs`: a local job with `procs_per_trainer: 3`; `launch`: a local job whose entry point is "
        "`python -m paddle.distributed.launch --nproc_per_node 3 ...`; `raw`: that launch started by hand twice "
        "(`--master`, `--nnodes 2`, `--rank 0/1`). The local jobs' times include submit, snapshot and the job master.",
        "",
        f"- procs_per_trainer job / raw launch: **{result['ratio_procs_vs_raw_launch']:.2f}** ({goal('<= 1.0', result['ratio_procs_vs_raw_launch'] <= 1.0)})",
        f"- launch entry point job / raw launch: {result['ratio_launch_entry_vs_raw_launch']:.2f} (recorded)",
        "",
        "Produced by `.venv/bin/python benchmarks/bench_ranks.py`.",
        "",
    ]
    print(write_report("ranks", result, "\n".join(md)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
