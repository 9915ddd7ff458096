"""Benchmark: real Paddle jobs on the real nodes, through paddle-nbext against the bare floor.

A control plane and the real nodes (tests/support/controlplane; two unless
``PADDLE_NBEXT_TEST_REAL_NODES`` says otherwise) are started; a notebook user is set up as the
real-node tests set one up (shipped RBAC, token, ``claim-jovyan`` home, a real ``jupyter server``
as uid 1000 with the ``kubernetes`` backend and ``replica_spread = "spread"``, so a job's replicas
of each role go to different nodes).  For each job -- a 2 pserver + 2
trainer GEO job (examples/ps_train.py) and a 2-trainer collective job (examples/collective_train.py)
-- rounds alternate between:

- **paddle-nbext**: ``POST /jobs`` through the server; the job's master, Service, record and Jobs
  made by the backend, replicas run by the launcher;
- **floor**: the same job's own dry-run manifests (``POST /jobs?dry_run=1``) applied with
  ``kubectl apply`` as the admin, without the master, each replica's command replaced by the same
  training script run bare: the launcher's environment contract is computed (``build_env``, pure),
  the two waits without which a start is not correct are made (the replica's own name in cluster
  DNS, and a PS trainer's pservers), and the script is exec'd, with no preflight, no log tee and
  no supervision.

Each round records, from the moment of the submit: every replica pod Running, the first
``step N loss`` line in trainer 0's log (read from the kubelet through the API, the same way for
both), and the end (paddle-nbext: the job Succeeded; floor: the trainers' Job Complete).  Goal:
time to first step <= 1.15 x the floor's.

A PS job's training speed across nodes against on one node: the same GEO job (2 pservers, 2
trainers, more steps) through paddle-nbext, spread over the nodes and, with every node but the
first cordoned, all on the first; steps per second are trainer 0's ``report()`` times in its
metrics file, from step 50 to its last (Paddle's start-up left out).  Each node's own footprint
(RSS of kubelet, containerd, shims, kube-proxy, CoreDNS) is read once the jobs have run.

Writes benchmarks/results/real_node.json and real_node.md.

    .venv/bin/python benchmarks/bench_real_node.py [--rounds 2]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from harness import machine, median_range, min_median_max, verdict, write_report  # noqa: E402
from kubernetes import client  # noqa: E402
from kubernetes import config as kube_config  # noqa: E402
from support.controlplane import ControlPlane, node_cleanup  # noqa: E402
from support.notebook_server import NotebookServer  # noqa: E402
from support.realnode_notebook import NOTEBOOK_ACCOUNT, apply_shipped_rbac, prepare_notebook  # noqa: E402
from support.realnode_site import RealNodeSite  # noqa: E402

USER = "jovyan"
WAIT = 600.0
GOAL = 1.15
STEP = re.compile(r"step \d+ loss")
RESOURCES = {"pserver_cpu": "250m", "trainer_cpu": "250m", "pserver_mem": "1Gi", "trainer_mem": "1536Mi"}
SPEED_JOB = {"mode": "ps", "pservers": 2, "trainers": 2, "entry_point": "python ps_train.py --steps 600 --print-every 100"}
SPEED_FROM_STEP = 50
JOBS: dict[str, dict[str, Any]] = {
    "ps": {"mode": "ps", "pservers": 2, "trainers": 2, "entry_point": "python ps_train.py --steps 200 --print-every 20"},
    "collective": {"mode": "collective", "trainers": 2, "entry_point": "python collective_train.py --steps 60 --print-every 10"},
}
# The floor's replica command: the launcher's contract computed, the two waits a correct start
# needs (its own name in cluster DNS; a PS trainer, its pservers), then the script itself.
FLOOR_SCRIPT = (
    "import os, shlex, sys\n"
    "sys.path.insert(0, '{runtime}')\n"
    "import launcher\n"
    "env = launcher.build_env(os.environ, launcher.pylib_dir())\n"
    "assert launcher.wait_resolvable(env['POD_IP'], 300)\n"
    "assert launcher.wait_for(launcher.endpoints_to_wait_for(os.environ), 300) is None\n"
    "os.chdir(env['TRAINER_PACKAGE'])\n"
    "argv = shlex.split(env['ENTRY'])\n"
    "argv[0] = sys.executable\n"
    "os.execve(sys.executable, argv, env)\n"
)


def new_namespace(core: client.CoreV1Api, prefix: str) -> str:
    """A namespace the API server names from `prefix`, once its ServiceAccount controller has been at it."""
    made = core.create_namespace(client.V1Namespace.model_validate({"metadata": {"generateName": prefix}}))
    assert made.metadata is not None  # the API server answers with the namespace it made, named
    namespace = str(made.metadata.name)
    while not core.list_namespaced_service_account(namespace).items:
        time.sleep(0.1)
    return namespace


def account_token(core: client.CoreV1Api, namespace: str, account: str) -> str:
    """A token of ServiceAccount `account`, good for two hours (a TokenRequest)."""
    request = client.AuthenticationV1TokenRequest.model_validate({"spec": {"expirationSeconds": 7200}})
    status = core.create_namespaced_service_account_token(account, namespace, request).status
    assert status is not None and status.token is not None  # a granted TokenRequest carries the token in its status
    return status.token


def notebook_kubeconfig(admin_kubeconfig: Path, token: str, namespace: str, path: Path) -> Path:
    """A kubeconfig at `path` for the notebook's ServiceAccount `token` in `namespace`, on the
    cluster of `admin_kubeconfig` (what a notebook pod's in-cluster config amounts to)."""
    cluster_entry = yaml.safe_load(admin_kubeconfig.read_text())["clusters"][0]["cluster"]
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "current-context": "nb",
                "clusters": [{"name": "c", "cluster": cluster_entry}],
                "users": [{"name": "u", "user": {"token": token}}],
                "contexts": [{"name": "nb", "context": {"cluster": "c", "user": "u", "namespace": namespace}}],
            }
        )
    )
    return path


