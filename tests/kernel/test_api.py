"""The Python API against the live server: discovery through the running-server list, and the
original design's `PaddleJob` + `dist_train` with a function and with a script path."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from .conftest import LiveServer

if TYPE_CHECKING:
    from paddle_nbext.client import Client


def test_client_finds_the_server_in_the_running_server_list(kernel_env: LiveServer, monkeypatch: pytest.MonkeyPatch) -> None:
    from paddle_nbext.client import Client, ServerNotFound

    monkeypatch.delenv("PADDLE_NBEXT_API_URL")
    monkeypatch.delenv("PADDLE_NBEXT_TOKEN")
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(kernel_env.home / ".runtime"))
    client = Client()  # cwd is inside the server's root dir
    assert client.url == kernel_env.api and client.token == kernel_env.token
    assert isinstance(client.list_jobs(), list)
    monkeypatch.chdir("/")  # outside every server's root dir: the user's only server is the one
    assert Client().url == kernel_env.api
    # A second running server, serving neither: which one is meant cannot be told, so it asks.
    other = kernel_env.home / ".runtime" / f"jpserver-{os.getpid()}.json"
    other.write_text(json.dumps({"url": "http://127.0.0.1:9/", "root_dir": "/srv/elsewhere", "pid": os.getpid(), "port": 9, "token": "t"}))
    try:
        with pytest.raises(ServerNotFound, match=r"running: .*127\.0\.0\.1:9.*none serves / .*PADDLE_NBEXT_API_URL"):
            Client()
    finally:
        other.unlink()


def epoch_report() -> None:
    import os

    print(f"function trainer {os.environ['PADDLE_TRAINER_ID']} of {os.environ['PADDLE_TRAINERS_NUM']}", flush=True)


def test_dist_train_runs_a_function_or_a_script(kernel_env: LiveServer, workdir: Path) -> None:
    from paddle_nbext import PaddleJob, dist_train

    job = dist_train(
        trainer=epoch_report,
        paddle_job=PaddleJob(job_name="api-func", mode="collective", pservers=0, trainers=2, trainer_cpu="500m"),
        wait=True,
    )
    assert job.phase == "Succeeded", job.last
    assert "function trainer 1 of 2" in job.logs("trainer", 1)
    assert job.last.spec["entry_point"] == "python paddle_entry.py"
    job.delete()

    (workdir / "tools").mkdir(exist_ok=True)
    (workdir / "tools" / "report.py").write_text("print('script trainer ran')\n")
    job = dist_train(trainer="tools/report.py", paddle_job=PaddleJob(job_name="api-script", mode="collective", pservers=0, trainers=1))
    assert job.wait(timeout=120).phase == "Succeeded"
    assert job.last.spec["entry_point"] == "python tools/report.py"
    assert "script trainer ran" in job.logs()
    job.delete()

    with pytest.raises(FileNotFoundError, match="trainer: .*missing.py is not a file"):
        dist_train(trainer="missing.py", paddle_job=PaddleJob(job_name="api-missing"))


def test_the_client_returns_typed_statuses_and_plans_that_render_the_rest_body(kernel_env: LiveServer, client: Client) -> None:
    import requests

    from paddle_nbext import api
    from paddle_nbext.model.status import JobStatus, SubmitPlan

    plan = api.submit("python -c pass", job_name="api-typed", mode="collective", trainers=1, dry_run=True, client=client)
    assert isinstance(plan, SubmitPlan) and plan.spec["job_name"] == "api-typed" and plan.plan
    raw = requests.post(
        f"{client.url}/jobs", params={"dry_run": "true"}, json={**plan.spec}, timeout=60, headers={"Authorization": f"token {client.token}"}
    ).json()
    assert SubmitPlan.from_dict(raw).to_dict() == raw  # what the CLI and the magic print is the server's body
    job = api.submit("python -c \"print('typed')\"", job_name="api-typed", mode="collective", trainers=1, client=client)
    assert isinstance(job, api.Job) and isinstance(job.last, JobStatus)
    assert job.wait(timeout=120).last.terminal and job.phase == "Succeeded"
    assert [s.name for s in client.list_jobs()].count("api-typed") == 1
    assert (
        client.get_job("api-typed").to_dict()
        == requests.get(f"{client.url}/jobs/api-typed", timeout=60, headers={"Authorization": f"token {client.token}"}).json()
    )
    job.delete()
    assert str(job) == "Job api-typed: Deleted — Deleted."  # no replica counts of a job that is gone
