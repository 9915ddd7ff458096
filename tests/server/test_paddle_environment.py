"""The local backend knows what its replicas' interpreter can run, before anything runs: `/config`
reports the PaddlePaddle version and the modes, and a job of a mode that cannot run here is
refused at submit with a 422 naming `mode` and the versions, with nothing written."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from .conftest import Api


@pytest.fixture
def local_config(tmp_path: Path) -> dict[str, Any]:
    """Replicas run an interpreter whose installed PaddlePaddle reports 3.3.1 (a distribution's
    metadata first on its path, as an installed wheel would be)."""
    site = tmp_path / "paddle-3.3.1-site"
    info = site / "paddlepaddle-3.3.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: paddlepaddle\nVersion: 3.3.1\n", encoding="utf-8")
    wrapper = tmp_path / "python-with-paddle-3.3.1"
    wrapper.write_text(f'#!/bin/sh\nPYTHONPATH="{site}" exec "{sys.executable}" "$@"\n', encoding="utf-8")
    wrapper.chmod(0o755)
    return {"python": str(wrapper)}


async def test_config_reports_the_replicas_paddle_and_modes(api: Api) -> None:
    status, config = await api("GET", "config")
    assert status == 200, config
    paddle = config["backend"]["paddle"]
    assert paddle["version"] == "3.3.1" and paddle["modes"] == ["collective"]
    assert paddle["summary"].startswith("PaddlePaddle 3.3.1 runs collective jobs only: parameter-server mode needs PaddlePaddle 3.0.x")


async def test_a_ps_job_that_cannot_run_here_is_refused_naming_mode(api: Api, package: Path, jp_home_dir: Path) -> None:
    body = {"job_name": "psjob", "entry_point": "python train.py", "trainer_package": "work", "pservers": 1, "trainers": 1}
    for params in ({"dry_run": "true"}, None):
        status, error = await api("POST", "jobs", body=body, params=params)
        assert status == 422, error
        assert error["field"] == "mode"
        assert "paddlepaddle 3.3.1 is installed" in error["message"] and "mode=collective" in error["message"]
    assert (await api("GET", "jobs"))[1]["jobs"] == []
    jobs_dir = jp_home_dir / ".paddle-jobs"
    assert not jobs_dir.exists() or list(jobs_dir.iterdir()) == []
    # Collective runs on that Paddle: accepted.
    status, plan = await api("POST", "jobs", body={**body, "pservers": 0}, params={"dry_run": "true"})
    assert status == 200, plan
