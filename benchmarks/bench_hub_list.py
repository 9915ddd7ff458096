"""Benchmark: the panel's job list with 200 jobs of the user, from the notebook pod a JupyterHub spawned.

A control plane and the real node (tests/support/controlplane) are started, and a JupyterHub from
the shipped recipe beside them (``support.hub_site``, as the suite's ``hub`` fixture runs it); the
hub spawns the user's notebook pod on the real node (the shipped RBAC, home_volume "auto", the
in-cluster ServiceAccount).  Then 200 jobs of that user are written as the backend writes them
(``bench_owner_scope.fill``: a record ConfigMap and one unschedulable trainer pod each, labelled
for the owner), and once the server in the pod lists all 200 (its watch cache has them), ``GET
/paddle/api/v1/jobs`` (what the panel loads) is timed ``--requests`` times after 5 warm-up calls:

- **in the pod**: from a process in the notebook's container to its own server (127.0.0.1:8888,
  the user's hub token; a new connection per request, as urllib makes them) — the server's cost;
- **through the hub's proxy**: from the host, as the browser's panel reaches it
  (``http://<node>:8000/user/<name>/...``, one keep-alive session).

Goal (issue 24, "Performance"): p50 < 300 ms.  Writes benchmarks/results/hub_list.json and
hub_list.md.

    .venv/bin/python benchmarks/bench_hub_list.py [--jobs 200] [--requests 50]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import requests

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_hub import Bench as HubBench  # noqa: E402
from bench_owner_scope import fill  # noqa: E402
from bench_real_node import new_namespace  # noqa: E402
from harness import machine_line, percentile, verdict, write_report  # noqa: E402
from kubernetes import client  # noqa: E402
from kubernetes import config as kube_config  # noqa: E402
from kubernetes.stream import stream  # noqa: E402
from support.controlplane import ControlPlane  # noqa: E402
from support.hub_site import HUB_ROLE, PUBLIC_URL, HubSite  # noqa: E402
from support.realnode_notebook import apply_shipped_rbac  # noqa: E402
from support.realnode_site import RealNodeSite  # noqa: E402

USER = "lena"
GOAL_MS = 300.0
WARMUP = 5
LIST_WAIT = 300.0

IN_POD = r"""
import json, sys, time, urllib.request
url, token, warmup, count = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
request = urllib.request.Request(url, headers={"Authorization": "token " + token})
times, size, jobs = [], 0, 0
for index in range(warmup + count):
    started = time.perf_counter()
    with urllib.request.urlopen(request, timeout=60) as answer:
        body = answer.read()
    elapsed = (time.perf_counter() - started) * 1000
    if index >= warmup:
        times.append(elapsed)
    size, jobs = len(body), len(json.loads(body)["jobs"])
print(json.dumps({"ms": times, "bytes": size, "jobs": jobs}))
"""


def summary(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {
        "p50_ms": round(statistics.median(ordered), 1),
        "p95_ms": round(percentile(ordered, 95), 1),
        "min_ms": round(ordered[0], 1),
        "max_ms": round(ordered[-1], 1),
        "count": len(ordered),
    }


class Bench:
    account_kubeconfig = HubBench.account_kubeconfig  # a token kubeconfig of a ServiceAccount (made and bound)

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.plane = ControlPlane(workdir / "controlplane").start()
        self.site = RealNodeSite.start(self.plane, workdir)
        self.admin = kube_config.new_client_from_config(config_file=str(self.plane.admin_kubeconfig))
        self.core = client.CoreV1Api(self.admin)
        self.namespace = new_namespace(self.core, "pnb-bench-hub-list-")
        apply_shipped_rbac(self.admin, self.namespace)
        self.hub = HubSite(self.site, self.admin, self.namespace, workdir / "hub")
        self.hub.workdir.mkdir()
        self.hub.prepare(str(self.account_kubeconfig("jupyterhub", HUB_ROLE)), [USER])
        self.hub.start()

    def close(self) -> None:
        for step in (self.hub.stop, lambda: self.site.release_volumes(self.admin), self.site.stop, self.plane.stop):
            try:
                step()
            except Exception as error:  # noqa: BLE001 - tear down the rest whatever one step says
                print(f"bench_hub_list: teardown: {error}", file=sys.stderr)

    def run(self, jobs: int, count: int) -> dict[str, Any]:
        started = time.monotonic()
        self.hub.start_server(USER)
        spawn = time.monotonic() - started
        token = self.hub.user_token(USER)
        filled = time.monotonic()
        fill(self.core, self.namespace, USER, jobs)
        fill_seconds = time.monotonic() - filled
        session = requests.Session()
        url = f"{PUBLIC_URL}/user/{USER}/paddle/api/v1/jobs"
        headers = {"Authorization": f"token {token}"}
        deadline = time.monotonic() + LIST_WAIT
        listed = 0
        while listed < jobs:
            answer = session.get(url, headers=headers, timeout=60)
            listed = len(answer.json().get("jobs") or []) if answer.status_code == 200 else 0
            if time.monotonic() > deadline:
                raise RuntimeError(f"the server in the pod lists {listed} of {jobs} jobs after {LIST_WAIT:.0f} s: {answer.text[:300]}")
            time.sleep(0.2)
        seen = time.monotonic() - filled
        proxy: list[float] = []
        size = 0
        for index in range(WARMUP + count):
            begun = time.perf_counter()
            answer = session.get(url, headers=headers, timeout=60)
            elapsed = (time.perf_counter() - begun) * 1000
            if answer.status_code != 200:
                raise RuntimeError(f"GET jobs through the proxy: {answer.status_code} {answer.text[:300]}")
            if index >= WARMUP:
                proxy.append(elapsed)
            size = len(answer.content)
        try:
            pod = self.in_pod(token, count)
        except Exception as error:  # noqa: BLE001 - the proxy's figures stand on their own; say why these are missing
            pod = {"error": f"{type(error).__name__}: {error}"}
        return {
            "jobs": jobs,
            "requests": count,
            "spawn_seconds": round(spawn, 2),
            "fill_seconds": round(fill_seconds, 2),
            "all_listed_after_seconds": round(seen, 2),
            "body_bytes": size,
            "in_pod": pod,
            "through_proxy": summary(proxy),
            "proxy_ms": [round(v, 2) for v in proxy],
        }

    def in_pod(self, token: str, count: int) -> dict[str, Any]:
        """The same GET from a process in the notebook's container to its own server."""
        url = f"http://127.0.0.1:8888/user/{USER}/paddle/api/v1/jobs"
        pods = self.core.list_namespaced_pod(
            self.namespace, label_selector=f"hub.jupyter.org/username={USER},component=singleuser-server"
        ).items
        if not pods:
            raise RuntimeError(f"no notebook pod of {USER} in {self.namespace}")
        notebook = pods[0].metadata
        assert notebook is not None  # every pod the API server lists has its metadata
        output = stream(
            self.core.connect_get_namespaced_pod_exec,
            notebook.name,
            self.namespace,
            container="notebook",
            command=["python3", "-c", IN_POD, url, token, str(WARMUP), str(count)],
            stderr=True,
            stdin=False,
            stdout=True,
            tty=False,
            _preload_content=True,
        )
        line = [text for text in str(output).splitlines() if text.startswith("{")]
        if not line:
            raise RuntimeError(f"the in-pod client printed no figures: {str(output)[-1000:]}")
        figures = json.loads(line[-1])
        return {
            **summary(figures["ms"]),
            "jobs_listed": figures["jobs"],
            "body_bytes": figures["bytes"],
            "ms": [round(v, 2) for v in figures["ms"]],
        }


