"""The checkpoint API of `paddle_nbext_job` (stdlib only, in every replica): a checkpoint becomes
visible only when complete (every saving rank done, one atomic rename), a crash in the middle of
a save leaves the previous one the latest, retention keeps the last K, and both backends name
the job's checkpoint directory to every replica."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from paddle_nbext.model.spec import JobSpec
from paddle_nbext_server.backends.kubernetes.build import manifests
from paddle_nbext_server.jobfiles.runtime_files import PYLIB, write_bundle
from paddle_nbext_server.runtime import paddle_nbext_checkpoints
from paddle_nbext_server.runtime import paddle_nbext_job as job


def save(directory: Path, step: int, payload: bytes = b"state", **options: object) -> job.save_checkpoint:
    saver = job.save_checkpoint(step, directory=directory, **options)  # type: ignore[arg-type]
    with saver as target:
        Path(target, "model.pdparams").write_bytes(payload)
    return saver


def test_a_checkpoint_is_invisible_until_its_block_ends(tmp_path: Path) -> None:
    saver = job.save_checkpoint(5, directory=tmp_path, ranks=1)
    with saver as target:
        Path(target, "model.pdparams").write_bytes(b"x" * 1000)
        assert job.latest(tmp_path) is None and job.checkpoints(tmp_path) == []
    found = job.latest(tmp_path)
    assert found is not None and found.step == 5 and saver.published == found
    assert Path(found.file("model.pdparams")).read_bytes() == b"x" * 1000
    assert found.size() >= 1000 and found.time > 0
    assert [p.name for p in tmp_path.iterdir()] == ["step-000000000005"]


def test_an_exception_in_the_block_keeps_the_previous_latest(tmp_path: Path) -> None:
    save(tmp_path, 10, ranks=1)
    with pytest.raises(ValueError, match="disk on fire"), job.save_checkpoint(20, directory=tmp_path, ranks=1) as target:
        Path(target, "model.pdparams").write_bytes(b"half")
        raise ValueError("disk on fire")
    latest = job.latest(tmp_path)
    assert latest is not None and latest.step == 10


def test_a_process_killed_mid_save_leaves_the_previous_checkpoint_the_latest(tmp_path: Path) -> None:
    """A real crash: the saving process is SIGKILLed while it writes step 20's files."""
    bundle = tmp_path / "runtime"
    write_bundle(bundle)
    checkpoints = tmp_path / "ckpt"
    save(checkpoints, 10, ranks=1)
    code = (
        "import os, sys, paddle_nbext_job as job\n"
        "with job.save_checkpoint(20, ranks=1) as d:\n"
        "    with open(os.path.join(d, 'model.pdparams'), 'wb') as f:\n"
        "        f.write(b'half'); f.flush()\n"
        "        print('writing', flush=True)\n"
        "        sys.stdin.readline()\n"  # blocks here, mid-save, until killed
    )
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(bundle / PYLIB), job.CHECKPOINT_DIR_VAR: str(checkpoints)}
    process = subprocess.Popen([sys.executable, "-c", code], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None
    assert process.stdout.readline() == "writing\n"
    process.send_signal(signal.SIGKILL)
    assert process.wait(timeout=30) == -signal.SIGKILL
    latest = job.latest(checkpoints)
    assert latest is not None and latest.step == 10
    assert Path(latest.file("model.pdparams")).read_bytes() == b"state"
    # The next attempt's publish removes the dead partial directory.
    os.environ[job.ATTEMPT_VAR] = "1"
    try:
        save(checkpoints, 30, ranks=1)
    finally:
        del os.environ[job.ATTEMPT_VAR]
    job.wait_for_removals()
    assert sorted(p.name for p in checkpoints.iterdir()) == ["step-000000000010", "step-000000000030"]


def test_with_several_ranks_the_last_one_to_finish_publishes(tmp_path: Path) -> None:
    first = job.save_checkpoint(7, directory=tmp_path, ranks=3, rank=0)
    with first as target:
        Path(target, "model.rank-0").write_text("0")
    assert first.published is None and job.latest(tmp_path) is None
    second = job.save_checkpoint(7, directory=tmp_path, ranks=3, rank=2)
    with second as target:
        Path(target, "model.rank-2").write_text("2")
    assert second.published is None and job.latest(tmp_path) is None
    third = job.save_checkpoint(7, directory=tmp_path, ranks=3, rank=1)
    with third as target:
        Path(target, "model.rank-1").write_text("1")
    latest = job.latest(tmp_path)
    assert latest is not None and latest.step == 7 and third.published == latest
    assert sorted(name for name in os.listdir(latest.path) if not name.startswith(".")) == [
        "CHECKPOINT.json",
        "model.rank-0",
        "model.rank-1",
        "model.rank-2",
    ]


def test_ranks_saving_at_once_in_processes_publish_exactly_once(tmp_path: Path) -> None:
    """Four processes save the same step together; one complete checkpoint holds every part."""
    bundle = tmp_path / "runtime"
    write_bundle(bundle)
    checkpoints = tmp_path / "ckpt"
    code = (
        "import os, paddle_nbext_job as job\n"
        "with job.save_checkpoint(100) as d:\n"
        "    open(os.path.join(d, 'part-%s' % os.environ['PADDLE_GLOBAL_RANK']), 'w').write('x' * 100000)\n"
    )
    base = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(bundle / PYLIB), job.CHECKPOINT_DIR_VAR: str(checkpoints), "PADDLE_GLOBAL_SIZE": "4"}
    processes = [
        subprocess.Popen([sys.executable, "-c", code], env={**base, "PADDLE_GLOBAL_RANK": str(rank)}, stderr=subprocess.PIPE, text=True)
        for rank in range(4)
    ]
    for process in processes:
        _, err = process.communicate(timeout=60)
        assert process.returncode == 0, err
    assert [c.step for c in job.checkpoints(checkpoints)] == [100]
    latest = job.latest(checkpoints)
    assert latest is not None
    assert sorted(name for name in os.listdir(latest.path) if name.startswith("part-")) == [f"part-{r}" for r in range(4)]
    assert [p.name for p in checkpoints.iterdir()] == ["step-000000000100"]


