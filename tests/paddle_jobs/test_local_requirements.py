"""Real Paddle, local backend: a job's own requirements.txt (issue 25).  The packages come from an
offline index of tiny wheels made here; the environment is built once with the job's own
interpreter over its Paddle, reused by the next job, built once for two jobs at once, and a
requirement the index cannot satisfy ends the job in the installer's words before any user code
runs."""

from __future__ import annotations

import asyncio
import json
import os
import threading
from pathlib import Path
from typing import Any

import pytest
from support.wheels import SimpleIndex, make_wheel

from paddle_jobs.local_jobs import OWNER, backend_for, request, wait_terminal, wait_until
from paddle_nbext.model.status import JobStatus
from paddle_nbext_server.backends.local import LocalBackend
from paddle_nbext_server.config import PaddleNbext
from paddle_nbext_server.errors import InvalidRequest

pytestmark = pytest.mark.paddle

USES_TINYTOK = '''"""Needs tinytok, which only the job's requirements provide, and Paddle, which is the image's."""
import paddle
import tinytok
import tinyutil

print("tinytok", tinytok.VERSION, "tinyutil", tinyutil.VERSION, flush=True)
print("paddle from", paddle.__file__, flush=True)
print("tokens", tinytok.tokens("a b c"), flush=True)
'''


