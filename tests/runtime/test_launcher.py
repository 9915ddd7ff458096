"""The launcher's Paddle environment contract per role and mode, and its bounded pserver wait."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from paddle_nbext_server.runtime import launcher

PSERVERS = "127.0.0.1:7001,127.0.0.1:7002"
TRAINERS = "127.0.0.1:7101,127.0.0.1:7102"


def inputs(**overrides: str | None) -> dict[str, str]:
    base: dict[str, str | None] = {
        "PATH": "/usr/bin:/bin",
        "PADDLE_NBEXT_JOB": "mnist-ps-1",
        "PADDLE_NBEXT_MODE": "ps",
        "PADDLE_NBEXT_ROLE": "trainer",
        "PADDLE_NBEXT_INDEX": "1",
        "PADDLE_NBEXT_PSERVER_ENDPOINTS": PSERVERS,
        "PADDLE_NBEXT_TRAINER_ENDPOINTS": TRAINERS,
        "PADDLE_NBEXT_ENTRY": "python train.py",
        "PADDLE_NBEXT_WORKDIR": "/home/alice/.paddle-jobs/mnist-ps-1/package",
    }
    base.update(overrides)
    return {k: v for k, v in base.items() if v is not None}


def test_ps_pserver_gets_its_own_endpoint_and_the_list() -> None:
    env = launcher.build_env(inputs(PADDLE_NBEXT_ROLE="pserver", PADDLE_NBEXT_INDEX="1"))
    assert env["TRAINING_ROLE"] == "PSERVER"
    assert env["PADDLE_PSERVERS_IP_PORT_LIST"] == PSERVERS
    # POD_IP:PADDLE_PORT must be exactly the list entry at the server's index.
    assert f"{env['POD_IP']}:{env['PADDLE_PORT']}" == PSERVERS.split(",")[1]
    assert env["PADDLE_TRAINERS_NUM"] == "2"
    assert env["FLAGS_enable_pir_api"] == "0"
    assert "PADDLE_TRAINER_ID" not in env


def test_ps_trainer_has_stable_id_and_pserver_list() -> None:
    env = launcher.build_env(inputs())
    assert env["TRAINING_ROLE"] == "TRAINER"
    assert env["PADDLE_TRAINER_ID"] == "1"
    assert env["PADDLE_TRAINERS_NUM"] == "2"
    assert env["PADDLE_PSERVERS_IP_PORT_LIST"] == PSERVERS
    assert (env["POD_IP"], env["PADDLE_PORT"]) == ("127.0.0.1", "7102")
    assert env["FLAGS_enable_pir_api"] == "0"
    assert launcher.endpoints_to_wait_for(inputs()) == [("127.0.0.1", 7001), ("127.0.0.1", 7002)]


def test_design_variables_are_set_for_every_role() -> None:
    env = launcher.build_env(inputs())
    assert env["PADDLE_JOB_NAME"] == "mnist-ps-1"
    assert (env["TRAINERS"], env["PSERVERS"]) == ("2", "2")
    assert env["ENTRY"] == "python train.py"
    assert env["TRAINER_PACKAGE"] == "/home/alice/.paddle-jobs/mnist-ps-1/package"


def test_collective_trainer_gets_endpoints_and_gloo() -> None:
    env = launcher.build_env(inputs(PADDLE_NBEXT_MODE="collective", PADDLE_NBEXT_INDEX="0", PADDLE_NBEXT_PSERVER_ENDPOINTS=""))
    assert env["PADDLE_TRAINER_ID"] == "0"
    assert env["PADDLE_TRAINERS_NUM"] == "2"
    assert env["PADDLE_TRAINER_ENDPOINTS"] == TRAINERS
    assert env["PADDLE_CURRENT_ENDPOINT"] == "127.0.0.1:7101"
    assert env["PADDLE_DISTRI_BACKEND"] == "gloo"
    assert "FLAGS_enable_pir_api" not in env
    assert "PADDLE_PSERVERS_IP_PORT_LIST" not in env
    assert launcher.endpoints_to_wait_for(inputs(PADDLE_NBEXT_MODE="collective")) == []


def test_collective_with_visible_gpu_does_not_force_gloo() -> None:
    env = launcher.build_env(inputs(PADDLE_NBEXT_MODE="collective", CUDA_VISIBLE_DEVICES="0"))
    assert "PADDLE_DISTRI_BACKEND" not in env


def test_stale_contract_variables_are_replaced() -> None:
    env = launcher.build_env(
        inputs(PADDLE_NBEXT_ROLE="pserver", PADDLE_NBEXT_INDEX="0", PADDLE_TRAINER_ID="7", PADDLE_CURRENT_ENDPOINT="x:1")
    )
    assert "PADDLE_TRAINER_ID" not in env
    assert "PADDLE_CURRENT_ENDPOINT" not in env


def test_cpu_sets_thread_counts_rounded_up() -> None:
    env = launcher.build_env(inputs(PADDLE_NBEXT_CPU="1.5"))
    assert (env["CPU_NUM"], env["OMP_NUM_THREADS"]) == ("2", "2")
    env = launcher.build_env(inputs(PADDLE_NBEXT_CPU="0.5"))
    assert env["CPU_NUM"] == "1"


def test_kubernetes_completion_index_is_the_replica_index() -> None:
    env = launcher.build_env(inputs(PADDLE_NBEXT_INDEX="", JOB_COMPLETION_INDEX="0"))
    assert env["PADDLE_TRAINER_ID"] == "0"


@pytest.mark.parametrize(
    ("overrides", "named"),
    [
        ({"PADDLE_NBEXT_ROLE": None}, "PADDLE_NBEXT_ROLE"),
        ({"PADDLE_NBEXT_MODE": "sync"}, "PADDLE_NBEXT_MODE"),
        ({"PADDLE_NBEXT_INDEX": "5"}, "index 5"),
        ({"PADDLE_NBEXT_PSERVER_ENDPOINTS": ""}, "PADDLE_NBEXT_PSERVER_ENDPOINTS"),
        ({"PADDLE_NBEXT_TRAINER_ENDPOINTS": "localhost"}, "PADDLE_NBEXT_TRAINER_ENDPOINTS"),
        ({"PADDLE_NBEXT_ENTRY": " "}, "PADDLE_NBEXT_ENTRY"),
    ],
)
def test_bad_inputs_name_the_variable(overrides: dict[str, str | None], named: str) -> None:
    with pytest.raises(launcher.LaunchError, match=named):
        launcher.build_env(inputs(**overrides))


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def test_trainer_gives_up_naming_the_unreachable_pserver(tmp_path: Path) -> None:
    listening = socket.socket()
    listening.bind(("127.0.0.1", 0))
    listening.listen()
    dead = _closed_port()
    try:
        env = inputs(
            PADDLE_NBEXT_PSERVER_ENDPOINTS=f"127.0.0.1:{listening.getsockname()[1]},127.0.0.1:{dead}",
            PADDLE_NBEXT_WORKDIR=str(tmp_path),
            PADDLE_NBEXT_ENTRY="touch entry-ran",
            PADDLE_NBEXT_WAIT_TIMEOUT="1",
        )
        result = subprocess.run([sys.executable, launcher.__file__], env=env, capture_output=True, text=True, timeout=60)
    finally:
        listening.close()
    assert result.returncode == launcher.WAIT_EXIT_CODE
    assert f"pserver 1 at 127.0.0.1:{dead}" in result.stderr
    assert "it refuses connections: its pod runs, but its code has not started serving" in result.stderr
    assert not (tmp_path / "entry-ran").exists()


def test_a_trainer_waiting_for_a_pserver_whose_name_does_not_resolve_says_its_pod_is_not_running(tmp_path: Path) -> None:
    env = inputs(
        PADDLE_NBEXT_PSERVER_ENDPOINTS="train-pserver-0.nowhere.invalid:6174",
        PADDLE_NBEXT_WORKDIR=str(tmp_path),
        PADDLE_NBEXT_ENTRY="touch entry-ran",
        PADDLE_NBEXT_WAIT_TIMEOUT="1",
    )
    result = subprocess.run([sys.executable, launcher.__file__], env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == launcher.WAIT_EXIT_CODE
    assert "pserver 0 at train-pserver-0.nowhere.invalid:6174 did not accept connections within 1s" in result.stderr
    assert "its name does not resolve yet: its pod is not running (still Pending, pulling its image" in result.stderr


def _signal_mask(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1], 16)
    return 0


@pytest.mark.skipif(shutil.which("unshare") is None or os.geteuid() != 0, reason="needs unshare and root for a PID namespace")
def test_a_launcher_that_is_pid_1_ends_at_once_on_sigterm_while_it_waits_for_pservers(tmp_path: Path) -> None:
    """In a container the launcher is PID 1, which gets no default-fatal signals: without its own
    handler a SIGTERM while it waits for the pservers (a cancel, a whole-job restart, an eviction)
    would be ignored until the grace period's SIGKILL.  It ends with 143 instead."""
    env = inputs(
        PADDLE_NBEXT_PSERVER_ENDPOINTS=f"127.0.0.1:{_closed_port()}",
        PADDLE_NBEXT_WORKDIR=str(tmp_path),
        PADDLE_NBEXT_ENTRY="touch entry-ran",
        PADDLE_NBEXT_WAIT_TIMEOUT="600",
    )
    outer = subprocess.Popen(["unshare", "--pid", "--fork", sys.executable, launcher.__file__], env=env, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        pid = None
        while time.monotonic() < deadline:  # the launcher: unshare's child, PID 1 in its namespace
            children = Path(f"/proc/{outer.pid}/task/{outer.pid}/children").read_text().split()
            if children and _signal_mask(int(children[0]), "SigCgt") & (1 << (signal.SIGTERM - 1)):
                pid = int(children[0])
                break
            time.sleep(0.05)
        assert pid is not None, "the launcher never installed its SIGTERM handler"
        nspid = next(line for line in Path(f"/proc/{pid}/status").read_text().splitlines() if line.startswith("NSpid:"))
        assert nspid.split()[-1] == "1", nspid  # PID 1 in its namespace, as in a container
        os.kill(pid, signal.SIGTERM)
        code = outer.wait(timeout=60)
    finally:
        if outer.poll() is None:
            outer.kill()
    assert code == 143, outer.stderr.read() if outer.stderr else ""
    assert "stopped by signal 15 before the entry point ran" in (outer.stderr.read() if outer.stderr else "")
    assert not (tmp_path / "entry-ran").exists()


def test_a_replica_whose_own_name_never_resolves_says_so_and_runs_nothing(tmp_path: Path) -> None:
    env = inputs(
        PADDLE_NBEXT_MODE="collective",
        PADDLE_NBEXT_TRAINER_ENDPOINTS="127.0.0.1:7101,no-such-replica.invalid:7102",
        PADDLE_NBEXT_WORKDIR=str(tmp_path),
        PADDLE_NBEXT_ENTRY="touch entry-ran",
        PADDLE_NBEXT_WAIT_TIMEOUT="1",
    )
    result = subprocess.run([sys.executable, launcher.__file__], env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == launcher.WAIT_EXIT_CODE
    assert "own address no-such-replica.invalid did not resolve within 1s" in result.stderr
    assert not (tmp_path / "entry-ran").exists()


def test_entry_runs_in_the_workdir_with_the_contract(tmp_path: Path) -> None:
    env = inputs(
        PADDLE_NBEXT_MODE="collective",
        PADDLE_NBEXT_WORKDIR=str(tmp_path),
        PADDLE_NBEXT_ENTRY='echo "$PADDLE_TRAINER_ID $PADDLE_CURRENT_ENDPOINT" > out.txt; exit 4',
    )
    result = subprocess.run([sys.executable, launcher.__file__], env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 4  # the entry point's own exit code, not the launcher's
    assert (tmp_path / "out.txt").read_text().strip() == "1 127.0.0.1:7102"


def test_python_in_the_entry_point_runs_where_the_image_has_only_python3(tmp_path: Path) -> None:
    """Debian's python3 package installs no `python`: the entry point still runs, with the
    interpreter that runs the launcher (in a pod: the image's, the one with Paddle)."""
    only_python3 = tmp_path / "bin"
    only_python3.mkdir()
    (only_python3 / "python3").symlink_to(sys.executable)
    for tool in ("sh", "echo"):  # what the entry point's shell needs
        found = shutil.which(tool)
        assert found is not None
        (only_python3 / tool).symlink_to(found)
    env = inputs(
        PADDLE_NBEXT_MODE="collective",
        PADDLE_NBEXT_WORKDIR=str(tmp_path),
        PADDLE_NBEXT_ENTRY='python -c \'import sys; open("out.txt", "w").write(sys.executable)\' && echo done',
        PATH=str(only_python3),
    )
    result = subprocess.run([sys.executable, launcher.__file__], env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert "done" in result.stdout and (tmp_path / "out.txt").read_text() == sys.executable


# ------------------------------------------------------------------ replica log files (Kubernetes)


def kubernetes_inputs(tmp_path: Path, entry: str, **overrides: str | None) -> dict[str, str]:
    """What a trainer pod of an Indexed Job gets: the index only as JOB_COMPLETION_INDEX, HOME the user's home."""
    (tmp_path / "package").mkdir(exist_ok=True)
    pod: dict[str, str | None] = {
        "PADDLE_NBEXT_MODE": "collective",
        "PADDLE_NBEXT_INDEX": None,
        "JOB_COMPLETION_INDEX": "1",
        "HOME": str(tmp_path / "home"),
        "PADDLE_NBEXT_WORKDIR": str(tmp_path / "package"),
        "PADDLE_NBEXT_ENTRY": entry,
    }
    return inputs(**{**pod, **overrides})


def logs_of(tmp_path: Path) -> dict[str, str]:
    folder = tmp_path / "home" / ".paddle-jobs" / "mnist-ps-1" / "logs"
    return {p.name: p.read_text() for p in sorted(folder.iterdir())} if folder.is_dir() else {}


def launch(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, launcher.__file__], env=env, capture_output=True, text=True, timeout=60, check=False)


def test_log_dir_is_the_jobs_dir_on_kubernetes_only() -> None:
    pod = {"HOME": "/home/alice", "PADDLE_NBEXT_JOB": "mnist", "JOB_COMPLETION_INDEX": "0"}
    assert launcher.log_dir(pod) == "/home/alice/.paddle-jobs/mnist/logs"
    # the local runner sets the index itself and keeps its own logs/<role>-<index>.log
    assert launcher.log_dir({**pod, "PADDLE_NBEXT_INDEX": "0"}) is None
    assert launcher.log_dir({"HOME": "/home/alice", "PADDLE_NBEXT_JOB": "mnist"}) is None
    assert launcher.log_dir({**pod, launcher.LOG_DIR_VAR: "/logs"}) == "/logs"
    assert launcher.log_dir({**pod, launcher.LOG_DIR_VAR: ""}) is None


def test_output_goes_to_stdout_and_to_the_attempt_file(tmp_path: Path) -> None:
    entry = 'echo "trainer $PADDLE_TRAINER_ID"; echo oops >&2; head -c 300000 /dev/zero | tr "\\0" x; printf "\\nend"; exit 4'
    result = launch(kubernetes_inputs(tmp_path, entry))
    assert result.returncode == 4  # still the entry point's own exit code
    expected = "trainer 1\noops\n" + "x" * 300000 + "\nend"
    assert result.stdout == expected  # kubectl logs shows stdout and stderr, in order
    assert logs_of(tmp_path) == {"trainer-1.attempt-0.log": expected}


def test_every_start_is_a_new_attempt_after_the_highest_one(tmp_path: Path) -> None:
    for text in ("first", "second"):
        assert launch(kubernetes_inputs(tmp_path, f"echo {text}")).returncode == 0
    assert logs_of(tmp_path) == {"trainer-1.attempt-0.log": "first\n", "trainer-1.attempt-1.log": "second\n"}
    folder = tmp_path / "home" / ".paddle-jobs" / "mnist-ps-1" / "logs"
    (folder / "trainer-1.attempt-5.log").write_text("an attempt whose predecessors were removed\n")
    (folder / "trainer-0.attempt-9.log").write_text("another replica\n")
    assert launch(kubernetes_inputs(tmp_path, "echo third")).returncode == 0
    assert logs_of(tmp_path)["trainer-1.attempt-6.log"] == "third\n"


def test_replicas_starting_together_never_share_a_file(tmp_path: Path) -> None:
    env = kubernetes_inputs(tmp_path, 'echo "pid $$"')
    processes = [subprocess.Popen([sys.executable, launcher.__file__], env=env, stdout=subprocess.DEVNULL) for _ in range(8)]
    assert [p.wait(timeout=60) for p in processes] == [0] * 8
    files = logs_of(tmp_path)
    assert sorted(files) == [f"trainer-1.attempt-{n}.log" for n in range(8)]
    assert all(text.startswith("pid ") and text.count("\n") == 1 for text in files.values())
    assert len(set(files.values())) == 8


def test_an_unwritable_log_dir_never_fails_the_training(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    result = launch(kubernetes_inputs(tmp_path, "echo trained", PADDLE_NBEXT_LOG_DIR=str(blocker / "logs")))
    assert result.returncode == 0
    assert result.stdout == "trained\n"
    assert result.stderr.count("paddle-nbext launcher: cannot create a log file") == 1


def test_a_failing_file_is_reported_once_and_dropped(capfd: pytest.CaptureFixture[str]) -> None:
    full = launcher.ReplicaLog("/dev/full", 0, os.open("/dev/full", os.O_WRONLY))
    for _ in range(3):
        full.write(b"line\n")  # ENOSPC: the disk is full
    full.close()
    err = capfd.readouterr().err
    assert err.count("cannot write /dev/full") == 1


def test_the_launchers_own_failure_is_in_the_attempt_file(tmp_path: Path) -> None:
    dead = _closed_port()
    env = kubernetes_inputs(
        tmp_path, "echo never", PADDLE_NBEXT_MODE="ps", PADDLE_NBEXT_PSERVER_ENDPOINTS=f"127.0.0.1:{dead}", PADDLE_NBEXT_WAIT_TIMEOUT="0.5"
    )
    result = launch(env)
    assert result.returncode == launcher.WAIT_EXIT_CODE
    text = logs_of(tmp_path)["trainer-1.attempt-0.log"]
    assert f"pserver 0 at 127.0.0.1:{dead} did not accept connections" in text
    assert "never" not in text


def test_sigterm_reaches_the_entry_point_through_the_tee(tmp_path: Path) -> None:
    entry = "trap 'echo got TERM; exit 7' TERM; echo ready; while :; do sleep 0.05; done"
    process = subprocess.Popen(
        [sys.executable, launcher.__file__], env=kubernetes_inputs(tmp_path, entry), stdout=subprocess.PIPE, text=True
    )
    assert process.stdout is not None
    assert process.stdout.readline() == "ready\n"
    process.send_signal(signal.SIGTERM)  # what the kubelet sends PID 1 when the pod is deleted
    assert process.wait(timeout=60) == 7
    assert process.stdout.read() == "got TERM\n"
    assert logs_of(tmp_path) == {"trainer-1.attempt-0.log": "ready\ngot TERM\n"}


def test_an_entry_point_killed_by_a_signal_exits_as_a_shell_reports_it(tmp_path: Path) -> None:
    result = launch(kubernetes_inputs(tmp_path, "echo before; kill -9 $$"))
    assert result.returncode == 128 + signal.SIGKILL
    assert logs_of(tmp_path) == {"trainer-1.attempt-0.log": "before\n"}


def test_local_replicas_write_no_file_of_their_own(tmp_path: Path) -> None:
    env = kubernetes_inputs(tmp_path, "echo local", PADDLE_NBEXT_INDEX="1", JOB_COMPLETION_INDEX=None)
    result = launch(env)
    assert (result.returncode, result.stdout) == (0, "local\n")
    assert not (tmp_path / "home").exists()


# ------------------------------------------------------------------ the bundle in a job image


def test_the_bundle_runs_where_paddle_nbext_is_not_installed(tmp_path: Path) -> None:
    """A job image has Python 3 and the bundle's files, nothing of paddle-nbext: the runtime then
    imports the contract shipped beside it."""
    from paddle_nbext_server.jobfiles.runtime_files import write_bundle

    bundle = tmp_path / "runtime"
    write_bundle(bundle)
    bare = [sys.executable, "-S", "-s", "-E"]  # no site-packages: paddle_nbext cannot be imported
    assert subprocess.run([*bare, "-c", "import paddle_nbext"], cwd=tmp_path, capture_output=True, check=False).returncode != 0
    # The image has Paddle (its distribution's metadata is all the preflight reads) but no paddle-nbext.
    paddle = tmp_path / "site" / "paddlepaddle-3.0.0.dist-info"
    paddle.mkdir(parents=True)
    (paddle / "METADATA").write_text("Metadata-Version: 2.1\nName: paddlepaddle\nVersion: 3.0.0\n", encoding="utf-8")
    env = inputs(
        PADDLE_NBEXT_MODE="collective",
        PADDLE_NBEXT_WORKDIR=str(tmp_path),
        PADDLE_NBEXT_ENTRY="echo $TRAINING_ROLE > out.txt",
        PYTHONPATH=str(paddle.parent),
    )
    result = subprocess.run([*bare[:-1], str(bundle / "launcher.py")], env=env, capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "out.txt").read_text().strip() == "TRAINER"
    master = subprocess.run(
        [*bare, str(bundle / "cluster_master.py")], env={"PATH": "/usr/bin:/bin"}, capture_output=True, text=True, timeout=60, check=False
    )
    assert master.returncode == 2 and "PADDLE_NBEXT_RECORD" in master.stderr  # every import resolved


# ------------------------------------------------------------------ Paddle preflight and log level


def test_paddle_info_and_warning_lines_are_quiet_unless_the_job_asks() -> None:
    assert launcher.build_env(inputs())["GLOG_minloglevel"] == "2"
    assert launcher.build_env(inputs(GLOG_minloglevel="0"))["GLOG_minloglevel"] == "0"


def test_ps_replica_on_paddle_3_3_ends_at_once_naming_versions_and_fix(tmp_path: Path) -> None:
    """An interpreter reporting PaddlePaddle 3.3.1 (a distribution's metadata, first on the
    path, as an installed wheel would be) cannot run parameter-server mode: the replica stops
    before the entry point runs, with the sentence as its last line."""
    site = tmp_path / "site" / "paddlepaddle-3.3.1.dist-info"
    site.mkdir(parents=True)
    (site / "METADATA").write_text("Metadata-Version: 2.1\nName: paddlepaddle\nVersion: 3.3.1\n", encoding="utf-8")
    env = inputs(PADDLE_NBEXT_WORKDIR=str(tmp_path), PADDLE_NBEXT_ENTRY="touch ran", PYTHONPATH=str(site.parent))
    result = subprocess.run([sys.executable, launcher.__file__], env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    last = (result.stdout + result.stderr).strip().splitlines()[-1]
    assert "parameter-server mode needs PaddlePaddle 3.0.x, but paddlepaddle 3.3.1 is installed" in last
    assert "mode=collective" in last
    assert not (tmp_path / "ran").exists()
    collective = inputs(
        PADDLE_NBEXT_MODE="collective", PADDLE_NBEXT_WORKDIR=str(tmp_path), PADDLE_NBEXT_ENTRY="touch ran", PYTHONPATH=str(site.parent)
    )
    assert subprocess.run([sys.executable, launcher.__file__], env=collective, capture_output=True, timeout=60).returncode == 0
    assert (tmp_path / "ran").exists()


HUNG_VOLUME_SCENARIO = r"""
import fcntl, os, sys, threading, time
from paddle_nbext_server.runtime import launcher

fifo = sys.argv[1]
os.mkfifo(fifo)
reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # read nothing for now
writer = os.open(fifo, os.O_WRONLY)
fcntl.fcntl(writer, fcntl.F_SETPIPE_SZ, 4096)  # the smallest volume buffer, whatever the machine's default
log = launcher.ReplicaLog(fifo, 0, writer)
chunk = b"x" * 65535 + b"\n"

def produce():
    for _ in range(launcher.MAX_PENDING_BYTES * 2 // len(chunk)):
        log.write(chunk)

producer = threading.Thread(target=produce)
producer.start()
producer.join(60)
print("producer-done" if not producer.is_alive() else "producer-blocked", flush=True)
print("skipped", log.skipped, flush=True)

seen = b""
deadline = time.monotonic() + 60
while b"bytes of output are missing here" not in seen and time.monotonic() < deadline:
    try:
        seen = (seen + os.read(reader, 1 << 20))[-(1 << 16):]
    except BlockingIOError:
        time.sleep(0.01)
print("noted" if b"bytes of output are missing here" in seen else "never-noted", flush=True)
log.close(wait=0)
os.close(reader)
"""


def test_an_attempt_file_that_cannot_keep_up_never_holds_the_replica_back_and_says_what_it_skipped(tmp_path: Path) -> None:
    """A hung home volume (here: a pipe nobody reads, which blocks its writer when full) delays
    the copy of the output, never the replica: writes return at once, what does not fit in the
    lag the file may have is skipped, and the file says how much once it moves again.

    It runs in an interpreter of its own, as the launcher does in a pod: the test process holds
    the threads and descriptors of a whole suite, any of which could touch a reused fd number."""
    run = subprocess.run(
        [sys.executable, "-c", HUNG_VOLUME_SCENARIO, str(tmp_path / "hung-volume")],
        capture_output=True,
        text=True,
        timeout=180,
    )
    said = f"stdout:\n{run.stdout}\nstderr:\n{run.stderr}"
    assert run.returncode == 0, said
    lines = run.stdout.splitlines()
    assert "producer-done" in lines, f"writing the output blocked behind the file\n{said}"
    skipped = next(int(line.split()[1]) for line in lines if line.startswith("skipped "))
    assert skipped > 0, said
    assert "noted" in lines, f"the file never said what it skipped\n{said}"


def test_a_collective_replica_on_kubernetes_waits_for_every_other_trainers_name_first() -> None:
    base = {
        "PADDLE_NBEXT_MODE": "collective",
        "PADDLE_NBEXT_TRAINER_ENDPOINTS": "job-trainer-0.job:6170,job-trainer-1.job:6170,job-trainer-0.job:6171",
    }
    assert launcher.peer_hosts(base, "job-trainer-1.job") == ["job-trainer-0.job"]
    assert launcher.peer_hosts(base, "") == []  # locally every endpoint is 127.0.0.1
    assert launcher.peer_hosts({**base, "PADDLE_NBEXT_MODE": "ps"}, "job-trainer-1.job") == []  # trainers wait for pservers instead
