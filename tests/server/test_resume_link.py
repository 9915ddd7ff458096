"""Issue 26, what is left: a job that Resume started links to the job it resumed (`resumed_from` in
its status, kept in each backend's record), and on Kubernetes the server says where a restarted
job resumed from, as the local master does ("... (restart 1 of 3 (trainer 1 failed); resumed from
step 40)."), reading the checkpoints in the home (the in-cluster master cannot)."""

from __future__ import annotations

import asyncio
import json
import os
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from paddle_nbext import display
from paddle_nbext.model.contract import ATTEMPT_LABEL, RESTART_ANNOTATION, RESUMED_FROM_ANNOTATION, SPEC_KEY
from paddle_nbext.model.status import JobStatus
from paddle_nbext_server.backends.kubernetes.backend import KubernetesBackend
from paddle_nbext_server.backends.kubernetes.build import manifests
from paddle_nbext_server.backends.kubernetes.status import resume_note
from paddle_nbext_server.backends.kubernetes.status.home_notes import HomeNotes
from paddle_nbext_server.backends.kubernetes.status.job_status import job_status, link_record
from paddle_nbext_server.backends.local.records import JobRecord, StatusRecord
from paddle_nbext_server.events import EventHub
from paddle_nbext_server.jobfiles import checkpoints
from paddle_nbext_server.runtime import paddle_nbext_fence, paddle_nbext_job, replicas

LINK = {"job": "ck", "step": 10}


def status(**changes: Any) -> JobStatus:
    base: dict[str, Any] = {
        "name": "ck-2",
        "owner": "alice",
        "backend": "kubernetes",
        "phase": "Running",
        "message": "Training is running.",
        "spec": {"trainers": 2},
        "created": "2026-12-01T10:00:00Z",
        "started": "2026-12-01T10:00:05Z",
    }
    return JobStatus(**{**base, **changes})


# ------------------------------------------------------------------------ the link in the status
def test_the_status_carries_the_link_only_for_a_resumed_job() -> None:
    linked = status(resumed_from=dict(LINK))
    body = linked.to_dict()
    assert body["resumed_from"] == LINK
    assert JobStatus.from_dict(body).resumed_from == LINK
    assert "resumed_from" not in status().to_dict()  # a job submitted as new: as before
    assert JobStatus.from_dict({**status().to_dict(), "resumed_from": "not a link"}).resumed_from is None
    assert JobStatus.from_dict({**body, "resumed_from": {"job": "ck"}}).resumed_from == {"job": "ck", "step": None}


def test_status_and_the_kernel_display_say_which_job_it_resumed() -> None:
    text = display.status_text(status(resumed_from=dict(LINK)))
    assert "  resumed from job ck at step 10" in text.splitlines(), text
    assert "resumed from job ck at step 10" in display.status_html(status(resumed_from=dict(LINK)))
    assert "resumed from" not in display.status_text(status()) and "paddle-resumed-from" not in display.status_html(status())


def test_local_records_keep_the_link_in_job_json_and_status_json_stays_as_it_was() -> None:
    job = JobRecord(owner="alice", spec={"trainers": 1}, created="2026-12-01T10:00:00Z", resumed_from=dict(LINK))
    assert JobRecord.from_json(job.to_json()).resumed_from == LINK
    assert "resumed_from" not in json.loads(JobRecord(owner="alice").to_json())
    assert JobRecord.from_json(JobRecord(owner="alice").to_json()).resumed_from is None
    record = StatusRecord(status(backend="local"))
    assert "resumed_from" not in json.loads(record.to_json())
    assert StatusRecord.from_json(StatusRecord(status(resumed_from=dict(LINK))).to_json()).status.resumed_from == LINK


def record(restart: dict[str, Any] | None = None, link: dict[str, Any] | None = None, max_restarts: int = 3) -> dict[str, Any]:
    made: dict[str, Any] = {
        "metadata": {"name": "ck-2-alice", "uid": "u1", "annotations": {"paddle-nbext/owner": "alice"}},
        "data": {SPEC_KEY: json.dumps({"job_name": "ck-2", "trainers": 2, "pservers": 0, "max_restarts": max_restarts})},
    }
    if restart is not None:
        made["metadata"]["annotations"][RESTART_ANNOTATION] = json.dumps(restart)
    if link is not None:
        link_record(made, link)
    return made


