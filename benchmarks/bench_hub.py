"""Benchmark: a user's path through JupyterHub on the real node, against the same job from the host.

A control plane and the real node (tests/support/controlplane) are started, and a JupyterHub from
the shipped recipe beside them (``support.hub_site``, as the suite's ``hub`` fixture runs it).
Measured, in headless Chromium through the hub's proxy (issue 24, "Performance"):

- **login → JupyterLab ready in the pod**: from the login form's submit to the hub sending the
  browser to ``/user/<name>/lab`` (the notebook pod spawned and ready), and to JupyterLab started
  in that page (the paddle-nbext sidebar tab present); each round from a stopped server;
- **notebook cell → job Running → first report() step**: a ``%%paddle_submit`` cell (a GEO job, 1
  pserver + 2 trainers, whose trainers ``report()`` every step) run in JupyterLab in the pod, its
  kernel warm (``%load_ext`` done), from the cell's Shift+Enter; against **the host**: the same
  cell body sent with ``paddle-nbext submit --script`` from a terminal on the host, to a ``jupyter
  server`` on the host with the Kubernetes backend (the real-node tests' notebook: shipped RBAC,
  token kubeconfig, ``claim-<user>`` home), rounds interleaved.  Both clocks read the job through
  its own server's API (phase Running; the first reported point of any replica).

Goal: cell → first step ≤ 1.1 × the host's.  Writes benchmarks/results/hub.json and hub.md.

    .venv/bin/python benchmarks/bench_hub.py [--rounds 3]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from bench_real_node import account_token, new_namespace, notebook_kubeconfig  # noqa: E402
from browser.lab_server import CHROMIUM, CHROMIUM_ARGS, PANEL_TAB  # noqa: E402
from harness import goal, machine, median_range, min_median_max, write_report  # noqa: E402
from kubernetes import client  # noqa: E402
from kubernetes import config as kube_config  # noqa: E402
from playwright.sync_api import Page, sync_playwright  # noqa: E402
from support.controlplane import ControlPlane  # noqa: E402
from support.hub_site import HUB_ROLE, PASSWORD, PUBLIC_URL, START_WAIT, HubSite  # noqa: E402
from support.notebook_server import NotebookServer  # noqa: E402
from support.realnode_notebook import NOTEBOOK_ACCOUNT, apply_shipped_rbac, prepare_notebook  # noqa: E402
from support.realnode_site import RealNodeSite  # noqa: E402

HUB_USER, HOST_USER = "dana", "hostuser"
GOAL = 1.1
WAIT = 600.0
FLAGS = "--pservers 1 --trainers 2 --pserver-cpu 250m --trainer-cpu 250m --pserver-mem 1Gi --trainer-mem 1536Mi"
#: The job both ways run: GEO parameter-server training that report()s every step.
BODY = """import os

os.environ.setdefault("FLAGS_enable_pir_api", "0")
import numpy as np
import paddle
import paddle.distributed.fleet as fleet
from paddle_nbext_job import report

STEPS = 100
paddle.enable_static()
fleet.init(fleet.PaddleCloudRoleMaker(is_collective=False))
x = paddle.static.data(name="x", shape=[None, 4], dtype="float32")
y = paddle.static.data(name="y", shape=[None, 1], dtype="float32")
loss = paddle.mean(paddle.nn.functional.square_error_cost(paddle.static.nn.fc(x, size=1), y))
strategy = fleet.DistributedStrategy()
strategy.a_sync = True
strategy.a_sync_configs = {"k_steps": 10}
fleet.distributed_optimizer(paddle.optimizer.SGD(learning_rate=0.05), strategy).minimize(loss)
if fleet.is_server():
    fleet.init_server()
    fleet.run_server()
else:
    exe = paddle.static.Executor(paddle.CPUPlace())
    exe.run(paddle.static.default_startup_program())
    fleet.init_worker()
    rng = np.random.default_rng(fleet.worker_index())
    for step in range(STEPS):
        batch = rng.normal(size=(32, 4)).astype("float32")
        (value,) = exe.run(feed={"x": batch, "y": batch.sum(axis=1, keepdims=True)}, fetch_list=[loss])
        report(step + 1, total=STEPS, loss=float(np.mean(value)))
    fleet.stop_worker()
