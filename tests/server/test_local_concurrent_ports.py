"""Jobs submitted together get replica ports of their own (issue 28).

Ports are picked at submit by asking the kernel for a free one, with nothing bound in between:
two jobs submitted at the same moment can be handed the same port, and neither listens on it
until its replicas start.  The kernel's choice is made to collide here on purpose (every job is
planned the same two ports, as the kernel may hand them out), so the test fails whenever the
jobs' masters do not re-plan under the admission lock.  Every replica is a real process that
binds its own endpoint after a second (as a pserver or a collective rank does once Paddle has
started), so a port given twice makes a replica fail."""

from __future__ import annotations

import asyncio
import re
import socket
from pathlib import Path
from typing import Any

import pytest

from paddle_nbext_server.backends.local import plan as local_plan

from .conftest import Api

JOBS = 10

BIND = """
import os, socket, time
time.sleep(1.0)  # Paddle's own start-up before a replica listens
host, port = os.environ["PADDLE_CURRENT_ENDPOINT"].rsplit(":", 1)
server = socket.socket()
server.bind((host, int(port)))
server.listen()
print("bound", port, flush=True)
time.sleep(2.0)
"""


@pytest.fixture
def local_config() -> dict[str, Any]:
    return {"max_cpu": 8.0}


@pytest.fixture
def colliding_ports(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The kernel's answers at submit: the same two free ports for every job."""
    pool: list[int] = []
    for _ in range(2):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            pool.append(probe.getsockname()[1])

    def same_ports(host: str = "127.0.0.1", count: int = 1, avoid: set[int] | None = None) -> int:
        assert count == 1, "these jobs' trainers run one rank each"
        return next(port for port in pool if port not in (avoid or set()))

    monkeypatch.setattr(local_plan, "free_ports", same_ports)
    return pool


async def test_jobs_submitted_together_each_get_their_own_ports_and_succeed(
    api: Api, jp_home_dir: Path, colliding_ports: list[int]
) -> None:
    work = jp_home_dir / "work"
    work.mkdir(exist_ok=True)
    (work / "bind.py").write_text(BIND)

    def body(index: int) -> dict[str, Any]:
        return {
            "job_name": f"together-{index}",
            "mode": "collective",
            "trainers": 2,
            "trainer_cpu": "200m",
            "trainer_mem": "512Mi",
            "entry_point": "python bind.py",
            "trainer_package": "work",
        }

    answers = await asyncio.gather(*(api("POST", "jobs", body=body(i)) for i in range(JOBS)))
    assert [status for status, _ in answers] == [201] * JOBS, answers
    try:
        finals = {}
        for index in range(JOBS):
            name = f"together-{index}"
            for _ in range(1200):
                status, job = await api("GET", f"jobs/{name}")
                if job["phase"] in ("Succeeded", "Failed", "Cancelled"):
                    finals[name] = job
                    break
                await asyncio.sleep(0.1)
        assert {n: j["phase"] for n, j in finals.items()} == {f"together-{i}": "Succeeded" for i in range(JOBS)}, {
            n: j["message"] for n, j in finals.items() if j["phase"] != "Succeeded"
        }
        ports = []
        for index in range(JOBS):
            for rank in (0, 1):
                _, log = await api("GET", f"jobs/together-{index}/logs", params={"index": rank})
                ports += re.findall(r"bound (\d+)", log)
        assert len(ports) == 2 * JOBS and len(set(ports)) == len(ports), sorted(ports)
    finally:
        for index in range(JOBS):
            await api("DELETE", f"jobs/together-{index}")