def test_a_kubernetes_record_keeps_the_link_so_a_restarted_server_reads_it() -> None:
    linked = record(link=dict(LINK))
    assert json.loads(linked["metadata"]["annotations"][RESUMED_FROM_ANNOTATION]) == LINK
    assert job_status(linked, [])[0].resumed_from == LINK
    ended = json.loads(json.dumps(linked))
    ended["metadata"]["annotations"]["paddle-nbext/status"] = json.dumps({"phase": "Succeeded", "message": "done", "replicas": []})
    assert job_status(ended, [])[0].resumed_from == LINK  # the final status is the record's too
    assert job_status(record(), [])[0].resumed_from is None


# ------------------------------------------------------------------- Kubernetes: "resumed from step N"
def save(directory: Path, step: int, attempt: str, when: float | None = None) -> None:
    """A complete checkpoint as `save_checkpoint` publishes it, saved by `attempt` at `when`."""
    path = directory / f"{paddle_nbext_job.STEP_PREFIX}{step:0{paddle_nbext_job.STEP_DIGITS}d}"
    path.mkdir(parents=True)
    (path / "state.txt").write_text(str(step))
    manifest = {"step": step, "time": when if when is not None else time.time(), "ranks": 1, "attempt": attempt}
    (path / paddle_nbext_job.MANIFEST).write_text(json.dumps(manifest))


def fence(directory: Path, attempt: str, began: float) -> None:
    """The marker the launchers of `attempt` leave when its replicas start (paddle_nbext_fence)."""
    markers = directory / paddle_nbext_fence.FENCE_SUBDIR
    markers.mkdir(parents=True, exist_ok=True)
    (markers / attempt).write_text(f"{began!r}\n")


def pod(index: int, attempt: int, *, started: str = "2026-12-01T10:00:05Z", jobset: str | None = None) -> dict[str, Any]:
    labels = {"paddle-nbext/role": "trainer", replicas.INDEX_KEY: str(index), ATTEMPT_LABEL: str(attempt)}
    if jobset is not None:
        labels[replicas.JOBSET_RESTART_LABEL] = jobset
    return {
        "metadata": {"name": f"ck-2-alice-trainer-{index}-{attempt}", "labels": labels, "creationTimestamp": started},
        "status": {"phase": "Running", "containerStatuses": [{"name": "main", "state": {"running": {"startedAt": started}}}]},
    }


def test_the_checkpoint_a_restart_resumed_from_is_the_latest_of_an_earlier_attempt(tmp_path: Path) -> None:
    directory = tmp_path / "checkpoints"
    started = time.time() - 5
    save(directory, 20, "0", started - 60)
    save(directory, 40, "0", started - 30)
    save(directory, 60, "1", started + 2)  # attempt 1 saved its own since: not where it resumed from
    fence(directory, "0", started - 90)
    fence(directory, "1", started - 1)
    found = checkpoints.resumed_checkpoint(directory, "1.", started)
    assert found is not None and found.step == 40
    assert checkpoints.resumed_words(found) == "resumed from step 40"
    # Retention took the checkpoint it resumed from: nothing to name (the server's cache keeps
    # what it found while it was there).
    os.rename(directory / "step-000000000040", directory / ".deleting-step-40")
    os.rename(directory / "step-000000000020", directory / ".deleting-step-20")
    assert checkpoints.resumed_checkpoint(directory, "1.", started) is None
    # A queue's re-admission keeps the attempt: its own checkpoint from before the start counts.
    assert checkpoints.resumed_checkpoint(directory, "1.", started + 10) is not None
    # No directory, or one that cannot be read: no answer, no exception.
    assert checkpoints.resumed_checkpoint(tmp_path / "missing", "1.", started) is None
    if os.geteuid() != 0:
        directory.chmod(0)
        try:
            assert checkpoints.resumed_checkpoint(directory, "1.", started) is None
        finally:
            directory.chmod(0o755)


def test_a_resumed_jobs_linked_checkpoint_names_the_job_it_came_from(tmp_path: Path) -> None:
    source = tmp_path / "old"
    save(source, 10, "0")
    linked = checkpoints.link_checkpoint(paddle_nbext_job.latest(source), tmp_path / "new", "ck")  # type: ignore[arg-type]
    fence(tmp_path / "new", "0", time.time())
    found = checkpoints.resumed_checkpoint(tmp_path / "new", "0.", time.time())
    assert found is not None and found.path == linked.path
    assert checkpoints.resumed_words(found) == "resumed from step 10 of job ck"


