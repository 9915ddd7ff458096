"""The magics through a real IPython InteractiveShell against the live server (real HTTP, real
Paddle processes through the local backend)."""

from __future__ import annotations

from typing import Any, Protocol

import pytest
from IPython.core.interactiveshell import InteractiveShell

from .conftest import TRAIN_SCRIPT, LiveServer, wait_until


class Shell(Protocol):
    """What these tests use of IPython's InteractiveShell (which leaves `run_cell_magic` unannotated)."""

    def run_cell_magic(self, magic_name: str, line: str, cell: str) -> Any: ...

    def run_line_magic(self, magic_name: str, line: str) -> Any: ...


@pytest.fixture(scope="module")
def shell() -> Shell:
    ip = InteractiveShell.instance()
    ip.run_line_magic("load_ext", "paddle_nbext")
    return ip


def test_submit_a_ps_job_from_a_cell_then_logs_list_and_delete(
    shell: Shell, kernel_env: LiveServer, capsys: pytest.CaptureFixture[str]
) -> None:
    from paddle_nbext.api import Job

    body = TRAIN_SCRIPT.read_text()
    job = shell.run_cell_magic("paddle_submit", "--job-name magic-ps --pservers 1 --trainers 2 --trainer-cpu 500m --wait", body)
    assert isinstance(job, Job), capsys.readouterr().err
    assert job.phase == "Succeeded", job.last
    assert job.last.role_counts()["trainer"].succeeded == 2
    assert "Job magic-ps: Succeeded" in str(job)
    # the cell body ran as the entry script inside the snapshot
    assert job.last.spec["entry_point"] == "python paddle_entry.py"
    assert job.last.spec["trainer_package"] == str(kernel_env.home / "project")
    capsys.readouterr()

    shell.run_line_magic("paddle_logs", "magic-ps --role trainer --index 1")
    out = capsys.readouterr().out
    assert "step 199 loss" in out and "trainer done" in out

    # the environment log is the magic's too; this job has no requirements file, and says so
    shell.run_line_magic("paddle_logs", "magic-ps --role environment")
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "job 'magic-ps' has no environment log: it has no requirements file" in err, err

    listing = shell.run_line_magic("paddle_jobs", "")
    assert "magic-ps" in [j.name for j in listing]

    shell.run_line_magic("paddle_delete", "magic-ps")
    assert capsys.readouterr().out.strip().startswith("Deleted magic-ps, freeing ")
    shell.run_line_magic("paddle_logs", "magic-ps")
    err = capsys.readouterr().err
    assert err.startswith("paddle-nbext: ") and err.count("\n") == 1 and "magic-ps" in err


def test_cancel_keeps_the_record_until_delete(shell: Shell, kernel_env: LiveServer, capsys: pytest.CaptureFixture[str]) -> None:
    # --entry with a body: the body is still written as paddle_entry.py, so arguments reach it
    body = "import sys, time\nprint('sleeping', sys.argv[1], flush=True)\ntime.sleep(float(sys.argv[1]))\n"
    job = shell.run_cell_magic(
        "paddle_submit", "--job-name magic-sleep --mode collective --trainers 1 --entry 'python paddle_entry.py 600'", body
    )
    assert job is not None, capsys.readouterr().err
    wait_until(lambda: job.status().phase == "Running", what="the sleeping job to run")
    wait_until(lambda: "sleeping 600" in job.logs(), what="the entry script's output")
    shell.run_line_magic("paddle_cancel", "magic-sleep")
    assert capsys.readouterr().out.strip().startswith(("Cancelled magic-sleep.", "Cancelling magic-sleep:"))
    assert job.wait(timeout=60).phase == "Cancelled"
    # Cancelling what has ended says so, instead of claiming to cancel it.
    shell.run_line_magic("paddle_cancel", "magic-sleep")
    assert capsys.readouterr().out.strip() == "magic-sleep had already ended (Cancelled); nothing to cancel."
    assert "magic-sleep" in [j.name for j in shell.run_line_magic("paddle_jobs", "")]
    shell.run_line_magic("paddle_delete", "magic-sleep")
    assert "magic-sleep" not in [j.name for j in shell.run_line_magic("paddle_jobs", "")]


def test_user_errors_are_one_line_without_traceback(shell: Shell, kernel_env: LiveServer, capsys: pytest.CaptureFixture[str]) -> None:
    cases = {
        "--trainers 0": "--trainers: must be at least 1",
        "--trainer-mem 4GB": "--trainer-mem: '4GB' is not a quantity",
        "--frobnicate": "unrecognized arguments: --frobnicate",
        # the server's limit, reported through its {error, message, field} body
        "--trainers 100000": "--trainers (trainers): must be at most",
        "--package /definitely/not/home": "--package (trainer_package):",
        "--requirements /abs/requirements.txt": "--requirements: '/abs/requirements.txt' is an absolute path",
    }
    for line, expected in cases.items():
        assert shell.run_cell_magic("paddle_submit", line, "print('hi')\n") is None
        captured = capsys.readouterr()
        assert captured.err.startswith("paddle-nbext: ") and expected in captured.err, (line, captured.err)
        assert captured.err.count("\n") == 1 and "Traceback" not in captured.err + captured.out
    shell.run_line_magic("paddle_submit", "--help")
    help_text = capsys.readouterr().out
    assert "--trainer-cpu CPU" in help_text and "--requirements FILE" in help_text


