"""Benchmark: what one notebook server holds and relists in a namespace shared by many users.

`c.KubernetesBackend.owner` (default `$JUPYTERHUB_USER`) makes a server's watches select its own
user's objects (label `paddle-nbext/owner`).  Goal (issue 22): a server's memory and relist time
are flat in the number of *other* users.  On the suite's own control plane (KWOK nodes, the
shipped Role, a real ServiceAccount token), `--jobs` job records with one trainer pod each are
made for each of `--users` users; then, for 1 user present and for all of them, one server
scoped to user 0 and one watching everyone start, and the run records per server:

- objects held in its watch cache (records, pods, Jobs),
- the time from `start()` to a synced cache (the lists and watches: what every relist costs),
- the Python memory its cache holds after the sync (tracemalloc, in this process).

A first start, not recorded, warms the process up (the API client loads its modules then).

Writes benchmarks/results/owner_scope.json and owner_scope.md.

    .venv/bin/python benchmarks/bench_owner_scope.py [--users 10] [--jobs 100]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime
import gc
import json
import os
import signal
import sys
import tempfile
import time
import tracemalloc
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import yaml
from bench_k8s import INDEX_KEY, KUBECONFIG_ENV, ROOT, _terminate, load_fixture_module, read_body
from harness import machine_line, write_report
from kubernetes import client

SERVICE_ACCOUNT = "paddle-notebook"


def user(index: int) -> str:
    return f"user-{index:02d}"


def fill(core: Any, namespace: str, owner: str, jobs: int) -> None:
    """`jobs` records of `owner`, one trainer pod each, labelled as the backend makes them."""
    from paddle_nbext.model.contract import OWNER_ANNOTATION, SPEC_KEY
    from paddle_nbext.model.spec import JobSpec
    from paddle_nbext_server.backends.kubernetes.build import manifests as m

    def one(index: int) -> None:
        name = f"job-{index:04d}"
        spec = JobSpec.from_dict({"job_name": name, "entry_point": "python train.py", "mode": "collective", "pservers": 0, "trainers": 1})
        obj = m.object_name(name, owner)
        base = {"name": obj, "annotations": {OWNER_ANNOTATION: owner}}
        read_body(
            core.create_namespaced_config_map(
                namespace,
                {"metadata": {**base, "labels": m.labels(obj, owner, "record")}, "data": {SPEC_KEY: json.dumps(spec.to_dict())}},
                _preload_content=False,
            )
        )
        read_body(
            core.create_namespaced_pod(
                namespace,
                {
                    "metadata": {**base, "name": f"{obj}-trainer-0", "labels": {**m.labels(obj, owner, "trainer"), INDEX_KEY: "0"}},
                    "spec": {
                        "nodeSelector": {"nowhere": "true"},  # never bound: the benchmark needs no nodes
                        "containers": [{"name": m.CONTAINER, "image": "paddle"}],
                        "automountServiceAccountToken": False,
                        "enableServiceLinks": False,
                    },
                },
                _preload_content=False,
            )
        )

    with ThreadPoolExecutor(4) as pool:
        list(pool.map(one, range(jobs)))


async def measure(kubeconfig: str, namespace: str, home: Path, owner: str) -> dict[str, Any]:
    """One server's start: cache sync time, objects held, memory held by the cache."""
    from paddle_nbext_server.backends.kubernetes import KubernetesBackend
    from paddle_nbext_server.events import EventHub

    gc.collect()
    tracemalloc.start()
    before = tracemalloc.take_snapshot()
    backend = KubernetesBackend(
        events=EventHub(), kubeconfig=kubeconfig, namespace=namespace, owner=owner, home_volume="pvc", home_path=str(home), sync_timeout=300
    )
    started = time.monotonic()
    await backend.start()
    await backend.list_jobs(owner or user(0))  # waits for the synced cache
    synced = time.monotonic() - started
    gc.collect()
    after = tracemalloc.take_snapshot()
    held = sum(stat.size_diff for stat in after.compare_to(before, "filename"))
    tracemalloc.stop()
    assert backend.view.cache is not None
    objects = {kind: len(backend.view.cache.stores[kind]) for kind in ("configmaps", "pods", "jobs")}
    await backend.stop()
    return {"owner": owner or "(everyone)", "sync_seconds": round(synced, 3), "objects": objects, "cache_kib": round(held / 1024)}


