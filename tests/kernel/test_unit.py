"""Kernel-side logic that needs no Jupyter server: flags, rendering, dist_train, laziness, and the
client's error messages against real (loopback) HTTP endpoints that are not paddle-nbext."""

from __future__ import annotations

import http.server
import subprocess
import sys
import threading
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from support.jupyter_process import free_port

from paddle_nbext import display
from paddle_nbext.api import ENTRY_SCRIPT_COMMAND, PaddleJob, _function_script
from paddle_nbext.client import Client, ExtensionMissing, ServerUnreachable
from paddle_nbext.model.status import JobStatus
from paddle_nbext.options import Parser, UsageError, add_job_flags, spec_from_args


def parse(*argv: str) -> dict[str, Any]:
    parser = Parser(prog="%%paddle_submit")
    add_job_flags(parser)
    return spec_from_args(parser.parse_args(list(argv)))


def test_flags_map_to_job_fields_and_only_given_fields_are_sent() -> None:
    spec = parse(
        "--job-name",
        "mnist-1",
        "--trainers",
        "4",
        "--trainer-cpu",
        "2",
        "--trainer-mem",
        "4Gi",
        "--env",
        "EPOCHS=3",
        "--env",
        "LR=0.1",
        "--package",
        "/home/u/p",
        "--requirements",
        "env/requirements-dev.txt",
        "--timeout",
        "30m",
    )
    assert spec == {
        "job_name": "mnist-1",
        "trainers": 4,
        "trainer_cpu": "2",
        "trainer_mem": "4Gi",
        "env": {"EPOCHS": "3", "LR": "0.1"},
        "trainer_package": "/home/u/p",
        "requirements": "env/requirements-dev.txt",
        "timeout": "30m",
    }


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (("--trainers", "0"), "--trainers: must be at least 1"),
        (("--trainer-mem", "4GB"), "--trainer-mem: '4GB' is not a quantity"),
        (("--job-name", "Bad_Name"), "--job-name: 'Bad_Name' is not allowed"),
        (("--env", "NOEQUALS"), "--env: 'NOEQUALS' is not K=V"),
        (("--env", "PADDLE_TRAINER_ID=3"), "--env: PADDLE_TRAINER_ID is set by the launcher"),
        (("--mode", "mpi"), "--mode: 'mpi' is not a mode"),
        (
            ("--requirements", "/home/u/requirements.txt"),
            "--requirements: '/home/u/requirements.txt' is an absolute path; give a path relative",
        ),
        (("--requirements", "../requirements.txt"), "--requirements: '../requirements.txt' leaves the package directory"),
        (("--bogus",), "unrecognized arguments: --bogus"),
    ],
)
def test_bad_flags_give_one_line_naming_the_flag(argv: tuple[str, ...], expected: str) -> None:
    with pytest.raises(UsageError) as caught:
        parse(*argv)
    assert expected in str(caught.value)
    assert "\n" not in str(caught.value)


def test_status_text_and_html_show_phase_counts_and_reasons() -> None:
    created = (datetime.now(timezone.utc) - timedelta(minutes=3)).isoformat()
    status = JobStatus.from_dict(
        {
            "name": "job-a",
            "phase": "Failed",
            "message": "trainer-1 failed: Exit code 3",
            "created": created,
            "spec": {"pservers": 1, "trainers": 2},
            "a key of a newer server": True,
            "replicas": [
                {"role": "trainer", "index": 1, "phase": "Failed", "reason": "Exit code 3", "restarts": 0, "node": "n1"},
                {"role": "trainer", "index": 0, "phase": "Succeeded"},
                {"role": "pserver", "index": 0, "phase": "Stopped"},
            ],
        }
    )
    text = display.status_text(status)
    assert text.splitlines()[0] == "Job job-a: Failed — trainer-1 failed: Exit code 3"
    assert "pserver 1/1 stopped · trainers 1/2 succeeded, 1 failed" in text
    assert "trainer 1: Failed (Exit code 3)" in text
    html = display.status_html(status)
    assert "paddle-phase-failed" in html and "Exit code 3" in html and "age 3m" in html
    assert display.jobs_text([status]).splitlines()[1].split()[:2] == ["job-a", "Failed"]


def test_age_is_compact() -> None:
    now = datetime(2026, 1, 2, tzinfo=timezone.utc)
    assert display.age("2026-01-01T23:59:30Z", now) == "30s"
    assert display.age("2026-01-01T22:00:00.000Z", now) == "2h"
    assert display.age("2025-12-30T00:00:00Z", now) == "3d"
    assert display.age(None, now) == "?"


def trainer_function() -> None:
    import os

    print("trainer", os.environ.get("PADDLE_TRAINER_ID"))


def test_function_trainer_becomes_a_runnable_entry_script(tmp_path: Path) -> None:
    script = _function_script(trainer_function)
    path = tmp_path / "paddle_entry.py"
    path.write_text(script)
    result = subprocess.run([sys.executable, str(path)], env={"PADDLE_TRAINER_ID": "7"}, capture_output=True, text=True)
    assert result.stdout == "trainer 7\n"
    with pytest.raises(ValueError, match="no required arguments"):
        _function_script(trainer_with_args)


def trainer_with_args(epochs: int) -> int:
    return epochs