def test_dry_run_creates_nothing(shell: Shell, kernel_env: LiveServer, capsys: pytest.CaptureFixture[str]) -> None:
    assert shell.run_cell_magic("paddle_submit", "--job-name magic-dry --trainers 2 --dry-run", "print('x')\n") is None
    out = capsys.readouterr().out
    assert '"dry_run": true' in out and "magic-dry" in out
    assert "magic-dry" not in [j.name for j in shell.run_line_magic("paddle_jobs", "")]


def test_follow_streams_the_trainer_log_then_returns_the_ended_job(
    shell: Shell, kernel_env: LiveServer, capsys: pytest.CaptureFixture[str]
) -> None:
    body = "for i in range(3):\n    print('epoch', i, flush=True)\n"
    job = shell.run_cell_magic("paddle_submit", "--job-name magic-follow --mode collective --trainers 1 --follow", body)
    out = capsys.readouterr().out
    assert job is not None and job.phase == "Succeeded"
    assert "epoch 0\nepoch 1\nepoch 2\n" in out
    shell.run_line_magic("paddle_delete", "magic-follow")


def test_resume_a_cancelled_cell_job_from_its_checkpoint(shell: Shell, kernel_env: LiveServer, capsys: pytest.CaptureFixture[str]) -> None:
    body = (
        "import os, time, paddle_nbext_job as job\n"
        "resume = job.resume_from()\n"
        "if resume is None:\n"
        "    with job.save_checkpoint(7, ranks=1) as d:\n"
        "        open(os.path.join(d, 'w'), 'w').write('7')\n"
        "    print('saved', flush=True)\n"
        "    time.sleep(600)\n"
        "print('resumed at', resume.step, open(resume.file('w')).read(), flush=True)\n"
    )
    job = shell.run_cell_magic("paddle_submit", "--job-name magic-ck", body)
    assert job is not None, capsys.readouterr().err
    wait_until(lambda: "saved" in job.logs(), what="the checkpoint")
    shell.run_line_magic("paddle_resume", "magic-ck")
    err = capsys.readouterr().err
    assert err.startswith("paddle-nbext: ") and "only a Cancelled or Failed job can be resumed" in err, err
    job.cancel().wait(timeout=60)
    new = shell.run_line_magic("paddle_resume", "magic-ck --job-name magic-ck-2 --wait")
    assert new is not None and new.name == "magic-ck-2", capsys.readouterr().err
    assert new.last.phase == "Succeeded" and "resumed at 7 7" in new.logs(), new.last
    assert new.checkpoints()["resumed_from"]["job"] == "magic-ck"
    shell.run_line_magic("paddle_delete", "magic-ck-2")
    shell.run_line_magic("paddle_delete", "magic-ck --keep-checkpoints")
    out = capsys.readouterr().out
    assert "Deleted magic-ck-2, freeing " in out and "Its checkpoints (" in out, out


#: Reports 40 steps, slowly enough that a wait sees it in progress.
REPORTING = (
    "import time\n"
    "from paddle_nbext_job import report\n"
    "for step in range(1, 41):\n"
    "    report(step, total=40, loss=1.0 / step)\n"
    "    time.sleep(0.1)\n"
)


def test_wait_shows_progress_while_it_waits_and_ends_on_the_card_with_progress_and_sparkline(
    shell: Shell, kernel_env: LiveServer, capsys: pytest.CaptureFixture[str]
) -> None:
    """Terminal IPython: a line per phase or percent change while waiting (the cell was blank for
    the whole wait); the ended job's card has the progress bar and the loss sparkline."""
    job = shell.run_cell_magic("paddle_submit", "--job-name magic-wait --mode collective --trainers 1 --wait", REPORTING)
    out = capsys.readouterr().out
    assert job is not None and job.phase == "Succeeded", job
    lines = out.splitlines()
    assert lines[0].startswith("magic-wait: "), out
    assert any(line.startswith("magic-wait: Running · ") and "% (step " in line and line.endswith("/40)") for line in lines), out
    assert lines[-1] == "magic-wait: Succeeded · 100% (step 40/40)", out
    card = job._repr_html_()
    assert "paddle-metrics" in card and "<svg" in card and "loss" in card, card
    shell.run_line_magic("paddle_delete", "magic-wait")


def test_wait_in_a_notebook_shows_the_live_view_then_makes_way_for_the_card(
    shell: Shell, kernel_env: LiveServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In a widget frontend the live status view (progress bar, sparkline) is displayed while the
    cell waits, and closed at the end, when the returned job's card (with both) replaces it."""
    import IPython.display

    from paddle_nbext import api
    from paddle_nbext.widgets.status import JobStatusView

    shown: list[Any] = []
    monkeypatch.setattr(api, "_in_widget_frontend", lambda: True)
    monkeypatch.setattr(IPython.display, "display", lambda *objects, **_kw: shown.extend(objects))
    job = shell.run_cell_magic("paddle_submit", "--job-name magic-wait-nb --mode collective --trainers 1 --wait", REPORTING)
    assert job is not None and job.phase == "Succeeded", job
    assert len(shown) == 1 and isinstance(shown[0], JobStatusView)
    view = shown[0]
    assert "Running" in view.phases  # it followed the job while the cell waited
    assert "paddle-metrics" in view.metrics.value and "<svg" in view.metrics.value  # progress and sparkline
    assert view.comm is None  # closed: the card takes its place
    shell.run_line_magic("paddle_delete", "magic-wait-nb")
