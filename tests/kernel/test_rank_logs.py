"""One rank's lines of a trainer's log from the kernel side, against the live server: a job of
1 trainer x 3 ranks (plain Python, `procs_per_trainer`) read whole, by `job.logs(rank=)`, and by
`paddle-nbext logs --rank` (plain and followed)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from .conftest import LiveServer, wait_until

if TYPE_CHECKING:
    from paddle_nbext.client import Client

CLI = str(Path(sys.executable).with_name("paddle-nbext"))
SCRIPT = """\
import os
rank = os.environ["PADDLE_LOCAL_RANK"]
for step in range(1, 4):
    print(f"rank {rank} says step {step}", flush=True)
"""


def test_a_ranks_lines_by_api_and_cli(client: Client, server: LiveServer, workdir: Path) -> None:
    from paddle_nbext import api

    (workdir / "say_rank.py").write_text(SCRIPT)
    job = api.submit(
        entry_point="python say_rank.py",
        job_name="rank-logs",
        mode="collective",
        trainers=1,
        procs_per_trainer=3,
        trainer_package=str(workdir),
        client=client,
    )
    try:
        job.wait(timeout=180)
        assert job.phase == "Succeeded", job.last.message
        whole = str(job.logs())
        assert "[rank 2] rank 2 says step 3\n" in whole and "[rank 0] rank 0 says step 1\n" in whole
        assert str(job.logs(rank=2)) == "".join(f"rank 2 says step {step}\n" for step in (1, 2, 3))
        for follow in ([], ["--follow"]):
            result = subprocess.run(
                [CLI, "logs", job.name, "--rank", "1", *follow],
                cwd=workdir,
                env=server.env(),
                capture_output=True,
                text=True,
                timeout=120,
            )
            assert result.returncode == 0, result.stderr
            assert result.stdout == "".join(f"rank 1 says step {step}\n" for step in (1, 2, 3)), follow
    finally:
        job.delete()


RAISES = """\
import os
rank = os.environ["PADDLE_LOCAL_RANK"]
print(f"rank {rank} starts", flush=True)
if rank == "1":
    raise ValueError("rank one cannot go on")
"""


def test_the_job_lists_logs_button_shows_the_failed_ranks_lines(client: Client, workdir: Path) -> None:
    from paddle_nbext import api
    from paddle_nbext.widgets.job_list import JobListWidget

    (workdir / "rank_raises.py").write_text(RAISES)
    job = api.submit(
        entry_point="python rank_raises.py",
        job_name="rank-raises-widget",
        mode="collective",
        trainers=1,
        procs_per_trainer=2,
        trainer_package=str(workdir),
        client=client,
    )
    table = JobListWidget(client, interval=0.3)
    try:
        job.wait(timeout=180)
        assert job.last.message == "trainer 0 rank 1 failed: ValueError: rank one cannot go on"
        wait_until(lambda: "paddle-phase-failed" in table.rows["rank-raises-widget"].cells[1].value, what="the row to show Failed")
        text = table.show_logs("rank-raises-widget")
        assert "rank 1 starts\n" in text and "ValueError: rank one cannot go on" in text
        assert "[rank" not in text and "rank 0 starts" not in text
        assert "rank-raises-widget · trainer 0 · rank 1" in table.logs.value
    finally:
        table.close()
        job.delete()
