"""Launchers forked from the job master (`backends/local/master/forked.py`), end to end: with the
default interpreter every replica's launcher is a fork of its master, marked with the job's dir
like any replica process, in a session of its own; a job whose environment changes what Python
reads at start-up gets launchers started as `python <job>/runtime/launcher.py` instead.  Both
run the job to the same end."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

from paddle_jobs.local_jobs import backend_for, job_record, request, wait_terminal, wait_until
from paddle_nbext.model.status import JobStatus
from paddle_nbext_server.backends.local.records import JOB_DIR_VAR

GATED = "while [ ! -e release ]; do sleep 0.05; done; echo released"


def launcher_facts(home: Path, name: str, **fields: Any) -> tuple[dict[str, object], JobStatus]:
    """What the running trainer's launcher process is (its command line, marks, session, parent),
    then the job's end once released."""

    async def scenario() -> tuple[dict[str, object], JobStatus]:
        backend = backend_for(home)
        await backend.submit(request(home, job_name=name, mode="collective", trainers=1, entry_point=GATED, **fields))
        await wait_until(backend, name, lambda s: s.phase == "Running" and s.replicas[0].phase == "Running")
        job_dir = home / ".paddle-jobs" / name
        while "trainer-0" not in job_record(home, name).get("processes", {}):
            await asyncio.sleep(0.05)
        leader = int(job_record(home, name)["processes"]["trainer-0"])
        proc = Path(f"/proc/{leader}")
        stat = (proc / "stat").read_text().rpartition(")")[2].split()
        facts: dict[str, object] = {
            "cmdline": (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(),
            "marked": f"{JOB_DIR_VAR}=".encode() in (proc / "environ").read_bytes(),
            "session": os.getsid(leader) == leader,
            "parent": int(stat[1]) == int((job_dir / "master.pid").read_text()),
        }
        (job_dir / "package" / "release").touch()
        return facts, await wait_terminal(backend, name)

    return asyncio.run(scenario())


def test_launchers_are_forks_of_their_master_with_the_default_interpreter(home: Path) -> None:
    facts, status = launcher_facts(home, "forked", snapshot=True)
    assert "paddle_nbext_server.backends.local.master" in str(facts["cmdline"]), facts
    assert facts["marked"] and facts["session"] and facts["parent"], facts
    assert status.phase == "Succeeded", status.message


def test_a_job_that_changes_pythonpath_gets_started_launchers(home: Path) -> None:
    facts, status = launcher_facts(home, "started", snapshot=True, env={"PYTHONPATH": str(home / "code")})
    assert str(facts["cmdline"]).rstrip().endswith("/runtime/launcher.py"), facts
    assert facts["marked"] and facts["session"] and facts["parent"], facts
    assert status.phase == "Succeeded", status.message
