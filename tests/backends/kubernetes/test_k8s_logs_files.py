"""Which attempt file stands for which pod, and reading them: the pure half of
`backends/kubernetes/logs/replica_logs.py`, on real files (the cluster half is tests/cluster/test_k8s_logs.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from paddle_nbext_server.backends.kubernetes.logs import replica_logs as logs
from paddle_nbext_server.runtime import launcher


def pod(name: str, created: str, phase: str, *, started: bool = True) -> dict[str, Any]:
    state: dict[str, Any] = {"waiting": {"reason": "ContainerCreating"}}
    if started:
        state = {"running": {"startedAt": created}} if phase == "Running" else {"terminated": {"startedAt": created}}
    return {
        "metadata": {
            "name": name,
            "creationTimestamp": created,
            "labels": {"paddle-nbext/role": "trainer", "batch.kubernetes.io/job-completion-index": "0"},
        },
        "status": {"phase": phase, "containerStatuses": [{"name": "main", "state": state}]},
    }


def attempts(tmp_path: Path, count: int) -> list[Path]:
    for _ in range(count):
        launcher.open_attempt_log(str(tmp_path), "trainer", 0).close()
    return logs.attempt_files(tmp_path, "trainer", 0)


def test_files_are_matched_to_pods_counting_started_pods_from_the_newest(tmp_path: Path) -> None:
    files = attempts(tmp_path, 2)
    first = pod("job-trainer-0-aaaaa", "2026-01-01T00:00:00Z", "Failed")
    second = pod("job-trainer-0-bbbbb", "2026-01-01T00:01:00Z", "Running")
    waiting = pod("job-trainer-0-ccccc", "2026-01-01T00:02:00Z", "Pending", started=False)
    pods = logs.replica_pods([second, first], "trainer", 0)
    assert logs.attempt_file(files, pods, None, previous=False) == files[1]
    assert logs.attempt_file(files, pods, None, previous=True) == files[0]
    assert logs.attempt_file(files, pods, "job-trainer-0-aaaaa", previous=False) == files[0]
    assert logs.attempt_file(files, pods, "job-trainer-0-aaaaa", previous=True) is None
    # a pod that has not started has no file yet; the attempt before it is the newest file
    pods = logs.replica_pods([first, second, waiting], "trainer", 0)
    assert logs.attempt_file(files, pods, None, previous=False) is None
    assert logs.attempt_file(files, pods, None, previous=True) == files[1]
    # every pod gone: the newest file is the current attempt
    assert logs.attempt_file(files, [], None, previous=False) == files[1]
    assert logs.attempt_file(files, [], "job-trainer-0-zzzzz", previous=True) == files[0]


def test_a_removed_pod_is_found_by_its_name(tmp_path: Path) -> None:
    assert logs.replica_of("my-job-pserver-3-x7k2p", {}) == ("my-job", "pserver", 3, [])
    assert logs.replica_of("not-a-replica", {}) is None


def test_tail_reads_the_last_lines_from_the_end(tmp_path: Path) -> None:
    path = tmp_path / "big.log"
    lines = [f"line {n} " + "x" * 100 + "\n" for n in range(3000)]  # several read blocks
    path.write_text("".join(lines) + "partial")
    assert logs.read_text(path, 2) == lines[-1] + "partial"
    assert logs.read_text(path, 3) == "".join(lines[-2:]) + "partial"
    assert logs.read_text(path, 0) == ""
    path.write_text("a\nb\n")
    assert logs.read_text(path, 1) == "b\n"
    assert logs.read_text(path, 5) == "a\nb\n"


def test_a_broken_stream_resumes_after_the_last_bytes_it_gave(tmp_path: Path) -> None:
    path = tmp_path / "attempt.log"
    path.write_text("step 1\nstep 2\nstep 3\n")
    assert logs.resume_offset(path, b"step 2\n") == len("step 1\nstep 2\n")
    assert logs.resume_offset(path, b"never written") is None
    assert logs.resume_offset(path, b"") is None


def test_a_follow_sends_whole_lines_so_a_breaking_streams_last_words_never_pass_as_output() -> None:
    """A kubelet that goes away may end the stream with its own words ("context cancelled"),
    without a newline; only whole lines go out while the stream lasts, and a progress bar that
    redraws with a carriage return stays at most one frame behind."""
    from paddle_nbext_server.backends.kubernetes.logs.replica_logs import split_complete

    assert split_complete("step 1\ncontext cancelled") == ("step 1\n", "context cancelled")
    assert split_complete(" 10%|#  \r 20%|## \r 30") == (" 10%|#  \r 20%|## \r", " 30")
    assert split_complete("step 2\n") == ("step 2\n", "")
    assert split_complete("partial") == ("", "partial")