def test_retention_keeps_the_last_k(tmp_path: Path) -> None:
    for step in range(0, 60, 10):
        save(tmp_path, step, ranks=1, keep=3)
    assert [c.step for c in job.checkpoints(tmp_path)] == [30, 40, 50]
    save(tmp_path, 60, ranks=1, keep=0)  # 0 keeps all
    assert [c.step for c in job.checkpoints(tmp_path)] == [30, 40, 50, 60]
    # Retired ones are renamed away at once and removed in the background.
    job.wait_for_removals()
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"step-0000000000{step}" for step in (30, 40, 50, 60)]


def test_what_a_crash_left_mid_removal_goes_with_the_next_prune(tmp_path: Path) -> None:
    save(tmp_path, 1, ranks=1)
    leftover = tmp_path / ".deleting-step-000000000000-123-456"
    leftover.mkdir()
    (leftover / "model.pdparams").write_bytes(b"x")
    save(tmp_path, 2, ranks=1, keep=5)
    job.wait_for_removals()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["step-000000000001", "step-000000000002"]


def test_retention_comes_from_the_job_field_through_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(job.KEEP_VAR, "2")
    for step in (1, 2, 3, 4):
        save(tmp_path, step, ranks=1)
    assert [c.step for c in job.checkpoints(tmp_path)] == [3, 4]


def test_saving_a_step_again_replaces_it(tmp_path: Path) -> None:
    save(tmp_path, 5, b"old", ranks=1)
    save(tmp_path, 5, b"new", ranks=1)
    latest = job.latest(tmp_path)
    assert latest is not None and Path(latest.file("model.pdparams")).read_bytes() == b"new"
    assert [p.name for p in tmp_path.iterdir()] == ["step-000000000005"]


