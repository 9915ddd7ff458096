"""`paddle_nbext_job.report()`, the module every replica imports: buffered, written by its own
thread and at exit, never raising into training code, a no-op outside a job; and the launcher
putting it (only it) on the replica's PYTHONPATH with the replica's metrics file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from paddle_nbext_server.jobfiles.runtime_files import PYLIB, write_bundle
from paddle_nbext_server.runtime import launcher, paddle_nbext_job


def lines(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def run_in_replica(tmp_path: Path, code: str, **env: str) -> subprocess.CompletedProcess[str]:
    """`code` run the way user code in a replica runs: only the bundle's pylib on the path."""
    bundle = tmp_path / "runtime"
    write_bundle(bundle)
    full_env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(bundle / PYLIB), **env}
    return subprocess.run([sys.executable, "-c", code], env=full_env, capture_output=True, text=True, timeout=60, check=False)


def test_points_are_written_at_exit_in_order(tmp_path: Path) -> None:
    target = tmp_path / "logs" / "trainer-0.metrics.jsonl"
    code = "from paddle_nbext_job import report\nfor i in range(1000):\n    report(i, total=1000, loss=1.0 / (i + 1), acc=i)\n"
    result = run_in_replica(tmp_path, code, PADDLE_NBEXT_METRICS_FILE=str(target))
    assert result.returncode == 0 and result.stderr == ""
    points = lines(target)
    assert [p["step"] for p in points] == list(range(1000))
    assert points[0]["total"] == 1000 and points[-1]["m"] == {"loss": 0.001, "acc": 999.0}
    assert all(isinstance(p["t"], float) for p in points)


def test_a_crash_in_training_code_still_writes_what_was_reported(tmp_path: Path) -> None:
    """User code fails with an exception (and Paddle prints its shutdown lines after it)."""
    target = tmp_path / "trainer-1.metrics.jsonl"
    code = (
        "import sys\nfrom paddle_nbext_job import report\n"
        "for i in range(5):\n    report(i, loss=float(i))\n"
        "import atexit\natexit.register(lambda: print('I1201 shutdown: Paddle is exiting', file=sys.stderr))\n"
        "raise ValueError('bad batch')\n"
    )
    result = run_in_replica(tmp_path, code, PADDLE_NBEXT_METRICS_FILE=str(target))
    assert result.returncode == 1 and "ValueError: bad batch" in result.stderr
    assert [p["step"] for p in lines(target)] == [0, 1, 2, 3, 4]


def test_the_writer_thread_flushes_without_an_exit(tmp_path: Path) -> None:
    target = tmp_path / "m.jsonl"
    reporter = paddle_nbext_job.Reporter(str(target), interval=0.05)
    reporter.add(7, None, {"loss": 0.5})
    assert not target.exists()  # buffered: the training thread wrote nothing
    deadline = time.monotonic() + 30
    while not target.exists() or not target.read_text():
        assert time.monotonic() < deadline, "the writer thread never wrote the point"
        time.sleep(0.02)
    assert lines(target) == [{"t": lines(target)[0]["t"], "step": 7, "total": None, "m": {"loss": 0.5}, "start": True}]
    reporter.close()
    assert paddle_nbext_job.FLUSH_SECONDS <= 1.0


def test_outside_a_job_report_is_a_no_op(tmp_path: Path) -> None:
    result = run_in_replica(tmp_path, "from paddle_nbext_job import report, flush\nreport(1, loss=2.0)\nflush()\nprint(report(2))")
    assert (result.returncode, result.stdout, result.stderr) == (0, "None\n", "")
    assert list(tmp_path.rglob("*.jsonl")) == []


def test_bad_values_are_counted_and_said_once(tmp_path: Path) -> None:
    target = tmp_path / "m.jsonl"
    code = (
        "from paddle_nbext_job import report\n"
        "report('3', loss=1.0)\nreport(True)\nreport(1.5)\nreport(1, total='x')\n"
        "report(2, loss=float('nan'), acc=float('inf'), name='text', obj=object(), good=0.25)\n"
        "report(3, loss=1)\nprint('training goes on')\n"
    )
    result = run_in_replica(tmp_path, code, PADDLE_NBEXT_METRICS_FILE=str(target))
    assert result.returncode == 0 and result.stdout == "training goes on\n"
    assert [p["step"] for p in lines(target)] == [2, 3]
    assert lines(target)[0]["m"] == {"good": 0.25}
    said = result.stderr.splitlines()
    assert len([line for line in said if "ignored" in line]) == 1, result.stderr
    assert said[-1] == "paddle-nbext report(): 8 values refused, 0 points not written"


def test_a_full_disk_never_reaches_training_code(tmp_path: Path) -> None:
    code = "from paddle_nbext_job import report, flush\nfor i in range(3):\n    report(i, loss=1.0)\n    flush()\nprint('done')\n"
    result = run_in_replica(tmp_path, code, PADDLE_NBEXT_METRICS_FILE="/dev/full")
    assert (result.returncode, result.stdout) == (0, "done\n")
    assert result.stderr.count("cannot write /dev/full") == 1, result.stderr
    assert result.stderr.splitlines()[-1] == "paddle-nbext report(): 0 values refused, 3 points not written"


