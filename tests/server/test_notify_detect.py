"""Which events a job's status and timeline hold (`notify.detect`), and the outbox's dedup: each
event is found once, in the words the health rules wrote, a job met after it began brings no old
news, and a second copy of an event (a look cut short before its cursors were saved) is dropped."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from paddle_nbext.model.contract import now_iso
from paddle_nbext.model.status import JobStatus
from paddle_nbext_server.notify.detect import Cursors, phase_event, timeline_events
from paddle_nbext_server.notify.outbox import Delivery, Outbox

MEMORY = "Memory: trainer 1 uses 1.8 GiB of its 2 GiB limit; the kernel stops it (OOMKilled) if it goes over."
STALL = "Stalled: no progress for 10 min since step 1234; trainer 1 last wrote at 14:02:05."


def status(phase: str, created: str, message: str = "") -> JobStatus:
    return JobStatus(name="bert-3", owner="ada", backend="local", phase=phase, message=message, spec={}, created=created)


def entry(seq: int, kind: str, text: str) -> dict[str, Any]:
    return {"seq": seq, "t": now_iso(), "kind": kind, "text": text}


def test_a_new_jobs_warnings_start_and_end_are_found_once_in_its_words(tmp_path: Path) -> None:
    cursors = Cursors(tmp_path, "ada")
    job = status("Running", now_iso())
    cursor = cursors.cursor(job)
    entries = [
        entry(1, "submitted", "Submitted."),
        entry(2, "waiting", "Waiting for resources: the job needs 2 CPU (free: 0 of 2)."),
        entry(3, "admitted", "Admitted: 2 CPU."),
        entry(4, "warning", MEMORY),
        entry(5, "warning", STALL),
        entry(6, "recovered", "Progress again after 11 min without any (trainer 1)."),
    ]
    found = timeline_events(job, cursor, entries)
    assert [(event.kind, event.words) for event in found] == [
        ("started", "Admitted: 2 CPU."),
        ("memory", MEMORY.removeprefix("Memory: ")),
        ("stalled", STALL.removeprefix("Stalled: ")),
    ]
    assert timeline_events(job, cursor, entries) == []  # the cursor moved on
    ended = status("Failed", job.created, "trainer 1 failed with exit code 1: IndexError: list index out of range")
    failed = phase_event(ended, cursor)
    assert failed is not None and failed.kind == "failed" and failed.words == ended.message

    cursor.phase = "Failed"
    cursors.save()
    again = Cursors(tmp_path, "ada")  # a restarted server
    assert phase_event(ended, again.cursor(ended)) is None
    assert timeline_events(ended, again.cursor(ended), entries) == []


def test_a_job_met_after_it_began_brings_no_old_news(tmp_path: Path) -> None:
    cursors = Cursors(tmp_path, "ada")
    old = status("Running", "2020-01-01T00:00:00.000Z")
    cursor = cursors.cursor(old)
    assert timeline_events(old, cursor, [entry(1, "warning", STALL), entry(2, "waiting", "Waiting.")]) == []
    assert cursor.seq == 2 and cursor.waited
    [started] = timeline_events(old, cursor, [entry(3, "admitted", "Admitted: 1 CPU.")])
    assert started.kind == "started"
    assert phase_event(status("Cancelled", old.created), cursor) is None  # a cancel is the user's own doing


def test_the_outbox_keeps_one_copy_of_an_event_and_marks_it_sent(tmp_path: Path) -> None:
    job = status("Failed", now_iso(), "trainer 0 failed")
    event = phase_event(job, Cursors(tmp_path, "ada").cursor(job))
    assert event is not None
    outbox = Outbox(tmp_path)
    outbox.open()
    delivery = Delivery(f"{event.id}-webhook", "ada", "webhook", "https://hooks.example.org/x", "json", "https://lab/", event)
    assert outbox.add(delivery) is True
    assert outbox.add(delivery) is False  # derived again: dropped
    [waiting] = outbox.waiting()
    assert waiting.event == event and waiting.target == "https://hooks.example.org/x"
    outbox.mark_sent(waiting)
    assert outbox.waiting() == [] and outbox.add(delivery) is False  # sent: never again


def test_a_job_submitted_after_the_settings_were_saved_is_news_however_late_the_first_look(tmp_path: Path) -> None:
    """The server's first look at a user may come seconds after they saved their settings and
    submitted a job (a busy machine): that job's stall is news, not old news."""
    saved = "2026-12-08T00:00:00.000Z"
    job = status("Running", "2026-12-08T00:00:01.000Z")  # submitted a second after the settings
    cursors = Cursors(tmp_path, "ada", since=saved)  # first looked at later: now_iso() would be too late
    [stalled] = timeline_events(job, cursors.cursor(job), [entry(1, "warning", STALL)])
    assert stalled.kind == "stalled"
    late = Cursors(tmp_path / "other", "ada")  # without the settings' time: the first look's
    assert timeline_events(job, late.cursor(job), [entry(1, "warning", STALL)]) == []