def test_restart_words_read_like_the_local_masters() -> None:
    failed = {
        "attempt": 1,
        "failures": 1,
        "message": "restart 1 of 3: trainer 1 failed with Exit code 1 (ValueError: x); all replicas restarting",
    }
    assert resume_note.restart_words(record(failed), 0) == "restart 1 of 3 (trainer 1 failed)"
    evicted = {
        "attempt": 2,
        "failures": 1,
        "disruptions": 1,
        "message": "restart 2: trainer 1 was evicted (a node drain or an eviction); all replicas restarting "
        "(evictions and preemptions do not use up max_restarts)",
    }
    assert resume_note.restart_words(record(evicted), 0) == "restart 2 (trainer 1 was evicted)"
    assert resume_note.restart_words(record(), 2) == "restart 2"  # jobset mode: JobSet's count
    assert resume_note.restart_words(record(), 0) == ""


def test_which_statuses_ask_for_the_checkpoint() -> None:
    restarted = record(
        {"attempt": 1, "failures": 1, "message": "restart 1 of 3: trainer 0 failed with Exit code 3; all replicas restarting"}
    )
    pods = [pod(0, 1), pod(1, 1)]
    asked = resume_note.question(restarted, pods, status())
    assert asked is not None and asked.attempt == "1." and asked.restart == "restart 1 of 3 (trainer 0 failed)"
    assert asked.started == datetime(2026, 12, 1, 10, 0, 5, tzinfo=timezone.utc).timestamp()
    assert resume_note.question(record(), [pod(0, 0)], status()) is None  # never restarted
    assert resume_note.question(restarted, [pod(0, 0)], status()) is None  # no pod of the current attempt
    assert resume_note.question(restarted, pods, status(phase="Failed")) is None
    first = resume_note.question(record(link=dict(LINK)), [pod(0, 0)], status(resumed_from=dict(LINK)))
    assert first is not None and first.restart == "" and first.attempt == "0."
    jobset = resume_note.question(record(), [pod(0, 0, jobset="1"), pod(0, 0, jobset="2")], status())
    assert jobset is not None and jobset.attempt == "0.2" and jobset.restart == "restart 2"


def test_the_note_goes_where_the_local_master_puts_it() -> None:
    note = "restart 1 of 3 (trainer 1 failed); resumed from step 40"
    assert resume_note.with_note(status(), note).message == f"Training is running ({note})."
    assert resume_note.with_note(status(message="1/2 trainers finished."), note).message == f"1/2 trainers finished ({note})."
    ended = status(phase="Succeeded", message="All 2 trainers finished successfully.")
    assert resume_note.with_note(ended, note).message == f"All 2 trainers finished successfully ({note})."
    stopping = status(phase="Pending", message="restart 1 of 3: trainer 1 failed; all replicas restarting")
    assert resume_note.with_note(stopping, note) is stopping
    twice = resume_note.with_note(resume_note.with_note(status(), note), note)
    assert twice.message == f"Training is running ({note})."


