"""Benchmark: the `kubernetes` backend against the in-memory Kubernetes API (tests/kubeapi),
served over real HTTP on 127.0.0.1 and spoken to by the official client, under the shipped Role.

Figures (issue 4, Performance):
* API requests per submit: writes (goal <= 6) and reads (goal: none after the first submit,
  whose one read is the notebook pod for home_volume=auto);
* API requests per list/get in steady state (goal 0: the watch-backed cache answers);
* `list_jobs` with 1,000 jobs in the cache, p50 (goal < 20 ms);
* delay from a pod status change (written to the API) to the backend's change event, p50
  (goal < 100 ms).

Writes benchmarks/results/k8s.json and k8s.md.

    .venv/bin/python benchmarks/bench_k8s.py [--jobs 1000] [--submits 5] [--changes 40]
"""
from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client

ROOT = Path(__file__).resolve().parents[1]
RESULTS = Path(__file__).resolve().parent / "results"
READ_VERBS = {"get", "list"}
WRITE_VERBS = {"create", "update", "patch", "delete", "deletecollection"}


def load_fixture_module() -> Any:
    """The cluster fixture's substrate (emulator start, tokens, played kubelet) without pytest."""
    spec = importlib.util.spec_from_file_location("paddle_nbext_cluster_fixture", ROOT / "tests" / "cluster" / "conftest.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def split(counts: dict[tuple[str, str], int]) -> dict[str, Any]:
    writes = sum(n for (verb, _), n in counts.items() if verb in WRITE_VERBS)
    reads = sum(n for (verb, _), n in counts.items() if verb in READ_VERBS)
    return {"writes": writes, "reads": reads, "by_request": {f"{verb} {what}": n for (verb, what), n in sorted(counts.items())}}


def p50_ms(samples: list[float]) -> float:
    return round(statistics.median(samples) * 1000, 3)


async def run(args: argparse.Namespace, cluster: Any, work: Path) -> dict[str, Any]:
    from paddle_nbext.spec import JobSpec
    from paddle_nbext_server.backends.base import SubmitRequest
    from paddle_nbext_server.backends.kubernetes import KubernetesBackend
    from paddle_nbext_server.events import UPDATED, EventHub

    role = next(d for d in yaml.safe_load_all((ROOT / "deploy/rbac/notebook-role.yaml").read_text()) if d and d["kind"] == "Role")
    namespace = cluster.new_namespace()
    kubeconfig = cluster.kubeconfig_for(namespace, "paddle-notebook", role)
    admin = cluster.api_client()
    core = client.CoreV1Api(admin)
    home = work / "home"
    (home / "code").mkdir(parents=True)
    (home / "code" / "train.py").write_text("print('hi')\n")
    core.create_namespaced_pod(namespace, {
        "metadata": {"name": "jupyter-bench"},
        "spec": {"containers": [{"name": "notebook", "image": "jupyter", "volumeMounts": [{"name": "home", "mountPath": str(home)}]}],
                 "volumes": [{"name": "home", "persistentVolumeClaim": {"claimName": "claim-bench"}}]}})  # fmt: skip
    hub = EventHub(queue_size=100_000)
    backend = KubernetesBackend(events=hub, kubeconfig=kubeconfig, namespace=namespace, home_volume="auto",
                                pod_name="jupyter-bench", home_path=str(home), sync_timeout=60)  # fmt: skip
    await backend.start()
    result: dict[str, Any] = {}
    try:
        # --- requests per submit
        submits = []
        for number in range(args.submits):
            spec = JobSpec.from_dict({"job_name": f"bench-{number}", "entry_point": "python train.py", "trainer_package": "code",
                                      "pservers": 2, "trainers": 2})  # fmt: skip
            cluster.reset_request_counts()
            await backend.submit(SubmitRequest(spec, "bench", home))
            submits.append(split(cluster.request_counts()))
        result["submit"] = {
            "first": submits[0],
            "later_writes_max": max(s["writes"] for s in submits[1:]),
            "later_reads_max": max(s["reads"] for s in submits[1:]),
            "goal": "<= 6 writes, no reads after the first",
        }
        # --- steady-state list / get
        await asyncio.sleep(0.5)  # let the watch events of the submits arrive
        cluster.reset_request_counts()
        for _ in range(100):
            await backend.list_jobs("bench")
            await backend.get_job("bench-0", "bench")
        steady = split(cluster.request_counts())
        result["steady_state_100_lists_and_gets"] = {"requests": steady["reads"] + steady["writes"], "goal": 0}

        # --- 1,000 jobs in the cache
        started = time.perf_counter()
        template = {"job_name": "", "entry_point": "python train.py", "mode": "collective", "pservers": 0, "trainers": 1}
        for index in range(args.jobs):
            name = f"many-{index:04d}"
            labels = {"app.kubernetes.io/managed-by": "paddle-nbext", "paddle-nbext/job": name, "paddle-nbext/owner": "bench"}
            core.create_namespaced_config_map(namespace, {
                "metadata": {"name": name, "labels": {**labels, "paddle-nbext/role": "record"}, "annotations": {"paddle-nbext/owner": "bench"}},
                "data": {"spec.json": json.dumps({**template, "job_name": name})}}, _preload_content=False)  # fmt: skip
            core.create_namespaced_pod(namespace, {
                "metadata": {"name": f"{name}-trainer-0-x", "labels": {**labels, "paddle-nbext/role": "trainer",
                                                                        "batch.kubernetes.io/job-completion-index": "0"}},
                "spec": {"containers": [{"name": "main", "image": "paddle"}]}}, _preload_content=False)  # fmt: skip
        while len(await backend.list_jobs("bench")) < args.jobs + args.submits:
            await asyncio.sleep(0.05)
        result["fill_1000_jobs_seconds"] = round(time.perf_counter() - started, 2)
        samples = []
        for _ in range(50):
            t0 = time.perf_counter()
            jobs = await backend.list_jobs("bench")
            samples.append(time.perf_counter() - t0)
        result["list_jobs"] = {"jobs": len(jobs), "p50_ms": p50_ms(samples), "max_ms": round(max(samples) * 1000, 3), "goal_p50_ms": 20}

        # --- pod change -> backend event
        delays = []
        async with hub.subscribe() as queue:
            for index in range(args.changes):
                name = f"many-{index:04d}"
                phase = "Running"
                t0 = time.perf_counter()
                await asyncio.to_thread(cluster.set_pod_status, namespace, f"{name}-trainer-0-x", phase)
                while True:
                    event = await asyncio.wait_for(queue.get(), 30)
                    if event.kind == UPDATED and event.name == name and event.job and event.job["phase"] == phase:
                        delays.append(time.perf_counter() - t0)
                        break
        result["pod_change_to_event"] = {"samples": len(delays), "p50_ms": p50_ms(delays), "max_ms": round(max(delays) * 1000, 3), "goal_p50_ms": 100}
    finally:
        await backend.stop()
    return result


def markdown(result: dict[str, Any]) -> str:
    submit = result["submit"]
    rows = [
        ("API writes, first submit", submit["first"]["writes"], "<= 6"),
        ("API reads, first submit", submit["first"]["reads"], "1 (notebook pod, home_volume=auto)"),
        ("API writes per later submit (max)", submit["later_writes_max"], "<= 6"),
        ("API reads per later submit (max)", submit["later_reads_max"], "0"),
        ("API requests for 100 list + 100 get (steady state)", result["steady_state_100_lists_and_gets"]["requests"], "0"),
        (f"list_jobs with {result['list_jobs']['jobs']} jobs, p50 ms", result["list_jobs"]["p50_ms"], "< 20"),
        ("pod status change -> backend event, p50 ms", result["pod_change_to_event"]["p50_ms"], "< 100"),
    ]
    lines = ["# Kubernetes backend benchmark", "",
             f"In-memory Kubernetes API over HTTP on 127.0.0.1, official client, shipped Role; {result['machine']}.", "",
             "| measure | value | goal |", "|---|---|---|"]  # fmt: skip
    lines += [f"| {name} | {value} | {goal} |" for name, value, goal in rows]
    lines += ["", f"First submit requests: {submit['first']['by_request']}", ""]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--submits", type=int, default=5)
    parser.add_argument("--changes", type=int, default=40)
    args = parser.parse_args()
    fixture = load_fixture_module()
    with tempfile.TemporaryDirectory(prefix="bench-k8s-") as tmp:
        work = Path(tmp)
        substrate = fixture.ClusterSubstrate(work)
        cluster = fixture.Cluster(substrate)
        try:
            result = asyncio.run(run(args, cluster, work))
        finally:
            cluster.cleanup()
            substrate.close()
    result["machine"] = f"{platform.machine()}, Python {platform.python_version()}, {platform.system()}"
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "k8s.json").write_text(json.dumps(result, indent=2) + "\n")
    (RESULTS / "k8s.md").write_text(markdown(result))
    print(markdown(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
