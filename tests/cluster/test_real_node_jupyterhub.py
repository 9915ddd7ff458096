"""The whole path as users live it: JupyterHub (KubeSpawner) spawns each user's notebook as a pod
on the real node, and paddle-nbext in that pod runs jobs as real pods in the user's home.

The hub runs from the shipped recipe (deploy/jupyterhub/jupyterhub_config.py, the site settings
of deploy/jupyterhub/paddle-nbext-site.yaml, the shipped RBAC) with the notebook image built here
(``support/hub_site.py``); the notebook's server finds everything itself, as in production: the
in-cluster API through its ServiceAccount, its home by reading its own pod (home_volume "auto"),
the uid and groups the job pods run as from the same pod, its user from $JUPYTERHUB_USER.
The suite talks to the notebook through the hub's proxy with each user's own hub token; the hub
is the session's one (``hub`` in conftest.py), shared with the browser's day
(test_real_node_jupyterhub_browser.py).
"""

from __future__ import annotations

import os
import time
from typing import Any

import pytest
from kubernetes import client
from support.hub_site import HubSite

from cluster.k8s_objects import meta, present

pytestmark = pytest.mark.timeout(1800)

JOB_WAIT = 240.0
TINY_MODEL = '''"""Train a tiny model over gloo and save it into the user's home, as a notebook user would."""
import os

import paddle
import paddle.distributed as dist

dist.init_parallel_env()
model = paddle.DataParallel(paddle.nn.Linear(4, 1))
optimizer = paddle.optimizer.SGD(learning_rate=0.1, parameters=model.parameters())
for step in range(20):
    x = paddle.randn([8, 4])
    loss = ((model(x) - x.sum(axis=1, keepdim=True)) ** 2).mean()
    loss.backward()
    optimizer.step()
    optimizer.clear_grad()
    print(f"step {step} loss {float(loss):.4f}", flush=True)
if dist.get_rank() == 0:
    target = os.path.join(os.environ["HOME"], "models", os.environ["PADDLE_NBEXT_JOB"] + ".pdparams")
    os.makedirs(os.path.dirname(target), exist_ok=True)
    paddle.save(model.state_dict(), target)
    print(f"saved {target}", flush=True)
'''


def write_code(hub: HubSite, user: str, relative: str, text: str) -> None:
    """A file in the user's home, owned by them, as if written in their notebook."""
    path = hub.homes[user] / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    for item in (path, path.parent):
        os.chown(item, hub.site.uid, hub.site.gid)


def job_status(hub: HubSite, user: str, token: str, name: str) -> dict[str, Any]:
    answer = hub.notebook(user, token, "GET", f"jobs/{name}")
    assert answer.status_code == 200, f"GET jobs/{name}: {answer.status_code} {answer.text[:500]}"
    return dict(answer.json())


def diagnose(hub: HubSite, user: str, token: str, name: str, status: dict[str, Any]) -> str:
    """What a user would look at when a job hangs: its replicas, each one's log tail, the pods."""
    lines = [f"job {name}: {status['phase']} {status.get('message')!r}"]
    for replica in status.get("replicas", []):
        lines.append(f"  {replica['role']} {replica['index']}: {replica['phase']} {replica.get('reason')!r}")
        log = hub.notebook(user, token, "GET", f"jobs/{name}/logs?role={replica['role']}&index={replica['index']}&tail=15")
        lines += ["    | " + line for line in log.text.splitlines()[-15:]]
    for pod in client.CoreV1Api(hub.api).list_namespaced_pod(hub.namespace).items:
        lines.append(f"  pod {meta(pod).name}: {present(pod.status, 'status').phase} on {present(pod.spec, 'spec').node_name}")
    return "\n".join(lines)


def wait_phase(hub: HubSite, user: str, token: str, name: str, phases: set[str], timeout: float = JOB_WAIT) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    status = job_status(hub, user, token, name)
    while status["phase"] not in phases:
        if time.monotonic() > deadline:
            raise AssertionError(f"job {name} never reached {sorted(phases)}:\n{diagnose(hub, user, token, name, status)}")
        time.sleep(1)
        status = job_status(hub, user, token, name)
    return status


def submit(hub: HubSite, user: str, token: str, **fields: Any) -> None:
    answer = hub.notebook(user, token, "POST", "jobs", fields)
    assert answer.status_code == 201, f"POST jobs: {answer.status_code} {answer.text[:1000]}"


