"""Training health of plain Python jobs through the local backend (no Paddle needed): resource use
turned off says why, a job waiting for resources has the reason in its timeline, the timeline
reads the same from a new backend (a server restart), and a job that never reports is never
called stalled.  Every wait is for a state."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path
from typing import Any

from paddle_jobs.local_jobs import OWNER, backend_for, request, wait_terminal, wait_until

#: Prints nothing, reports nothing, and ends once the file named by GO_FILE exists.
SILENT = "import os, time\nwhile not os.path.exists(os.environ['GO_FILE']):\n    time.sleep(0.05)\n"


def _silent(home: Path, **fields: Any) -> dict[str, Any]:
    (home / "code" / "silent.py").write_text(SILENT)
    return {"entry_point": "python silent.py", "mode": "collective", **fields}


def test_resource_use_turned_off_says_why(home: Path) -> None:
    async def scenario() -> tuple[dict[str, Any], dict[str, Any]]:
        go = home / "go"
        backend = backend_for(home, usage_interval=0)
        name = (await backend.submit(request(home, **_silent(home, env={"GO_FILE": str(go)}))))["name"]
        try:
            await wait_until(backend, name, lambda s: s.phase == "Running")
            return await backend.usage(name, OWNER), await backend.timeline(name, OWNER)
        finally:
            go.write_text("")
            await wait_terminal(backend, name)

    usage, timeline = asyncio.run(scenario())
    assert usage["available"] is False and usage["replicas"] == []
    assert usage["reason"] == "resource use is off on this server (c.LocalBackend.usage_interval = 0)"
    assert [entry["kind"] for entry in timeline["entries"]][:3] == ["submitted", "admitted", "started"]


def test_a_waiting_job_says_why_in_its_timeline_which_a_new_backend_reads_the_same(home: Path) -> None:
    async def scenario() -> tuple[dict[str, Any], dict[str, Any], list[dict[str, Any]], list[dict[str, Any]]]:
        first_go, second_go = home / "go-1", home / "go-2"
        backend = backend_for(home, max_cpu=1.0, cpu_overcommit=1.0)
        await backend.submit(request(home, job_name="holder", **_silent(home, env={"GO_FILE": str(first_go)})))
        await wait_until(backend, "holder", lambda s: s.phase == "Running")
        await backend.submit(request(home, job_name="waiter", **_silent(home, env={"GO_FILE": str(second_go)})))
        await wait_until(backend, "waiter", lambda s: s.message.startswith("Waiting for resources"))
        waiting_usage = await backend.usage("waiter", OWNER)
        waiting = await backend.timeline("waiter", OWNER)
        first_go.write_text("")
        second_go.write_text("")
        await wait_terminal(backend, "waiter")
        before = (await backend.timeline("waiter", OWNER))["entries"]
        restarted = backend_for(home, max_cpu=1.0, cpu_overcommit=1.0)  # what a restarted server reads
        after = (await restarted.timeline("waiter", OWNER))["entries"]
        return waiting_usage, waiting, before, after

    waiting_usage, waiting, before, after = asyncio.run(scenario())
    assert waiting_usage["available"] is False
    assert waiting_usage["reason"] == "the job has not started yet, so nothing runs to measure"
    (said,) = [entry for entry in waiting["entries"] if entry["kind"] == "waiting"]
    assert said["text"].startswith("Waiting for resources: the job needs 1 CPU (free: 0 of 1); held by your running local job holder")
    assert after == before
    kinds = [entry["kind"] for entry in after]
    assert kinds[:3] == ["submitted", "waiting", "admitted"] and kinds[-1] == "ended"
    assert after[-1]["text"].startswith("Succeeded: ")


def test_a_job_that_never_reports_is_never_called_stalled(home: Path) -> None:
    async def scenario() -> tuple[str, list[dict[str, Any]], dict[str, Any]]:
        go = home / "go"
        backend = backend_for(home, usage_interval=0.5)
        name = (await backend.submit(request(home, **_silent(home, stall_timeout=1, env={"GO_FILE": str(go)}))))["name"]
        try:
            # Six samples half a second apart: the once-a-second stall check with a 1 s timeout
            # has looked at the silent trainer several times by then.
            while len(((await backend.usage(name, OWNER)).get("replicas") or [{}])[0].get("history") or []) < 6:
                status = await backend.get_job(name, OWNER)
                assert not status.terminal, status.to_dict()
                await asyncio.sleep(0.1)
            message = (await backend.get_job(name, OWNER)).message
            return message, (await backend.timeline(name, OWNER))["entries"], await backend.usage(name, OWNER)
        finally:
            go.write_text("")
            await wait_terminal(backend, name)

    message, entries, usage = asyncio.run(scenario())
    assert "stalled" not in message, message
    assert "warning" not in [entry["kind"] for entry in entries]
    (replica,) = usage["replicas"]
    assert replica["phase"] == "Running" and replica["memory"] > 0 and replica["memory_limit"] == 1 << 30


def test_when_the_master_was_killed_the_server_writes_the_end_into_the_timeline(home: Path) -> None:
    async def scenario() -> list[dict[str, Any]]:
        go = home / "go"
        backend = backend_for(home)
        name = (await backend.submit(request(home, job_name="lost", **_silent(home, env={"GO_FILE": str(go)}))))["name"]
        await wait_until(backend, name, lambda s: s.phase == "Running")
        master = int((home / ".paddle-jobs" / name / "master.pid").read_text())
        os.kill(master, signal.SIGKILL)  # the timeline's writer dies without a word
        status = await backend.cancel(name, OWNER)
        assert status.phase == "Cancelled", status.to_dict()
        entries: list[dict[str, Any]] = (await backend.timeline(name, OWNER))["entries"]
        return entries

    entries = asyncio.run(scenario())
    assert entries[-1]["kind"] == "ended" and entries[-1]["text"].startswith("Cancelled: ")
    assert [entry["seq"] for entry in entries] == list(range(1, len(entries) + 1))


#: Each rank holds (rank + 1) × 40 MiB until GO_FILE exists, having said so.
RANK_HOLDER = """\
import os, time
held = b"x" * ((int(os.environ["PADDLE_LOCAL_RANK"]) + 1) * 40 << 20)
print("holding", flush=True)
while not os.path.exists(os.environ["GO_FILE"]):
    time.sleep(0.05)