def test_the_server_says_where_a_restarted_kubernetes_job_resumed_from(tmp_path: Path) -> None:
    """The reconciler's share: the home read off the event loop, once per attempt, the message
    decorated from the cache after, and nothing said (nor raised) while it cannot be read."""
    home = tmp_path / "home"
    directory = Path(manifests.checkpoint_dir(str(home), "ck-2"))
    started = time.time() - 5
    save(directory, 20, "0", started - 60)
    save(directory, 40, "0", started - 30)
    fence(directory, "0", started - 90)
    fence(directory, "1", started - 1)
    restarted = record(
        {"attempt": 1, "failures": 1, "message": "restart 1 of 3: trainer 1 failed with Exit code 1; all replicas restarting"}
    )
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started))

    async def scenario() -> list[str]:
        backend = KubernetesBackend(events=EventHub(), home_path=str(home))
        key = "ck-2-alice"
        backend.view.pods_by_job[key] = {p["metadata"]["name"]: p for p in (pod(0, 1, started=stamp), pod(1, 1, started=stamp))}
        marked: list[str] = []
        # The reconciler's part that reads the home, as the backend makes it, marking into a list.
        notes = HomeNotes(backend.settings, backend.view, marked.append, backend.log)
        running = status(started=stamp)
        backend.view.statuses[key] = running
        said = [notes.with_resume_note(key, restarted, running).message]  # not read yet: the policy's words
        await asyncio.gather(*backend.view.tasks)
        assert marked == [key], marked  # read: the job's status is computed again
        said.append(notes.with_resume_note(key, restarted, running).message)
        # The attempt saves its own and retention removes the one it resumed from: the words stay.
        save(directory, 60, "1", time.time())
        for step in (20, 40):
            os.rename(directory / f"step-{step:012d}", directory / f".deleting-{step}")
        said.append(notes.with_resume_note(key, restarted, running).message)
        assert not backend.view.tasks, "read once per attempt"
        ended = status(phase="Succeeded", message="All 2 trainers finished successfully.", started=stamp)
        backend.view.pods_by_job[key] = {}  # a success's Jobs are deleted with their pods
        said.append(notes.with_resume_note(key, restarted, ended).message)
        # Another job whose home cannot be read (gone): nothing said, nothing raised.
        other = record({"attempt": 1, "failures": 1, "message": "restart 1 of 3: trainer 0 failed; all replicas restarting"})
        other["data"][SPEC_KEY] = json.dumps({"job_name": "gone", "trainers": 1, "max_restarts": 3})
        backend.view.pods_by_job["gone-alice"] = {"p": pod(0, 1, started=stamp)}
        backend.view.statuses["gone-alice"] = status(name="gone", started=stamp)
        said.append(notes.with_resume_note("gone-alice", other, status(name="gone", started=stamp)).message)
        await asyncio.gather(*backend.view.tasks)
        said.append(notes.with_resume_note("gone-alice", other, status(name="gone", started=stamp)).message)
        for task in list(backend.view.tasks):
            task.cancel()
        return said

    said = asyncio.run(scenario())
    note = "restart 1 of 3 (trainer 1 failed); resumed from step 40"
    assert said == [
        "Training is running.",
        f"Training is running ({note}).",
        f"Training is running ({note}).",
        f"All 2 trainers finished successfully ({note}).",
        "Training is running.",
        "Training is running.",
    ], said


def test_what_a_cut_off_replica_published_as_the_restart_began_is_never_named_as_resumed_from(tmp_path: Path) -> None:
    """Issue 46: a trainer of attempt 0, cut off, published step 220 0.075 s after the restart
    began and before attempt 1's replicas raised their fence; they resumed from 210, as the fence
    says.  The status must not say 220: until the marker is there the answer is unknown (asked
    again), and with it the fence leaves 220 out."""
    directory = tmp_path / "checkpoints"
    began = time.time() - 5
    fence(directory, "0", began - 600)
    save(directory, 210, "0", began - 3)
    save(directory, 220, "0", began + 0.075)
    assert checkpoints.resumed_checkpoint(directory, "1.", began + 1) is None  # replicas not started yet
    fence(directory, "1", began)
    found = checkpoints.resumed_checkpoint(directory, "1.", began + 1)
    assert found is not None and checkpoints.resumed_words(found) == "resumed from step 210"


def test_a_server_started_after_a_restarted_job_ended_still_says_how_it_got_there(tmp_path: Path) -> None:
    """Issue 46: the in-cluster master restarted a job and saw it succeed while no notebook server
    ran; the server started afterwards found no pods and said only "All 2 trainers finished
    successfully.".  The record's restarts and the home's checkpoints carry the story."""
    restarted = record({"attempt": 1, "failures": 0, "disruptions": 1, "message": "restart 1: node n2 stopped responding; trainer 1 lost"})
    ended = status(phase="Succeeded", message="All 2 trainers finished successfully.")
    asked = resume_note.question(restarted, [], ended)
    assert asked is not None and asked.attempt == "1." and asked.restart == "restart 1 (node n2 stopped responding; trainer 1 lost)"
    assert resume_note.question(record(), [], ended) is None  # never restarted: nothing to say
    assert resume_note.question(restarted, [], status()) is None  # running between two attempts: wait for its pods

    home = tmp_path / "home"
    directory = Path(manifests.checkpoint_dir(str(home), "ck-2"))
    began = time.time() - 60
    fence(directory, "0", began - 600)
    save(directory, 40, "0", began - 5)
    fence(directory, "1", began)
    save(directory, 60, "1", began + 20)

    async def scenario() -> str:
        backend = KubernetesBackend(events=EventHub(), home_path=str(home))
        key = "ck-2-alice"
        notes = HomeNotes(backend.settings, backend.view, lambda _job: None, backend.log)
        backend.view.statuses[key] = ended
        notes.with_resume_note(key, restarted, ended)
        await asyncio.gather(*backend.view.tasks)
        return notes.with_resume_note(key, restarted, ended).message

    said = asyncio.run(scenario())
    assert said == "All 2 trainers finished successfully (restart 1 (node n2 stopped responding; trainer 1 lost); resumed from step 40)."
