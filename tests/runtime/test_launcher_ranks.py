"""A trainer of several ranks (runtime/gang.py): the launcher runs one process per rank, tells
their output apart, stops them all on SIGTERM and when one fails, and names the rank that did.
Plain processes stand in for Paddle here (tests/paddle_jobs/test_local_ranks.py runs real Paddle)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from paddle_nbext_server.runtime import launcher
from runtime.test_launcher import inputs, kubernetes_inputs, launch, logs_of

RANK_SCRIPT = """
import os, sys, time
rank = int(os.environ["PADDLE_LOCAL_RANK"])
with open(f"pid-{rank}", "w") as out:
    out.write(str(os.getpid()))
print(f"global {os.environ['PADDLE_GLOBAL_RANK']} at {os.environ['PADDLE_CURRENT_ENDPOINT']}", flush=True)
if sys.argv[1] == "fail" and rank == 2:
    while not all(os.path.exists(f"pid-{other}") for other in range(3)):  # the others run too
        time.sleep(0.01)
    raise ValueError("rank two cannot go on")
if sys.argv[1] in ("abort-first", "raise-slow") and rank == 2:  # raises, then shuts down slowly, as Paddle does
    while not all(os.path.exists(f"pid-{other}") for other in range(3)):  # the others run too
        time.sleep(0.01)
    import atexit
    atexit.register(time.sleep, 3)
    def hook(*exc):
        sys.__excepthook__(*exc)
        sys.stderr.flush()
        open("raised", "w").close()
    sys.excepthook = hook
    raise ValueError("rank two cannot go on")
if sys.argv[1] == "abort-first" and rank == 0:  # a gloo peer aborts when the raiser goes away
    while not os.path.exists("raised"):
        time.sleep(0.01)
    os.abort()
if sys.argv[1] != "ok":
    while True:
        time.sleep(0.05)
