"""`paddle-nbext envs list|prune|rm` and the Python API's environment functions, as users run
them, against the live server of this suite (local backend, jobs in `~/.paddle-jobs`), with
environments made on disk as the launcher leaves them and a real running job using one."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Protocol

import pytest
from support.fake_envs import make_env, use_env

from paddle_nbext.model.contract import format_bytes
from paddle_nbext_server.backends.local.store import JobStore

from .conftest import LiveServer

CLI = str(Path(sys.executable).with_name("paddle-nbext"))
USED, OLD, ALSO_OLD = "0123456789abcdef", "fedcba9876543210", "00000000000000aa"


class Run(Protocol):
    def __call__(self, *argv: str) -> subprocess.CompletedProcess[str]: ...


@pytest.fixture
def run(server: LiveServer, workdir: Path) -> Run:
    def run(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([CLI, *argv], cwd=workdir, env=server.env(), capture_output=True, text=True, timeout=240)

    return run


@pytest.fixture
def envs(server: LiveServer) -> Iterator[Path]:
    path = server.home / ".paddle-jobs" / "envs"
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def size_words(value: int) -> str:
    return f"{format_bytes(value)}B"


def test_envs_list_prune_and_rm(run: Run, envs: Path, workdir: Path, server: LiveServer) -> None:
    used = make_env(envs, USED, days_ago=1, payload=5000)
    old = make_env(envs, OLD, days_ago=40, payload=3000)
    also_old = make_env(envs, ALSO_OLD, days_ago=50, payload=2000)
    (workdir / "envs_idle.py").write_text("import time\nprint('idle', flush=True)\ntime.sleep(300)\n")
    submitted = run("submit", "--job-name", "cli-env-user", "--entry", "python envs_idle.py", "-o", "json")
    assert submitted.returncode == 0, submitted.stderr
    try:
        owner = json.loads(submitted.stdout)["owner"]
        use_env(JobStore(server.home / ".paddle-jobs").job_dir("cli-env-user", owner) / "logs", "cli-env-user", USED)

        listed = run("envs", "list")
        assert listed.returncode == 0, listed.stderr
        lines = listed.stdout.splitlines()
        assert lines[0].split() == ["KEY", "PACKAGES", "SIZE", "LAST", "USED", "IN", "USE", "BY"]
        assert [line.split() for line in lines[1:4]] == [
            [USED, "1", size_words(used), "1d", "ago", "cli-env-user"],
            [OLD, "1", size_words(old), "40d", "ago", "-"],
            [ALSO_OLD, "1", size_words(also_old), "50d", "ago", "-"],
        ]
        assert lines[4] == f"3 environments, {size_words(used + old + also_old)}; download cache 0 bytes (in {envs})."
        as_json = json.loads(run("envs", "list", "--json").stdout)
        assert [(env["key"], env["in_use_by"]) for env in as_json["environments"]] == [
            (USED, ["cli-env-user"]),
            (OLD, []),
            (ALSO_OLD, []),
        ]

        dry = run("envs", "prune", "--dry-run")
        assert dry.returncode == 0, dry.stderr
        assert dry.stdout.splitlines() == [
            f"Would remove {ALSO_OLD} ({size_words(also_old)}, 1 package)",
            f"Would remove {OLD} ({size_words(old)}, 1 package)",
            f"Would free {size_words(old + also_old)}.",
        ], dry.stdout
        assert (envs / OLD).is_dir() and (envs / ALSO_OLD).is_dir()

        # A running job's environment is never pruned, even with --unused-days 0; it says why.
        pruned = run("envs", "prune", "--unused-days", "0")
        assert pruned.returncode == 0, pruned.stderr
        assert pruned.stdout.splitlines() == [
            f"Removed {ALSO_OLD} ({size_words(also_old)}, 1 package)",
            f"Removed {OLD} ({size_words(old)}, 1 package)",
            f"Kept {USED}: in use by running job cli-env-user",
            f"Freed {size_words(old + also_old)}.",
        ], pruned.stdout
        assert sorted(path.name for path in envs.iterdir()) == sorted([".locks", USED])

        refused = run("envs", "rm", USED)
        assert refused.returncode == 1 and refused.stdout == "", refused
        assert refused.stderr.startswith("paddle-nbext: ") and "in use by running job cli-env-user" in refused.stderr, refused.stderr
    finally:
        run("delete", "cli-env-user")

    removed = run("envs", "rm", USED)
    assert removed.returncode == 0, removed.stderr
    assert removed.stdout.strip() == f"Removed environment {USED}, freeing {size_words(used)}."
    assert not (envs / USED).exists()
    empty = run("envs", "list")
    assert empty.stdout.splitlines()[0] == "No environments yet: a job gets one when its package has a requirements file."
    nothing = run("envs", "prune")
    assert nothing.returncode == 0 and nothing.stdout.splitlines()[-1] == "Freed 0 bytes.", nothing.stdout


def test_envs_errors(run: Run, envs: Path) -> None:
    unknown = run("envs", "rm", OLD)
    assert unknown.returncode == 1 and f"no environment {OLD}" in unknown.stderr, unknown.stderr
    bad = run("envs", "rm", "nope")
    assert bad.returncode == 1 and "16 hexadecimal digits" in bad.stderr, bad.stderr
    for argv, words in (
        (("envs", "rm"), "envs rm: give the KEY of the environment to remove"),
        (("envs", "list", OLD), "envs list takes no KEY"),
        (("envs", "list", "--cache"), "envs list: --cache is an option of envs prune"),
        (("envs", "prune", "--unused-days", "-3"), "--unused-days must be 0 or more"),
        (("envs", "clean"), "invalid choice: 'clean'"),
    ):
        done = run(*argv)
        assert done.returncode == 2 and words in done.stderr, (argv, done.stderr)


def test_python_api_lists_prunes_and_removes_environments(kernel_env: LiveServer, envs: Path) -> None:
    import paddle_nbext as pn

    old = make_env(envs, OLD, days_ago=40, payload=3000)
    make_env(envs, USED, days_ago=1, payload=10)
    assert [env["key"] for env in pn.environments()] == [USED, OLD]
    would = pn.prune_environments(dry_run=True)
    assert [env["key"] for env in would["removed"]] == [OLD] and would["freed"] == old and (envs / OLD).is_dir()
    assert pn.prune_environments(40 + 1)["removed"] == []
    assert pn.remove_environment(OLD) == {"key": OLD, "size": old}
    assert [env["key"] for env in pn.environments()] == [USED]
    with pytest.raises(pn.ApiError, match=f"no environment {OLD}"):
        pn.remove_environment(OLD)
