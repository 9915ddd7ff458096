"""Benchmark: a real node lost under a job (issue 35), against a fresh submit of the same job.

A control plane, two real nodes and the test Ceph are started as the suite starts them; one
notebook user is set up with a CephFS home and ``replica_spread = "spread"`` (the two trainers of
a collective job on two nodes).  Rounds alternate between:

- **fresh**: the checkpointing 2-trainer collective job submitted; seconds from ``POST /jobs`` to
  the first ``step N loss`` line of trainer 0 (read through the server's log API);
- **node loss**: the same job, once it saved its first checkpoint, loses the node of its trainer
  that is not on the first node (every process of that node killed at once, as a power loss);
  seconds from the power-off to: the job holding its failure because the node does not answer
  ("does not answer"), the whole restart ("restart 1: node ... stopped responding"), and the
  first ``step N loss`` line after trainer 0 resumed from its checkpoint.  The node is then
  powered on again (and counted: a node's boot).

With the defaults (the controller manager's 50 s node-monitor grace period, `node_lost_seconds`
30) the restart cannot come before ~80 s: that is the bound an admin sets, the rest is ours.
The machine is the suite's 2-core one: figures are for comparing, not for absolutes.

Writes benchmarks/results/node_loss.json and node_loss.md.

    .venv/bin/python benchmarks/bench_node_loss.py [--rounds 2]
"""

from __future__ import annotations

import argparse
import datetime
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from bench_real_node import account_token, new_namespace, notebook_kubeconfig  # noqa: E402
from cluster.k8s_objects import present  # noqa: E402
from harness import machine_line, median_range, min_median_max, write_report  # noqa: E402
from kubernetes import client  # noqa: E402
from kubernetes import config as kube_config  # noqa: E402
from support.ceph.site import CephSite  # noqa: E402
from support.controlplane import ControlPlane  # noqa: E402
from support.controlplane.images import PADDLE_IMAGE  # noqa: E402
from support.controlplane.realnode import RealNode  # noqa: E402
from support.notebook_server import NotebookServer  # noqa: E402
from support.realnode_notebook import NOTEBOOK_ACCOUNT, apply_shipped_rbac, prepare_notebook  # noqa: E402
from support.realnode_site import RealNodeSite  # noqa: E402

USER = "jovyan"
WAIT = 600.0
STEP = re.compile(r"step (\d+) loss")
RESUMED = re.compile(r"trainer 0 resumed from step (\d+)")
JOB = {
    "trainer_package": "examples",
    "mode": "collective",
    "trainers": 2,
    "trainer_cpu": "250m",
    "trainer_mem": "1536Mi",
    "entry_point": "python collective_train.py --steps 2000 --step-delay 0.1 --checkpoint-every 20 --print-every 10",
}


