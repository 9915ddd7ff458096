"""A user's day through JupyterHub, in headless Chromium: the hub's login page, the Start button,
JupyterLab in the notebook pod the hub spawned on the real node, a notebook cell
``%%paddle_submit --pservers 1 --trainers 2 --wait`` whose Paddle code trains (GEO
parameter-server mode), ``report()``s every step and saves the model into the home; the job in the
paddle-nbext panel going Running with a live loss curve and then Succeeded, a trainer's log, the
saved model in JupyterLab's file browser, and a second job from the panel's New job form.

Everything goes through the hub's proxy at ``http://<node address>:8000``, as a user's browser
does; the hub is the session's one (``hub`` in conftest.py, the shipped recipe). Each step leaves a
screenshot in ``test-artifacts/screenshots/hub-*.png``; the admin guide shows three of them.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from browser.lab_server import APP_START_TIMEOUT_MS, PANEL_TAB, REPO, chromium, fresh_page
from browser.test_panel import PANEL, fill_form, job_view, widen_left_area
from kubernetes import client
from playwright.sync_api import Browser, Page, expect
from support.hub_site import PASSWORD, PUBLIC_URL, START_WAIT, HubSite

from cluster.k8s_objects import present

pytestmark = [pytest.mark.browser, pytest.mark.timeout(1800)]

USER = "carol"
SCREENSHOTS = REPO / "test-artifacts" / "screenshots"
JOB_WAIT_MS = 300_000  # pods from a cold image cache, Paddle's import, the training
NOTEBOOK = "day/train.ipynb"
CELL_JOB = "day-ps"
FORM_JOB = "day-form"
#: Small requests: the notebook pod, the job's master and its 3 replicas share one 2-core node.
SMALL = "--pserver-cpu 250m --trainer-cpu 250m --pserver-mem 1Gi --trainer-mem 1536Mi"
CELL = f"""%%paddle_submit --job-name {CELL_JOB} --pservers 1 --trainers 2 {SMALL} --wait
import os
import time

os.environ.setdefault("FLAGS_enable_pir_api", "0")  # PS minimize() needs the legacy program IR
import numpy as np
import paddle
import paddle.distributed.fleet as fleet
from paddle_nbext_job import report

STEPS = 400
paddle.enable_static()
fleet.init(fleet.PaddleCloudRoleMaker(is_collective=False))
x = paddle.static.data(name="x", shape=[None, 4], dtype="float32")
y = paddle.static.data(name="y", shape=[None, 1], dtype="float32")
loss = paddle.mean(paddle.nn.functional.square_error_cost(paddle.static.nn.fc(x, size=1), y))
strategy = fleet.DistributedStrategy()
strategy.a_sync = True
strategy.a_sync_configs = {{"k_steps": 10}}  # GEO: the strategy that learns on paddlepaddle 3.0.0
fleet.distributed_optimizer(paddle.optimizer.SGD(learning_rate=0.05), strategy).minimize(loss)

if fleet.is_server():
    fleet.init_server()
    fleet.run_server()  # blocks until the job's trainers are done
else:
    exe = paddle.static.Executor(paddle.CPUPlace())
    exe.run(paddle.static.default_startup_program())
    fleet.init_worker()
    rng = np.random.default_rng(fleet.worker_index())
    truth = np.array([[1.0], [-2.0], [0.5], [3.0]], "float32")
    for step in range(STEPS):
        batch = rng.normal(size=(32, 4)).astype("float32")
        target = batch @ truth + 0.1 * rng.normal(size=(32, 1)).astype("float32")
        (value,) = exe.run(feed={{"x": batch, "y": target}}, fetch_list=[loss])
        report(step + 1, total=STEPS, loss=float(np.mean(value)))
        if step % 50 == 0:
            print("step", step, "loss", float(np.mean(value)), flush=True)
        time.sleep(0.1)  # a demo's pace: the curve grows while you watch
    if fleet.worker_index() == 0:
        scope = paddle.static.global_scope()
        weights = {{p.name: np.array(scope.find_var(p.name).get_tensor()) for p in paddle.static.default_main_program().all_parameters()}}
        saved = os.path.join(os.environ["HOME"], "models", os.environ["PADDLE_NBEXT_JOB"] + ".pdparams")
        os.makedirs(os.path.dirname(saved), exist_ok=True)
        paddle.save(weights, saved)
        print("saved", saved, flush=True)
    fleet.stop_worker()