def test_paddle_job_keeps_only_set_fields() -> None:
    job = PaddleJob(job_name="fit-1", trainers=2, trainer_mem="2Gi", env={"A": "1"})
    assert job.to_spec() == {"job_name": "fit-1", "trainers": 2, "trainer_mem": "2Gi", "env": {"A": "1"}}
    assert PaddleJob(requirements="requirements-gpu.txt").to_spec() == {"requirements": "requirements-gpu.txt"}
    assert ENTRY_SCRIPT_COMMAND == "python paddle_entry.py"


def test_import_is_lazy_and_never_loads_the_server_side() -> None:
    code = (
        "import sys, paddle_nbext;"
        "from IPython.core.interactiveshell import InteractiveShell;"
        "InteractiveShell.instance().run_line_magic('load_ext', 'paddle_nbext');"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('ipywidgets', 'paddle_nbext_server', 'jupyter_server', 'paddle', 'requests')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
    labext = subprocess.run(
        [sys.executable, "-c", "import paddle_nbext; print(paddle_nbext._jupyter_labextension_paths())"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert labext.strip() == "[{'src': 'labextension', 'dest': 'paddle-nbext-labextension'}]"


class _NotPaddle(http.server.BaseHTTPRequestHandler):
    """A web server without the paddle-nbext API (what a server with the extension disabled looks like)."""

    def do_GET(self) -> None:
        body = b"<html>404: Not Found</html>"
        self.send_response(404)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


def test_client_explains_a_missing_extension_and_an_unreachable_server() -> None:
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _NotPaddle)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        client = Client(f"http://127.0.0.1:{httpd.server_address[1]}/", "t")
        with pytest.raises(ExtensionMissing) as caught:
            client.list_jobs()
        assert "jupyter server extension enable paddle_nbext_server" in str(caught.value)
    finally:
        httpd.shutdown()
        httpd.server_close()
    with pytest.raises(ServerUnreachable, match="Cannot reach the Jupyter server .*connection refused"):
        Client(f"http://127.0.0.1:{free_port()}", "t").list_jobs()


def test_cli_usage_errors_exit_2_before_any_request(tmp_path: Path) -> None:
    env = {"PATH": "/usr/bin:/bin", "PADDLE_NBEXT_API_URL": f"http://127.0.0.1:{free_port()}/paddle/api/v1"}
    result = subprocess.run(
        [sys.executable, "-m", "paddle_nbext.cli", "submit", "--entry", "python x.py", "--trainer-cpu", "lots"],
        capture_output=True,
        text=True,
        env=env,
    )
    assert result.returncode == 2
    assert result.stderr.strip().startswith("paddle-nbext: --trainer-cpu: 'lots' is not a quantity")
    assert result.stdout == ""


def test_cli_shows_the_installed_version(capsys: pytest.CaptureFixture[str]) -> None:
    from importlib.metadata import version

    from paddle_nbext.cli import main

    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"paddle-nbext {version('paddle-nbext')}"


def test_a_newer_servers_status_is_read_without_breaking() -> None:
    status = JobStatus.from_dict(
        {
            "name": "job-b",
            "phase": "Running",
            "spec": {"trainers": 2},
            "future": {"anything": 1},
            "replicas": [
                {"role": "trainer", "index": 0, "phase": "Hibernating", "gpu_model": "x"},
                {"role": "trainer", "index": 1, "phase": "Running"},
            ],
        }
    )
    assert (status.owner, status.created, status.message, status.finished) == ("", "", "", None)
    assert display.replica_counts(status) == "trainers 1/2 running"
    assert "trainer 0: Hibernating" in display.status_text(status)
    with pytest.raises(KeyError):
        JobStatus.from_dict({"phase": "Running"})  # a body without a name is no job status


def test_an_unreadable_answer_is_one_sentence() -> None:
    from paddle_nbext.client import UnexpectedAnswer, _read

    with pytest.raises(UnexpectedAnswer, match="GET http://x/jobs/a answered a body this client cannot read"):
        _read(JobStatus.from_dict, {"phase": "Running"}, "GET http://x/jobs/a")


def test_wait_returns_on_a_job_whose_record_is_damaged() -> None:
    """Phase Unknown never changes by itself: wait() hands it back instead of polling forever."""
    from paddle_nbext.api import Job

    damaged = JobStatus(
        name="broken", owner="alice", backend="local", phase="Unknown", message="status.json is damaged", spec={}, created=""
    )

    class Answers:
        calls = 0

        def get_job(self, name: str) -> JobStatus:
            Answers.calls += 1
            return damaged

    job = Job("broken", client=Answers())  # type: ignore[arg-type]
    assert job.wait(timeout=30, poll=0.01) is job
    assert job.phase == "Unknown" and job.last.message == "status.json is damaged" and Answers.calls == 1


def test_a_dry_run_says_what_the_jobs_requirements_would_do() -> None:
    from paddle_nbext.model.status import SubmitPlan

    job: dict[str, Any] = {"name": "r", "owner": "u", "phase": "Pending", "message": "", "replicas": [], "spec": {}, "created": None}
    with_file = SubmitPlan.from_dict(
        {
            "job": job,
            "plan": {
                "environment": {
                    "file": "requirements.txt",
                    "environment": "build",
                    "summary": "will be built before the replicas start (3 requirements)",
                }
            },
        }
    )
    assert with_file.environment_words == "requirements.txt: will be built before the replicas start (3 requirements)"
    assert SubmitPlan.from_dict({"job": job, "plan": {"environment": None}}).environment_words is None