"""


def notebook_json(cells: list[str]) -> str:
    return json.dumps(
        {
            "cells": [
                {"cell_type": "code", "execution_count": None, "id": f"c{i}", "metadata": {}, "outputs": [], "source": s}
                for i, s in enumerate(cells)
            ],
            "metadata": {"kernelspec": {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}},
            "nbformat": 4,
            "nbformat_minor": 5,
        }
    )


class Cluster(Protocol):
    """What `Bench.account_kubeconfig` uses of its bench (bench_hub_list's Bench borrows the method)."""

    workdir: Path
    plane: ControlPlane
    admin: client.ApiClient
    core: client.CoreV1Api
    namespace: str


class Bench:
    def __init__(self, workdir: Path, rounds: int) -> None:
        self.workdir = workdir
        self.rounds = rounds
        self.plane = ControlPlane(workdir / "controlplane").start()
        self.site = RealNodeSite.start(self.plane, workdir)
        self.admin = kube_config.new_client_from_config(config_file=str(self.plane.admin_kubeconfig))
        self.core = client.CoreV1Api(self.admin)
        self.namespace = new_namespace(self.core, "pnb-bench-hub-")
        apply_shipped_rbac(self.admin, self.namespace)
        # The hub: its own account (KubeSpawner's Role), the shipped recipe, one user.
        self.hub = HubSite(self.site, self.admin, self.namespace, workdir / "hub")
        self.hub.workdir.mkdir()
        self.hub.prepare(str(self.account_kubeconfig("jupyterhub", HUB_ROLE)), [HUB_USER])
        self.hub.start()
        home = self.hub.homes[HUB_USER]
        self.write(home, "bench/bench.ipynb", notebook_json(["%load_ext paddle_nbext"] + [self.cell(f"pod-{i}") for i in range(rounds)]))
        self.write(
            home,
            ".jupyter/lab/user-settings/@jupyterlab/apputils-extension/notification.jupyterlab-settings",
            json.dumps({"fetchNews": "false", "checkForUpdates": False}),
        )
        # The host: a jupyter server as uid 1000 with the Kubernetes backend, and the same code.
        setup = prepare_notebook(self.site, self.admin, self.namespace, self.account_kubeconfig(NOTEBOOK_ACCOUNT, None), HOST_USER)
        self.host_home = setup.home
        self.write(self.host_home, "bench/train.py", BODY)
        self.server = NotebookServer(
            setup.home, setup.settings, user=HOST_USER, uid=self.site.uid, gid=self.site.gid, log_dir=workdir
        ).start()

    def write(self, home: Path, relative: str, text: str) -> None:
        path = home / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        for item in [path, *path.parents]:
            if item == home:
                break
            os.chown(item, self.site.uid, self.site.gid)

    @staticmethod
    def cell(name: str) -> str:
        return f"%%paddle_submit --job-name {name} {FLAGS}\n{BODY}"

    def account_kubeconfig(self: Cluster, account: str, role: dict[str, Any] | None) -> Path:
        """A token kubeconfig of ServiceAccount `account` (made, and bound to `role`, if given)."""
        rbac = client.RbacAuthorizationV1Api(self.admin)
        if role is not None:
            self.core.create_namespaced_service_account(
                self.namespace, client.V1ServiceAccount.model_validate({"metadata": {"name": account}})
            )
            rbac.create_namespaced_role(self.namespace, client.V1Role.model_validate({"metadata": {"name": account}, **role}))
            rbac.create_namespaced_role_binding(
                self.namespace,
                client.V1RoleBinding.model_validate(
                    {
                        "metadata": {"name": account},
                        "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": self.namespace}],
                        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": account},
                    }
                ),
            )
            review = client.V1SubjectAccessReview.model_validate(
                {
                    "spec": {
                        "user": f"system:serviceaccount:{self.namespace}:{account}",
                        "resourceAttributes": {"namespace": self.namespace, "verb": "create", "resource": "pods"},
                    }
                }
            )

            def allowed() -> bool:
                status = client.AuthorizationV1Api(self.admin).create_subject_access_review(review).status
                assert status is not None  # the API server answers a review with its verdict
                return status.allowed

            deadline = time.monotonic() + 30
            while not allowed():
                if time.monotonic() > deadline:
                    raise RuntimeError(f"the Role of {account} never came into force")
                time.sleep(0.1)
        token = account_token(self.core, self.namespace, account)
        return notebook_kubeconfig(self.plane.admin_kubeconfig, token, self.namespace, self.workdir / f"{account}.kubeconfig")

    def close(self) -> None:
        for step in (self.server.stop, self.hub.stop, lambda: self.site.release_volumes(self.admin), self.site.stop, self.plane.stop):
            try:
                step()
            except Exception as error:  # noqa: BLE001 - tear down the rest whatever one step says
                print(f"bench_hub: teardown: {error}", file=sys.stderr)

    # --- login → JupyterLab ready ----------------------------------------------------------------
    def login(self, page: Page) -> dict[str, float]:
        page.goto(f"{PUBLIC_URL}/hub/login")
        page.locator("#username_input").fill(HUB_USER)
        page.locator("#password_input").fill(PASSWORD)
        started = time.monotonic()
        page.locator("#login_submit").click()
        page.wait_for_url(lambda url: f"/user/{HUB_USER}/lab" in url, timeout=START_WAIT * 1000)
        server = time.monotonic() - started
        page.locator(PANEL_TAB).wait_for(timeout=START_WAIT * 1000)
        return {"server_ready": server, "lab_ready": time.monotonic() - started}

    # --- cell → Running → first step ---------------------------------------------------------------
    def watch(self, status: Callable[[], dict[str, Any]], metrics: Callable[[], dict[str, Any]], started: float) -> dict[str, float]:
        marks: dict[str, float] = {}
        while time.monotonic() - started < WAIT:
            phase = status().get("phase")
            now = time.monotonic() - started
            if phase in ("Failed", "Cancelled"):
                raise RuntimeError(f"the job ended {phase}: {status().get('message')}")
            if "running" not in marks and phase in ("Running", "Succeeded"):
                marks["running"] = now
            if "running" in marks and "first_step" not in marks and any(r["count"] for r in metrics().get("replicas", [])):
                marks["first_step"] = time.monotonic() - started
            if "first_step" in marks and phase == "Succeeded":
                return marks
            time.sleep(0.1)
        raise RuntimeError(f"not done within {WAIT:.0f} s: {marks}")

    def pod_round(self, page: Page, token: str, index: int) -> dict[str, float]:
        name = f"pod-{index}"

        def api(path: str) -> dict[str, Any]:
            answer = self.hub.notebook(HUB_USER, token, "GET", path)
            return dict(answer.json()) if answer.status_code == 200 else {}

        editor = page.locator(".jp-NotebookPanel .jp-Cell").nth(index + 1).locator(".cm-content")
        editor.click()
        started = time.monotonic()
        page.keyboard.press("Shift+Enter")
        marks = self.watch(lambda: api(f"jobs/{name}"), lambda: api(f"jobs/{name}/metrics?points=1"), started)
        self.hub.notebook(HUB_USER, token, "DELETE", f"jobs/{name}")
        return marks

    def host_round(self, index: int) -> dict[str, float]:
        name = f"host-{index}"
        command = [
            str(Path(sys.executable).with_name("paddle-nbext")),
            "--url",
            self.server.base,
            "--token",
            self.server.jupyter.token,
            "submit",
            "--job-name",
            name,
            "--package",
            str(self.host_home / "bench"),
            "--script",
            str(self.host_home / "bench" / "train.py"),
            *FLAGS.split(),
        ]
        started = time.monotonic()
        done = subprocess.run(command, capture_output=True, text=True, check=False, cwd=self.host_home / "bench")
        if done.returncode != 0:
            raise RuntimeError(f"paddle-nbext submit: {done.returncode} {done.stdout} {done.stderr}")

        def api(path: str) -> dict[str, Any]:
            answer = self.server.api("GET", path)
            return dict(answer.json()) if answer.status_code == 200 else {}

        marks = self.watch(lambda: api(f"jobs/{name}"), lambda: api(f"jobs/{name}/metrics?points=1"), started)
        self.server.api("DELETE", f"jobs/{name}")
        return marks

    def run(self) -> dict[str, Any]:
        logins: list[dict[str, float]] = []
        pod: list[dict[str, float]] = []
        host: list[dict[str, float]] = []
        with sync_playwright() as playwright:
            chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
            for index in range(self.rounds):
                context = chromium.new_context(viewport={"width": 1400, "height": 1000})
                page = context.new_page()
                page.set_default_timeout(120_000)
                logins.append(self.login(page))
                print(f"bench_hub: login round {index}: {logins[-1]}", flush=True)
                if index < self.rounds - 1:
                    context.close()
                    self.hub.stop_server(HUB_USER)
            # The notebook, its kernel warm: %load_ext run once before the clock.
            page.goto(f"{PUBLIC_URL}/user/{HUB_USER}/lab/tree/bench/bench.ipynb")
            page.locator(".jp-StatusBar-TextItem", has_text=re.compile(r"\| Idle$")).first.wait_for(timeout=300_000)
            first = page.locator(".jp-NotebookPanel .jp-Cell").first
            first.locator(".cm-content").click()
            page.keyboard.press("Shift+Enter")
            first.locator(".jp-InputPrompt", has_text="[1]").wait_for(timeout=300_000)
            token = self.hub.user_token(HUB_USER)
            for index in range(self.rounds):
                order = ("host", "pod") if index % 2 else ("pod", "host")
                for way in order:
                    marks = self.pod_round(page, token, index) if way == "pod" else self.host_round(index)
                    (pod if way == "pod" else host).append(marks)
                    print(f"bench_hub: {way} round {index}: {marks}", flush=True)
            chromium.close()
        return {"logins": logins, "pod": pod, "host": host}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    if os.geteuid() != 0:
        print("bench_hub: the real node needs root", file=sys.stderr)
        return 1
    workdir = Path(tempfile.mkdtemp(prefix="pnb-bench-hub-"))
    bench = Bench(workdir, args.rounds)
    try:
        runs = bench.run()
    finally:
        bench.close()
        shutil.rmtree(workdir, ignore_errors=True)
    figures = {
        "login": {mark: min_median_max([r[mark] for r in runs["logins"]]) for mark in ("server_ready", "lab_ready")},
        "pod": {mark: min_median_max([r[mark] for r in runs["pod"]]) for mark in ("running", "first_step")},
        "host": {mark: min_median_max([r[mark] for r in runs["host"]]) for mark in ("running", "first_step")},
    }
    ratio = figures["pod"]["first_step"]["median"] / figures["host"]["first_step"]["median"]
    result: dict[str, Any] = {
        "when": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": machine(),
        "rounds": args.rounds,
        "goal": f"notebook cell in the pod -> first report() step <= {GOAL} x the same job from a terminal on the host",
        "figures": figures,
        "first_step_ratio": round(ratio, 3),
        "goal_met": ratio <= GOAL,
        "runs": runs,
    }
    lines = [
        "# JupyterHub on the real node: a user's path, and the job from the notebook pod vs. the host",
        "",
        f"{result['when']}, {os.cpu_count()} CPUs, {args.rounds} rounds; seconds (median, min-max).",
        "",
        "Login (the hub's form submitted) → the notebook pod spawned and the browser sent to it → JupyterLab started in it:",
        "",
        "| server ready (redirect to /user/…/lab) | JupyterLab ready (panel tab) |",
        "| --- | --- |",
        f"| {median_range(figures['login']['server_ready'])} | {median_range(figures['login']['lab_ready'])} |",
        "",
        "A GEO job (1 pserver + 2 trainers, report() every step), from the submit to the job Running and to its first reported step:",
        "",
        "| submitted from | job Running | first report() step |",
        "| --- | --- | --- |",
        f"| a `%%paddle_submit` cell in JupyterLab in the pod (warm kernel) | {median_range(figures['pod']['running'])} | {median_range(figures['pod']['first_step'])} |",
        f"| `paddle-nbext submit --script` in a terminal on the host (host `jupyter server`) | {median_range(figures['host']['running'])} | {median_range(figures['host']['first_step'])} |",
        "",
        f"First step, pod / host: {result['first_step_ratio']} ({goal(f'<= {GOAL}', result['goal_met'])}).",
        "",
    ]
    print(write_report("hub", result, "\n".join(lines)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