"""


def owned(hub: HubSite, path: Path) -> None:
    """`path` and the directories above it in the home belong to the notebook user."""
    home = hub.homes[USER]
    for item in [path, *path.parents]:
        if item == home:
            break
        os.chown(item, hub.site.uid, hub.site.gid)


def write_home_file(hub: HubSite, relative: str, text: str) -> None:
    path = hub.homes[USER] / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    owned(hub, path)


def notebook(*cells: str) -> str:
    return json.dumps(
        {
            "cells": [
                {"cell_type": "code", "execution_count": None, "id": f"cell-{i}", "metadata": {}, "outputs": [], "source": source}
                for i, source in enumerate(cells)
            ],
            "metadata": {
                "kernelspec": {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"},
                "language_info": {"name": "python"},
            },
            "nbformat": 4,
            "nbformat_minor": 5,
        },
        indent=1,
    )


@pytest.fixture(scope="module")
def day(hub: HubSite) -> HubSite:
    """Carol's home before her day: her notebook, a trainer package for the form, and her
    JupyterLab settings (no news pop-up over the panel, as a user who answered it once)."""
    write_home_file(hub, NOTEBOOK, notebook("%load_ext paddle_nbext", CELL))
    write_home_file(hub, "ps_pkg/ps_train.py", (REPO / "examples" / "ps_train.py").read_text())
    write_home_file(
        hub,
        ".jupyter/lab/user-settings/@jupyterlab/apputils-extension/notification.jupyterlab-settings",
        json.dumps({"fetchNews": "false", "checkForUpdates": False}),
    )
    return hub


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with chromium() as launched:
        yield launched


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    with fresh_page(browser, timeout_ms=60_000) as opened:
        yield opened


def shot(page: Page, name: str) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"hub-{name}.png"))


def show_panel(page: Page) -> None:
    """The paddle-nbext panel in the left area (its tab toggles it: click only when it is hidden)."""
    if not page.locator(PANEL).is_visible():
        page.locator(PANEL_TAB).click()
    expect(page.locator(PANEL)).to_be_visible()


def log_in_and_start(page: Page) -> None:
    """The hub's login form; the hub then starts her server (its spawn page, with KubeSpawner's
    progress while the pod starts) and sends her on to JupyterLab in the pod."""
    page.goto(f"{PUBLIC_URL}/hub/login")
    page.locator("#username_input").fill(USER)
    page.locator("#password_input").fill(PASSWORD)
    shot(page, "01-login")
    page.locator("#login_submit").click()
    page.wait_for_url(re.compile(rf"/hub/spawn-pending/{USER}|/user/{USER}/"), timeout=START_WAIT * 1000)
    if "/spawn-pending/" in page.url:
        expect(page.locator("#progress-message")).not_to_be_empty()
        shot(page, "02-spawn-pending")
    # Once the pod is ready the hub sends the browser on to the server (KubeSpawner's default_url: /lab).
    page.wait_for_url(re.compile(rf"/user/{USER}/lab"), timeout=START_WAIT * 1000)
    page.locator(PANEL_TAB).wait_for(timeout=APP_START_TIMEOUT_MS)


def test_a_users_day_in_jupyterlab_in_the_pod_the_hub_spawned(day: HubSite, page: Page) -> None:
    hub = day
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    log_in_and_start(page)
    # JupyterLab is served by the notebook pod on the real node, reached through the hub's proxy.
    assert page.url.startswith(f"{PUBLIC_URL}/user/{USER}/lab"), page.url
    pod = client.CoreV1Api(hub.api).read_namespaced_pod(f"jupyter-{USER}", hub.namespace)
    assert present(pod.spec, "spec").node_name in hub.site.node_names and present(pod.status, "status").phase == "Running"
    expect(page.locator(".jp-DirListing-itemText", has_text=re.compile(r"^day$"))).to_be_visible()
    shot(page, "03-lab")

    # Her notebook: once its kernel is up, run the cells as she would (Shift+Enter on each): load
    # the magics, then the training cell (it blocks until the job ends: --wait).
    page.goto(f"{PUBLIC_URL}/user/{USER}/lab/tree/{NOTEBOOK}", timeout=APP_START_TIMEOUT_MS)
    cells = page.locator(".jp-NotebookPanel .jp-Notebook .jp-Cell")
    expect(cells).to_have_count(2, timeout=APP_START_TIMEOUT_MS)
    expect(page.locator(".jp-StatusBar-TextItem", has_text=re.compile(r"\| Idle$")).first).to_be_visible(timeout=JOB_WAIT_MS)
    for index in (0, 1):
        cells.nth(index).locator(".cm-content").click()
        page.keyboard.press("Shift+Enter")
    expect(cells.nth(0).locator(".jp-InputPrompt")).to_have_text(re.compile(r"\[1\]"), timeout=JOB_WAIT_MS)
    expect(cells.nth(1).locator(".jp-InputPrompt")).to_have_text(re.compile(r"\[\*\]"))
    shot(page, "04-cell-running")

    # The panel: the job the cell submitted appears, goes Running, and its loss curve grows live.
    show_panel(page)
    panel = page.locator(PANEL)
    widen_left_area(page)
    row = panel.locator(f'[data-testid="paddle-job-row"][data-job="{CELL_JOB}"]')
    expect(row).to_have_count(1, timeout=JOB_WAIT_MS)
    shot(page, "05-submitted-from-the-notebook")
    row.click()
    view = job_view(page, CELL_JOB)
    phase = view.locator('[data-testid="paddle-detail-phase"]')
    expect(phase).to_have_text("Running", timeout=JOB_WAIT_MS)
    expect(view.locator('[data-testid="paddle-replica-row"]')).to_have_count(3)
    chart = view.locator('[data-testid="paddle-metrics-view"] [data-testid="paddle-chart"][data-metric="loss"]')
    expect(chart.locator("polyline")).to_have_count(2, timeout=JOB_WAIT_MS)  # one line per trainer
    points = chart.locator("polyline").first.get_attribute("points") or ""
    page.wait_for_function(
        """([selector, phaseSelector, before]) => {
            const line = document.querySelector(selector);
            const phase = document.querySelector(phaseSelector);
            return line && phase && phase.textContent === 'Running' && line.getAttribute('points').split(' ').length > before;
        }""",
        arg=[
            f'[data-job="{CELL_JOB}"] [data-metric="loss"] polyline',
            f'[data-job="{CELL_JOB}"] [data-testid="paddle-detail-phase"]',
            len(points.split()),
        ],
        timeout=JOB_WAIT_MS,
    )
    shot(page, "06-running-live-curve")
    expect(phase).to_have_text("Succeeded", timeout=JOB_WAIT_MS)
    expect(view.locator('[data-testid="paddle-detail-counts"]')).to_contain_text("trainers 2/2 succeeded")
    expect(view.locator('[data-testid="paddle-progress-label"]')).to_have_text("400/400 · 100%", timeout=60_000)
    shot(page, "07-succeeded")

    # Trainer 0's log, opened from its replica row: the loss lines and where the model went.
    view.locator('[data-testid="paddle-replica-row"][data-replica="trainer-0"] [data-testid="paddle-replica-logs"]').click()
    log = view.locator('[data-testid="paddle-log"]')
    expect(log).to_contain_text(re.compile(r"step \d+ loss \d"), timeout=60_000)
    expect(log).to_contain_text(f"saved /home/jovyan/models/{CELL_JOB}.pdparams", timeout=60_000)
    shot(page, "08-trainer-log")

    # The cell's own output ended with the job (its status view says Succeeded).
    output = page.locator(".jp-NotebookPanel .jp-Cell").nth(1).locator(".jp-OutputArea")
    expect(output).to_contain_text("Succeeded", timeout=60_000)

    # The saved model in JupyterLab's file browser: the home the job pods wrote into is hers.
    page.locator('.jp-SideBar [data-id="filebrowser"]').click()
    page.locator(".jp-FileBrowser .jp-BreadCrumbs-home").click()
    page.locator(".jp-DirListing-itemText", has_text=re.compile(r"^models$")).dblclick()
    expect(page.locator(".jp-DirListing-itemText", has_text=f"{CELL_JOB}.pdparams")).to_be_visible(timeout=60_000)
    shot(page, "09-model-in-the-file-browser")
    saved = hub.homes[USER] / "models" / f"{CELL_JOB}.pdparams"
    assert saved.stat().st_size > 0 and (saved.stat().st_uid, saved.stat().st_gid) == (hub.site.uid, hub.site.gid)

    # A second job from the panel's New job form (the copy of examples/ps_train.py in her home).
    show_panel(page)
    panel.locator('[data-testid="paddle-new-job"]').click()
    panel.locator('[data-testid="paddle-field-mode"]').select_option("ps")
    fill_form(
        page,
        job_name=FORM_JOB,
        entry_point="python ps_train.py --steps 200 --print-every 50 --step-delay 0.05",
        trainer_package="ps_pkg",
        pservers="1",
        trainers="2",
        pserver_cpu="250m",
        trainer_cpu="250m",
        pserver_mem="1Gi",
        trainer_mem="1536Mi",
    )
    submit = panel.locator('[data-testid="paddle-submit"]')
    expect(submit).to_be_enabled()
    shot(page, "10-new-job-form")
    submit.click()
    form_view = job_view(page, FORM_JOB)
    form_phase = form_view.locator('[data-testid="paddle-detail-phase"]')
    expect(form_phase).to_have_text("Succeeded", timeout=JOB_WAIT_MS)
    expect(form_view.locator('[data-testid="paddle-progress-label"]')).to_have_text("200/200 · 100%", timeout=60_000)
    shot(page, "11-form-job-succeeded")

    # Both jobs, in her list, Succeeded.
    form_view.locator('[data-testid="paddle-back"]').click()
    for name in (CELL_JOB, FORM_JOB):
        expect(panel.locator(f'[data-testid="paddle-job-row"][data-job="{name}"]')).to_have_attribute("data-phase", "Succeeded")
    shot(page, "12-list")
    assert not errors, errors