def test_the_checkpoint_directory_and_resume_point_come_from_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(job.CHECKPOINT_DIR_VAR, raising=False)
    monkeypatch.delenv(job.RESUME_VAR, raising=False)
    monkeypatch.delenv(job.RESUME_STEP_VAR, raising=False)
    assert job.checkpoint_dir() is None and job.latest() is None and job.resume_from() is None
    with pytest.raises(job.CheckpointError, match="no checkpoint directory"):
        job.save_checkpoint(1)
    monkeypatch.setenv(job.CHECKPOINT_DIR_VAR, str(tmp_path))
    save(tmp_path, 3, ranks=1)
    resumed = job.resume_from()
    assert resumed is not None and resumed.step == 3  # no runner's word: the latest
    save(tmp_path, 8, ranks=1)
    # The runner named step 3 when the attempt started: every rank resumes from it, even after
    # a faster rank saved step 8.
    monkeypatch.setenv(job.RESUME_VAR, str(tmp_path / "step-000000000003"))
    monkeypatch.setenv(job.RESUME_STEP_VAR, "3")
    resumed = job.resume_from()
    assert resumed is not None and resumed.step == 3 and resumed.path.endswith("step-000000000003")
    # The runner said "from scratch" (no checkpoint when the attempt started).
    monkeypatch.setenv(job.RESUME_VAR, "")
    monkeypatch.setenv(job.RESUME_STEP_VAR, "")
    assert job.resume_from() is None


@pytest.mark.parametrize("bad", [-1, 1.5, "7", True, 10**12])
def test_a_bad_step_is_refused(tmp_path: Path, bad: object) -> None:
    with pytest.raises(job.CheckpointError, match="step must be"):
        job.save_checkpoint(bad, directory=tmp_path, ranks=1)  # type: ignore[arg-type]


