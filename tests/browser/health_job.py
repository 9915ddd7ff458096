"""The growing health job (`support.health_job`) in the browser suite's JupyterLab: its trainer
grows its process tree to 93 % of a 256 MiB limit, reports one step and holds there until the test
writes its "go" file, then grows past the limit (and is stopped with MemoryLimitExceeded).  The
panel's and the widgets' tests both show its resource use."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from support.health_job import health_job_body, write_grower

from .lab_server import LabServer


@dataclass
class HealthJob:
    name: str
    #: Written by the test to let the trainer grow past its limit.
    go: Path

    def release(self) -> None:
        """Let the trainer go over its limit (the job then fails)."""
        self.go.write_text("")


def submit_health_job(lab: LabServer, name: str) -> HealthJob:
    """Submit the growing job through the REST API (one trainer, collective, `LIMIT_MIB` MiB)."""
    write_grower(lab.home / "health_pkg")
    go = lab.home / f"{name}.go"
    response = lab.api("POST", "jobs", json=health_job_body(name, "health_pkg", go))
    assert response.status_code == 201, response.text
    return HealthJob(name, go)
