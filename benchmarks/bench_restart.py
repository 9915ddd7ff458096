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

Writes benchmarks/results/restart.json and restart.md.

    .venv/bin/python benchmarks/bench_restart.py [--rounds 2]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench_real_node import RESOURCES, RESULTS, STEP, WAIT, Bench, summary
from kubernetes import client

GOAL = 1.2
JOB = {"mode": "ps", "pservers": 1, "trainers": 2, "entry_point": "python ps_train.py --steps 100000 --print-every 20 --step-delay 0.05"}
REPLICAS = 3


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


def one_round(bench: Bench, name: str) -> dict[str, float]:
    started = time.monotonic()
    answer = bench.server.api("POST", "jobs", body={"job_name": name, "trainer_package": "examples", **RESOURCES, **JOB})
    if answer.status_code != 201:
        raise RuntimeError(f"submit {name}: {answer.status_code} {answer.text}")
    fresh = until("the first step", lambda: first_step(bench, name, "0")) - started
    victim = next(p for p in attempt_pods(bench, name, "0") if "trainer-1-" in p.metadata.name)
    evicted = time.monotonic()
    bench.core.create_namespaced_pod_eviction(
        victim.metadata.name,
        bench.namespace,
        {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": victim.metadata.name, "namespace": bench.namespace}},
    )
    running = (
        until(
            "every replica of attempt 1 Running",
            lambda: len(pods := attempt_pods(bench, name, "1")) == REPLICAS and all(p.status.phase == "Running" for p in pods),
        )
        - evicted
    )
    restarted = until("the first step of attempt 1", lambda: first_step(bench, name, "1")) - evicted
    bench.server.api("POST", f"jobs/{name}/cancel")
    until("the end", lambda: bench.server.api("GET", f"jobs/{name}").json().get("finished"))
    bench.server.api("DELETE", f"jobs/{name}")
    return {"fresh_first_step": round(fresh, 2), "restart_running": round(running, 2), "restart_first_step": round(restarted, 2)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    if os.geteuid() != 0:
        print("bench_restart: the real node needs root", file=sys.stderr)
        return 1
    bench = Bench(Path(tempfile.mkdtemp(prefix="pnb-bench-restart-")))
    rounds: list[dict[str, float]] = []
    try:
        for number in range(args.rounds):
            marks = one_round(bench, f"restart-{number}")
            rounds.append(marks)
            print(f"bench_restart: round {number}: {marks}", flush=True)
    finally:
        bench.close()
    figures = {key: summary([r[key] for r in rounds]) for key in ("fresh_first_step", "restart_running", "restart_first_step")}
    ratio = figures["restart_first_step"]["median"] / figures["fresh_first_step"]["median"]
    result = {
        "when": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "command": f"python benchmarks/bench_restart.py --rounds {args.rounds}",
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
        "job": JOB,
        "figures": figures,
        "ratio": round(ratio, 3),
        "goal": f"restart to first step <= {GOAL} x fresh submit to first step",
        "goal_met": ratio <= GOAL,
        "rounds": rounds,
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "restart.json").write_text(json.dumps(result, indent=2) + "\n")

    def cell(key: str) -> str:
        return f"{figures[key]['median']} ({figures[key]['min']}-{figures[key]['max']})"

    lines = [
        "# Whole-job restart after an eviction, against a fresh submit",
        "",
        f"`{result['command']}`, {result['when']}, {os.cpu_count()} CPUs; GEO job, 1 pserver + 2 trainers; seconds (median, min-max).",
        "",
        "| fresh submit to first step | eviction to every replica Running again | eviction to first step again |",
        "| --- | --- | --- |",
        f"| {cell('fresh_first_step')} | {cell('restart_running')} | {cell('restart_first_step')} |",
        "",
        f"Restart / fresh: {result['ratio']} (goal <= {GOAL}: {'met' if result['goal_met'] else 'NOT met'}).",
        "",
    ]
    (RESULTS / "restart.md").write_text("\n".join(lines))
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