def test_the_ranks_default_to_every_rank_of_the_job(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PADDLE_GLOBAL_SIZE", "2")
    monkeypatch.setenv("PADDLE_GLOBAL_RANK", "1")
    saver = save(tmp_path, 4)
    assert (saver.ranks, saver.rank) == (2, 1) and saver.published is None and job.latest(tmp_path) is None


def test_stray_entries_are_not_checkpoints(tmp_path: Path) -> None:
    (tmp_path / "step-000000000009").mkdir()  # no manifest: not published by the API
    (tmp_path / "notes.txt").write_text("mine")
    (tmp_path / ".partial-000000000011-0").mkdir()
    assert job.checkpoints(tmp_path) == [] and job.latest(tmp_path / "missing") is None


def test_the_cost_of_the_api_around_a_save_is_small(tmp_path: Path) -> None:
    """The API adds a marker, a manifest and one rename: well under a plain 4 MB write's time
    plus a millisecond budget per publish (the benchmark measures 100 MB)."""
    payload = os.urandom(4 << 20)
    began = time.perf_counter()
    for step in range(5):
        save(tmp_path, step, payload, ranks=1, keep=2)
    with_api = time.perf_counter() - began
    began = time.perf_counter()
    for step in range(5):
        (tmp_path / f"plain-{step}").write_bytes(payload)
    plain = time.perf_counter() - began
    assert with_api < plain * 3 + 0.5, (with_api, plain)


def test_both_backends_name_the_checkpoint_directory(tmp_path: Path) -> None:
    spec = JobSpec.from_dict({"job_name": "ck", "entry_point": "python t.py", "keep_checkpoints": 5})
    assert manifests.checkpoint_dir("/home/jovyan/", "ck") == "/home/jovyan/.paddle-jobs/ck/checkpoints"
    from paddle_nbext_server.backends.local.records import Capacity, Plan, ReplicaPlan, ResourceRequest

    plan = Plan(
        job="ck",
        mode="collective",
        entry_point="python t.py",
        workdir=str(tmp_path),
        job_dir=str(tmp_path / "ck"),
        python=sys.executable,
        launcher="launcher.py",
        capacity=Capacity(cpu=2, memory=1 << 30, gpus=[]),
        request=ResourceRequest(cpu=1, memory=1 << 20, gpus=0),
        keep_checkpoints=spec.keep_checkpoints,
    )
    env = plan.launcher_env(ReplicaPlan(role="trainer", index=0, endpoint="127.0.0.1:1", cpu=1, memory=0), None)
    assert env[job.CHECKPOINT_DIR_VAR] == str(tmp_path / "ck" / "checkpoints")
    assert env[job.KEEP_VAR] == "5"
    assert Plan.from_json(plan.to_json()).keep_checkpoints == 5


def test_without_the_runners_word_a_rank_resumes_from_an_earlier_attempts_checkpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On Kubernetes the replicas find the resume point themselves: a rank of attempt 2 that
    starts after a faster rank of attempt 2 saved step 30 still resumes from attempt 1's step 20."""
    monkeypatch.delenv(job.RESUME_VAR, raising=False)
    monkeypatch.delenv(job.RESUME_STEP_VAR, raising=False)
    monkeypatch.setenv(job.CHECKPOINT_DIR_VAR, str(tmp_path))
    monkeypatch.setenv(job.ATTEMPT_VAR, "1")
    save(tmp_path, 20, ranks=1)
    monkeypatch.setenv(job.ATTEMPT_VAR, "2")
    assert (found := job.resume_from()) is not None and found.step == 20
    save(tmp_path, 30, ranks=1)
    assert (found := job.resume_from()) is not None and found.step == 20
    assert (newest := job.latest()) is not None and newest.step == 30
    # A process that started after attempt 2 saved step 30 under the same attempt label (a queue
    # suspended and re-admitted the job, which keeps JobSet's restart count) resumes from it.
    monkeypatch.setattr(paddle_nbext_checkpoints, "process_started", lambda: time.time() + 1)
    assert (found := job.resume_from()) is not None and found.step == 30


def test_kubernetes_replicas_know_their_attempt_from_the_pod_label() -> None:
    spec = JobSpec.from_dict({"job_name": "ck", "entry_point": "python t.py"})
    from backends.kubernetes.test_k8s_manifests import SETTINGS

    env = manifests.role_env(spec, "alice", "trainer", SETTINGS, "/home/jovyan/.paddle-jobs/ck/package")
    by_name = {item["name"]: item for item in env}
    # Ours (jobs mode: the master's restarts) and JobSet's (jobset mode), joined by Kubernetes'
    # $(VAR) expansion: "2." in jobs mode, "0.3" in jobset mode.
    assert by_name["PADDLE_NBEXT_ATTEMPT_JOBS"]["valueFrom"] == {"fieldRef": {"fieldPath": "metadata.labels['paddle-nbext/attempt']"}}
    assert by_name["PADDLE_NBEXT_ATTEMPT_JOBSET"]["valueFrom"] == {
        "fieldRef": {"fieldPath": "metadata.labels['jobset.sigs.k8s.io/restart-attempt']"}
    }
    assert by_name[job.ATTEMPT_VAR]["value"] == "$(PADDLE_NBEXT_ATTEMPT_JOBS).$(PADDLE_NBEXT_ATTEMPT_JOBSET)"
    names = [item["name"] for item in env]
    assert names.index(job.ATTEMPT_VAR) > names.index("PADDLE_NBEXT_ATTEMPT_JOBSET")  # expansion needs them first
    # The replicas read them as distinct attempts, in either mode.
    tokens = {paddle_nbext_checkpoints._attempt({job.ATTEMPT_VAR: value}) for value in ("0.", "1.", "0.1", "0.2", "10.", "1.0")}
    assert len(tokens) == 6