def test_a_user_the_hub_spawned_trains_a_job_from_their_notebook_pod_into_their_home(hub: HubSite) -> None:
    hub.start_server("alice")
    token = hub.user_token("alice")
    core = client.CoreV1Api(hub.api)
    notebook_pod = core.read_namespaced_pod("jupyter-alice", hub.namespace)
    notebook_spec = present(notebook_pod.spec, "spec")
    assert notebook_spec.node_name in hub.site.node_names
    assert notebook_spec.service_account_name == "paddle-notebook"

    config = hub.notebook("alice", token, "GET", "config")
    assert config.status_code == 200, config.text
    backend = config.json()["backend"]
    assert backend["name"] == "kubernetes" and backend["source"] == "in-cluster service account", backend

    write_code(hub, "alice", "tiny/train.py", TINY_MODEL)
    submit(
        hub,
        "alice",
        token,
        job_name="tiny",
        mode="collective",
        trainers=2,
        trainer_cpu="500m",
        entry_point="python train.py",
        trainer_package="tiny",
    )
    final = wait_phase(hub, "alice", token, "tiny", {"Succeeded", "Failed", "Cancelled"})
    assert final["phase"] == "Succeeded", final

    saved = hub.homes["alice"] / "models" / "tiny.pdparams"
    assert saved.is_file() and saved.stat().st_size > 0
    assert (saved.stat().st_uid, saved.stat().st_gid) == (1000, 100)  # the notebook's uid and fsGroup, read from its pod
    trainer0 = hub.notebook("alice", token, "GET", "jobs/tiny/logs?role=trainer&index=0")
    assert trainer0.status_code == 200 and "saved" in trainer0.text, trainer0.text[-1000:]

    # The job pods got the notebook's home and identity from the notebook pod itself.
    pods = core.list_namespaced_pod(hub.namespace, label_selector="paddle-nbext/role=trainer").items
    assert pods, "no trainer pod left to inspect"
    trainer_spec = present(pods[0].spec, "spec")
    security = present(trainer_spec.security_context, "securityContext")
    assert (security.run_as_user, security.fs_group) == (1000, 100)
    claims = {v.persistent_volume_claim.claim_name for v in present(trainer_spec.volumes, "volumes") if v.persistent_volume_claim}
    assert claims == {"claim-alice"}


def test_another_user_sees_none_of_alices_jobs(hub: HubSite) -> None:
    hub.start_server("bob")
    token = hub.user_token("bob")
    listed = hub.notebook("bob", token, "GET", "jobs")
    assert listed.status_code == 200, listed.text
    assert [job["name"] for job in listed.json()["jobs"]] == []
    assert hub.notebook("bob", token, "GET", "jobs/tiny").status_code == 404
    # Bob's hub token does not open Alice's notebook either.
    assert hub.notebook("alice", token, "GET", "jobs").status_code in (302, 403)


def test_a_job_finishes_while_its_users_server_is_stopped_and_shows_when_it_is_back(hub: HubSite) -> None:
    hub.start_server("alice")
    token = hub.user_token("alice")
    write_code(hub, "alice", "tiny/train.py", TINY_MODEL.replace("range(20)", "range(200)"))
    submit(
        hub,
        "alice",
        token,
        job_name="overnight",
        mode="collective",
        trainers=2,
        trainer_cpu="500m",
        entry_point="python train.py",
        trainer_package="tiny",
    )
    wait_phase(hub, "alice", token, "overnight", {"Running"})

    hub.stop_server("alice")  # the user closes their server from the hub's control panel
    saved = hub.homes["alice"] / "models" / "overnight.pdparams"
    deadline = time.monotonic() + JOB_WAIT
    while not saved.is_file():  # the in-cluster master sees the job through alone
        assert time.monotonic() < deadline, "the job never finished while the notebook was stopped"
        time.sleep(1)

    hub.start_server("alice")
    token = hub.user_token("alice")
    final = wait_phase(hub, "alice", token, "overnight", {"Succeeded", "Failed", "Cancelled"})
    assert final["phase"] == "Succeeded", final
    log = hub.notebook("alice", token, "GET", "jobs/overnight/logs?role=trainer&index=0")
    assert log.status_code == 200 and "saved" in log.text, log.text[-1000:]
