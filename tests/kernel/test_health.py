"""The kernel side of training health: `job.usage()` and `paddle-nbext top NAME` (resource use per
replica beside its limit), `job.timeline()` and `paddle-nbext timeline NAME` (what happened, in
order), against the live server and a running local job."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from paddle_nbext import health

from .conftest import LiveServer, wait_until

if TYPE_CHECKING:
    from paddle_nbext.api import Job

CLI = str(Path(sys.executable).with_name("paddle-nbext"))
#: Holds 100 MiB, reports once, and ends when the file GO_FILE exists.
HOLDER = """\
import os, time
from paddle_nbext_job import flush, report
held = b"x" * (100 << 20)
report(1, loss=1.0)
flush()
print("holding", flush=True)
while not os.path.exists(os.environ["GO_FILE"]):
    time.sleep(0.05)
"""


@pytest.fixture(scope="module")
def running(server: LiveServer, workdir: Path) -> Iterator[tuple[Job, Path]]:
    """A running 1-trainer job holding 100 MiB under a 1Gi limit, and the file that ends it."""
    from paddle_nbext import api
    from paddle_nbext.client import Client

    (workdir / "holder.py").write_text(HOLDER)
    go = workdir / "holder.go"
    client = Client(server.api, server.token)
    job = api.submit(
        entry_point="python holder.py",
        job_name="kernel-health",
        mode="collective",
        trainer_mem="1Gi",
        trainer_package=str(workdir),
        env={"GO_FILE": str(go)},
        client=client,
    )
    wait_until(lambda: (usage := job.usage()).available and (usage.replicas[0]["memory"] or 0) > 100 << 20, what="a sample of 100 MiB")
    yield job, go
    go.write_text("")
    job.delete()


def test_job_usage_is_a_table_of_each_replica_beside_its_limit(running: tuple[Job, Path]) -> None:
    job, _ = running
    usage = job.usage()
    (replica,) = usage.replicas
    assert (replica["role"], replica["index"], replica["memory_limit"]) == ("trainer", 0, 1 << 30)
    text = usage.text()
    header, row = text.splitlines()[:2]
    assert header.split()[:6] == ["REPLICA", "PHASE", "CPU", "REQUEST", "MEMORY", "LIMIT"]
    assert row.startswith("trainer 0") and "Running" in row and "1 GiB" in row and "[#" in row
    assert "<table class='paddle-usage'>" in usage._repr_html_() and "<meter" in usage._repr_html_()


def test_cli_top_and_timeline(running: tuple[Job, Path], server: LiveServer, workdir: Path) -> None:
    job, _ = running
    top = subprocess.run([CLI, "top", job.name], cwd=workdir, env=server.env(), capture_output=True, text=True, timeout=120)
    assert top.returncode == 0, top.stderr
    assert top.stdout.splitlines()[1].startswith("trainer 0") and "sampled at " in top.stdout
    timeline = subprocess.run([CLI, "timeline", job.name], cwd=workdir, env=server.env(), capture_output=True, text=True, timeout=120)
    assert timeline.returncode == 0, timeline.stderr
    lines = timeline.stdout.splitlines()
    assert lines[0].endswith("  Submitted.") and any("trainer 0 started on this machine" in line for line in lines)
    missing = subprocess.run([CLI, "top", "no-such-job"], cwd=workdir, env=server.env(), capture_output=True, text=True, timeout=120)
    assert missing.returncode == 1 and "no-such-job" in missing.stderr


def test_job_timeline_and_the_cli_follow_until_the_end(running: tuple[Job, Path], server: LiveServer, workdir: Path) -> None:
    job, go = running
    timeline = job.timeline()
    assert [entry["kind"] for entry in timeline.entries][:3] == ["submitted", "admitted", "started"]
    assert "<ol class='paddle-timeline'>" in timeline._repr_html_()
    follow = subprocess.Popen(
        [CLI, "timeline", job.name, "--follow"], cwd=workdir, env=server.env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    watch = subprocess.Popen(
        [CLI, "top", job.name, "--watch"], cwd=workdir, env=server.env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    go.write_text("")
    followed, _ = follow.communicate(timeout=120)
    watched, _ = watch.communicate(timeout=120)
    assert follow.returncode == 0 and watch.returncode == 0
    assert "  Succeeded: " in followed.splitlines()[-1]  # the entries came as they were written, the end last
    assert watched.splitlines()[0].startswith("REPLICA")
    ended = job.usage()
    assert ended.replicas[0]["memory"] is None and ended.replicas[0]["peak_memory"] > 100 << 20


def test_usage_text_without_figures_says_why() -> None:
    usage = health.Usage(
        {"name": "x", "available": False, "reason": "the job has not started yet, so nothing runs to measure", "replicas": []}
    )
    assert usage.text() == "Resource use is not available: the job has not started yet, so nothing runs to measure."
    assert health.bar(900, 1000) == "[######### ] 90%" and health.bar(900, None) == ""
    assert health.Timeline({"entries": []}).text() == "Nothing has happened to the job yet."


def test_usage_text_of_a_kubernetes_answer_without_an_interval() -> None:
    """metrics-server's samples come at its own pace: the answer has no interval."""
    body = {
        "name": "x",
        "available": True,
        "reason": None,
        "sampled": "2026-12-05T14:02:11Z",
        "interval": None,
        "replicas": [
            {
                "role": "trainer",
                "index": 0,
                "phase": "Running",
                "cpu": 0.5,
                "memory": 1 << 30,
                "peak_memory": 1 << 30,
                "cpu_request": 1.0,
                "memory_limit": 2 << 30,
            }
        ],
    }
    lines = health.Usage(body).text().splitlines()
    assert lines[1].startswith("trainer 0") and "1 GiB" in lines[1] and "[#####     ] 50%" in lines[1]
    assert lines[-1].startswith("sampled at ") and "every" not in lines[-1]