class Bench:
    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.plane = ControlPlane(workdir / "controlplane").start()
        self.nodes: list[RealNode] = []
        try:
            self._start()
        except BaseException:
            self.close()
            raise

    def _start(self) -> None:
        for index in (1, 2):
            self.nodes.append(RealNode(self.plane, index=index).start())
        homes = Path(tempfile.mkdtemp(prefix="pnb-homes-", dir="/tmp"))
        self.site = RealNodeSite(self.nodes[0], PADDLE_IMAGE, "Never", homes, nodes=self.nodes)
        self.site.homes.chmod(0o755)
        self.ceph = CephSite(self.plane, self.nodes, str(self.plane.admin_kubeconfig)).start()
        self.admin = kube_config.new_client_from_config(config_file=str(self.plane.admin_kubeconfig))
        self.core = client.CoreV1Api(self.admin)
        self.namespace = new_namespace(self.core, "pnb-bench-node-loss-")
        apply_shipped_rbac(self.admin, self.namespace)
        token = account_token(self.core, self.namespace, NOTEBOOK_ACCOUNT)
        kubeconfig = notebook_kubeconfig(self.plane.admin_kubeconfig, token, self.namespace, self.workdir / "notebook.kubeconfig")
        _, home = self.ceph.home(USER, self.namespace, self.site.uid, self.site.gid)
        setup = prepare_notebook(self.site, self.admin, self.namespace, kubeconfig, USER, home)
        setup.settings["KubernetesBackend"]["replica_spread"] = "spread"
        self.server = NotebookServer(
            setup.home, setup.settings, user=USER, uid=self.site.uid, gid=self.site.gid, log_dir=self.workdir
        ).start()

    def close(self) -> None:
        """Stop whatever started, in reverse order."""
        if hasattr(self, "server"):
            self.server.stop()
        if hasattr(self, "admin"):
            self.site.release_volumes(self.admin)
        if hasattr(self, "ceph"):
            self.ceph.stop()
        for node in reversed(self.nodes):
            node.stop()
        self.plane.stop()
        if hasattr(self, "site"):
            shutil.rmtree(self.site.homes, ignore_errors=True)

    def status(self, name: str) -> dict[str, Any]:
        answer: dict[str, Any] = self.server.api("GET", f"jobs/{name}").json()
        if answer.get("phase") in ("Failed", "Cancelled"):
            raise RuntimeError(f"{name} ended {answer['phase']}: {answer.get('message')}")
        return answer

    def log(self, name: str) -> str:
        answer = self.server.api("GET", f"jobs/{name}/logs", params={"role": "trainer", "index": 0})
        return answer.text if answer.status_code == 200 else ""

    def until(self, what: str, check: Any) -> float:
        deadline = time.monotonic() + WAIT
        while time.monotonic() < deadline:
            if check():
                return time.monotonic()
            time.sleep(0.2)
        raise RuntimeError(f"not seen within {WAIT:.0f} s: {what}")

    def submit(self, name: str) -> float:
        started = time.monotonic()
        answer = self.server.api("POST", "jobs", body={"job_name": name, **JOB})
        if answer.status_code != 201:
            raise RuntimeError(f"submit {name}: {answer.status_code} {answer.text}")
        return started

    def fresh(self, name: str) -> float:
        started = self.submit(name)
        first = self.until("the first step", lambda: STEP.search(self.log(name)) is not None)
        self.server.api("DELETE", f"jobs/{name}")
        return first - started

    def node_loss(self, name: str) -> dict[str, float]:
        self.submit(name)
        self.until("a checkpoint", lambda: (self.server.api("GET", f"jobs/{name}/checkpoints").json().get("latest") or None) is not None)
        pods = self.core.list_namespaced_pod(self.namespace).items
        first_node = self.nodes[0].name
        lost = next(
            node
            for pod in pods
            if name in str(present(pod.metadata, "metadata").name) and "-trainer-" in str(present(pod.metadata, "metadata").name)
            for node in self.nodes
            if node.name == present(pod.spec, "spec").node_name and node.name != first_node
        )
        off = time.monotonic()
        lost.power_off()
        marks: dict[str, float] = {}
        try:
            marks["held"] = self.until("the held failure", lambda: "does not answer" in self.status(name).get("message", "")) - off
            marks["restart"] = self.until("the restart", lambda: "restart 1: node" in self.status(name).get("message", "")) - off

            def stepped_after_resume() -> bool:
                log = self.log(name)
                resumed = RESUMED.search(log)
                return resumed is not None and STEP.search(log, resumed.end()) is not None

            marks["first_step_after_resume"] = self.until("the first step after the resume", stepped_after_resume) - off
        finally:
            booted = time.monotonic()
            lost.power_on()
            marks["node_boot"] = time.monotonic() - booted
            self.server.api("DELETE", f"jobs/{name}")
        return marks


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="pnb-bench-node-loss-"))
    bench = Bench(workdir)
    fresh: list[float] = []
    losses: list[dict[str, float]] = []
    try:
        for round_ in range(args.rounds):
            fresh.append(bench.fresh(f"fresh-{round_}"))
            losses.append(bench.node_loss(f"loss-{round_}"))
    finally:
        bench.close()
    figures: dict[str, Any] = {
        "date": datetime.date.today().isoformat(),
        "machine": machine_line(),
        "rounds": args.rounds,
        "fresh_submit_to_first_step": min_median_max(fresh),
        **{f"power_off_to_{key}": min_median_max([m[key] for m in losses]) for key in ("held", "restart", "first_step_after_resume")},
        "node_boot": min_median_max([m["node_boot"] for m in losses]),
    }
    lines = [
        "# A node lost under a job",
        "",
        f"{figures['date']}, {figures['machine']}; `.venv/bin/python benchmarks/bench_node_loss.py --rounds {args.rounds}`.",
        "Seconds, median (min-max). Two real nodes, a CephFS home, a 2-trainer collective job spread over the nodes,",
        "checkpointing every 20 steps; the node of trainer 1 loses power.",
        "",
        "| figure | seconds |",
        "|---|---|",
        f"| fresh submit → trainer 0's first step | {median_range(figures['fresh_submit_to_first_step'])} |",
        f'| power off → the failure held ("does not answer") | {median_range(figures["power_off_to_held"])} |',
        f"| power off → the whole restart (the node declared lost: grace 50 s + node_lost_seconds 30) | {median_range(figures['power_off_to_restart'])} |",
        f"| power off → trainer 0's first step after resuming from its checkpoint | {median_range(figures['power_off_to_first_step_after_resume'])} |",
        f"| the lost node's boot (power on → Ready, its pods finished) | {median_range(figures['node_boot'])} |",
        "",
        "Restart → first step after resume is the difference of the last two power-off figures; compare it",
        "with the fresh submit's first step (the restart re-creates the Jobs and pods, the ranks load the checkpoint).",
        "",
    ]
    print(write_report("node_loss", figures, "\n".join(lines)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