@pytest.fixture
def index(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Wheels of tinytok (needing tinyutil) and tinyutil; the machine's own pip.conf kept out."""
    wheels = tmp_path / "wheels"
    make_wheel(wheels, "tinytok", "1.0", requires=("tinyutil>=1",), body="def tokens(text):\n    return text.split()\n")
    make_wheel(wheels, "tinyutil", "1.2")
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    return wheels


def site(wheels: Path, installer: str = "auto") -> PaddleNbext:
    return PaddleNbext(pip_no_index=True, pip_find_links=[str(wheels)], pip_installer=installer)


def package(home: Path, requirements: str, name: str = "code") -> Path:
    code = home / name
    code.mkdir(parents=True, exist_ok=True)
    (code / "uses_tinytok.py").write_text(USES_TINYTOK)
    (code / "requirements.txt").write_text(requirements)
    return code


def environment_status(home: Path, name: str) -> dict[str, Any]:
    status: dict[str, Any] = json.loads((home / ".paddle-jobs" / name / "logs" / "environment.json").read_text())
    return status


async def run_job(backend: LocalBackend, home: Path, name: str, **fields: Any) -> JobStatus:
    fields.setdefault("entry_point", "python uses_tinytok.py")
    fields.setdefault("trainers", 1)
    await backend.submit(request(home, job_name=name, **fields))
    return await wait_terminal(backend, name)


@pytest.mark.parametrize("installer", ["uv", "pip"])
def test_a_job_imports_what_its_requirements_provide_and_the_next_job_installs_nothing(home: Path, index: Path, installer: str) -> None:
    package(home, "tinytok==1.0\n")

    async def scenario() -> tuple[dict[str, Any], JobStatus, str, JobStatus, str, dict[str, Any]]:
        backend = backend_for(home, parent=site(index, installer))
        preview = await backend.submit(request(home, job_name="first", entry_point="python uses_tinytok.py", trainers=1), dry_run=True)
        first = await run_job(backend, home, "first")
        first_log = await backend.read_logs("first", OWNER, "trainer", 0)
        second = await run_job(backend, home, "second")
        second_log = await backend.read_logs("second", OWNER, "trainer", 0)
        again = await backend.submit(request(home, job_name="third", entry_point="python uses_tinytok.py", trainers=1), dry_run=True)
        return preview, first, first_log, second, second_log, again

    preview, first, first_log, second, second_log, again = asyncio.run(scenario())
    assert first.phase == "Succeeded", (first.message, first_log)
    assert "tinytok 1.0 tinyutil 1.2" in first_log and "tokens ['a', 'b', 'c']" in first_log
    envs = home / ".paddle-jobs" / "envs"
    paddle_line = next(line for line in first_log.splitlines() if line.startswith("paddle from"))
    assert str(envs) not in paddle_line, "Paddle must stay the interpreter's own"
    built = environment_status(home, "first")
    assert built["state"] == "ready" and built["reused"] is False and built["installer"] == installer
    assert sorted(p.name for p in envs.iterdir() if not p.name.startswith(".")) == [built["key"]]
    install_log = (envs / built["key"] / "install.log").read_text()
    assert ("tinytok" in install_log) and ("tinyutil" in install_log)
    # The second job found the environment built: no installer ran for it.
    assert second.phase == "Succeeded", second.message
    assert "tinytok 1.0" in second_log
    reused = environment_status(home, "second")
    assert reused["reused"] is True and reused["key"] == built["key"]
    assert not (home / ".paddle-jobs" / "second" / "logs" / "environment.log").exists()
    assert (envs / built["key"] / "install.log").read_text() == install_log
    # The dry run said what would happen, before and after.
    assert preview["plan"]["environment"]["environment"] == "build", preview["plan"]["environment"]
    assert again["plan"]["environment"]["environment"] == "exists", again["plan"]["environment"]
    # The jobs list has no job called "envs".
    assert "envs" not in [job.name for job in asyncio.run(backend_for(home).list_jobs(OWNER))]


def test_two_jobs_submitted_at_once_build_their_environment_once(home: Path, index: Path) -> None:
    package(home, "tinytok==1.0  # both jobs\n")

    async def scenario() -> list[JobStatus]:
        backend = backend_for(home, parent=site(index))
        await asyncio.gather(
            *(backend.submit(request(home, job_name=n, entry_point="python uses_tinytok.py", trainers=2)) for n in ("one", "two"))
        )
        return [await wait_terminal(backend, n) for n in ("one", "two")]

    ends = asyncio.run(scenario())
    assert [end.phase for end in ends] == ["Succeeded", "Succeeded"], [end.message for end in ends]
    statuses = [environment_status(home, n) for n in ("one", "two")]
    assert len({s["key"] for s in statuses}) == 1
    assert sorted(s["reused"] for s in statuses) == [False, True], statuses
    install_log = (home / ".paddle-jobs" / "envs" / statuses[0]["key"] / "install.log").read_text()
    assert install_log.count("pip install") == 1, install_log


def test_a_requirement_the_index_cannot_satisfy_fails_the_job_in_the_installers_words_before_user_code(home: Path, index: Path) -> None:
    package(home, "tinyutil\ntinytok==9.9\n")

    async def scenario() -> tuple[JobStatus, str, str]:
        backend = backend_for(home, parent=site(index))
        end = await run_job(backend, home, "nosolution", trainers=2, max_restarts=2)
        log = await backend.read_logs("nosolution", OWNER, "trainer", 0)
        path = await backend.environment_log("nosolution", OWNER)
        return end, log, path.read_text()

    end, log, environment_log = asyncio.run(scenario())
    assert end.phase == "Failed"
    assert end.message.startswith("The job's environment could not be built: "), end.message
    assert "tinytok==9.9" in end.message and "(requirements.txt line 2)" in end.message, end.message
    assert all(replica.restarts == 0 for replica in end.replicas), end.to_dict()
    assert "tinytok 1.0" not in log and "paddle from" not in log  # the user's code never ran
    assert "tinytok" in environment_log


def test_a_requirements_file_naming_paddle_is_refused_at_submit_and_nothing_is_created(home: Path, index: Path) -> None:
    package(home, "tinytok==1.0\npaddlepaddle-gpu==2.6.2\n")

    async def scenario() -> None:
        backend = backend_for(home, parent=site(index))
        await backend.submit(request(home, job_name="ownpaddle", entry_point="python uses_tinytok.py"))

    with pytest.raises(InvalidRequest) as refused:
        asyncio.run(scenario())
    assert refused.value.field == "requirements"
    assert "requirements.txt line 2 names paddlepaddle-gpu==2.6.2" in str(refused.value)
    assert not (home / ".paddle-jobs" / "ownpaddle").exists()


def test_a_named_requirements_file_that_is_missing_is_refused_naming_the_field(home: Path, index: Path) -> None:
    package(home, "tinytok==1.0\n")

    async def scenario() -> None:
        backend = backend_for(home, parent=site(index))
        await backend.submit(request(home, job_name="missing", entry_point="python uses_tinytok.py", requirements="deps/gpu.txt"))

    with pytest.raises(InvalidRequest) as refused:
        asyncio.run(scenario())
    assert refused.value.field == "requirements"
    assert "'deps/gpu.txt' does not exist in the package directory" in str(refused.value)
    assert not (home / ".paddle-jobs" / "missing").exists()


def test_while_the_environment_is_built_the_job_says_so_and_its_log_shows_the_installer(home: Path, index: Path) -> None:
    """The index holds the wheels' downloads until the test has seen the job's message."""
    package(home, "tinytok==1.0  # held\n")
    held = SimpleIndex(index)
    downloads = held.downloads = threading.Event()

    async def scenario() -> tuple[JobStatus, str, JobStatus, str]:
        with held.serving():
            backend = backend_for(home, parent=PaddleNbext(pip_index_url=held.url, pip_installer="uv"))
            await backend.submit(request(home, job_name="held", entry_point="python uses_tinytok.py", trainers=2))
            try:
                preparing = await wait_until(backend, "held", lambda s: s.message.startswith("Preparing environment") or s.terminal)
                log = (await backend.environment_log("held", OWNER)).read_text()
            finally:
                downloads.set()
            end = await wait_terminal(backend, "held")
            return preparing, log, end, (await backend.environment_log("held", OWNER)).read_text()

    preparing, log, end, whole_log = asyncio.run(scenario())
    # Before the resolver has the wheels, the job counts the file's requirements.
    assert preparing.phase == "Running" and preparing.message == "Preparing environment: 1 requirement (uv)", preparing.to_dict()
    assert "uv pip compile" in log and "--index-url" in log
    assert end.phase == "Succeeded", end.message
    assert "uv pip install" in whole_log and "tinyutil==1.2" in whole_log