def markdown(result: dict[str, Any]) -> str:
    lines = [
        "# One server in a namespace shared by many users",
        "",
        f"`{result['command']}` on {result['machine']}, {result['started']}.",
        "",
        "| users in the namespace | server watches | objects held (records / pods) | start to synced cache | memory its cache holds |",
        "|---|---|---|---|---|",
    ]
    for row in result["rows"]:
        objects = row["objects"]
        lines.append(
            f"| {row['users']} ({row['users'] * result['args']['jobs']} jobs) | {row['owner']} | "
            f"{objects['configmaps']} / {objects['pods']} | {row['sync_seconds']:.2f} s | {row['cache_kib']} KiB |"
        )
    one, many = (next(r for r in result["rows"] if r["users"] == n and r["owner"] != "(everyone)") for n in (1, result["args"]["users"]))
    ratio = many["cache_kib"] / one["cache_kib"] if one["cache_kib"] else float("nan")
    lines += [
        "",
        f"Scoped to one user, memory with {result['args']['users']} users over memory with 1: {ratio:.2f}x "
        f"(goal: flat, about 1x); objects held: {many['objects']['configmaps']} vs {one['objects']['configmaps']} records.",
        "",
    ]
    return "\n".join(lines)


async def run(args: argparse.Namespace, cluster: Any, work: Path) -> list[dict[str, Any]]:
    role = next(d for d in yaml.safe_load_all((ROOT / "deploy/rbac/notebook-role.yaml").read_text()) if d and d["kind"] == "Role")
    namespace = cluster.new_namespace()
    kubeconfig = cluster.kubeconfig_for(namespace, SERVICE_ACCOUNT, role)
    core: Any = client.CoreV1Api(cluster.api_client())
    home = work / "home"
    home.mkdir()
    rows: list[dict[str, Any]] = []
    fill(core, namespace, user(0), args.jobs)
    await measure(kubeconfig, namespace, home, user(0))  # warm-up: the first start also loads the client's modules
    for owner in (user(0), ""):
        rows.append({"users": 1, **await measure(kubeconfig, namespace, home, owner)})
    for index in range(1, args.users):
        fill(core, namespace, user(index), args.jobs)
    for owner in (user(0), ""):
        rows.append({"users": args.users, **await measure(kubeconfig, namespace, home, owner)})
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, default=10)
    parser.add_argument("--jobs", type=int, default=100, help="jobs (a record and a pod each) per user")
    args = parser.parse_args()
    if args.users < 2 or args.jobs < 1:
        parser.error("--users must be at least 2 and --jobs at least 1")
    if os.environ.get(KUBECONFIG_ENV):
        print(f"bench_owner_scope: needs the suite's own control plane; unset {KUBECONFIG_ENV}", file=sys.stderr)
        return 2
    signal.signal(signal.SIGTERM, _terminate)
    fixture = load_fixture_module()
    started = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    with tempfile.TemporaryDirectory(prefix="bench-owner-") as tmp:
        work = Path(tmp)
        try:
            substrate = fixture.ClusterSubstrate(work)
        except RuntimeError as error:
            print(f"bench_owner_scope: {error}", file=sys.stderr)
            return 2
        cluster = fixture.Cluster(substrate)
        try:
            rows = asyncio.run(run(args, cluster, work))
        finally:
            with contextlib.suppress(Exception):
                cluster.cleanup()
            substrate.close()
    result = {
        "started": started,
        "command": f"python benchmarks/bench_owner_scope.py --users {args.users} --jobs {args.jobs}",
        "args": vars(args),
        "machine": machine_line(),
        "rows": rows,
    }
    print(write_report("owner_scope", result, markdown(result)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
