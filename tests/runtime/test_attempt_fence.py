"""Attempts fenced in the home (`paddle_nbext_fence`): after a whole restart, a replica of the
older attempt still running (its node cut off, not dead) publishes no checkpoint, appends no
curve point and stops itself; what it published after the new attempt began is no checkpoint for
anyone, and nothing it did replaces the new attempt's own checkpoints."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from paddle_nbext_server.runtime import launcher
from paddle_nbext_server.runtime import paddle_nbext_fence as fence
from paddle_nbext_server.runtime import paddle_nbext_job as job


def attempt_env(checkpoints: Path, attempt: str, began: float | None = None) -> dict[str, str]:
    env = {fence.CHECKPOINT_DIR_VAR: str(checkpoints), fence.ATTEMPT_VAR: attempt}
    if began is not None:
        env[fence.BEGAN_VAR] = f"{began:.3f}"
    return env


def use(monkeypatch: pytest.MonkeyPatch, env: dict[str, str]) -> None:
    for name in (fence.CHECKPOINT_DIR_VAR, fence.ATTEMPT_VAR, fence.BEGAN_VAR, job.RESUME_VAR, job.RESUME_STEP_VAR):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)


def save(step: int) -> job.Checkpoint:
    with job.save_checkpoint(step, ranks=1) as target:
        Path(target, "model.pdparams").write_bytes(b"state %d" % step)
    found = job.latest()
    assert found is not None
    return found


def test_an_older_attempt_publishes_nothing_once_a_newer_one_began(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    checkpoints = tmp_path / "job" / "checkpoints"
    use(monkeypatch, attempt_env(checkpoints, "0"))
    assert fence.raise_fence() and (saved := save(20)).step == 20
    # The job restarts whole without this replica (its node was cut off): attempt 1 begins, after
    # the save (the restart's own clock reading; this machine's wall clock may step back).
    began = json.loads(Path(saved.path, job.MANIFEST).read_text())["time"] + 0.5
    assert fence.raise_fence(attempt_env(checkpoints, "1", began=began))
    assert fence.newer_attempt() == "1"
    with pytest.raises(job.CheckpointError, match=r"discarded: this job restarted whole as attempt 1 while attempt 0 still ran"):
        save(40)
    assert [c.step for c in job.checkpoints(checkpoints)] == [20]
    assert not [name for name in os.listdir(checkpoints) if name.startswith(".partial-")]  # nothing half-written stays


def test_what_an_older_attempt_published_after_the_restart_began_is_no_checkpoint(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Published between the restart's beginning and the new attempt's first replica (the window
    no check can close): the new attempt neither resumes from it nor lists it; the new attempt's
    own checkpoints are listed and it resumes from the last one saved before the restart."""
    checkpoints = tmp_path / "job" / "checkpoints"
    use(monkeypatch, attempt_env(checkpoints, "0"))
    fence.raise_fence()
    before = save(20)
    time.sleep(0.05)  # apart by more than the marker's millisecond resolution
    late = save(40)  # attempt 0 goes on, cut off: saved after the restart began (below)
    saved = [json.loads(Path(each.path, job.MANIFEST).read_text())["time"] for each in (before, late)]
    began = sum(saved) / 2  # the restart began between the two saves
    assert saved[0] < began < saved[1], saved

    use(monkeypatch, attempt_env(checkpoints, "1", began=began))
    fence.raise_fence()
    assert [c.step for c in job.checkpoints(checkpoints)] == [20]
    assert (resumed := job.resume_from()) is not None and resumed.step == 20
    assert save(60).step == 60
    assert [c.step for c in job.checkpoints(checkpoints)] == [20, 60]
    # A later attempt (2) still never takes attempt 0's late one, and takes attempt 1's.
    use(
        monkeypatch,
        attempt_env(checkpoints, "2", began=json.loads(Path(checkpoints, "step-000000000060", job.MANIFEST).read_text())["time"] + 1),
    )
    fence.raise_fence()
    assert (resumed := job.resume_from()) is not None and resumed.step == 60


