"""Benchmark: CephFS homes on the real node against the node's local disk (issue 34).

A control plane, the real node and the test Ceph (tests/support/ceph: monitor, OSD on memstore,
MDS) are started as the suite starts them; two notebook users are set up as the real-node tests
set one up, one whose home is a CephFS home provisioned by deploy/cephfs/provision_home.py (the
kubelet mounts it through the CephFS CSI plugin) and one whose home is a ``local`` volume on the
node.  Then, rounds alternating between the two:

- **checkpoint save**: in one pod on the node that mounts both the CephFS home and an ``emptyDir``
  on the node's disk, ``paddle.save`` of a ~100 MB state, ``fsync`` and an atomic rename (what a
  durable ``save_checkpoint`` does), into each, alternating, seconds per save;
- **submit to first step**: the same 2-trainer collective job submitted through each user's
  server; seconds from ``POST /jobs`` to the first ``step N loss`` line of trainer 0 (read from
  the kubelet), and to the job's end;
- **cached environment**: each user's second job with the same ``requirements.txt`` (the
  environment built by the first, in the home, is reused): submit to first step.

Also recorded: the Ceph cluster's start (to an active MDS) and the CephFS provisioning of a user.
The machine is the suite's 2-core one: figures are for comparing, not for absolutes.

Writes benchmarks/results/cephfs.json and cephfs.md.

    .venv/bin/python benchmarks/bench_cephfs.py [--rounds 3]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
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
from support.controlplane.installer_image import installers_image  # noqa: E402
from support.controlplane.realnode import RealNode  # noqa: E402
from support.notebook_server import NotebookServer  # noqa: E402
from support.realnode_notebook import NOTEBOOK_ACCOUNT, apply_shipped_rbac, prepare_notebook  # noqa: E402
from support.realnode_site import RealNodeSite  # noqa: E402
from support.wheels import make_wheel  # noqa: E402

USER = "jovyan"
WAIT = 600.0
STEP = re.compile(r"step \d+ loss")
RESOURCES = {"trainer_cpu": "250m", "trainer_mem": "1536Mi"}
JOB = {"mode": "collective", "trainers": 2, "entry_point": "python collective_train.py --steps 40 --print-every 10"}
SAVE_ROUNDS = 5
# One pod saves a ~100 MB state alternately into the CephFS home and the node's disk (an emptyDir).
SAVE_SCRIPT = """
import json, os, sys, time
import numpy as np
import paddle
state = {"w": paddle.to_tensor(np.random.default_rng(0).standard_normal(26_214_400, dtype="float32"))}
times = {"cephfs": [], "local": []}
for round in range(int(sys.argv[1])):
    for where, folder in (("cephfs", "/home/ceph"), ("local", "/scratch")):
        partial, final = f"{folder}/ckpt.partial", f"{folder}/ckpt-{round}"
        started = time.monotonic()
        paddle.save(state, partial)
        with open(partial, "rb+") as f:
            os.fsync(f.fileno())
        os.replace(partial, final)
        times[where].append(time.monotonic() - started)
        os.remove(final)
