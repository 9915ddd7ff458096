"""Benchmark: the `kubernetes` backend on a real control plane, against `kubectl` on the same one.

The control plane is the suite's own (tests/support/controlplane): etcd, kube-apiserver,
kube-controller-manager, kube-scheduler and KWOK nodes on 127.0.0.1, TLS, RBAC; the backend
runs under the shipped Role (deploy/rbac/notebook-role.yaml) with a real ServiceAccount token.
Requests are counted from the API server's audit log, so they are what the server saw, not what
a client believes it sent.  One run measures, in order:

1. submit of a 2 pserver + 2 trainer job (its objects created) by `backend.submit`, interleaved
   round by round with `kubectl apply -f` (and `kubectl create -f`, for reference) of the same
   manifests the backend's dry run produces, under the same ServiceAccount; min/median/max, the
   ratio of the medians (goal: backend <= 0.5 x kubectl apply), and API writes (goal <= 6) and
   reads (goal: the first submit reads the notebook pod and its home claim, for
   home_volume=auto, and checks that no JupyterHub shares the namespace; every submit lists
   the namespace's ResourceQuotas, the quota check before submit, and reads nothing else) per submit;
2. `list_jobs` with 1,000 jobs in the watch cache: p50 of 200 calls (goal < 20 ms) and the API
   requests those 200 calls cost (goal 0);
3. a pod status change written as a kubelet reports it -> the backend's UPDATED event: p50 of
   40 changes (goal < 100 ms).

Next to each figure: the load average before and after it, the CPU busy share in the 2 s before
it and while it ran, and the number of CPUs, because the machine may be shared with other test
runs (the run also counts kube-apiserver processes that are not its own).

Writes benchmarks/results/k8s.json and k8s.md.  Needs the suite's own control plane (its audit
log and KWOK nodes); refuses to run when PADDLE_NBEXT_TEST_KUBECONFIG names another cluster.

    .venv/bin/python benchmarks/bench_k8s.py [--jobs 1000] [--rounds 5] [--changes 40]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import copy
import datetime
import importlib.util
import json
import math
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from types import FrameType, ModuleType
from typing import TYPE_CHECKING, Any

import yaml
from harness import machine_line, percentile, verdict, write_report
from kubernetes import client

if TYPE_CHECKING:
    from support.controlplane import ControlPlane

    from paddle_nbext.model.spec import JobSpec
    from paddle_nbext_server.backends.base import SubmitRequest
    from paddle_nbext_server.backends.kubernetes import KubernetesBackend
    from paddle_nbext_server.events import EventHub

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))  # `support.controlplane`, imported where used (after this line)

KUBECONFIG_ENV = "PADDLE_NBEXT_TEST_KUBECONFIG"
SERVICE_ACCOUNT = "paddle-notebook"
MASTER_SERVICE_ACCOUNT = "paddle-nbext-master"  # the backend's default master_service_account_name
OWNER = "bench"
NOTEBOOK_POD = "jupyter-bench"
HOME_CLAIM = "claim-bench"
LIST_CALLS = 200
SETTLE_SECONDS = 1.0  # after each timed step: the audit log is written, the controllers' follow-up work is done
CHANGE_GAP_SECONDS = 0.2
BACKGROUND_SECONDS = 2.0  # CPU busy share sampled this long before each figure
WAIT_SECONDS = 600.0
PODS_PER_NODE = 110  # kwok.node's default, a kubelet's default maxPods
WRITE_VERBS = {"create", "update", "patch", "delete", "deletecollection"}
READ_VERBS = {"get", "list"}
INDEX_KEY = "batch.kubernetes.io/job-completion-index"
GOALS = {"submit_ratio": 0.5, "writes_per_submit": 6, "list_p50_ms": 20.0, "list_requests": 0, "event_p50_ms": 100.0}
# What `kubectl apply` (client-side) needs beyond the shipped Role: it reads every object before
# writing it.  The shipped Role grants no `get` on these (the backend never reads them), so
# without this extra Role `kubectl apply` is refused (403) under the notebook's ServiceAccount.
KUBECTL_APPLY_GETS = {"get configmaps", "get services", "get jobs"}
KUBECTL_APPLY_ROLE: dict[str, Any] = {
    "apiVersion": "rbac.authorization.k8s.io/v1",
    "kind": "Role",
    "metadata": {"name": "bench-kubectl-apply"},
    "rules": [
        {"apiGroups": [""], "resources": ["configmaps", "services"], "verbs": ["get"]},
        {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["get"]},
    ],
}


# ------------------------------------------------------------------------------------------ machine load


def _cpu_times() -> tuple[int, int]:
    """(busy, total) jiffies of all CPUs since boot, from /proc/stat."""
    fields = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    return sum(fields) - idle, sum(fields)


def other_apiservers(ours: Iterable[int | None]) -> int:
    """kube-apiserver processes on this machine that are not ours: another test run's control plane."""
    mine = {pid for pid in ours if pid}
    count = 0
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) not in mine:
            with contextlib.suppress(OSError):
                if (entry / "comm").read_text().strip() == "kube-apiserver":
                    count += 1
    return count


