"""Benchmark: the same 2-pserver + 2-trainer PS job (examples/ps_train.py, GEO, 300 steps) run
three ways, interleaved, on this machine:

* `local`   - through `LocalBackend` (job dir, snapshot, detached master, launcher per replica);
* `launch`  - `python -m paddle.distributed.launch --server_num=2 --trainer_num=2`;
* `bare`    - four plain processes with the minimal environment, the script itself waiting for
              the pserver ports and stopping the pservers when the trainers are done.

Wall time is from "go" to "all trainers done and pservers stopped".  Also measures the memory
paddle-nbext adds per job: the master's peak RSS and the launcher's peak before it execs the entry
point.  Writes benchmarks/results/local.json and local.md.

    .venv/bin/python benchmarks/bench_local.py [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "ps_train.py"
RESULTS = Path(__file__).resolve().parent / "results"
PYTHON = sys.executable


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def wait_ports(ports: list[int], timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    for port in ports:
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"pserver port {port} never opened") from None
                time.sleep(0.05)


def run_bare(workdir: Path) -> float:
    """Four processes, minimal env (docs/paddle-facts.md), no paddle-nbext code involved."""
    ports = [free_port(), free_port()]
    plist = ",".join(f"127.0.0.1:{p}" for p in ports)
    common = {
        **os.environ,
        "FLAGS_enable_pir_api": "0",
        "PADDLE_PSERVERS_IP_PORT_LIST": plist,
        "PADDLE_TRAINERS_NUM": "2",
        "POD_IP": "127.0.0.1",
        "PYTHONUNBUFFERED": "1",
    }
    start = time.monotonic()
    logs = open(workdir / "bare.log", "ab")
    servers = [
        subprocess.Popen(
            [PYTHON, str(EXAMPLE)],
            cwd=workdir,
            stdout=logs,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env={**common, "TRAINING_ROLE": "PSERVER", "PADDLE_PORT": str(port)},
        )
        for port in ports
    ]
    try:
        wait_ports(ports)
        trainers = [
            subprocess.Popen(
                [PYTHON, str(EXAMPLE)],
                cwd=workdir,
                stdout=logs,
                stderr=subprocess.STDOUT,
                env={**common, "TRAINING_ROLE": "TRAINER", "PADDLE_TRAINER_ID": str(i), "PADDLE_PORT": str(free_port())},
            )
            for i in range(2)
        ]
        codes = [t.wait(timeout=300) for t in trainers]
        if any(codes):
            raise RuntimeError(f"bare trainers failed: {codes}")
    finally:
        for server in servers:
            os.killpg(server.pid, signal.SIGTERM)
        for server in servers:
            server.wait()
        logs.close()
    return time.monotonic() - start


def _children_of(pid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as handle:
                    if int(handle.read().rpartition(")")[2].split()[1]) == pid:
                        found.append(int(entry))
            except (OSError, ValueError, IndexError):
                continue
    return found


def run_launch(workdir: Path) -> float:
    """paddle.distributed.launch never returns for a PS job (its pservers block forever), so its
    time is taken when both trainers have logged "done"; then its processes are stopped."""
    log_dir = workdir / f"launch-log-{time.monotonic_ns()}"
    start = time.monotonic()
    launch = subprocess.Popen(
        [PYTHON, "-m", "paddle.distributed.launch", "--server_num=2", "--trainer_num=2", "--log_dir", str(log_dir), str(EXAMPLE)],
        cwd=workdir,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "FLAGS_enable_pir_api": "0"},
        start_new_session=True,
    )
    try:
        while True:
            done = 0
            for i in range(2):
                try:
                    done += f"trainer {i} done" in (log_dir / f"workerlog.{i}").read_text(errors="replace")
                except OSError:
                    pass
            if done == 2:
                return time.monotonic() - start
            if launch.poll() is not None:
                raise RuntimeError(f"paddle.distributed.launch exited {launch.returncode} before the trainers finished")
            if time.monotonic() - start > 600:
                raise RuntimeError("paddle.distributed.launch trainers did not finish within 600s")
            time.sleep(0.05)
    finally:
        for child in _children_of(launch.pid):
            try:
                os.killpg(os.getpgid(child), signal.SIGKILL)
            except OSError:
                pass
        os.killpg(launch.pid, signal.SIGKILL)
        launch.wait()


def master_rss_sampler(job_dir: Path, peak: list[int]) -> None:
    try:
        pid = int((job_dir / "master.pid").read_text())
        with open(f"/proc/{pid}/status") as handle:
            for line in handle:
                if line.startswith("VmHWM:"):
                    peak[0] = max(peak[0], int(line.split()[1]) * 1024)
    except (OSError, ValueError):
        pass


def run_local(home: Path, name: str) -> tuple[float, int]:
    from paddle_nbext.model.spec import JobSpec
    from paddle_nbext_server.backends.base import SubmitRequest
    from paddle_nbext_server.backends.local import LocalBackend
    from paddle_nbext_server.events import EventHub

    async def scenario() -> tuple[float, int]:
        backend = LocalBackend(events=EventHub(), jobs_dir=str(home / ".paddle-jobs"))
        spec = JobSpec.from_dict(
            {
                "job_name": name,
                "entry_point": "python ps_train.py",
                "trainer_package": "code",
                "pservers": 2,
                "trainers": 2,
                "pserver_cpu": "500m",
                "trainer_cpu": "500m",
            }
        )
        peak = [0]
        start = time.monotonic()
        await backend.submit(SubmitRequest(spec=spec, owner="bench", home=home))
        job_dir = home / ".paddle-jobs" / name
        while True:
            await asyncio.to_thread(master_rss_sampler, job_dir, peak)
            status = await backend.get_job(name, "bench")
            if status.terminal:
                break
            await asyncio.sleep(0.05)
        elapsed = time.monotonic() - start
        if status.phase != "Succeeded":
            raise RuntimeError(f"local job ended {status.phase}: {status.message}")
        return elapsed, peak[0]

    return asyncio.run(scenario())


def launcher_peak_rss(workdir: Path) -> int:
    """Peak RSS of the launcher process before it execs (exec keeps the max-RSS record)."""
    env = {
        **os.environ,
        "PADDLE_NBEXT_JOB": "bench",
        "PADDLE_NBEXT_MODE": "collective",
        "PADDLE_NBEXT_ROLE": "trainer",
        "PADDLE_NBEXT_INDEX": "0",
        "PADDLE_NBEXT_TRAINER_ENDPOINTS": "127.0.0.1:1",
        "PADDLE_NBEXT_ENTRY": "true",
        "PADDLE_NBEXT_WORKDIR": str(workdir),
    }
    code = (
        "import resource, subprocess, sys; subprocess.run([sys.executable, sys.argv[1]], check=True); "
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)"
    )
    launcher = ROOT / "server_ext" / "paddle_nbext_server" / "runtime" / "launcher.py"
    out = subprocess.run([PYTHON, "-c", code, str(launcher)], env=env, capture_output=True, text=True, check=True)
    return int(out.stdout.strip()) * 1024


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-local-"))
    home = work / "home"
    (home / "code").mkdir(parents=True)
    shutil.copy(EXAMPLE, home / "code" / "ps_train.py")
    times: dict[str, list[float]] = {"local": [], "launch": [], "bare": []}
    master_peaks: list[int] = []
    order = ["local", "launch", "bare"]
    try:
        for round_number in range(args.rounds):
            for variant in order[round_number % 3 :] + order[: round_number % 3]:  # rotate so no variant always goes first
                if variant == "local":
                    elapsed, peak = run_local(home, f"bench-{round_number}")
                    master_peaks.append(peak)
                elif variant == "launch":
                    elapsed = run_launch(work)
                else:
                    elapsed = run_bare(work)
                times[variant].append(elapsed)
                print(f"round {round_number} {variant}: {elapsed:.2f}s", flush=True)
        launcher_peak = launcher_peak_rss(work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    medians = {k: statistics.median(v) for k, v in times.items()}
    mib = 2**20
    result = {
        "job": "2 pservers + 2 trainers, examples/ps_train.py, GEO, 300 steps",
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform()},
        "rounds": args.rounds,
        "wall_seconds": times,
        "median_seconds": medians,
        "ratio_local_vs_launch": medians["local"] / medians["launch"],
        "ratio_local_vs_bare": medians["local"] / medians["bare"],
        "master_peak_rss_mib": max(master_peaks) / mib,
        "launcher_peak_rss_mib": launcher_peak / mib,
        "note_launch": "paddle.distributed.launch never exits for this PS job (pservers block forever); its time is measured "
        "until both trainers logged 'done', after which the benchmark kills it. local and bare include stopping the pservers.",
        "note": "The launcher execs the entry point, so its memory is transient (gone once the replica runs); "
        "the master stays for the job's lifetime.",
        "goals": {"ratio_local_vs_launch": "<= 0.9", "ratio_local_vs_bare": "<= 1.1", "extra_rss_mib": "<= 30"},
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "local.json").write_text(json.dumps(result, indent=2) + "\n")
    md = [
        "# Local backend vs paddle.distributed.launch vs bare processes",
        "",
        f"{result['job']}; {args.rounds} interleaved rounds on {os.cpu_count()} CPUs (Python {platform.python_version()}).",
        "",
        "| launch | median wall (s) | runs (s) |",
        "|---|---|---|",
        *(f"| {k} | {medians[k]:.2f} | {', '.join(f'{t:.2f}' for t in v)} |" for k, v in times.items()),
        "",
        "paddle.distributed.launch never exits for this PS job (its pservers block forever): its time is taken when both "
        "trainers logged `done` (then the benchmark kills it); `local` and `bare` include stopping the pservers.",
        "",
        f"- local / paddle.distributed.launch: **{result['ratio_local_vs_launch']:.2f}** (goal <= 0.9)",
        f"- local / bare processes: **{result['ratio_local_vs_bare']:.2f}** (goal <= 1.1)",
        f"- job master peak RSS: **{result['master_peak_rss_mib']:.1f} MiB**; launcher peak before exec: "
        f"{result['launcher_peak_rss_mib']:.1f} MiB (transient, per replica) (goal: <= 30 MiB extra per job)",
        "",
        "Produced by `.venv/bin/python benchmarks/bench_local.py`.",
        "",
    ]
    (RESULTS / "local.md").write_text("\n".join(md))
    print("\n".join(md))
    return 0


if __name__ == "__main__":
    sys.exit(main())
