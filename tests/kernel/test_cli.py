"""`paddle-nbext` as users run it: the installed console script, in a subprocess, against the
live server; exit codes 0 (ok), 1 (job failed / API error), 2 (usage)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Protocol

import pytest

from .conftest import LiveServer

CLI = str(Path(sys.executable).with_name("paddle-nbext"))


class Run(Protocol):
    def __call__(self, *argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]: ...


@pytest.fixture(scope="module")
def run(server: LiveServer, workdir: Path) -> Run:
    def run(*argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run([CLI, *argv], cwd=workdir, env=env or server.env(), capture_output=True, text=True, timeout=240)

    return run


def test_submit_wait_status_logs_list_delete(run: Run, workdir: Path) -> None:
    script = workdir / "cli_entry.py"
    script.write_text("import os\nprint('cli trainer', os.environ['PADDLE_TRAINER_ID'])\n")
    done = run(
        "submit",
        "--job-name",
        "cli-ok",
        "--mode",
        "collective",
        "--trainers",
        "2",
        "--trainer-cpu",
        "500m",
        "--script",
        str(script),
        "--wait",
        "--output",
        "json",
    )
    assert done.returncode == 0, done.stderr
    status = json.loads(done.stdout)
    assert status["name"] == "cli-ok" and status["phase"] == "Succeeded"
    assert status["spec"]["trainer_package"] == str(workdir)

    shown = run("status", "cli-ok")
    assert shown.returncode == 0 and shown.stdout.startswith("Job cli-ok: Succeeded")
    late = run("cancel", "cli-ok")
    assert late.returncode == 0 and late.stdout.strip() == "cli-ok had already ended (Succeeded); nothing to cancel."
    logs = run("logs", "cli-ok", "--index", "1")
    assert logs.returncode == 0 and "cli trainer 1" in logs.stdout
    listed = run("list", "-o", "json")
    assert "cli-ok" in [job["name"] for job in json.loads(listed.stdout)["jobs"]]
    deleted = run("delete", "cli-ok")
    # Delete says what it frees (the job dir: snapshot, logs, checkpoints).
    assert deleted.returncode == 0 and re.fullmatch(r"Deleted cli-ok, freeing [\d.]+([KMGT]i)?\.", deleted.stdout.strip()), deleted.stdout
    gone = run("status", "cli-ok")
    assert gone.returncode == 1 and gone.stderr.startswith("paddle-nbext: ") and "cli-ok" in gone.stderr


def test_a_plain_script_with_no_mode_just_runs(run: Run, workdir: Path) -> None:
    """The first thing a new user tries: no mode, no pservers; it runs as one trainer."""
    script = workdir / "hi.py"
    script.write_text("print('hi from', __import__('os').environ['PADDLE_TRAINER_ID'])\n")
    done = run("submit", "--job-name", "cli-hi", "--script", str(script), "--wait")
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith("Job cli-hi: Succeeded"), done.stdout
    assert "hi from 0" in run("logs", "cli-hi").stdout
    run("delete", "cli-hi")


def test_a_failed_job_exits_1_and_follow_streams_the_log(run: Run) -> None:
    failed = run(
        "submit",
        "--job-name",
        "cli-fail",
        "--mode",
        "collective",
        "--trainers",
        "1",
        "--entry",
        "python -c \"print('about to fail', flush=True); raise SystemExit(3)\"",
        "--follow",
    )
    assert failed.returncode == 1, failed.stderr
    assert "about to fail" in failed.stdout
    assert "Job cli-fail: Failed" in failed.stdout and "Exit code 3" in failed.stdout
    assert run("delete", "cli-fail").returncode == 0


def test_usage_and_connection_errors(run: Run, server: LiveServer) -> None:
    usage = run("submit", "--entry", "python x.py", "--trainers", "-1")
    assert usage.returncode == 2 and usage.stderr.startswith("paddle-nbext: --trainers: must be")
    outside = run("submit", "--entry", "python x.py", "--requirements", "../requirements.txt")
    assert outside.returncode == 2 and outside.stderr.startswith("paddle-nbext: --requirements: '../requirements.txt' leaves the package")
    assert run("frobnicate").returncode == 2
    limit = run("submit", "--entry", "python x.py", "--trainers", "100000")
    assert limit.returncode == 1 and "--trainers (trainers): must be at most" in limit.stderr
    forbidden = run("list", env={**server.env(), "PADDLE_NBEXT_TOKEN": "wrong"})
    assert forbidden.returncode == 1 and "(403): set PADDLE_NBEXT_TOKEN or --token" in forbidden.stderr
    missing = run("--url", server.url + "not-here/", "list")
    assert missing.returncode == 1 and "jupyter server extension enable paddle_nbext_server" in missing.stderr
    assert "\n" not in forbidden.stderr.strip() and "Traceback" not in missing.stderr


RESUMABLE = """
import os, sys, time
import paddle_nbext_job as job