def markdown(result: dict[str, Any]) -> str:
    run = result["run"]
    pod, proxy = run["in_pod"], run["through_proxy"]

    def row(where: str, figures: dict[str, Any]) -> str:
        if "error" in figures:
            return f"| {where} | not measured: {figures['error']} | | | |"
        return f"| {where} | {figures['p50_ms']} | {figures['p95_ms']} | {figures['min_ms']}-{figures['max_ms']} | {figures['count']} |"

    return "\n".join(
        [
            "# The panel's job list with 200 jobs, from the notebook pod a JupyterHub spawned",
            "",
            f"`{result['command']}`, {result['when']}, {result['machine']}.",
            "",
            f"The user's notebook pod on the real node (the shipped recipe; spawned in {run['spawn_seconds']} s); "
            f"{run['jobs']} jobs of the user written as the backend writes them (a record ConfigMap and a trainer pod each, "
            f"{run['fill_seconds']} s); the server in the pod listed all of them {run['all_listed_after_seconds']} s after the "
            f"first write (its watch cache). `GET /paddle/api/v1/jobs` ({run['body_bytes']} bytes), {run['requests']} requests "
            f"after {WARMUP} warm-up calls, milliseconds:",
            "",
            "| from | p50 | p95 | min-max | requests |",
            "| --- | --- | --- | --- | --- |",
            row("a process in the notebook's container, to its own server (a new connection each)", pod),
            row("the host, through the hub's proxy (as the panel; keep-alive)", proxy),
            "",
            f"Goal p50 < {GOAL_MS:.0f} ms: {verdict(result['goal_met'])} "
            f"(in the pod {pod.get('p50_ms', 'not measured')} ms, through the proxy {proxy['p50_ms']} ms).",
            "",
        ]
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=200)
    parser.add_argument("--requests", type=int, default=50)
    args = parser.parse_args()
    if os.geteuid() != 0:
        print("bench_hub_list: the real node needs root", file=sys.stderr)
        return 1
    workdir = Path(tempfile.mkdtemp(prefix="pnb-bench-hub-list-"))
    bench = Bench(workdir)
    try:
        run = bench.run(args.jobs, args.requests)
    finally:
        bench.close()
        shutil.rmtree(workdir, ignore_errors=True)
    worst = max(run["in_pod"].get("p50_ms", 0.0), run["through_proxy"]["p50_ms"])
    result = {
        "when": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "command": f"python benchmarks/bench_hub_list.py --jobs {args.jobs} --requests {args.requests}",
        "machine": machine_line(),
        "goal": f"GET /jobs with {args.jobs} jobs of the user, from the notebook pod: p50 < {GOAL_MS:.0f} ms",
        "goal_met": worst < GOAL_MS,
        "run": run,
    }
    print(write_report("hub_list", result, markdown(result)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