def _busy_share(since: tuple[int, int]) -> float:
    busy, total = _cpu_times()
    return round(100 * (busy - since[0]) / max(1, total - since[1]), 1)


class LoadWindow:
    """The machine load one figure saw: load averages before and after it, and the CPU busy share
    (all processes, ours included) in the seconds just before it and while it ran.

    The 1-minute load average lags a phase of a few seconds, hence the busy shares; the share
    while a phase ran is left out for phases shorter than a second (a few clock ticks say nothing)."""

    def __init__(self, plane: ControlPlane, background: float) -> None:
        self.plane = plane
        self.background = background
        self.before = os.getloadavg()
        self.cpu = _cpu_times()
        self.started = time.monotonic()
        self.others = other_apiservers(p.pid for p in plane.processes.values())

    @classmethod
    async def open(cls, plane: ControlPlane) -> LoadWindow:
        """Sample the background for BACKGROUND_SECONDS (the event loop, and so the backend, keeps running)."""
        since = _cpu_times()
        await asyncio.sleep(BACKGROUND_SECONDS)
        return cls(plane, _busy_share(since))

    def close(self) -> dict[str, Any]:
        seconds = time.monotonic() - self.started
        return {
            "loadavg_before": [round(v, 2) for v in self.before],
            "loadavg_after": [round(v, 2) for v in os.getloadavg()],
            "cpu_busy_percent_before": self.background,
            "cpu_busy_percent_during": _busy_share(self.cpu) if seconds >= 1 else None,
            "background_seconds": BACKGROUND_SECONDS,
            "nproc": os.cpu_count(),
            "seconds": round(seconds, 3),
            "other_kube_apiservers": max(self.others, other_apiservers(p.pid for p in self.plane.processes.values())),
        }


def load_text(load: dict[str, Any]) -> str:
    during = load["cpu_busy_percent_during"]
    busy = f"CPU busy {load['cpu_busy_percent_before']}% in the {load['background_seconds']:.0f} s before" + (
        f", {during}% during" if during is not None else ""
    )
    return f"load {load['loadavg_before'][0]} → {load['loadavg_after'][0]}; {busy}; {load['nproc']} CPUs"


# ------------------------------------------------------------------------------------------ audit log


def request_name(event: dict[str, Any]) -> str:
    """`verb resource[/subresource]` for a resource request, `verb /path` for discovery and OpenAPI."""
    ref = event.get("objectRef")
    if not ref:
        return f"{event.get('verb')} {event.get('requestURI', '').split('?')[0]}"
    resource = ref.get("resource", "") + (f"/{ref['subresource']}" if ref.get("subresource") else "")
    return f"{event.get('verb')} {resource}"


def is_kubectl(event: dict[str, Any]) -> bool:
    return str(event.get("userAgent", "")).startswith("kubectl")


@dataclass
class Audit:
    """The requests one user made, from the API server's audit log (one event per request and
    stage; a watch has two, so requests are told apart by their audit ID)."""

    plane: ControlPlane
    user: str

    def mark(self) -> set[str]:
        return {e["auditID"] for e in self.plane.audit_events(user=self.user)}

    def since(self, seen: set[str], keep: Callable[[dict[str, Any]], bool] = lambda _: True) -> list[dict[str, Any]]:
        fresh: dict[str, dict[str, Any]] = {}
        for event in self.plane.audit_events(user=self.user):
            if event["auditID"] not in seen and event["auditID"] not in fresh and keep(event):
                fresh[event["auditID"]] = event
        return list(fresh.values())


def classify(events: list[dict[str, Any]]) -> dict[str, Any]:
    """Writes, reads (get/list of resources), watches and the rest (discovery, OpenAPI)."""
    by_request: dict[str, int] = {}
    for event in events:
        name = request_name(event)
        by_request[name] = by_request.get(name, 0) + 1
    resource = [e for e in events if e.get("objectRef")]
    return {
        "writes": sum(1 for e in resource if e.get("verb") in WRITE_VERBS),
        "reads": sum(1 for e in resource if e.get("verb") in READ_VERBS),
        "watches": sum(1 for e in resource if e.get("verb") == "watch"),
        "non_resource": len(events) - len(resource),
        "total": len(events),
        "forbidden": sum(1 for e in events if (e.get("responseStatus") or {}).get("code") == 403),
        "not_found": sum(1 for e in events if (e.get("responseStatus") or {}).get("code") == 404),
        "by_request": dict(sorted(by_request.items())),
    }


