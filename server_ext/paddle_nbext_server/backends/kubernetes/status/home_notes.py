"""What the server reads from a job's folder in the home into its status message (the in-cluster
master cannot read the home): the checkpoint a restarted job resumed from (status/resume_note.py) and,
while the launchers build the job's environment, how far they are (runtime/environments.py).

A part of `KubernetesBackend` (backend.py): the reconciler decorates each status it computes here;
the home is read in threads, and a read that brings news asks for the job's status again (`mark`)."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from paddle_nbext.model.contract import Phase
from paddle_nbext.model.status import JobStatus

from ....jobfiles import checkpoints
from ....runtime import environments
from ..build import manifests
from ..job_view import JobView
from ..settings import BackendSettings
from . import resume_note

#: When the checkpoint a job's current attempt resumed from is not found, its checkpoints are read
#: again this many times, this many seconds apart (a Resume links its checkpoint just after the
#: submit, so the first read may come before it).
RESUME_RECHECKS = 3
RESUME_RECHECK = 5.0
#: Seconds between reads of a job's environment status while its launchers build it.
ENVIRONMENT_RECHECK = 1.0


class HomeNotes:
    """The resume and environment notes of each job, read from the home."""

    def __init__(self, settings: BackendSettings, view: JobView, mark: Callable[[str], None], log: logging.Logger) -> None:
        self.settings = settings
        self.view = view
        self.mark = mark  # asks for the job's status again
        self.log = log
        # The checkpoint each job's current attempt resumed from (`resume_note`), read from the
        # home in a thread: job -> (attempt, its note or "" for none, reads of that attempt).
        self._resume_notes: dict[str, tuple[str, str, int]] = {}
        self._resume_reading: set[str] = set()
        # While a job's launchers build its environment (`runtime/environments.py`), the status
        # file they write in the home: job -> (the step has ended, "Preparing environment: ..." or "").
        self._environment_notes: dict[str, tuple[bool, str]] = {}
        self._environment_reading: set[str] = set()

    def resumed(self, job: str) -> tuple[str, str] | None:
        """(attempt, where it resumed from) once known, for the timeline."""
        known = self._resume_notes.get(job)
        return (known[0], known[1].rsplit("; ", 1)[-1]) if known and known[1] else None

    def forget(self, job: str) -> None:
        """The job is gone: its notes with it."""
        self._resume_notes.pop(job, None)
        self._environment_notes.pop(job, None)

    def with_resume_note(self, job: str, record: dict[str, Any], status: JobStatus) -> JobStatus:
        """After a whole-job restart (or in a job Resume started), the message says which
        checkpoint the replicas resumed from, as the local master's does (`resume_note`).  The
        home is read in a thread, once per attempt (a found checkpoint stays the answer: a
        later save of the attempt or retention does not change where it resumed from; none
        found is read again `RESUME_RECHECKS` times, `RESUME_RECHECK` seconds apart); until then,
        and whenever the home cannot be read, the message is the policy's alone."""
        asked = resume_note.question(record, self.view.pods(job), status)
        known = self._resume_notes.get(job)
        if asked is None:
            # A success whose pods are gone already: the note its run had.
            return resume_note.with_note(status, known[1]) if known and status.phase == Phase.SUCCEEDED else status
        if known is not None and known[0] == asked.attempt and (known[1] or known[2] > RESUME_RECHECKS):
            return resume_note.with_note(status, known[1])
        if job not in self._resume_reading:
            self._resume_reading.add(job)
            self.view.spawn(self._read_resume(job, status.name, asked))
        return resume_note.with_note(status, known[1]) if known is not None and known[0] == asked.attempt else status

    def with_environment_note(self, job: str, status: JobStatus) -> JobStatus:
        """While the replicas of a job with a requirements file build its environment, the
        message says so ("Preparing environment: 12 packages (uv)"), as the local master's does.
        The in-cluster master cannot read the home; the server reads the launchers' status file
        there in a thread, again every `ENVIRONMENT_RECHECK` seconds until the step has ended."""
        if not status.spec.get("requirements") or status.phase != Phase.RUNNING:
            return status
        ended, note = self._environment_notes.get(job, (False, ""))
        if not ended and job not in self._environment_reading:
            self._environment_reading.add(job)
            self.view.spawn(self._read_environment(job, status.name))
        return dataclasses.replace(status, message=note) if note else status

    async def _read_environment(self, job: str, name: str) -> None:
        logs_dir = Path(manifests.job_folder(self.settings.home_path, name)) / "logs"
        try:
            state = await asyncio.to_thread(environments.read_status, str(logs_dir))
        finally:
            self._environment_reading.discard(job)
        ended = state is not None and state.get("state") in ("ready", "failed")
        note = (environments.phase_message(state) or "") if state else ""
        before = self._environment_notes.get(job)
        self._environment_notes[job] = (ended, note)
        if job not in self.view.statuses:
            return
        if before is None or before[1] != note:
            self.mark(job)
        if not ended:
            asyncio.get_running_loop().call_later(ENVIRONMENT_RECHECK, self.mark, job)

    async def _read_resume(self, job: str, name: str, asked: resume_note.Question) -> None:
        directory = Path(manifests.checkpoint_dir(self.settings.home_path, name))

        def read() -> str:
            found = checkpoints.resumed_checkpoint(directory, asked.attempt, asked.started)
            return "" if found is None else resume_note.note_of(asked, checkpoints.resumed_words(found))

        try:
            note = await asyncio.to_thread(read)
        except Exception as error:  # never the status's problem
            self.log.debug("paddle-nbext: could not read the checkpoints of %s: %s", name, error)
            note = ""
        finally:
            self._resume_reading.discard(job)
        before = self._resume_notes.get(job)
        reads = before[2] + 1 if before is not None and before[0] == asked.attempt else 1
        self._resume_notes[job] = (asked.attempt, note, reads)
        if job not in self.view.statuses:
            return  # deleted meanwhile
        if note and (before is None or before[:2] != (asked.attempt, note)):
            self.mark(job)
        elif not note and reads <= RESUME_RECHECKS:
            asyncio.get_running_loop().call_later(RESUME_RECHECK, self.mark, job)