def test_the_budget_stops_the_file_growing(tmp_path: Path) -> None:
    target = tmp_path / "m.jsonl"
    code = "from paddle_nbext_job import report, flush\nfor i in range(100):\n    report(i, loss=1.0)\n    flush()\n"
    result = run_in_replica(tmp_path, code, PADDLE_NBEXT_METRICS_FILE=str(target), PADDLE_NBEXT_METRICS_BUDGET="500")
    assert result.returncode == 0
    assert 0 < target.stat().st_size <= 500
    kept = len(lines(target))
    assert result.stderr.count("reached its budget") == 1
    assert result.stderr.splitlines()[-1] == f"paddle-nbext report(): 0 values refused, {100 - kept} points not written"


def test_numpy_like_integers_and_floats_are_taken(tmp_path: Path) -> None:
    class Index:
        def __index__(self) -> int:
            return 4

    class Scalar:
        def __float__(self) -> float:
            return 0.125

    reporter = paddle_nbext_job.Reporter(str(tmp_path / "m.jsonl"), interval=3600)
    reporter.add(Index(), Index(), {"loss": Scalar()})
    reporter.close()
    assert [(p["step"], p["total"], p["m"]) for p in lines(tmp_path / "m.jsonl")] == [(4, 4, {"loss": 0.125})]


# ------------------------------------------------------------------ the launcher's part


def test_the_launcher_names_the_metrics_file_beside_the_logs() -> None:
    base = {
        "PADDLE_NBEXT_MODE": "collective",
        "PADDLE_NBEXT_ROLE": "trainer",
        "PADDLE_NBEXT_INDEX": "2",
        "PADDLE_NBEXT_TRAINER_ENDPOINTS": "127.0.0.1:1,127.0.0.1:2,127.0.0.1:3",
        "PADDLE_NBEXT_ENTRY": "python train.py",
        "PADDLE_NBEXT_WORKDIR": "/w",
        "PADDLE_NBEXT_METRICS_DIR": "/jobs/j/logs",
        "PADDLE_NBEXT_METRICS_FILE": "/stale/from/the/notebook",
        "PYTHONPATH": "/user/lib",
    }
    env = launcher.build_env(base, "/bundle/pylib")
    assert env[launcher.METRICS_FILE_VAR] == "/jobs/j/logs/trainer-2.metrics.jsonl"
    assert env["PYTHONPATH"] == f"/bundle/pylib{os.pathsep}/user/lib"
    assert launcher.METRICS_FILE_VAR == paddle_nbext_job.FILE_VAR
    # Kubernetes: no metrics dir given, the job's logs dir on the home volume.
    kubernetes = {**base, "PADDLE_NBEXT_INDEX": "", "JOB_COMPLETION_INDEX": "0", "HOME": "/home/jovyan", "PADDLE_NBEXT_JOB": "j"}
    del kubernetes["PADDLE_NBEXT_METRICS_DIR"]
    assert launcher.build_env(kubernetes)[launcher.METRICS_FILE_VAR] == "/home/jovyan/.paddle-jobs/j/logs/trainer-0.metrics.jsonl"
    # Nowhere to write (a plain local run without the backend): no file, report() is a no-op.
    del base["PADDLE_NBEXT_METRICS_DIR"]
    assert launcher.METRICS_FILE_VAR not in launcher.build_env(base)


@pytest.mark.parametrize("module", ["launcher", "policy", "contract", "preflight"])
def test_only_the_reporting_module_is_importable_by_user_code(tmp_path: Path, module: str) -> None:
    bundle = tmp_path / "runtime"
    write_bundle(bundle)
    (tmp_path / "work").mkdir()
    env = {
        "PATH": "/usr/bin:/bin",
        "PADDLE_NBEXT_JOB": "j",
        "PADDLE_NBEXT_MODE": "collective",
        "PADDLE_NBEXT_ROLE": "trainer",
        "PADDLE_NBEXT_INDEX": "0",
        "PADDLE_NBEXT_TRAINER_ENDPOINTS": "127.0.0.1:1",
        "PADDLE_NBEXT_WORKDIR": str(tmp_path / "work"),
        "PADDLE_NBEXT_METRICS_DIR": str(tmp_path / "logs"),
        "PADDLE_NBEXT_PREFLIGHT": "0",
        "PADDLE_NBEXT_ENTRY": (
            f"{sys.executable} -s -c 'import importlib.util as u; from paddle_nbext_job import report; report(1, loss=0.5); "
            f'print(u.find_spec("{module}") is None)\''
        ),
    }
    result = subprocess.run(
        [sys.executable, "-s", str(bundle / "launcher.py")], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60, check=False
    )
    assert (result.returncode, result.stdout) == (0, "True\n"), result.stderr
    assert [p["step"] for p in lines(tmp_path / "logs" / "trainer-0.metrics.jsonl")] == [1]
