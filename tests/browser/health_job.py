"""A real local job for the training-health tests of the browser suite: its trainer grows its
process tree to 93 % of a 256 MiB limit, reports one step and holds there until the test writes
its "go" file, then grows past the limit (and is stopped with MemoryLimitExceeded).  The panel's
and the widgets' tests both show its resource use; this is the one copy of its set-up."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .lab_server import LabServer

#: The trainer's memory limit, in MiB (the job's `trainer_mem`).
LIMIT_MIB = 256
#: Grows the replica's tree (itself and its launcher) to 93 % of LIMIT_MIB, reports, holds until GO_FILE.
GROWER = """\
import os, time
from paddle_nbext_job import flush, report
limit = int(os.environ["LIMIT_MIB"]) << 20
def resident(pid):
    with open(f"/proc/{pid}/statm") as handle:
        return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
held = []
while resident(os.getpid()) + resident(os.getppid()) < 0.93 * limit:
    held.append(b"x" * (1 << 20))
report(1, loss=1.0)
flush()
while not os.path.exists(os.environ["GO_FILE"]):
    time.sleep(0.05)
while True:
    held.append(b"x" * (4 << 20))
"""


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
    package = lab.home / "health_pkg"
    package.mkdir(exist_ok=True)
    (package / "grow.py").write_text(GROWER)
    go = lab.home / f"{name}.go"
    response = lab.api(
        "POST",
        "jobs",
        json={
            "job_name": name,
            "mode": "collective",
            "entry_point": "python grow.py",
            "trainer_package": "health_pkg",
            "trainer_mem": f"{LIMIT_MIB}Mi",
            "env": {"LIMIT_MIB": str(LIMIT_MIB), "GO_FILE": str(go)},
        },
    )
    assert response.status_code == 201, response.text
    return HealthJob(name, go)