# ------------------------------------------------------------------------------------------ figures


def summary(seconds: list[float]) -> dict[str, Any]:
    ms = [s * 1000 for s in seconds]
    return {
        "n": len(ms),
        "min_ms": round(min(ms), 3),
        "median_ms": round(statistics.median(ms), 3),
        "max_ms": round(max(ms), 3),
        "samples_ms": [round(v, 3) for v in ms],
    }


def read_body(response: Any) -> bytes:
    """The body of a `_preload_content=False` response, read so its connection goes back to the pool."""
    return bytes(response.data)


def load_fixture_module() -> ModuleType:
    """tests/cluster/conftest.py's ClusterSubstrate and Cluster (start, tokens, home claim) without pytest running."""
    path = ROOT / "tests" / "cluster" / "conftest.py"
    spec = importlib.util.spec_from_file_location("paddle_nbext_cluster_fixture", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def strip_owner_references(manifests: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The dry run's manifests point at the record with a placeholder uid (the backend fills in the
    real one after creating the record).  A single `kubectl apply` cannot know that uid, and the
    garbage collector would delete objects whose owner uid does not match, so kubectl gets them
    without ownerReferences (one request less work for the API server's GC, not more)."""
    out = copy.deepcopy(manifests)
    for manifest in out:
        manifest["metadata"].pop("ownerReferences", None)
    return out


async def eventually(check: Callable[[], Awaitable[bool]], what: str, timeout: float = WAIT_SECONDS) -> None:
    deadline = time.monotonic() + timeout
    while not await check():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out after {timeout:.0f} s waiting for {what}")
        await asyncio.sleep(0.2)


class Bench:
    """One run: the namespace, the notebook's identity, the backend and the admin client."""

    def __init__(self, args: argparse.Namespace, cluster: Any, plane: ControlPlane, work: Path) -> None:
        from support.controlplane import DEFAULT_NODES, find_binaries

        self.args = args
        self.cluster = cluster
        self.plane = plane
        self.work = work
        self.kubectl = str((find_binaries() or {}).get("kubectl", ""))
        if not self.kubectl:
            raise RuntimeError("no kubectl among the control plane's binaries; run `bash scripts/controlplane.sh build`")
        self.kubectl_cache = work / "kubectl-cache"
        self.admin = cluster.api_client()
        # Any: the client takes plain dicts for bodies (as the backend sends them), which its type hints do not say
        self.core: Any = client.CoreV1Api(self.admin)
        self.namespace = ""
        self.kubeconfig = ""
        self.home = work / "home"
        self.audit: Audit | None = None
        self.nodes: list[str] = [n["metadata"]["name"] for n in DEFAULT_NODES]

    # --- setup --------------------------------------------------------------------------------
    def setup(self) -> None:
        """Namespace, ServiceAccount under the shipped Role (+ the get rights kubectl apply needs),
        home claim and the notebook pod that home_volume=auto reads, and enough KWOK nodes for
        every pod of the run to be bound by the scheduler (they go when the control plane stops)."""
        from support.controlplane import DEFAULT_NODES, kwok

        role = next(d for d in yaml.safe_load_all((ROOT / "deploy/rbac/notebook-role.yaml").read_text()) if d and d["kind"] == "Role")
        self.namespace = self.cluster.new_namespace()
        self.kubeconfig = self.cluster.kubeconfig_for(self.namespace, SERVICE_ACCOUNT, role)
        rbac: Any = client.RbacAuthorizationV1Api(self.admin)
        rbac.create_namespaced_role(self.namespace, KUBECTL_APPLY_ROLE)
        rbac.create_namespaced_role_binding(
            self.namespace,
            {
                "metadata": {"name": KUBECTL_APPLY_ROLE["metadata"]["name"]},
                "subjects": [{"kind": "ServiceAccount", "name": SERVICE_ACCOUNT, "namespace": self.namespace}],
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": KUBECTL_APPLY_ROLE["metadata"]["name"]},
            },
        )
        self.core.create_namespaced_service_account(self.namespace, {"metadata": {"name": MASTER_SERVICE_ACCOUNT}})
        self.audit = Audit(self.plane, f"system:serviceaccount:{self.namespace}:{SERVICE_ACCOUNT}")
        self.cluster.home_claim(self.namespace, HOME_CLAIM)
        (self.home / "code").mkdir(parents=True)
        (self.home / "code" / "train.py").write_text("print('hi')\n")
        deadline = time.monotonic() + 60
        accounts = self.core.list_namespaced_service_account
        while "default" not in {a.metadata.name for a in accounts(self.namespace).items}:
            if time.monotonic() > deadline:
                raise RuntimeError("the ServiceAccount controller made no `default` account in the namespace")
            time.sleep(0.1)
        self.core.create_namespaced_pod(
            self.namespace,
            {
                "metadata": {"name": NOTEBOOK_POD},
                "spec": {
                    "containers": [
                        {"name": "notebook", "image": "jupyter", "volumeMounts": [{"name": "home", "mountPath": str(self.home)}]}
                    ],
                    "volumes": [{"name": "home", "persistentVolumeClaim": {"claimName": HOME_CLAIM}}],
                },
            },
        )
        pods = self.args.jobs + 3 * self.args.rounds * 5 + 1  # fill pods, 5 pods per submitted job, notebook
        extra = max(0, math.ceil(pods / PODS_PER_NODE) + 1 - len(DEFAULT_NODES))
        for index in range(extra):
            node = kwok.node(f"kwok-bench-{index}", cpu="16", memory="64Gi", pods=PODS_PER_NODE)
            self.core.create_node(node)
            self.nodes.append(node["metadata"]["name"])
        deadline = time.monotonic() + 60
        while True:
            ready = {
                n.metadata.name
                for n in self.core.list_node().items
                if any(c.type == "Ready" and c.status == "True" for c in n.status.conditions or [])
            }
            if ready >= set(self.nodes):
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"KWOK did not make nodes {sorted(set(self.nodes) - ready)} Ready")
            time.sleep(0.2)

    def spec(self, name: str) -> JobSpec:
        from paddle_nbext.model.spec import JobSpec

        return JobSpec.from_dict(
            {"job_name": name, "entry_point": "python train.py", "trainer_package": "code", "pservers": 2, "trainers": 2}
        )

    def request(self, name: str) -> SubmitRequest:
        from paddle_nbext_server.backends.base import SubmitRequest

        return SubmitRequest(self.spec(name), OWNER, self.home)

    # --- kubectl --------------------------------------------------------------------------------
    def run_kubectl(self, *argv: str) -> tuple[float, subprocess.CompletedProcess[str]]:
        started = time.perf_counter()
        command = [self.kubectl, f"--kubeconfig={self.kubeconfig}", f"--cache-dir={self.kubectl_cache}", *argv]
        done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
        return time.perf_counter() - started, done

    async def kubectl_manifests(self, backend: KubernetesBackend, name: str) -> Path:
        """The backend's own dry-run manifests for a job named `name`, as a file for `kubectl -f`."""
        plan = await backend.submit(self.request(name), dry_run=True)
        path = self.work / f"{name}.yaml"
        path.write_text(yaml.safe_dump_all(strip_owner_references(plan["plan"]["manifests"])))
        return path

    async def warm_kubectl(self, backend: KubernetesBackend) -> None:
        """One untimed server-side dry run: kubectl's discovery and OpenAPI caches are filled (as on
        any workstation that used kubectl in the last minutes), and the extra Role is in force."""
        path = await self.kubectl_manifests(backend, "kubectl-warmup")
        deadline = time.monotonic() + 30
        while True:
            _, done = await asyncio.to_thread(self.run_kubectl, "apply", "--dry-run=server", "-f", str(path))
            if done.returncode == 0:
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"kubectl apply --dry-run=server failed: {done.stderr.strip()}")
            await asyncio.sleep(0.5)

    # --- 1. submit ------------------------------------------------------------------------------
    async def submits(self, backend: KubernetesBackend) -> dict[str, Any]:
        assert self.audit is not None
        load = await LoadWindow.open(self.plane)
        seconds: dict[str, list[float]] = {"backend": [], "kubectl_apply": [], "kubectl_create": []}
        requests: dict[str, list[dict[str, Any]]] = {key: [] for key in seconds}
        for number in range(self.args.rounds):
            seen = self.audit.mark()
            started = time.perf_counter()
            await backend.submit(self.request(f"bench-{number}"))
            seconds["backend"].append(time.perf_counter() - started)
            await asyncio.sleep(SETTLE_SECONDS)
            requests["backend"].append(classify(self.audit.since(seen, lambda e: not is_kubectl(e))))
            if number == 0:  # after the first submit, whose read of the notebook pod a dry run would do
                await self.warm_kubectl(backend)
            for verb in ("apply", "create"):
                path = await self.kubectl_manifests(backend, f"kubectl-{verb}-{number}")
                seen = self.audit.mark()
                elapsed, done = await asyncio.to_thread(self.run_kubectl, verb, "-f", str(path))
                if done.returncode != 0:
                    raise RuntimeError(f"kubectl {verb} -f {path.name} failed: {done.stderr.strip()}")
                seconds[f"kubectl_{verb}"].append(elapsed)
                await asyncio.sleep(SETTLE_SECONDS)
                requests[f"kubectl_{verb}"].append(classify(self.audit.since(seen, is_kubectl)))
        figures = {key: summary(values) for key, values in seconds.items()}
        backend_requests = requests["backend"]
        return {
            "rounds": self.args.rounds,
            "job": "ps mode, 2 pservers + 2 trainers: record ConfigMap, headless Service, master/pserver/trainer Jobs",
            "order": f"per round: backend submit, kubectl apply -f, kubectl create -f; {SETTLE_SECONDS} s pause after each (untimed)",
            **figures,
            "ratio_median_backend_to_kubectl_apply": round(figures["backend"]["median_ms"] / figures["kubectl_apply"]["median_ms"], 3),
            "ratio_median_backend_to_kubectl_create": round(figures["backend"]["median_ms"] / figures["kubectl_create"]["median_ms"], 3),
            "goal_ratio_max": GOALS["submit_ratio"],
            "requests": {
                "backend_first": backend_requests[0],
                "backend_later_writes_max": max((r["writes"] for r in backend_requests[1:]), default=None),
                "backend_later_reads_max": max((r["reads"] for r in backend_requests[1:]), default=None),
                "backend_writes_max": max(r["writes"] for r in backend_requests),
                "backend_used_kubectl_apply_gets": sorted(
                    {name for r in backend_requests for name in r["by_request"] if name in KUBECTL_APPLY_GETS}
                ),
                "backend_per_round": backend_requests,
                "kubectl_apply_per_round": requests["kubectl_apply"],
                "kubectl_create_per_round": requests["kubectl_create"],
                "goal": "<= 6 writes per submit; reads: the first 5 (notebook pod and home claim, hub check, quota), later 1 (quota)",
            },
            "load": load.close(),
        }

    # --- 2. list of 1,000 jobs ----------------------------------------------------------------
    def fill(self) -> None:
        """`--jobs` job records, each with one trainer pod, through the admin client: what the
        backend's watch cache selects (managed-by label) and reads (job/owner/role labels, the
        completion index label, the owner annotation, spec.json in the record)."""
        from paddle_nbext.model.contract import OWNER_ANNOTATION, SPEC_KEY
        from paddle_nbext.model.spec import JobSpec
        from paddle_nbext_server.backends.kubernetes.build import manifests as m

        def one(index: int) -> None:
            name = f"many-{index:04d}"
            spec = JobSpec.from_dict(
                {"job_name": name, "entry_point": "python train.py", "mode": "collective", "pservers": 0, "trainers": 1}
            )
            obj = m.object_name(name, OWNER)  # the objects' name and job label, as the backend makes them
            base = {"name": obj, "annotations": {OWNER_ANNOTATION: OWNER}}
            read_body(
                self.core.create_namespaced_config_map(
                    self.namespace,
                    {
                        "metadata": {**base, "labels": m.labels(obj, OWNER, "record")},
                        "data": {SPEC_KEY: json.dumps(spec.to_dict(), sort_keys=True)},
                    },
                    _preload_content=False,
                )
            )
            read_body(
                self.core.create_namespaced_pod(
                    self.namespace,
                    {
                        "metadata": {**base, "name": f"{obj}-trainer-0", "labels": {**m.labels(obj, OWNER, "trainer"), INDEX_KEY: "0"}},
                        "spec": {
                            "containers": [{"name": m.CONTAINER, "image": "paddle"}],
                            "automountServiceAccountToken": False,
                            "enableServiceLinks": False,
                        },
                    },
                    _preload_content=False,
                )
            )

        with ThreadPoolExecutor(4) as pool:  # the admin client's connection pool holds 4
            list(pool.map(one, range(self.args.jobs)))

    def fill_pods_bound(self) -> tuple[int, int]:
        response = self.core.list_namespaced_pod(self.namespace, label_selector="paddle-nbext/role=trainer", _preload_content=False)
        pods = [p for p in json.loads(response.data)["items"] if p["metadata"]["name"].startswith("many-")]
        return sum(1 for p in pods if (p.get("spec") or {}).get("nodeName")), len(pods)

    async def quiet(self, queue: asyncio.Queue[Any], seconds: float) -> None:
        """Until the backend has published no job event for `seconds`: its cache has caught up."""
        while True:
            try:
                await asyncio.wait_for(queue.get(), seconds)
            except asyncio.TimeoutError:
                return

    async def lists(self, backend: KubernetesBackend, hub: EventHub) -> dict[str, Any]:
        assert self.audit is not None
        filled_jobs: int = self.args.jobs
        expected: int = filled_jobs + 3 * self.args.rounds
        started = time.perf_counter()
        async with hub.subscribe() as queue:
            await asyncio.to_thread(self.fill)
            filled = time.perf_counter() - started

            async def all_listed() -> bool:
                return len(await backend.list_jobs(OWNER)) >= expected

            async def all_bound() -> bool:
                bound, total = await asyncio.to_thread(self.fill_pods_bound)
                return bound == total == filled_jobs

            await eventually(all_listed, f"list_jobs to show {expected} jobs")
            await eventually(all_bound, f"kube-scheduler to bind all {self.args.jobs} pods to KWOK nodes")
            await self.quiet(queue, 2.0)
        ready = time.perf_counter() - started
        load = await LoadWindow.open(self.plane)
        seen = self.audit.mark()
        samples = []
        jobs: list[Any] = []
        for _ in range(LIST_CALLS):
            t0 = time.perf_counter()
            jobs = await backend.list_jobs(OWNER)
            samples.append(time.perf_counter() - t0)
        figures = load.close()
        await asyncio.sleep(SETTLE_SECONDS)
        used = classify(self.audit.since(seen))
        timing = summary(samples)
        return {
            "jobs": len(jobs),
            "calls": LIST_CALLS,
            **timing,
            "p50_ms": timing["median_ms"],
            "p90_ms": round(percentile(samples, 90) * 1000, 3),
            "goal_p50_ms": GOALS["list_p50_ms"],
            "api_requests_during_lists": used["total"],
            "api_requests_by_request": used["by_request"],
            "goal_api_requests": GOALS["list_requests"],
            "fill_seconds": round(filled, 1),
            "fill_to_steady_seconds": round(ready, 1),
            "pods": f"all {self.args.jobs} fill pods bound by kube-scheduler to KWOK nodes, none Pending unscheduled",
            "load": figures,
        }

    # --- 3. pod status change -> event ------------------------------------------------------
    def read_pod(self, name: str) -> dict[str, Any]:
        return dict(json.loads(self.core.read_namespaced_pod(name, self.namespace, _preload_content=False).data))

    def write_status(self, name: str, pod: dict[str, Any]) -> float:
        started = time.perf_counter()
        read_body(self.core.replace_namespaced_pod_status(name, self.namespace, pod, _preload_content=False))
        return time.perf_counter() - started

    async def changes(self, hub: EventHub) -> dict[str, Any]:
        from support.controlplane.kubelet import pod_status

        from paddle_nbext.model.contract import Phase
        from paddle_nbext_server.backends.kubernetes.build import manifests as m
        from paddle_nbext_server.events import UPDATED

        if self.args.changes > self.args.jobs:
            raise RuntimeError("--changes must not exceed --jobs (each change is to another fill job's pod)")
        delays: list[float] = []
        writes: list[float] = []
        load = await LoadWindow.open(self.plane)
        async with hub.subscribe() as queue:
            for index in range(self.args.changes):
                job = f"many-{index:04d}"
                pod_name = f"{m.object_name(job, OWNER)}-trainer-0"
                pod = await asyncio.to_thread(self.read_pod, pod_name)
                pod["status"] = pod_status(pod, "Running")
                while not queue.empty():
                    queue.get_nowait()
                started = time.perf_counter()
                write = asyncio.ensure_future(asyncio.to_thread(self.write_status, pod_name, pod))
                while True:
                    event = await asyncio.wait_for(queue.get(), 30)
                    if event.kind == UPDATED and event.name == job and (event.job or {}).get("phase") == Phase.RUNNING:
                        delays.append(time.perf_counter() - started)
                        break
                writes.append(await write)
                await asyncio.sleep(CHANGE_GAP_SECONDS)
        figures = summary(delays)
        return {
            **figures,
            "p50_ms": figures["median_ms"],
            "goal_p50_ms": GOALS["event_p50_ms"],
            "status_write_round_trip_p50_ms": round(statistics.median(writes) * 1000, 2),
            "how": "admin client replaces pods/status (kubelet.pod_status: Pending -> Running) of a bound fill pod; "
            "timed from sending the write to the backend's UPDATED event with phase Running at a hub "
            f"subscriber; {CHANGE_GAP_SECONDS} s between changes",
            "load": load.close(),
        }

    # --- the run --------------------------------------------------------------------------------
    async def run(self) -> dict[str, Any]:
        from paddle_nbext_server.backends.kubernetes import KubernetesBackend
        from paddle_nbext_server.events import EventHub

        hub = EventHub(queue_size=100_000)
        backend = KubernetesBackend(
            events=hub,
            kubeconfig=self.kubeconfig,
            namespace=self.namespace,
            home_volume="auto",
            pod_name=NOTEBOOK_POD,
            home_path=str(self.home),
            sync_timeout=60,
        )
        await backend.start()
        try:
            return {
                "submit": await self.submits(backend),
                "list_jobs": await self.lists(backend, hub),
                "pod_change_to_event": await self.changes(hub),
            }
        finally:
            await backend.stop()


