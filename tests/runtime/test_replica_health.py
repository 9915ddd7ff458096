"""A Kubernetes replica's own health watch (runtime/replica_health.py), through the real launcher:
a fake cgroup directory the test writes stands for the container's memory, and real entry points
report, go quiet and come back.  The health file's lines and the stall's exit are what the
server's reader and `policy.decide` take, so they are checked as those read them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from support.waiting import eventually

from paddle_nbext.model import contract
from paddle_nbext_server.runtime import health_rules, launcher, policy, replica_health

GIB = 1 << 30
LIMIT = 2 * GIB
LOGS = ("home", ".paddle-jobs", "mnist-ps-1", "logs")


def pod_env(tmp_path: Path, entry: str, role: str = "trainer", **extra: str) -> dict[str, str]:
    """A pod of an Indexed Job (the index only as JOB_COMPLETION_INDEX), its cgroup the test's."""
    (tmp_path / "package").mkdir(exist_ok=True)
    env = {
        "PATH": os.environ["PATH"],
        "PADDLE_NBEXT_JOB": "mnist-ps-1",
        "PADDLE_NBEXT_MODE": "collective" if role == "trainer" else "ps",
        "PADDLE_NBEXT_ROLE": role,
        "JOB_COMPLETION_INDEX": "1" if role == "trainer" else "0",
        "PADDLE_NBEXT_PSERVER_ENDPOINTS": "127.0.0.1:7001",
        "PADDLE_NBEXT_TRAINER_ENDPOINTS": "127.0.0.1:7101,127.0.0.1:7102",
        "PADDLE_NBEXT_ENTRY": entry,
        "PADDLE_NBEXT_WORKDIR": str(tmp_path / "package"),
        "PADDLE_NBEXT_PREFLIGHT": "0",
        "HOME": str(tmp_path / "home"),
        "PADDLE_NBEXT_ATTEMPT": "2.",
        replica_health.CGROUP_DIR_VAR: str(tmp_path / "cgroup"),
        replica_health.INTERVAL_VAR: "0.05",
        replica_health.MEMORY_WARN_AFTER_VAR: "0",
        replica_health.TERMINATION_LOG_VAR: str(tmp_path / "termination-log"),
    }
    env.update(extra)
    return env


def write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_text(text)
    os.replace(temporary, path)


def cgroup(tmp_path: Path, current: int, limit: int | str, inactive_file: int = 0) -> None:
    """The container's cgroup v2 files as the kernel shows them."""
    directory = tmp_path / "cgroup"
    write_atomic(directory / "memory.max", f"{limit}\n")
    write_atomic(directory / "memory.stat", f"anon {current}\nfile {inactive_file}\ninactive_file {inactive_file}\nactive_file 0\n")
    write_atomic(directory / "memory.current", f"{current}\n")


def health_file(tmp_path: Path, role: str = "trainer", index: int = 1) -> Path:
    return tmp_path.joinpath(*LOGS, f"{role}-{index}.health.jsonl")


def entries(tmp_path: Path, role: str = "trainer", index: int = 1) -> list[dict[str, Any]]:
    return replica_health.read_entries(str(health_file(tmp_path, role, index)))


def start(env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, launcher.__file__], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def finish(process: subprocess.Popen[str]) -> tuple[int, str]:
    output, _ = process.communicate(timeout=60)
    return process.returncode, output


#: An entry point that runs until the test creates `stop` in its working dir.
WAIT_FOR_STOP = "while [ ! -e stop ]; do sleep 0.05; done"


# ------------------------------------------------------------------ memory


def test_memory_above_ninety_percent_of_the_limit_warns_and_clears_in_the_local_words(tmp_path: Path) -> None:
    cgroup(tmp_path, int(1.84 * GIB), LIMIT)
    process = start(pod_env(tmp_path, WAIT_FOR_STOP))
    try:
        warning = eventually(lambda: [e for e in entries(tmp_path) if e["kind"] == "warning"], "the memory warning")[0]
        assert warning["text"] == "Memory: trainer 1 uses 1.8 GiB of its 2 GiB limit; the kernel stops it (OOMKilled) if it goes over."
        assert (warning["role"], warning["index"], warning["attempt"]) == ("trainer", 1, 2)
        assert contract.parse_time(warning["t"]) is not None
        assert set(warning) == {"t", "kind", "text", "role", "index", "attempt"}
        assert replica_health.active_warnings(entries(tmp_path), attempt=2) == [warning]
        cgroup(tmp_path, 1 * GIB, LIMIT)
        recovered = eventually(lambda: [e for e in entries(tmp_path) if e["kind"] == "recovered"], "the warning to clear")[0]
        assert recovered["text"] == "Memory: trainer 1 is back to 1 GiB of its 2 GiB limit."
        assert replica_health.active_warnings(entries(tmp_path), attempt=2) == []
        assert [e["kind"] for e in entries(tmp_path)] == ["warning", "recovered"]  # each said once
    finally:
        (tmp_path / "package" / "stop").touch()
    assert finish(process) == (0, "")