"""


def test_a_trainer_of_several_ranks_shows_each_rank_own_use(home: Path) -> None:
    async def scenario() -> dict[str, Any]:
        go = home / "go"
        (home / "code" / "ranks.py").write_text(RANK_HOLDER)
        backend = backend_for(home, usage_interval=0.5)
        fields: dict[str, Any] = {
            "entry_point": "python ranks.py",
            "mode": "collective",
            "procs_per_trainer": 2,
            "env": {"GO_FILE": str(go)},
        }
        name = (await backend.submit(request(home, **fields)))["name"]
        try:
            while True:  # until both ranks hold their memory in a sample
                (replica,) = (await backend.usage(name, OWNER)).get("replicas") or [{}]
                ranks = replica.get("ranks") or []
                if len(ranks) == 2 and ranks[1]["memory"] and ranks[1]["memory"] > 80 << 20:
                    return dict(replica)
                assert not (await backend.get_job(name, OWNER)).terminal
                await asyncio.sleep(0.1)
        finally:
            go.write_text("")
            await wait_terminal(backend, name)

    replica = asyncio.run(scenario())
    first, second = replica["ranks"]
    assert (first["rank"], second["rank"]) == (0, 1)
    assert 40 << 20 < first["memory"] < second["memory"]  # each rank's own, not the trainer's
    assert first["memory"] + second["memory"] < replica["memory"]  # the trainer adds its launcher