resume = job.resume_from()
start = resume.step if resume is not None else 0
print(f"starting after step {start}", flush=True)
for step in range(start + 1, 7):
    job.report(step, total=6, loss=1.0 / step)
    if step % 2 == 0:
        with job.save_checkpoint(step, ranks=1) as directory:
            open(os.path.join(directory, "state"), "w").write(str(step))
    if step == 4 and resume is None:
        print("saved 4, waiting", flush=True)
        time.sleep(600)
print("finished", flush=True)
"""


def test_checkpoints_resume_and_delete_keeping_them(run: Run, workdir: Path, server: LiveServer) -> None:
    """A cell-body job (`--script`, run as paddle_entry.py from the snapshot) saves checkpoints and is
    cancelled; `checkpoints` lists them, `resume` starts a new job from the latest (the cell body
    comes from the ended job's snapshot), and `delete --keep-checkpoints` keeps them in the home."""
    script = workdir / "resumable.py"
    script.write_text(RESUMABLE)
    assert run("submit", "--job-name", "cli-ck", "--script", str(script)).returncode == 0
    deadline = time.monotonic() + 120
    while "saved 4, waiting" not in run("logs", "cli-ck").stdout:
        assert time.monotonic() < deadline, run("status", "cli-ck").stdout
        time.sleep(0.2)
    refused = run("resume", "cli-ck")
    assert refused.returncode == 1 and "only a Cancelled or Failed job can be resumed" in refused.stderr
    assert run("cancel", "cli-ck").returncode == 0
    listed = run("checkpoints", "cli-ck")
    assert listed.returncode == 0, listed.stderr
    assert [line.split()[0] for line in listed.stdout.splitlines()[1:3]] == ["2", "4"], listed.stdout
    assert "Checkpoints: 2," in listed.stdout
    resumed = run("resume", "cli-ck", "--job-name", "cli-ck-2", "--wait")
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert resumed.stdout.startswith("Job cli-ck-2: Succeeded"), resumed.stdout
    assert "resumed from step 4 of job cli-ck" in resumed.stdout
    # The new job links to the one it resumed: in its status, as text and as JSON.
    assert "  resumed from job cli-ck at step 4" in resumed.stdout.splitlines(), resumed.stdout
    assert json.loads(run("status", "cli-ck-2", "-o", "json").stdout)["resumed_from"] == {"job": "cli-ck", "step": 4}
    log = run("logs", "cli-ck-2").stdout
    assert "starting after step 4" in log and "finished" in log, log
    chain = json.loads(run("checkpoints", "cli-ck-2", "-o", "json").stdout)
    assert [c["step"] for c in chain["checkpoints"]] == [4, 6] and chain["resumed_from"]["job"] == "cli-ck"
    kept = run("delete", "cli-ck", "--keep-checkpoints")
    assert kept.returncode == 0 and "Its checkpoints (" in kept.stdout and "paddle-checkpoints" in kept.stdout, kept.stdout
    where = kept.stdout.rsplit(" are kept in ", 1)[1].rstrip(".\n")
    assert sorted(p.name for p in Path(where).iterdir()) == ["step-000000000002", "step-000000000004"]
    # The link outlives the job it names.
    assert "  resumed from job cli-ck at step 4" in run("status", "cli-ck-2").stdout.splitlines()
    assert run("delete", "cli-ck-2").returncode == 0
    missing = run("checkpoints", "cli-ck")
    assert missing.returncode == 1 and "cli-ck" in missing.stderr
