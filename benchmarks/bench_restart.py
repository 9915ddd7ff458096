"""Benchmark: a whole-job restart after an eviction, against a fresh submit of the same job.

On the real node (the same setup as bench_real_node.py: control plane, real node, a real
``jupyter server`` with the ``kubernetes`` backend as uid 1000), each round submits a GEO job
(1 pserver, 2 trainers, examples/ps_train.py) through ``POST /jobs`` and records:

- **fresh**: seconds from the submit to trainer 0's first ``step N loss`` line;
- **restart**: then trainer 1 is evicted (the Eviction API, as a node drain does), and seconds
  from the eviction to every replica of the next attempt Running and to trainer 0's first step
  in that attempt (the master stops every replica, waits for their pods to be gone, and makes the
  Jobs again).

Goal (issue 22): restart to first step <= 1.2 x the fresh submit's.

With ``--checkpoints`` (issue 26) each round is a collective job (2 trainers,
examples/collective_train.py saving a checkpoint every 20 steps) that is evicted once it has a
checkpoint, and the round also records **eviction to the first step after resume** (trainer 0 of
the next attempt printed "resumed from step N" and then a step) and **eviction to the job saying
"resumed from step N"** (the server reads the checkpoint in the home for the message).

Writes benchmarks/results/restart.json and restart.md (``--checkpoints``: restart_resume.json
and restart_resume.md).

    .venv/bin/python benchmarks/bench_restart.py [--rounds 2] [--checkpoints]
"""

from __future__ import annotations

import argparse
import datetime
import os
import re
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench_real_node import RESOURCES, STEP, WAIT, Bench
from harness import goal, machine, median_range, min_median_max, write_report
from kubernetes import client

GOAL = 1.2
JOB: dict[str, Any] = {
    "mode": "ps",
    "pservers": 1,
    "trainers": 2,
    "entry_point": "python ps_train.py --steps 100000 --print-every 20 --step-delay 0.05",
}
REPLICAS = 3
#: `--checkpoints`: a collective job that saves every 20 steps and resumes from the latest.
RESUME_JOB: dict[str, Any] = {
    "mode": "collective",
    "trainers": 2,
    "entry_point": "python collective_train.py --steps 100000 --print-every 1 --step-delay 0.05 --checkpoint-every 20",
}
RESUMED = re.compile(r"trainer 0 resumed from step (\d+)")


def attempt_pods(bench: Bench, name: str, attempt: str) -> list[Any]:
    return [
        p
        for p in bench.pods(name)
        if (p.metadata.labels or {}).get("paddle-nbext/attempt") == attempt
        and (p.metadata.labels or {}).get("paddle-nbext/role") != "master"
    ]


def until(what: str, check: Any) -> float:
    """Seconds (monotonic clock) at which `check()` first held."""
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        if check():
            return time.monotonic()
        time.sleep(0.2)
    raise RuntimeError(f"bench_restart: {what} not seen within {WAIT:.0f} s")


def first_step(bench: Bench, name: str, attempt: str) -> bool:
    for pod in attempt_pods(bench, name, attempt):
        if "trainer-0-" in pod.metadata.name and pod.status.phase == "Running":
            try:
                if STEP.search(bench.core.read_namespaced_pod_log(pod.metadata.name, bench.namespace)):
                    return True
            except client.ApiException:
                return False
    return False


def trainer0_log(bench: Bench, name: str, attempt: str) -> str:
    for pod in attempt_pods(bench, name, attempt):
        if "trainer-0-" in pod.metadata.name and pod.status.phase == "Running":
            try:
                return str(bench.core.read_namespaced_pod_log(pod.metadata.name, bench.namespace))
            except client.ApiException:
                return ""
    return ""


def first_step_after_resume(bench: Bench, name: str, attempt: str) -> bool:
    """Trainer 0 of `attempt` loaded a checkpoint and then trained a step."""
    log = trainer0_log(bench, name, attempt)
    found = RESUMED.search(log)
    return found is not None and STEP.search(log, found.end()) is not None


def latest_checkpoint(bench: Bench, name: str) -> int | None:
    answer = bench.server.api("GET", f"jobs/{name}/checkpoints")
    latest = answer.json().get("latest") if answer.status_code == 200 else None
    return int(latest["step"]) if latest else None