def labels(obj: client.V1Pod) -> dict[str, str]:
    """The pod's labels (none: an empty dict)."""
    assert obj.metadata is not None  # every object the API server lists has its metadata
    return obj.metadata.labels or {}


class Bench:
    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.plane = ControlPlane(workdir / "controlplane").start()
        self.site = RealNodeSite.start(self.plane, workdir)
        self.admin = kube_config.new_client_from_config(config_file=str(self.plane.admin_kubeconfig))
        self.core = client.CoreV1Api(self.admin)
        self.batch = client.BatchV1Api(self.admin)
        self.namespace = new_namespace(self.core, "pnb-bench-")
        apply_shipped_rbac(self.admin, self.namespace)
        token = account_token(self.core, self.namespace, NOTEBOOK_ACCOUNT)
        kubeconfig = notebook_kubeconfig(self.plane.admin_kubeconfig, token, self.namespace, workdir / "notebook.kubeconfig")
        setup = prepare_notebook(self.site, self.admin, self.namespace, kubeconfig, USER)
        self.home = setup.home
        settings = {**setup.settings, "KubernetesBackend": {**setup.settings["KubernetesBackend"], "replica_spread": "spread"}}
        self.server = NotebookServer(setup.home, settings, user=USER, uid=self.site.uid, gid=self.site.gid, log_dir=workdir).start()
        self.kubectl = str(self.plane.binaries["kubectl"])

    def close(self) -> None:
        self.server.stop()
        self.site.release_volumes(self.admin)
        self.site.stop()
        self.plane.stop()

    # --- observation ---------------------------------------------------------------------------
    def pods(self, label: str) -> list[Any]:
        return [p for p in self.core.list_namespaced_pod(self.namespace).items if label in labels(p).get("paddle-nbext/job", "")]

    def observe(self, label: str, replicas: int, done: Any, started: float) -> dict[str, float]:
        """Seconds from ``started`` to: every replica Running, trainer 0's first step, the end."""
        marks: dict[str, float] = {}
        deadline = started + WAIT
        while time.monotonic() < deadline:
            pods = [p for p in self.pods(label) if "master" not in p.metadata.name]
            now = time.monotonic() - started
            if "running" not in marks and len(pods) >= replicas and all(p.status.phase in ("Running", "Succeeded") for p in pods):
                marks["running"] = now
            if "first_step" not in marks:
                trainer0 = [p for p in pods if re.search(r"trainer-0-[a-z0-9]+$", p.metadata.name) and p.status.phase != "Pending"]
                for pod in trainer0:
                    try:
                        if STEP.search(self.core.read_namespaced_pod_log(pod.metadata.name, self.namespace)):
                            marks["first_step"] = time.monotonic() - started
                    except client.ApiException:
                        pass
            if "first_step" in marks and done():
                marks["done"] = time.monotonic() - started
                return marks
            failed = [p for p in pods if p.status.phase == "Failed"]
            if failed:
                log = self.core.read_namespaced_pod_log(failed[0].metadata.name, self.namespace, tail_lines=30)
                raise RuntimeError(f"{label}: replica {failed[0].metadata.name} failed; its log ends:\n{log}")
            time.sleep(0.2)
        raise RuntimeError(
            f"{label}: not done within {WAIT:.0f} s (marks so far {marks}); pods {[(p.metadata.name, p.status.phase) for p in self.pods(label)]}"
        )

    # --- the two ways ------------------------------------------------------------------------------
    def product(self, kind: str, name: str) -> dict[str, float]:
        body = {"job_name": name, "trainer_package": "examples", **RESOURCES, **JOBS[kind]}
        started = time.monotonic()
        answer = self.server.api("POST", "jobs", body=body)
        if answer.status_code != 201:
            raise RuntimeError(f"submit {name}: {answer.status_code} {answer.text}")
        replicas = int(JOBS[kind].get("pservers", 0)) + int(JOBS[kind]["trainers"])

        def succeeded() -> bool:
            phase = self.server.api("GET", f"jobs/{name}").json()["phase"]
            if phase in ("Failed", "Cancelled"):
                raise RuntimeError(f"{name} ended {phase}: {self.server.api('GET', f'jobs/{name}').json()['message']}")
            return bool(phase == "Succeeded")

        marks = self.observe(name, replicas, succeeded, started)
        marks["trainer_nodes"] = self.trainer_nodes(name)
        self.server.api("DELETE", f"jobs/{name}")
        return marks

    def floor(self, kind: str, name: str) -> dict[str, float]:
        body = {"job_name": name, "trainer_package": "examples", **RESOURCES, **JOBS[kind]}
        answer = self.server.api("POST", "jobs", body=body, params={"dry_run": "true"})
        if answer.status_code != 200:
            raise RuntimeError(f"dry run {name}: {answer.status_code} {answer.text}")
        plan = answer.json()["plan"]
        manifests = plan.get("manifests", plan) if isinstance(plan, dict) else plan
        documents = []
        for manifest in manifests:
            if manifest["kind"] in ("Role", "RoleBinding", "ServiceAccount") or manifest["metadata"]["name"].endswith("-master"):
                continue
            manifest.pop("status", None)
            manifest["metadata"].pop("ownerReferences", None)
            if manifest["kind"] == "Job":
                for container in manifest["spec"]["template"]["spec"]["containers"]:
                    runtime = next(m["mountPath"] for m in container["volumeMounts"] if m["name"] == "paddle-nbext-runtime")
                    container["command"] = ["python3", "-c", FLOOR_SCRIPT.format(runtime=runtime)]
            documents.append(manifest)
        path = self.workdir / f"{name}.yaml"
        path.write_text(yaml.safe_dump_all(documents))
        replicas = int(JOBS[kind].get("pservers", 0)) + int(JOBS[kind]["trainers"])
        trainers_job = next(d["metadata"]["name"] for d in documents if d["kind"] == "Job" and "trainer" in d["metadata"]["name"])
        label = next(d["metadata"]["labels"]["paddle-nbext/job"] for d in documents if d["kind"] == "Job")

        def complete() -> bool:
            status = self.batch.read_namespaced_job(trainers_job, self.namespace).status
            assert status is not None  # the Job controller has given the Job its status by now
            if any(c.type == "Failed" and c.status == "True" for c in status.conditions or []):
                raise RuntimeError(f"floor {name}: the trainers' Job failed")
            return any(c.type == "Complete" and c.status == "True" for c in status.conditions or [])

        # The trainer package where the replicas look for it (the product's submit snapshots it
        # there; the floor's copy is made before its clock starts).
        container = next(d for d in documents if d["kind"] == "Job")["spec"]["template"]["spec"]["containers"][0]
        workdir = Path(next(e["value"] for e in container["env"] if e["name"] == "PADDLE_NBEXT_WORKDIR"))
        shutil.copytree(self.home / "examples", workdir, dirs_exist_ok=True)
        for owned in [workdir.parent.parent, workdir.parent, workdir, *workdir.rglob("*")]:
            os.lchown(owned, self.site.uid, self.site.gid)
        started = time.monotonic()
        subprocess.run(
            [self.kubectl, "--kubeconfig", str(self.plane.admin_kubeconfig), "apply", "-f", str(path)], check=True, capture_output=True
        )
        marks = self.observe(label, replicas, complete, started)
        marks["trainer_nodes"] = self.trainer_nodes(label)
        subprocess.run(
            [
                self.kubectl,
                "--kubeconfig",
                str(self.plane.admin_kubeconfig),
                "delete",
                "-f",
                str(path),
                "--wait=true",
                "--ignore-not-found=true",
            ],
            check=True,
            capture_output=True,
        )
        return marks

    def trainer_nodes(self, label: str) -> float:
        """On how many nodes the job's trainer pods ran."""
        return float(len({p.spec.node_name for p in self.pods(label) if "-trainer-" in p.metadata.name}))

    def cordon(self, others: bool) -> None:
        """Every node but the first unschedulable (``kubectl cordon``), or schedulable again."""
        for node in self.site.nodes[1:]:
            self.core.patch_node(node.name, {"spec": {"unschedulable": others}})

    def speed(self, name: str, spread: bool) -> dict[str, float]:
        """Trainer 0's steps per second of the PS speed job, spread over the nodes or on the first."""
        self.cordon(not spread)
        try:
            body = {"job_name": name, "trainer_package": "examples", **RESOURCES, **SPEED_JOB}
            answer = self.server.api("POST", "jobs", body=body)
            if answer.status_code != 201:
                raise RuntimeError(f"submit {name}: {answer.status_code} {answer.text}")
            deadline = time.monotonic() + WAIT
            while (status := self.server.api("GET", f"jobs/{name}").json())["phase"] != "Succeeded":
                if status["phase"] in ("Failed", "Cancelled") or time.monotonic() > deadline:
                    raise RuntimeError(f"{name}: {status['phase']}: {status['message']}")
                time.sleep(0.5)
            nodes = float(len({p.spec.node_name for p in self.pods(name) if "master" not in p.metadata.name}))
        finally:
            self.cordon(False)
        (metrics,) = self.home.glob(f".paddle-jobs/{name}*/logs/trainer-0.metrics.jsonl")
        points = [json.loads(line) for line in metrics.read_text().splitlines() if line.strip()]
        timed = [(int(p["step"]), float(p["t"])) for p in points if int(p["step"]) >= SPEED_FROM_STEP]
        (first_step, first_t), (last_step, last_t) = timed[0], timed[-1]
        self.server.api("DELETE", f"jobs/{name}")
        return {"steps_per_second": round((last_step - first_step) / (last_t - first_t), 1), "nodes": nodes}

    def footprint(self) -> dict[str, float]:
        """RSS in MB of each node's own processes (kubelet, containerd, shims, kube-proxy, CoreDNS),
        the median over the nodes."""
        per_node = [self._node_footprint(node.root) for node in self.site.nodes]
        return {name: round(statistics.median(sizes.get(name, 0.0) for sizes in per_node), 1) for name in per_node[0]}

    def _node_footprint(self, root: Path) -> dict[str, float]:
        sizes: dict[str, float] = {}
        for pid in node_cleanup.node_processes(root):
            try:
                command = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
                status = Path(f"/proc/{pid}/status").read_text()
            except OSError:
                continue
            name = Path(command[0].decode()).name
            if name not in ("kubelet", "containerd", "containerd-shim-runc-v2", "kube-proxy", "coredns"):
                continue
            rss = next((int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS:")), 0) / 1024
            sizes[name] = sizes.get(name, 0.0) + rss
        return {k: round(v, 1) for k, v in sorted(sizes.items())}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    if os.geteuid() != 0:
        print("bench_real_node: the real node needs root", file=sys.stderr)
        return 1
    workdir = Path(tempfile.mkdtemp(prefix="pnb-bench-real-"))
    bench = Bench(workdir)
    runs: dict[str, dict[str, list[dict[str, float]]]] = {kind: {"paddle-nbext": [], "floor": []} for kind in JOBS}
    speeds: dict[str, list[dict[str, float]]] = {"spread": [], "one node": []}
    try:
        for round_number in range(args.rounds):
            for kind in JOBS:
                order = ("floor", "paddle-nbext") if round_number % 2 else ("paddle-nbext", "floor")
                for way in order:
                    name = f"{kind}-{way.replace('-', '')[:6]}-{round_number}"
                    marks = bench.product(kind, name) if way == "paddle-nbext" else bench.floor(kind, name)
                    runs[kind][way].append(marks)
                    print(f"bench_real_node: {kind} {way} round {round_number}: {marks}", flush=True)
            for placement in ("spread", "one node") if round_number % 2 == 0 else ("one node", "spread"):
                measured = bench.speed(f"speed-{placement.replace(' ', '')}-{round_number}", placement == "spread")
                speeds[placement].append(measured)
                print(f"bench_real_node: ps speed {placement} round {round_number}: {measured}", flush=True)
        footprint = bench.footprint()
    finally:
        bench.close()
    figures: dict[str, Any] = {}
    for kind, ways in runs.items():
        figures[kind] = {
            way: {mark: min_median_max([r[mark] for r in rounds]) for mark in ("running", "first_step", "done")}
            for way, rounds in ways.items()
        }
        ratio = figures[kind]["paddle-nbext"]["first_step"]["median"] / figures[kind]["floor"]["first_step"]["median"]
        figures[kind]["first_step_ratio"] = round(ratio, 3)
        figures[kind]["goal_met"] = ratio <= GOAL
    result = {
        "when": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": machine(),
        "rounds": args.rounds,
        "goal": f"time to first step <= {GOAL} x floor",
        "jobs": figures,
        "nodes": len(bench.site.nodes),
        "ps_speed": {
            placement: {
                "steps_per_second": min_median_max([r["steps_per_second"] for r in rounds]),
                "nodes": [r["nodes"] for r in rounds],
            }
            for placement, rounds in speeds.items()
        },
        "node_rss_mb": footprint,
        "runs": runs,
        "speed_runs": speeds,
    }
    lines = [
        "# Real nodes: paddle-nbext against the bare floor",
        "",
        f"{result['when']}, {os.cpu_count()} CPUs, {len(bench.site.nodes)} real nodes, replicas of each role spread over them; "
        f"{args.rounds} interleaved rounds per job; seconds from submit (median, min-max).",
        "",
        "| job | way | every replica Running | first step | end | trainers on nodes |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for kind in JOBS:
        for way in ("paddle-nbext", "floor"):
            cells = [median_range(figures[kind][way][m]) for m in ("running", "first_step", "done")]
            spread_over = sorted({int(r["trainer_nodes"]) for r in runs[kind][way]})
            lines.append(f"| {kind} | {way} | " + " | ".join(cells) + f" | {', '.join(map(str, spread_over))} |")
    lines += ["", "First step, paddle-nbext / floor (goal <= 1.15):", ""]
    lines += [f"- {kind}: {figures[kind]['first_step_ratio']} ({verdict(figures[kind]['goal_met'])})" for kind in JOBS]
    lines += [
        "",
        f"A PS job's speed (2 pservers + 2 trainers, GEO; trainer 0's steps per second from step {SPEED_FROM_STEP}; median, min-max):",
        "",
    ]
    for placement, measured in result["ps_speed"].items():
        used = sorted({int(n) for n in measured["nodes"]})
        lines.append(
            f"- {placement}: {median_range(measured['steps_per_second'])} steps/s (its pods on {', '.join(map(str, used))} node(s))"
        )
    lines += ["", "Node footprint (RSS, MB, median over the nodes): " + ", ".join(f"{k} {v}" for k, v in footprint.items()), ""]
    print(write_report("real_node", result, "\n".join(lines)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