# ------------------------------------------------------------------------------------------ report


def markdown(result: dict[str, Any]) -> str:
    submit, listing, change = result["submit"], result["list_jobs"], result["pod_change_to_event"]
    requests = submit["requests"]
    first = requests["backend_first"]

    def spread(figure: dict[str, Any]) -> str:
        return f"{figure['median_ms']} (min {figure['min_ms']}, max {figure['max_ms']})"

    apply_requests = requests["kubectl_apply_per_round"][-1]
    later_reads = requests["backend_later_reads_max"]
    sload, lload, cload = load_text(submit["load"]), load_text(listing["load"]), load_text(change["load"])
    rows = [
        (f"submit 2+2 job, backend, median ms of {submit['rounds']}", spread(submit["backend"]), "", "", sload),
        ("`kubectl apply -f` same manifests, median ms", spread(submit["kubectl_apply"]), "", "", sload),
        (
            "ratio of medians backend / kubectl apply",
            submit["ratio_median_backend_to_kubectl_apply"],
            "≤ 0.5",
            verdict(submit["ratio_median_backend_to_kubectl_apply"] <= GOALS["submit_ratio"]),
            sload,
        ),
        (
            "`kubectl create -f` same manifests, median ms (reference)",
            f"{spread(submit['kubectl_create'])}; backend / create {submit['ratio_median_backend_to_kubectl_create']}",
            "",
            "",
            sload,
        ),
        (
            "API writes per submit (max of all rounds)",
            requests["backend_writes_max"],
            "≤ 6",
            verdict(requests["backend_writes_max"] <= GOALS["writes_per_submit"]),
            sload,
        ),
        (
            "API reads, first submit",
            first["reads"],
            "5: notebook pod + its home claim (home_volume=auto), hub check (list pods, list configmaps), quota check",
            verdict(
                first["reads"] == 5
                and first["by_request"].get("list resourcequotas") == 1
                and first["by_request"].get("get pods") == 1
                and first["by_request"].get("get persistentvolumeclaims") == 1
            ),
            sload,
        ),
        (
            "API reads per later submit (max)",
            later_reads,
            "1: list resourcequotas (quota before submit)",
            verdict(later_reads in (1, None)),
            sload,
        ),
        (
            "kubectl apply: requests per apply (writes / reads / discovery+OpenAPI)",
            (
                f"{apply_requests['writes']} / {apply_requests['reads']} ({apply_requests['forbidden']} refused, "
                f"{apply_requests['not_found']} not found) / {apply_requests['non_resource']}"
            ),
            "",
            "",
            sload,
        ),
        (
            f"`list_jobs` with {listing['jobs']} jobs, p50 ms ({listing['calls']} calls)",
            listing["p50_ms"],
            "< 20",
            verdict(listing["p50_ms"] < GOALS["list_p50_ms"]),
            lload,
        ),
        (
            f"API requests during those {listing['calls']} lists",
            listing["api_requests_during_lists"],
            "0",
            verdict(listing["api_requests_during_lists"] == GOALS["list_requests"]),
            lload,
        ),
        (
            f"pod status change → backend event, p50 ms ({change['n']} changes)",
            change["p50_ms"],
            "< 100",
            verdict(change["p50_ms"] < GOALS["event_p50_ms"]),
            cload,
        ),
    ]
    plane = result["control_plane"]
    used = requests["backend_used_kubectl_apply_gets"]
    used_gets = f"the backend used {', '.join(used)} of them" if used else "the audit log shows the backend used none"
    lines = [
        "# Kubernetes backend benchmark",
        "",
        f"Run {result['started']} on {result['machine']}. Command: `{result['command']}`.",
        "",
        "| measure | value | goal | met | machine load (1-min load average before → after; CPU busy share) |",
        "|---|---|---|---|---|",
        *[f"| {' | '.join(str(c) for c in row)} |" for row in rows],
        "",
        (
            f"Real control plane from `tests/support/controlplane` on 127.0.0.1: kube-apiserver, kube-controller-manager "
            f"and kube-scheduler {plane['kubernetes']}, etcd {plane['etcd']}, KWOK {plane['kwok']} playing the kubelets of "
            f"{plane['nodes']} fake nodes ({PODS_PER_NODE} pods each), TLS, ServiceAccount tokens, Node+RBAC, default "
            f"admission, audit log (started in {plane['startup_seconds']} s). The backend runs under the shipped Role "
            f"with a TokenRequest token for ServiceAccount `{SERVICE_ACCOUNT}`; requests are counted from the API "
            f"server's audit log for that user (the backend's and kubectl's told apart by user agent). kubectl "
            f"{plane['kubernetes']} is built from the same pinned sources and applies, under the same ServiceAccount, "
            f"the manifests of the backend's dry run for a fresh job name, with their ownerReferences removed (a single "
            f"apply cannot know the record's uid that the backend fills in after creating the record; with the "
            f"placeholder the garbage collector would delete the objects). Client-side `kubectl apply` reads each "
            f"object first, and the shipped Role grants no `get` on ConfigMaps, Services or Jobs, so for kubectl the "
            f"same ServiceAccount is also bound to a Role `bench-kubectl-apply` with just those gets ({used_gets}); "
            f"`kubectl create -f` needs only the shipped Role. kubectl's "
            f"discovery and OpenAPI caches are warm (one untimed server-side dry run first); the backend had listed and "
            f"was watching, and its first submit reads the notebook pod and its home claim and checks once that no "
            f"JupyterHub shares the namespace. The {listing['jobs']} listed jobs are "
            f"{result['args']['jobs']} records with one trainer pod each, written by the admin client (every pod bound by "
            f"kube-scheduler to a KWOK node before timing), plus the jobs submitted above. Other kube-apiserver processes "
            f"(another test run's control plane) on the machine during the run: {result['other_kube_apiservers']} at "
            f"most."
        ),
        "",
        (f"First submit requests: {first['by_request']}. kubectl apply requests (last round): {apply_requests['by_request']}."),
        "",
        (
            f"Submit samples in ms, round by round: backend {submit['backend']['samples_ms']}; kubectl apply "
            f"{submit['kubectl_apply']['samples_ms']}; kubectl create {submit['kubectl_create']['samples_ms']}. The "
            f"backend's first submit also reads the notebook pod and opens its first write connection."
        ),
        "",
    ]
    return "\n".join(lines)