print("TIMES " + json.dumps({"times": times, "bytes": state["w"].numel().item() * 4}), flush=True)
"""
USES_TINYTOK = "import tinytok\nprint('tinytok', tinytok.tokens('a b c'))\nprint('step 1 loss 0.5', flush=True)\n"


class Bench:
    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.plane = ControlPlane(workdir / "controlplane").start()
        try:
            self._start()
        except BaseException:
            self.plane.stop()
            raise

    def _start(self) -> None:
        """Everything after the control plane: the node, Ceph, the two users (the node and Ceph
        sweep what a failed start left, the next time they start)."""
        self.node = RealNode(self.plane).start()
        homes = Path(tempfile.mkdtemp(prefix="pnb-homes-", dir="/tmp"))
        self.site = RealNodeSite(self.node, installers_image().reference, "Never", homes, nodes=[self.node])
        self.node.import_image(installers_image())
        self.site.homes.chmod(0o755)
        started = time.monotonic()
        self.ceph = CephSite(self.plane, [self.node], str(self.plane.admin_kubeconfig)).start()
        self.ceph_start = time.monotonic() - started
        self.admin = kube_config.new_client_from_config(config_file=str(self.plane.admin_kubeconfig))
        self.core = client.CoreV1Api(self.admin)
        self.users: dict[str, tuple[str, Path, NotebookServer]] = {}
        self.provision_seconds = 0.0
        for kind in ("cephfs", "local"):
            self.users[kind] = self._user(kind)

    def _user(self, kind: str) -> tuple[str, Path, NotebookServer]:
        namespace = new_namespace(self.core, f"pnb-bench-{kind}-")
        apply_shipped_rbac(self.admin, namespace)
        token = account_token(self.core, namespace, NOTEBOOK_ACCOUNT)
        kubeconfig = notebook_kubeconfig(self.plane.admin_kubeconfig, token, namespace, self.workdir / f"{kind}.kubeconfig")
        home = None
        if kind == "cephfs":
            started = time.monotonic()
            _, home = self.ceph.home(USER, namespace, self.site.uid, self.site.gid)
            self.provision_seconds = time.monotonic() - started
        setup = prepare_notebook(self.site, self.admin, namespace, kubeconfig, USER, home)
        wheels = setup.home / "wheels"
        make_wheel(wheels, "tinytok", "1.0", body="def tokens(text):\n    return text.split()\n")
        package = setup.home / "tok"
        package.mkdir()
        (package / "uses_tinytok.py").write_text(USES_TINYTOK)
        (package / "requirements.txt").write_text("tinytok==1.0\n")
        for path in [wheels, *wheels.iterdir(), package, *package.iterdir()]:
            os.lchown(path, self.site.uid, self.site.gid)
        setup.settings["PaddleNbext"].update(pip_no_index=True, pip_find_links=[str(wheels)])
        server = NotebookServer(setup.home, setup.settings, user=USER, uid=self.site.uid, gid=self.site.gid, log_dir=self.workdir).start()
        return namespace, setup.home, server

    def close(self) -> None:
        for _, _, server in self.users.values():
            server.stop()
        self.site.release_volumes(self.admin)
        self.ceph.stop()
        self.node.stop()
        self.plane.stop()
        shutil.rmtree(self.site.homes, ignore_errors=True)

    # --- submit to first step ------------------------------------------------------------------
    def job(self, kind: str, name: str, body: dict[str, Any]) -> dict[str, float]:
        namespace, _, server = self.users[kind]
        started = time.monotonic()
        answer = server.api("POST", "jobs", body={"job_name": name, **RESOURCES, **body})
        if answer.status_code != 201:
            raise RuntimeError(f"submit {name}: {answer.status_code} {answer.text}")
        marks: dict[str, float] = {}
        deadline = started + WAIT
        while time.monotonic() < deadline:
            if "first_step" not in marks:
                pods = [p for p in self.core.list_namespaced_pod(namespace).items if name in str(present(p.metadata, "metadata").name)]
                replicas = [p for p in pods if "-trainer-" in str(present(p.metadata, "metadata").name)]
                if "running" not in marks and replicas and all(present(p.status, "status").phase != "Pending" for p in replicas):
                    marks["running"] = time.monotonic() - started
                for pod in replicas:
                    pod_name, phase = str(present(pod.metadata, "metadata").name), present(pod.status, "status").phase
                    if re.search(r"trainer-0-[a-z0-9]+$", pod_name) and phase != "Pending":
                        try:
                            if STEP.search(self.core.read_namespaced_pod_log(pod_name, namespace)):
                                marks["first_step"] = time.monotonic() - started
                        except client.ApiException:
                            pass
            status = server.api("GET", f"jobs/{name}").json()
            if status["phase"] in ("Failed", "Cancelled"):
                raise RuntimeError(f"{name} ended {status['phase']}: {status['message']}")
            if status["phase"] == "Succeeded" and status.get("finished"):
                marks["done"] = time.monotonic() - started
                marks.setdefault("first_step", marks["done"])
                server.api("DELETE", f"jobs/{name}")
                return marks
            time.sleep(0.2)
        raise RuntimeError(f"{name}: not done within {WAIT:.0f} s ({marks})")

    # --- checkpoint saves --------------------------------------------------------------------------
    def saves(self, rounds: int) -> dict[str, Any]:
        namespace, _, _ = self.users["cephfs"]
        placement = self.site.placement()
        pod = {
            "metadata": {"name": "ckpt-saves"},
            "spec": {
                "restartPolicy": "Never",
                "nodeSelector": placement["node_selector"],
                "tolerations": placement["tolerations"],
                "securityContext": {"runAsUser": self.site.uid, "runAsGroup": self.site.gid},
                "containers": [
                    {
                        "name": "save",
                        "image": self.site.image,
                        "imagePullPolicy": "Never",
                        "command": ["python3", "-c", SAVE_SCRIPT, str(rounds)],
                        "resources": {"limits": {"memory": "2Gi"}},
                        "volumeMounts": [{"name": "home", "mountPath": "/home/ceph"}, {"name": "scratch", "mountPath": "/scratch"}],
                    }
                ],
                "volumes": [
                    {"name": "home", "persistentVolumeClaim": {"claimName": f"claim-{USER}"}},
                    {"name": "scratch", "emptyDir": {}},
                ],
            },
        }
        self.core.create_namespaced_pod(namespace, client.V1Pod.model_validate(pod))
        deadline = time.monotonic() + WAIT
        while time.monotonic() < deadline:
            phase = present(self.core.read_namespaced_pod("ckpt-saves", namespace).status, "status").phase
            if phase in ("Succeeded", "Failed"):
                log = self.core.read_namespaced_pod_log("ckpt-saves", namespace)
                if phase == "Failed":
                    raise RuntimeError(f"the save pod failed:\n{log[-3000:]}")
                found = next(line for line in log.splitlines() if line.startswith("TIMES "))
                return dict(json.loads(found[len("TIMES ") :]))
            time.sleep(0.5)
        raise RuntimeError("the save pod did not end")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="pnb-bench-cephfs-"))
    bench = Bench(workdir)
    try:
        saves = bench.saves(SAVE_ROUNDS)
        first: dict[str, list[dict[str, float]]] = {"cephfs": [], "local": []}
        env: dict[str, list[dict[str, float]]] = {"cephfs": [], "local": []}
        requirements_job = {"mode": "collective", "trainers": 1, "trainer_package": "tok", "entry_point": "python uses_tinytok.py"}
        for kind in ("cephfs", "local"):
            bench.job(kind, "env-build", requirements_job)  # builds the environment the rounds reuse
        for round_ in range(args.rounds):
            for kind in ("cephfs", "local") if round_ % 2 == 0 else ("local", "cephfs"):
                first[kind].append(bench.job(kind, f"first-{round_}", {"trainer_package": "examples", **JOB}))
                env[kind].append(bench.job(kind, f"env-{round_}", requirements_job))
    finally:
        bench.close()
    figures: dict[str, Any] = {
        "date": datetime.date.today().isoformat(),
        "machine": machine_line(),
        "ceph_start_seconds": round(bench.ceph_start, 2),
        "provision_home_seconds": round(bench.provision_seconds, 2),
        "checkpoint_save_bytes": saves["bytes"],
        "checkpoint_save_seconds": {kind: min_median_max(values) for kind, values in saves["times"].items()},
        "submit_to_trainers_running": {
            kind: min_median_max([m.get("running", m["first_step"]) for m in marks]) for kind, marks in first.items()
        },
        "submit_to_first_step": {kind: min_median_max([m["first_step"] for m in marks]) for kind, marks in first.items()},
        "submit_to_end": {kind: min_median_max([m["done"] for m in marks]) for kind, marks in first.items()},
        "cached_environment_submit_to_first_step": {kind: min_median_max([m["first_step"] for m in marks]) for kind, marks in env.items()},
        "rounds": args.rounds,
    }
    save = figures["checkpoint_save_seconds"]
    mb = saves["bytes"] / 1e6
    lines = [
        "# CephFS homes against the node's local disk",
        "",
        f"{figures['date']}, {figures['machine']}; `.venv/bin/python benchmarks/bench_cephfs.py --rounds {args.rounds}`.",
        "Seconds, median (min-max). One host's Ceph (monitor, one OSD on memstore, MDS) and ceph-fuse mounts",
        "through the CSI plugin on the real node; the 'local' home is a `local` PersistentVolume on the node.",
        "",
        "| figure | CephFS home | local disk |",
        "|---|---|---|",
        f"| checkpoint save of {mb:.0f} MB (paddle.save, fsync, rename), {SAVE_ROUNDS} rounds | {median_range(save['cephfs'])} | {median_range(save['local'])} |",
        f"| submit → every trainer pod out of Pending (the kubelet mounted the home), 2-trainer collective job | {median_range(figures['submit_to_trainers_running']['cephfs'])} | {median_range(figures['submit_to_trainers_running']['local'])} |",
        f"| submit → trainer 0's first step, same job | {median_range(figures['submit_to_first_step']['cephfs'])} | {median_range(figures['submit_to_first_step']['local'])} |",
        f"| submit → the job's recorded end | {median_range(figures['submit_to_end']['cephfs'])} | {median_range(figures['submit_to_end']['local'])} |",
        f"| submit → first step with the cached environment of its requirements.txt | {median_range(figures['cached_environment_submit_to_first_step']['cephfs'])} | {median_range(figures['cached_environment_submit_to_first_step']['local'])} |",
        "",
        f"Ceph start to an active MDS: {figures['ceph_start_seconds']} s; provisioning one user's home "
        f"(`provision_home.py`: directory, key, Secret, PersistentVolume, claim) and mounting it for the notebook: "
        f"{figures['provision_home_seconds']} s.",
        "",
    ]
    print(write_report("cephfs", figures, "\n".join(lines)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