def test_the_working_set_leaves_out_inactive_file_pages_as_the_kubelet_does(tmp_path: Path) -> None:
    # 1.95 GiB charged, of which 0.5 GiB is page cache the kernel drops first: 1.45 GiB in use.
    cgroup(tmp_path, int(1.95 * GIB), LIMIT, inactive_file=GIB // 2)
    assert replica_health.read_memory(str(tmp_path / "cgroup")) == replica_health.MemoryReading(int(1.95 * GIB) - GIB // 2, LIMIT)
    process = start(pod_env(tmp_path, WAIT_FOR_STOP))
    try:
        cgroup(tmp_path, int(1.95 * GIB), LIMIT, inactive_file=0)  # the same charge, all of it in use now
        eventually(lambda: entries(tmp_path), "a warning once the working set is above the line")
        assert [e["kind"] for e in entries(tmp_path)] == ["warning"]
        assert "uses 1.9 GiB of its 2 GiB limit" in entries(tmp_path)[0]["text"]  # 1.95 is said as 1.9
    finally:
        (tmp_path / "package" / "stop").touch()
    assert finish(process)[0] == 0


def test_no_limit_is_never_warned_about_and_pservers_are_watched_too(tmp_path: Path) -> None:
    cgroup(tmp_path, 40 * GIB, "max")
    assert replica_health.read_memory(str(tmp_path / "cgroup")) == replica_health.MemoryReading(40 * GIB, 0)
    watch = replica_health.ReplicaWatch(
        pod_env(tmp_path, "true", role="pserver"),
        str(tmp_path / "logs"),
        "pserver",
        0,
        last_output=lambda: 0.0,
        on_stop=lambda: None,
        say=lambda _words: None,
    )
    (tmp_path / "logs").mkdir()
    for now in (0.0, 100.0, 1000.0):
        watch.check(now)
    assert not (tmp_path / "logs" / "pserver-0.health.jsonl").exists()
    cgroup(tmp_path, int(1.9 * GIB), LIMIT)  # the same pserver with a limit
    watch.check(1001.0)
    (entry,) = replica_health.read_entries(str(tmp_path / "logs" / "pserver-0.health.jsonl"))
    assert entry["text"].startswith("Memory: pserver 0 uses 1.9 GiB of its 2 GiB limit")


def test_cgroup_v1_is_read_from_the_memory_controller(tmp_path: Path) -> None:
    v1 = tmp_path / "cgroup" / "memory"
    write_atomic(v1 / "memory.usage_in_bytes", f"{int(1.8 * GIB)}\n")
    write_atomic(v1 / "memory.limit_in_bytes", f"{LIMIT}\n")
    write_atomic(v1 / "memory.stat", f"cache 0\ntotal_inactive_file {GIB // 4}\n")
    assert replica_health.read_memory(str(tmp_path / "cgroup")) == replica_health.MemoryReading(int(1.8 * GIB) - GIB // 4, LIMIT)
    write_atomic(v1 / "memory.limit_in_bytes", "9223372036854771712\n")  # v1's "no limit"
    assert replica_health.read_memory(str(tmp_path / "cgroup")) == replica_health.MemoryReading(int(1.8 * GIB) - GIB // 4, 0)
    assert replica_health.read_memory(str(tmp_path / "nothing")) is None


# ------------------------------------------------------------------ stall

#: A trainer that reports step 7 (as report() writes it), says so, and then waits for `go`
#: before it writes again, and for `stop` before it ends: quiet in between.
REPORTER = """
import json, os, sys, time
with open(os.environ["PADDLE_NBEXT_METRICS_FILE"], "a") as f:
    f.write(json.dumps({"t": time.time(), "step": 7, "total": None, "m": {"loss": 0.5}}) + "\\n")
print("step 7", flush=True)
while not os.path.exists("go"):
    time.sleep(0.05)
print("step 8", flush=True)
while not os.path.exists("stop"):
    time.sleep(0.05)
"""


def reporter(tmp_path: Path) -> str:
    (tmp_path / "package").mkdir(exist_ok=True)
    (tmp_path / "package" / "train.py").write_text(REPORTER)
    return f"{sys.executable} train.py"


def test_a_quiet_trainer_is_marked_stalled_and_recovers_when_it_writes_again_on_warn(tmp_path: Path) -> None:
    cgroup(tmp_path, GIB, LIMIT)
    env = pod_env(tmp_path, reporter(tmp_path), **{replica_health.STALL_TIMEOUT_VAR: "1", replica_health.ON_STALL_VAR: "warn"})
    process = start(env)
    try:
        stalled = eventually(lambda: [e for e in entries(tmp_path) if e["kind"] == "warning"], "the stall warning")[0]
        assert stalled["text"].startswith("Stalled: no progress for ") and " since step 7; trainer 1 last wrote at " in stalled["text"]
        assert (stalled["role"], stalled["index"], stalled["attempt"]) == ("trainer", 1, 2)
        assert replica_health.watch_of(stalled) == "stall"
        (tmp_path / "package" / "go").touch()
        recovered = eventually(lambda: [e for e in entries(tmp_path) if e["kind"] == "recovered"], "progress again")[0]
        assert recovered["text"].startswith("Progress again after ") and recovered["text"].endswith(" without any (trainer 1).")
    finally:
        (tmp_path / "package" / "stop").touch()
    code, output = finish(process)
    assert code == 0  # warn: the trainer goes on and ends as it would have
    assert output.splitlines()[:2] == ["step 7", "step 8"] and "stalled" not in output


def test_on_stall_restart_stops_the_trainer_and_exits_with_the_stall_the_policy_restarts_the_job_for(tmp_path: Path) -> None:
    cgroup(tmp_path, GIB, LIMIT)
    (tmp_path / "termination-log").touch()  # the kubelet's /dev/termination-log
    env = pod_env(tmp_path, reporter(tmp_path), **{replica_health.STALL_TIMEOUT_VAR: "1", replica_health.ON_STALL_VAR: "restart"})
    code, output = finish(start(env))
    assert code == contract.STALL_EXIT_CODE, output
    words = (tmp_path / "termination-log").read_text()
    assert words.startswith("no progress for ") and " since step 7; trainer 1 last wrote at " in words
    assert output.splitlines()[-1] == f"paddle-nbext launcher: the training stalled: {words}"
    (entry,) = entries(tmp_path)
    assert (entry["kind"], entry["text"]) == ("warning", f"Stalled: {words}.")
    attempt_log = tmp_path.joinpath(*LOGS, "trainer-1.attempt-0.log").read_text()
    assert attempt_log.splitlines()[-1] == output.splitlines()[-1]  # the words outlive the pod
    # What the master makes of that pod: its log tail alone, or its termination message.
    for observed in (
        policy.Observed("trainer", 1, "Failed", code, 0, "Exit code 5", output),
        policy.Observed("trainer", 1, "Failed", code, 0, f"Stalled: {words}", ""),
    ):
        peer = policy.Observed("trainer", 0, "Running")
        decision = policy.decide([peer, observed], max_restarts=2, on_stall="restart")
        assert decision.restart == [("trainer", 1)] and not decision.terminal and not decision.disruption
        assert decision.message == f"restart 1 of 2: the job stalled ({words}); all replicas restarting"


#: What the kernel does to a container over its limit, as the test's cgroup shows it: one more
#: OOM kill counted, and the largest process (the trainer's code, not the launcher) killed.
OOM_KILLED = """
import os, pathlib, signal
events = pathlib.Path(os.environ["PADDLE_NBEXT_CGROUP_DIR"]) / "memory.events"
events.write_text("low 0\\nhigh 0\\nmax 3\\noom 1\\noom_kill 1\\n")
print("step 7 loss 0.5", flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_an_oom_kill_is_said_last_with_the_limit_and_the_most_seen_in_use(tmp_path: Path) -> None:
    cgroup(tmp_path, int(1.5 * GIB), LIMIT)
    write_atomic(tmp_path / "cgroup" / "memory.events", "low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\n")
    (tmp_path / "package").mkdir()
    (tmp_path / "package" / "train.py").write_text(OOM_KILLED)
    env = pod_env(tmp_path, f"{sys.executable} train.py", **{replica_health.INTERVAL_VAR: "0.01"})
    code, output = finish(start(env))
    assert code == 137, output  # the launcher ends as its entry point did
    last = output.strip().splitlines()[-1]
    assert last.startswith("the kernel killed it at its 2 GiB memory limit (OOMKilled)"), output
    failed = policy.Observed("trainer", 1, "Failed", code, 0, "OOMKilled", output)
    assert policy.failure_words(failed) == ("trainer 1", last)


def test_a_kill_that_is_no_oom_says_nothing_of_memory(tmp_path: Path) -> None:
    cgroup(tmp_path, GIB, LIMIT)
    write_atomic(tmp_path / "cgroup" / "memory.events", "oom 0\noom_kill 0\n")
    (tmp_path / "package").mkdir()
    (tmp_path / "package" / "train.py").write_text("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n")
    code, output = finish(start(pod_env(tmp_path, f"{sys.executable} train.py")))
    assert code == 137 and "OOMKilled" not in output and "memory" not in output, output


def test_on_stall_fail_kills_a_trainer_that_ignores_sigterm_and_the_job_fails_in_the_stalls_words(tmp_path: Path) -> None:
    cgroup(tmp_path, GIB, LIMIT)
    (tmp_path / "package").mkdir()
    script = REPORTER.replace(
        "import json, os, sys, time", "import json, os, signal, sys, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)"
    )
    (tmp_path / "package" / "train.py").write_text(script)
    env = pod_env(tmp_path, f"{sys.executable} train.py", **{replica_health.STALL_TIMEOUT_VAR: "1", replica_health.ON_STALL_VAR: "fail"})
    code, output = finish(start(env))  # the launcher's SIGKILL after STOP_GRACE_SECONDS ends it
    assert code == contract.STALL_EXIT_CODE, output
    assert "on_stall is 'fail': stopping the trainer" in output
    failed = policy.Observed("trainer", 1, "Failed", code, 0, "Exit code 5", output)
    decision = policy.decide([policy.Observed("trainer", 0, "Running"), failed], max_restarts=3, on_stall="fail")
    words = policy.stall_words(failed)
    assert words is not None and words.startswith("no progress for ")
    assert decision.phase == "Failed" and decision.message == f"The job stalled: {words}; on_stall is 'fail'."
    assert decision.stop == [("trainer", 0)]


def test_a_trainer_of_several_ranks_is_stopped_whole_for_a_stall(tmp_path: Path) -> None:
    cgroup(tmp_path, GIB, LIMIT)
    (tmp_path / "package").mkdir()
    # Each rank reports into its own metrics file (rank 0's is the trainer's), then all go quiet.
    (tmp_path / "package" / "train.py").write_text(REPORTER)
    env = pod_env(
        tmp_path,
        f"{sys.executable} train.py",
        PADDLE_NBEXT_PROCS="2",
        **{replica_health.STALL_TIMEOUT_VAR: "1", replica_health.ON_STALL_VAR: "restart"},
    )
    code, output = finish(start(env))
    assert code == contract.STALL_EXIT_CODE, output
    assert output.splitlines()[-1].startswith("paddle-nbext launcher: the training stalled: no progress for ")
    assert "[rank 0] step 7" in output and "[rank 1] step 7" in output
    assert [e["kind"] for e in entries(tmp_path)] == ["warning"]


def test_a_trainer_that_never_reports_is_never_called_stalled(tmp_path: Path) -> None:
    """Pure: the watch's check at chosen times.  Armed only by a report of this attempt."""
    logs = tmp_path / "logs"
    logs.mkdir()
    said: list[str] = []
    stops: list[bool] = []
    env = pod_env(tmp_path, "true", **{replica_health.STALL_TIMEOUT_VAR: "60", replica_health.ON_STALL_VAR: "restart"})
    watch = replica_health.ReplicaWatch(
        {**env, "PADDLE_NBEXT_METRICS_DIR": str(logs)},
        str(logs),
        "trainer",
        1,
        last_output=lambda: 0.0,
        on_stop=lambda: stops.append(True),
        say=said.append,
    )
    started = watch.stall_check.started
    metrics = logs / "trainer-1.metrics.jsonl"
    metrics.write_text(json.dumps({"step": 3}) + "\n")
    os.utime(metrics, (started - 10, started - 10))  # an earlier attempt's report
    watch.check_stall(started + 3600)
    assert not (logs / "trainer-1.health.jsonl").exists() and stops == []
    os.utime(metrics, (started + 5, started + 5))  # reported in this attempt, then quiet
    watch.check_stall(started + 64)
    assert not (logs / "trainer-1.health.jsonl").exists()  # 59 s quiet: not yet
    watch.check_stall(started + 65)
    (entry,) = replica_health.read_entries(str(logs / "trainer-1.health.jsonl"))
    assert entry["text"].startswith("Stalled: no progress for 1 min since step 3; trainer 1 last wrote at ")
    assert stops == [True] and watch.stopped_for is not None
    watch.check_stall(started + 600)  # stopped once: nothing more is said or done
    assert len(replica_health.read_entries(str(logs / "trainer-1.health.jsonl"))) == 1 and stops == [True]


def test_older_attempts_entries_are_history_and_a_torn_line_is_skipped(tmp_path: Path) -> None:
    path = tmp_path / "trainer-0.health.jsonl"
    lines = [
        {"t": "2026-12-06T01:00:00Z", "kind": "warning", "text": "Stalled: x.", "role": "trainer", "index": 0, "attempt": 0},
        {
            "t": "2026-12-06T01:01:00Z",
            "kind": "warning",
            "text": "Memory: trainer 0 uses 1.9 GiB of its 2 GiB limit; ...",
            "role": "trainer",
            "index": 0,
            "attempt": 1,
        },
        {"t": "2026-12-06T01:02:00Z", "kind": "warning", "text": "Stalled: y.", "role": "trainer", "index": 0, "attempt": 1},
        {
            "t": "2026-12-06T01:03:00Z",
            "kind": "recovered",
            "text": "Memory: trainer 0 is back to 1 GiB of its 2 GiB limit.",
            "role": "trainer",
            "index": 0,
            "attempt": 1,
        },
    ]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines) + '{"t": "2026-12-06T01:04:00Z", "kind": "warn')
    read = replica_health.read_entries(str(path))
    assert read == lines
    assert replica_health.active_warnings(read, attempt=1) == [lines[2]]  # the stall holds; the memory warning cleared
    assert replica_health.active_warnings(read, attempt=0) == [lines[0]]
    assert replica_health.active_warnings(read, attempt=2) == []
    assert replica_health.attempt_number({"PADDLE_NBEXT_ATTEMPT": "3."}) == 3  # jobs mode
    assert replica_health.attempt_number({"PADDLE_NBEXT_ATTEMPT": "0.4"}) == 4  # jobset mode
    assert replica_health.attempt_number({}) == 0


def test_local_replicas_run_no_watch_of_their_own(tmp_path: Path) -> None:
    """The local master watches local replicas; their launcher has no log dir and writes nothing."""
    cgroup(tmp_path, int(1.95 * GIB), LIMIT)
    env = pod_env(tmp_path, "echo local", PADDLE_NBEXT_INDEX="1")
    del env["JOB_COMPLETION_INDEX"]
    result = subprocess.run([sys.executable, launcher.__file__], env=env, capture_output=True, text=True, timeout=60, check=False)
    assert (result.returncode, result.stdout) == (0, "local\n")
    assert not (tmp_path / "home").exists()


def test_the_stall_words_are_the_local_masters() -> None:
    stall = health_rules.Stall(index=1, quiet_since=1000.0, step=1234)
    assert stall.words(1600.0).startswith("no progress for 10 min since step 1234; trainer 1 last wrote at ")


def test_the_bundles_watch_runs_where_paddle_nbext_is_not_installed(tmp_path: Path) -> None:
    """In a job image the launcher imports replica_health and health_rules from the bundle."""
    from paddle_nbext_server.jobfiles.runtime_files import write_bundle

    bundle = tmp_path / "runtime"
    write_bundle(bundle)
    cgroup(tmp_path, int(1.95 * GIB), LIMIT)
    # The entry point ends once its replica's warning is in the home: the watch ran.
    entry = f"while ! grep -q warning {health_file(tmp_path)}; do sleep 0.05; done"
    env = pod_env(tmp_path, entry)
    bare = [sys.executable, "-S", "-s"]  # no site-packages: paddle_nbext cannot be imported
    result = subprocess.run([*bare, str(bundle / "launcher.py")], env=env, capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stderr
    (entry_seen,) = entries(tmp_path)
    assert entry_seen["text"].startswith("Memory: trainer 1 uses 1.9 GiB of its 2 GiB limit")