def test_the_older_attempts_curve_points_are_dropped_once_a_newer_one_began(tmp_path: Path) -> None:
    checkpoints = tmp_path / "job" / "checkpoints"
    metrics = tmp_path / "job" / "logs" / "trainer-1.metrics.jsonl"
    env = {**os.environ, **attempt_env(checkpoints, "0"), job.FILE_VAR: str(metrics)}
    code = "from paddle_nbext_job import report, flush\nimport paddle_nbext_fence as f, os\n"
    code += "report(1, loss=1.0); flush()\n"
    code += "f.raise_fence({**os.environ, 'PADDLE_NBEXT_ATTEMPT': '1'})\n"
    code += "report(2, loss=0.5); flush()\n"
    pylib = Path(job.__file__).parent
    done = subprocess.run([sys.executable, "-c", code], env={**env, "PYTHONPATH": str(pylib)}, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    steps = [json.loads(line)["step"] for line in metrics.read_text().splitlines()]
    assert steps == [1]
    assert "the job restarted whole as attempt 1; this replica's points are dropped" in done.stderr


def test_a_replica_of_a_superseded_attempt_stops_itself(tmp_path: Path) -> None:
    """The launcher of attempt 0 sees attempt 1's marker and stops its entry point, as a stop
    from Kubernetes does, saying why in the replica's log."""
    from runtime.test_launcher import kubernetes_inputs, logs_of

    env = kubernetes_inputs(tmp_path, "trap 'echo stopped; exit 143' TERM; echo ready; while :; do sleep 0.05; done")
    checkpoints = tmp_path / "home" / ".paddle-jobs" / "mnist-ps-1" / "checkpoints"
    env = {**env, fence.CHECKPOINT_DIR_VAR: str(checkpoints), fence.ATTEMPT_VAR: "0"}
    process = subprocess.Popen([sys.executable, launcher.__file__], env=env, stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None
    assert process.stdout.readline() == "ready\n"
    assert (checkpoints / fence.FENCE_SUBDIR / "0").is_file()  # this attempt's own marker
    fence.raise_fence({**env, fence.ATTEMPT_VAR: "1"})
    assert process.wait(timeout=120) == 143
    (log,) = logs_of(tmp_path).values()
    assert "the job restarted whole as attempt 1 without this replica (attempt 0" in log and log.endswith("stopped\n"), log


def test_an_older_processs_late_writes_never_land_in_the_newer_ones_metrics_file(tmp_path: Path) -> None:
    """A cut-off node's file system client may write back an old attempt's points long after the
    new attempt began (CephFS does when the client's session comes back): they go to the file the
    old process opened, which the new process has replaced with a copy of its own."""
    metrics = tmp_path / "trainer-0.metrics.jsonl"
    metrics.write_text('{"t":1.0,"step":1,"total":null,"m":{"loss":1.0},"start":true}\n')
    old = os.open(metrics, os.O_WRONLY | os.O_APPEND)  # the old process's open file
    try:
        code = "from paddle_nbext_job import report, flush\nreport(2, loss=0.5); flush()\n"
        env = {**os.environ, job.FILE_VAR: str(metrics), "PYTHONPATH": str(Path(job.__file__).parent)}
        done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=False)
        assert done.returncode == 0, done.stderr
        os.write(old, b'{"t":1.5,"step":7,"total":null,"m":{"loss":9.0}}\n')  # written back late
    finally:
        os.close(old)
    assert [json.loads(line)["step"] for line in metrics.read_text().splitlines()] == [1, 2]


def test_a_point_after_an_earlier_processs_half_written_line_is_kept(tmp_path: Path) -> None:
    """A cut-off client's write-back may stop inside a line: the new process's first point
    starts on a line of its own."""
    metrics = tmp_path / "trainer-0.metrics.jsonl"
    metrics.write_text('{"t":1.0,"step":1,"total":null,"m":{"loss":1.0},"start":true}\n{"t":1.1,"ste')
    code = "from paddle_nbext_job import report, flush\nreport(2, loss=0.5); flush()\n"
    env = {**os.environ, job.FILE_VAR: str(metrics), "PYTHONPATH": str(Path(job.__file__).parent)}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    lines = metrics.read_text().splitlines()
    assert lines[1] == '{"t":1.1,"ste' and json.loads(lines[2])["step"] == 2, lines