def one_round(bench: Bench, name: str, checkpoints: bool = False) -> dict[str, float]:
    job = RESUME_JOB if checkpoints else JOB
    replicas = int(job.get("pservers") or 0) + int(job["trainers"])
    started = time.monotonic()
    answer = bench.server.api("POST", "jobs", body={"job_name": name, "trainer_package": "examples", **RESOURCES, **job})
    if answer.status_code != 201:
        raise RuntimeError(f"submit {name}: {answer.status_code} {answer.text}")
    fresh = until("the first step", lambda: first_step(bench, name, "0")) - started
    if checkpoints:
        until("a checkpoint", lambda: latest_checkpoint(bench, name) is not None)
    victim = next(p for p in attempt_pods(bench, name, "0") if "trainer-1-" in p.metadata.name)
    evicted = time.monotonic()
    bench.core.create_namespaced_pod_eviction(
        victim.metadata.name,
        bench.namespace,
        client.V1Eviction.model_validate(
            {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": victim.metadata.name, "namespace": bench.namespace}}
        ),
    )
    # `--checkpoints`: the job's message is watched from the eviction on, in the same loops as
    # the other marks, so each figure is when its own condition first held.
    seen: dict[str, float] = {}

    def said() -> bool:
        if (
            checkpoints
            and "restart_message" not in seen
            and "resumed from step" in bench.server.api("GET", f"jobs/{name}").json()["message"]
        ):
            seen["restart_message"] = time.monotonic() - evicted
        return "restart_message" in seen

    def all_running() -> bool:
        said()
        pods = attempt_pods(bench, name, "1")
        return len(pods) == replicas and all(p.status.phase == "Running" for p in pods)

    running = until("every replica of attempt 1 Running", all_running) - evicted
    marks = {"fresh_first_step": round(fresh, 2), "restart_running": round(running, 2)}
    if checkpoints:

        def both() -> bool:
            if "restart_first_step" not in seen and first_step_after_resume(bench, name, "1"):
                seen["restart_first_step"] = time.monotonic() - evicted
            return said() and "restart_first_step" in seen

        until("the first step after resume and the job saying where it resumed from", both)
        step = RESUMED.search(trainer0_log(bench, name, "1"))
        message = bench.server.api("GET", f"jobs/{name}").json()["message"]
        print(f"bench_restart: {name} resumed from step {step.group(1) if step else '?'}; the job says: {message}", flush=True)
        marks.update({key: round(value, 2) for key, value in seen.items()})
    else:
        marks["restart_first_step"] = round(until("the first step of attempt 1", lambda: first_step(bench, name, "1")) - evicted, 2)
    bench.server.api("POST", f"jobs/{name}/cancel")
    until("the end", lambda: bench.server.api("GET", f"jobs/{name}").json().get("finished"))
    bench.server.api("DELETE", f"jobs/{name}")
    return marks


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--checkpoints", action="store_true", help="a collective job that resumes from its checkpoint (issue 26)")
    args = parser.parse_args()
    if os.geteuid() != 0:
        print("bench_restart: the real node needs root", file=sys.stderr)
        return 1
    bench = Bench(Path(tempfile.mkdtemp(prefix="pnb-bench-restart-")))
    rounds: list[dict[str, float]] = []
    try:
        for number in range(args.rounds):
            marks = one_round(bench, f"restart-{number}", checkpoints=args.checkpoints)
            rounds.append(marks)
            print(f"bench_restart: round {number}: {marks}", flush=True)
    finally:
        bench.close()
    keys = ["fresh_first_step", "restart_running", "restart_first_step"] + (["restart_message"] if args.checkpoints else [])
    figures = {key: min_median_max([r[key] for r in rounds]) for key in keys}
    ratio = figures["restart_first_step"]["median"] / figures["fresh_first_step"]["median"]
    result: dict[str, Any] = {
        "when": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "command": f"python benchmarks/bench_restart.py --rounds {args.rounds}" + (" --checkpoints" if args.checkpoints else ""),
        "machine": machine(),
        "job": RESUME_JOB if args.checkpoints else JOB,
        "figures": figures,
        "ratio": round(ratio, 3),
        "goal": f"restart to first step <= {GOAL} x fresh submit to first step",
        "goal_met": ratio <= GOAL,
        "rounds": rounds,
    }

    def cell(key: str) -> str:
        return median_range(figures[key])

    if args.checkpoints:
        lines = [
            "# Eviction to the first step after resume from a checkpoint (issue 26)",
            "",
            f"`{result['command']}`, {result['when']}, {os.cpu_count()} CPUs; collective job, 2 trainers, a checkpoint "
            "every 20 steps (examples/collective_train.py), trainer 1 evicted once one exists; seconds (median, min-max).",
            "",
            "| fresh submit to first step | eviction to every replica Running again | eviction to first step after resume "
            "| eviction to the job saying 'resumed from step N' |",
            "| --- | --- | --- | --- |",
            f"| {cell('fresh_first_step')} | {cell('restart_running')} | {cell('restart_first_step')} | {cell('restart_message')} |",
            "",
            f"Resume / fresh: {result['ratio']} ({goal(f'<= {GOAL}', result['goal_met'])}).",
            "",
        ]
        print(write_report("restart_resume", result, "\n".join(lines)))
        return 0
    lines = [
        "# Whole-job restart after an eviction, against a fresh submit",
        "",
        f"`{result['command']}`, {result['when']}, {os.cpu_count()} CPUs; GEO job, 1 pserver + 2 trainers; seconds (median, min-max).",
        "",
        "| fresh submit to first step | eviction to every replica Running again | eviction to first step again |",
        "| --- | --- | --- |",
        f"| {cell('fresh_first_step')} | {cell('restart_running')} | {cell('restart_first_step')} |",
        "",
        f"Restart / fresh: {result['ratio']} ({goal(f'<= {GOAL}', result['goal_met'])}).",
        "",
    ]
    print(write_report("restart", result, "\n".join(lines)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