def test_the_status_view_shows_each_replicas_use_live_until_the_end(server: LiveServer, workdir: Path) -> None:
    """`job.widget()` (what a running `Job` shows as in a notebook): while the job runs each replica's
    CPU and memory beside request and limit, with a bar against the limit and its peak; once it ended
    only the peak, no bar. Both states come by the view's own refresh."""
    from paddle_nbext import api
    from paddle_nbext.client import Client

    (workdir / "holder.py").write_text(HOLDER)
    go = workdir / "view-holder.go"
    job = api.submit(
        entry_point="python holder.py",
        job_name="kernel-health-view",
        mode="collective",
        trainer_cpu="1",
        trainer_mem="1Gi",
        trainer_package=str(workdir),
        env={"GO_FILE": str(go)},
        client=Client(server.api, server.token),
    )
    view = job.widget(interval=0.2)
    try:
        line = re.compile(r"<span class='paddle-usage-text'>\d+\.\d\d of 1 cores · 1\d\d(\.\d)? MiB of 1 GiB</span>")
        wait_until(lambda: line.search(view.usage.value), what=f"trainer 0's figures beside its limit, not {view.usage.value!r}")
        usage = view.usage.value
        assert "<li data-replica='trainer-0'><span class='paddle-usage-name'>trainer 0</span>" in usage
        assert re.search(r"<span class='paddle-usage-bar' role='img' aria-label='1\d% of its memory limit'", usage), usage
        assert "paddle-usage-peak'>peak 1" in usage
        go.write_text("")
        wait_until(lambda: not view.poller.running, what="the view to stop refreshing at the end")
        ended = view.usage.value
        assert re.search(r"<span class='paddle-usage-text'>peak 1\d\d(\.\d)? MiB</span>", ended), ended
        assert "paddle-usage-bar" not in ended and " of 1 GiB" not in ended
        assert view.phases[-1] == "Succeeded"
    finally:
        view.close()
        go.write_text("")
        job.delete()


def test_usage_words_match_the_panels_and_say_nothing_of_a_limit_that_does_not_exist() -> None:
    from paddle_nbext.widgets._usage_html import usage_html

    limited = {"role": "trainer", "index": 0, "cpu": 0.984, "cpu_request": 1.0, "memory": 0.93 * (2 << 30), "memory_limit": 2 << 30}
    free = {
        "role": "pserver",
        "index": 0,
        "cpu": 0.5,
        "cpu_request": 0.5,
        "memory": 300 << 20,
        "memory_limit": None,
        "peak_memory": 310 << 20,
    }
    assert health.usage_summary(limited) == "0.98 of 1 cores · 1.9 GiB of 2 GiB"
    assert health.usage_summary(free) == "0.50 of 0.5 cores · 300 MiB (no limit)"
    assert health.usage_summary({**free, "memory": None}) == "peak 310 MiB"
    assert health.usage_summary({"role": "trainer", "index": 1, "memory": None, "peak_memory": 0}) == ""
    assert health.memory_fraction(free) is None
    body = {"available": True, "replicas": [limited, free, {"role": "trainer", "index": 1, "memory": None, "peak_memory": 0}]}
    shown = usage_html(body, ended=False)
    trainer, pserver, silent = shown.split("<li ")[1:]
    assert "class='paddle-usage-bar paddle-usage-high'" in trainer and "aria-label='93% of its memory limit'" in trainer
    assert "(no limit)" in pserver and "paddle-usage-bar" not in pserver  # no bar: nothing to fill
    assert "<span class='paddle-usage-text'>\u2014</span>" in silent  # the panel's sign for no figures
    ranks = {
        **limited,
        "ranks": [{"rank": 0, "cpu": 0.5, "memory": 100 << 20}, {"rank": 1, "cpu": None, "memory": None, "peak_memory": 90 << 20}],
    }
    assert health.ranks_summary(ranks) == "rank 0: 0.50 cores · 100 MiB; rank 1: - cores · 90 MiB"
    off = usage_html({"available": False, "reason": "resource use is off on this server (c.LocalBackend.usage_interval = 0)"}, ended=False)
    assert off == (
        "<p class='paddle-usage-unavailable'>Resource use is not available: "
        "resource use is off on this server (c.LocalBackend.usage_interval = 0).</p>"
    )