"""


def ranked(tmp_path: Path, mode: str, **overrides: str | None) -> dict[str, str]:
    env = kubernetes_inputs(tmp_path, f"python rank.py {mode}", PADDLE_NBEXT_PROCS="3", **overrides)
    (Path(env["PADDLE_NBEXT_WORKDIR"]) / "rank.py").write_text(RANK_SCRIPT)
    return env


def pids(tmp_path: Path) -> list[int]:
    return [int((tmp_path / "package" / f"pid-{rank}").read_text()) for rank in range(3)]


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(") ")[1][0] != "Z"
    except OSError:
        return False


def test_every_rank_runs_with_its_own_contract_and_its_lines_say_which(tmp_path: Path) -> None:
    result = launch(ranked(tmp_path, "ok"))
    assert result.returncode == 0, result.stderr
    lines = sorted(result.stdout.splitlines())
    assert lines == [f"[rank {r}] global {3 + r} at 127.0.0.1:{7102 + r}" for r in range(3)]
    (name, text), *others = logs_of(tmp_path).items()
    assert (name, sorted(text.splitlines()), others) == ("trainer-1.attempt-0.log", lines, [])


def test_a_failing_rank_stops_the_others_and_is_named(tmp_path: Path) -> None:
    started = time.monotonic()
    result = launch(ranked(tmp_path, "fail"))
    assert result.returncode == 1
    # The launcher's own words (stderr; the pod's log and the local replica log hold both streams).
    assert result.stderr.splitlines()[-1] == "trainer 1 rank 2 failed: ValueError: rank two cannot go on", result.stderr
    assert "[rank 2] Traceback (most recent call last):" in result.stdout
    assert not [pid for pid in pids(tmp_path) if alive(pid)]
    assert time.monotonic() - started < 30  # the others were stopped, not waited for
    attempt = logs_of(tmp_path)["trainer-1.attempt-0.log"]
    assert attempt.splitlines()[-1] == "trainer 1 rank 2 failed: ValueError: rank two cannot go on"


def test_sigterm_reaches_every_rank_and_the_launcher_ends_as_stopped(tmp_path: Path) -> None:
    process = subprocess.Popen([sys.executable, launcher.__file__], env=ranked(tmp_path, "wait"), stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None
    seen = [process.stdout.readline() for _ in range(3)]
    assert sorted(line.split("]")[0] for line in seen) == ["[rank 0", "[rank 1", "[rank 2"]
    ranks = pids(tmp_path)
    process.send_signal(signal.SIGTERM)  # the kubelet stopping the pod
    sent = time.monotonic()
    assert process.wait(timeout=30) == 128 + signal.SIGTERM
    assert time.monotonic() - sent < 2.5
    assert not [pid for pid in ranks if alive(pid)]


def test_the_rank_that_raised_is_named_even_when_a_peers_abort_ends_first(tmp_path: Path) -> None:
    """In real pods the raising rank prints its traceback, then Paddle's shutdown keeps it alive
    while its peers abort (SIGABRT) on the lost connection: the abort ends first, yet the trainer
    names the rank that raised and exits as an exception does (1), not as an abort (134)."""
    result = launch(ranked(tmp_path, "abort-first"))
    assert result.stderr.splitlines()[-1] == "trainer 1 rank 2 failed: ValueError: rank two cannot go on", result.stderr
    assert result.returncode == 1
    assert not [pid for pid in pids(tmp_path) if alive(pid)]


def test_a_trainer_stopped_while_its_raising_rank_shuts_down_still_names_that_rank(tmp_path: Path) -> None:
    """Across nodes the peer trainer's abort can fail the Job first; the Job controller then stops
    this trainer (SIGTERM) while its rank that raised is still shutting down: the launcher still
    names that rank and exits as the exception did (1), not as a stopped trainer (143)."""
    # rank 2 raises and takes 3 s to shut down; the others run on (no abort): the stop lands
    # inside that shutdown, never after the launcher has already ended.
    process = subprocess.Popen([sys.executable, launcher.__file__], env=ranked(tmp_path, "raise-slow"), stderr=subprocess.PIPE, text=True)
    raised = tmp_path / "package" / "raised"
    deadline = time.monotonic() + 30
    while not raised.exists():  # the rank printed its traceback and is in its slow shutdown
        assert time.monotonic() < deadline and process.poll() is None, "rank 2 never raised"
        time.sleep(0.01)
    process.send_signal(signal.SIGTERM)  # the Job controller stopping the rest of a failed Job
    _, stderr = process.communicate(timeout=30)
    assert stderr.splitlines()[-1] == "trainer 1 rank 2 failed: ValueError: rank two cannot go on", stderr
    assert process.returncode == 1


def test_local_replica_ranks_write_to_the_runners_log(tmp_path: Path) -> None:
    """On the local backend the master keeps the output (stdout is the replica's log file)."""
    env = ranked(tmp_path, "ok", PADDLE_NBEXT_INDEX="0", JOB_COMPLETION_INDEX=None)
    result = launch(env)
    assert result.returncode == 0, result.stderr
    assert sorted(result.stdout.splitlines()) == [f"[rank {r}] global {r} at 127.0.0.1:{7101 + r}" for r in range(3)]
    assert not (tmp_path / "home").exists()


def test_a_rank_killed_by_a_signal_is_named_with_the_signal(tmp_path: Path) -> None:
    entry = 'if [ "$PADDLE_LOCAL_RANK" = 1 ]; then kill -9 $$; fi; echo "rank $PADDLE_LOCAL_RANK done"'
    result = launch(kubernetes_inputs(tmp_path, entry, PADDLE_NBEXT_PROCS="2"))
    assert result.returncode == 128 + signal.SIGKILL
    assert result.stderr.splitlines()[-1].startswith("trainer 1 rank 1 failed: exit code 137 (SIGKILL"), result.stderr


def test_the_bundle_runs_ranks_where_paddle_nbext_is_not_installed(tmp_path: Path) -> None:
    from paddle_nbext_server.jobfiles.runtime_files import write_bundle

    bundle = tmp_path / "runtime"
    write_bundle(bundle)
    env = inputs(
        PADDLE_NBEXT_MODE="collective",
        PADDLE_NBEXT_WORKDIR=str(tmp_path),
        PADDLE_NBEXT_PROCS="2",
        PADDLE_NBEXT_PREFLIGHT="0",
        PADDLE_NBEXT_ENTRY='echo "$PADDLE_GLOBAL_RANK/$PADDLE_GLOBAL_SIZE"',
    )
    result = subprocess.run(
        [sys.executable, "-S", "-s", str(bundle / "launcher.py")], env=env, capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr
    assert sorted(result.stdout.splitlines()) == ["[rank 0] 2/4", "[rank 1] 3/4"]
    assert os.environ.get("PADDLE_GLOBAL_RANK") is None