def _terminate(signum: int, frame: FrameType | None) -> None:
    """SIGTERM unwinds like Ctrl-C, so the `finally` that stops the control plane runs."""
    raise SystemExit(128 + signum)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=1000, help="job records (one pod each) in the cache for list_jobs")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds of backend submit / kubectl apply")
    parser.add_argument("--changes", type=int, default=40, help="pod status changes timed to the backend's event")
    args = parser.parse_args()
    if args.rounds < 1 or args.jobs < 1 or args.changes < 1:
        parser.error("--jobs, --rounds and --changes must be at least 1")
    if os.environ.get(KUBECONFIG_ENV):
        print(
            f"bench_k8s: needs the suite's own control plane (its API server audit log and KWOK nodes), not the "
            f"cluster {KUBECONFIG_ENV} names; unset {KUBECONFIG_ENV} and run again",
            file=sys.stderr,
        )
        return 2
    signal.signal(signal.SIGTERM, _terminate)
    from support.controlplane import ETCD_VERSION, KUBERNETES_VERSION, KWOK_VERSION

    fixture = load_fixture_module()
    started = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    with tempfile.TemporaryDirectory(prefix="bench-k8s-") as tmp:
        work = Path(tmp)
        try:
            substrate = fixture.ClusterSubstrate(work)
        except RuntimeError as error:
            print(f"bench_k8s: {error}", file=sys.stderr)
            return 2
        cluster = fixture.Cluster(substrate)
        try:
            plane = substrate.plane
            if plane is None:
                raise RuntimeError("bench_k8s needs the suite's own control plane")
            bench = Bench(args, cluster, plane, work)
            bench.setup()
            result = asyncio.run(bench.run())
            nodes, startup = len(bench.nodes), plane.startup_seconds
        finally:
            with contextlib.suppress(Exception):
                cluster.cleanup()
            substrate.close()
    loads = [result[k]["load"] for k in ("submit", "list_jobs", "pod_change_to_event")]
    result.update(
        {
            "started": started,
            "command": f"python benchmarks/bench_k8s.py --jobs {args.jobs} --rounds {args.rounds} --changes {args.changes}",
            "args": vars(args),
            "machine": machine_line(),
            "other_kube_apiservers": max(load["other_kube_apiservers"] for load in loads),
            "control_plane": {
                "kubernetes": KUBERNETES_VERSION,
                "etcd": ETCD_VERSION,
                "kwok": KWOK_VERSION,
                "kubectl": KUBERNETES_VERSION,
                "nodes": nodes,
                "startup_seconds": round(startup or 0.0, 1),
            },
        }
    )
    print(write_report("k8s", result, markdown(result)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
