"""The in-memory view of the jobs dir: per job dir, the last status read and the signatures of
the files it was read from.

Listing answers from this memory, so `list_jobs` costs no file reads in steady state; a scan (the
backend's watcher task calls it every poll) re-reads only the job dirs whose files changed and
turns the changes into `JobEvent`s; `get` compares two `stat`s against the memory and reads
through only when the files changed, so it is never stale.  Scans also notice masters that died
without recording an end and record the job as Failed.

Called from worker threads (the watcher task, submit, cancel) and read on the event loop, hence
the lock around the map.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from paddle_nbext.model.contract import Phase
from paddle_nbext.model.status import JobStatus

from ...events import DELETED, UPDATED, JobEvent
from ...jobfiles.job_requirements import ENVS_DIR
from ..base import JobNotFound
from . import pending_end
from .store import JobFiles, JobStore, Signature, signature

#: Seconds between checks that an ended job's job.json is still the same one (a job dir
#: replaced under the same name by another server).  Ended jobs are most of a long-lived jobs
#: dir, and stat-ing each of them on every poll kept a core busy for nothing.
ENDED_JOB_RECHECK = 2.0
#: Seconds between checks that a running job's master is still alive.
MASTER_CHECK_EVERY = 1.0
MASTER_LOST = "The job master stopped without recording an end (was it killed?); its replicas were stopped."
log = logging.getLogger(__name__)


#: The signatures that say a job's status changed: status.json's and its pending end's
#: (`pending_end`: the end its master keeps aside while the job dir cannot take it).
StatusSignature = tuple[Signature | None, Signature | None]


def status_signature(job_dir: Path) -> StatusSignature:
    return signature(job_dir / "status.json"), pending_end.signature(job_dir)


@dataclass
class Seen:
    """What was last read of one job dir, and the signatures of the files it was read from.

    `status` is shared with callers of `list_jobs`/`get_job` and never changed in place: a change
    on disk makes a new entry, so "same object" means "same status" (the list handler relies on
    that to reuse each job's JSON).  `reported` is the status.json signature the watcher last
    published an event for, kept apart so a read-through by `get` never swallows an event."""

    files: JobFiles
    signature: StatusSignature  # of status.json (None: not written yet) and of a pending end
    job_signature: Signature | None  # of job.json (a new one means the dir was re-created)
    reported: StatusSignature | None = None
    checked_alive: float = 0.0

    @property
    def owner(self) -> str:
        return self.files.owner

    @property
    def status(self) -> JobStatus:
        return self.files.record.status

    @property
    def settled(self) -> bool:
        """Nothing this server does can change the job any more: it ended, a newer release wrote
        it, or its records are damaged (only its files changing can).  Such entries are only
        re-checked now and then."""
        if self.signature[1] is not None:
            return False  # an end kept aside (`pending_end`): status.json is yet to change
        return self.status.terminal or self.files.refused is not None or self.files.damaged is not None


def _not_found(name: str) -> JobNotFound:
    return JobNotFound(f"There is no job named '{name}'.")


class JobWatcher:
    """The memory of one jobs dir (`store.root`)."""

    def __init__(self, store: JobStore) -> None:
        self.store = store
        self._seen: dict[str, Seen] = {}
        self._lock = threading.Lock()
        self._next_ended_check = 0.0  # monotonic time of the next check of ended jobs' job.json
        self._listed_signature: Signature | None = None  # the jobs dir as last listed
        self._listed_names: frozenset[str] = frozenset()
        self._orphans_swept = False  # the first scan with check_alive stops orphans of every job
        self._failing: dict[str, str] = {}  # job dir -> the error last logged for it (logged once)

    # ------------------------------------------------------------------ the map
    def _entry(self, files: JobFiles, status_signature: StatusSignature, job_signature: Signature | None, previous: Seen | None) -> Seen:
        """A new entry; the watcher's bookkeeping carries over from the one it replaces."""
        return Seen(
            files,
            status_signature,
            job_signature,
            reported=previous.reported if previous is not None else None,
            checked_alive=previous.checked_alive if previous is not None else 0.0,
        )

    def _store(self, name: str, entry: Seen) -> None:
        with self._lock:
            self._seen[name] = entry

    def forget(self, name: str) -> Seen | None:
        with self._lock:
            return self._seen.pop(name, None)

    def remember_submitted(self, name: str, files: JobFiles) -> None:
        """A job this server just created: known at once, its creation already published."""
        job_dir = self.store.root / name
        entry = Seen(files, status_signature(job_dir), signature(job_dir / "job.json"))
        entry.reported, entry.checked_alive = entry.signature, time.monotonic()
        self._store(name, entry)

    # ------------------------------------------------------------------ scanning
    def _job_names(self, force: bool) -> set[str]:
        """The job dirs, listed again only when the jobs dir itself changed (a job dir was added
        or removed), which its own signature tells at the cost of one `stat`, or when `force`d
        (file systems with coarse timestamps can hide a change made within the same tick)."""
        root_signature = signature(self.store.root)
        if not force and root_signature is not None and root_signature == self._listed_signature:
            return set(self._listed_names)
        try:
            names = {e.name for e in os.scandir(self.store.root) if e.is_dir() and not e.name.startswith(".") and e.name != ENVS_DIR}
        except OSError:
            names = set()
        self._listed_signature, self._listed_names = root_signature, frozenset(names)
        return names

    def scan(self, report: bool, check_alive: bool = True) -> list[JobEvent]:
        """One pass over the jobs dir: brings the memory up to date and returns changed, new and
        deleted jobs as events; with `check_alive`, masters that died without a terminal status
        are recorded as Failed.  Unchanged running jobs cost two `stat`s and no reads; ended ones
        cost nothing but one `stat` every `ENDED_JOB_RECHECK` seconds."""
        events: list[JobEvent] = []
        now = time.monotonic()
        check_ended = now >= self._next_ended_check
        if check_ended:
            self._next_ended_check = now + ENDED_JOB_RECHECK
        names = self._job_names(force=check_ended)
        with self._lock:
            known = dict(self._seen)
        for name, gone in known.items():
            if name not in names:
                self.forget(name)
                events.append(JobEvent(DELETED, gone.owner, gone.status.name))
        if check_alive and not self._orphans_swept:
            self._orphans_swept = True
            for pid in self.store.stop_orphans():
                log.warning("paddle-nbext: stopped process %d of a local job whose master is gone", pid)
        for name in names:
            try:
                event = self._scan_job(name, known.get(name), now, check_ended, check_alive, events)
            except Exception as error:  # noqa: BLE001 - one bad job dir must not stop the others
                self._report_failure(name, error)
                continue
            self._failing.pop(name, None)
            if event is not None and report:
                events.append(event)
        return events

    def _report_failure(self, name: str, error: Exception) -> None:
        """Log a job dir that cannot be scanned once per distinct error, not on every poll."""
        text = f"{type(error).__name__}: {error}"
        if self._failing.get(name) != text:
            self._failing[name] = text
            log.warning("paddle-nbext: cannot read the local job dir %s: %s", self.store.root / name, text)

    def _scan_job(
        self, name: str, seen: Seen | None, now: float, check_ended: bool, check_alive: bool, events: list[JobEvent]
    ) -> JobEvent | None:
        """Bring one job dir's entry up to date (`scan`); the UPDATED event to publish, if any.
        A DELETED event for a dir that now holds another job goes straight to `events`."""
        root = str(self.store.root)
        if not check_ended and seen is not None and seen.settled and seen.reported == seen.signature:
            return None  # an ended job no longer changes; its removal shows in the listing above
        job_signature = signature(f"{root}/{name}/job.json")  # str paths: this runs per job per poll
        if seen is not None and seen.job_signature != job_signature:
            # job.json vanished (deleted by another server) or the dir holds a new job now
            self.forget(name)
            events.append(JobEvent(DELETED, seen.owner, seen.status.name))
            seen = None
        if job_signature is None or (seen is not None and seen.settled and seen.status.terminal and seen.reported == seen.signature):
            return None
        job_dir = self.store.root / name
        # An end the master keeps aside (`pending_end`) changes what the job shows as much as
        # status.json does: either file's change means reading the job again.
        current = (signature(f"{root}/{name}/status.json"), pending_end.signature(job_dir))
        entry = seen
        if entry is None or current != entry.signature:
            try:
                files = self.store.load(job_dir)
            except (OSError, ValueError):
                return None  # not a job dir (yet), or a damaged one that names no owner
            entry = self._entry(files, current, job_signature, seen)
            self._store(name, entry)
        if check_alive and not entry.settled and now - entry.checked_alive >= MASTER_CHECK_EVERY:
            entry.checked_alive = now
            if not self.store.master_alive(job_dir, entry.files.job):
                record = self.store.mark_lost(job_dir, Phase.FAILED, MASTER_LOST)
                files = dataclasses.replace(entry.files, record=record)
                entry = self._entry(files, status_signature(job_dir), job_signature, entry)
                self._store(name, entry)
        if entry.reported != entry.signature:
            event = JobEvent(UPDATED, entry.owner, entry.status.name, entry.status.to_dict())
            entry.reported = entry.signature
            return event
        return None

    # ------------------------------------------------------------------ answering
    def from_memory(self, owner: str) -> list[JobStatus]:
        """The owner's jobs as last read, newest first."""
        with self._lock:
            entries = list(self._seen.values())
        result = [entry.status for entry in entries if entry.owner == owner]
        result.sort(key=lambda s: (s.created or "", s.name), reverse=True)
        return result

    def read_through(self, name: str, owner: str) -> JobStatus:
        """Read the job from disk into memory (signatures taken before reading, so a write in
        between shows as a change next time).  Memory is keyed by job dir (names are per user)."""
        job_dir = self.store.job_dir(name, owner)
        key = job_dir.name
        current = status_signature(job_dir)
        job_signature = signature(job_dir / "job.json")
        with self._lock:
            old = self._seen.get(key)
        if old is not None and job_signature is not None and (current, job_signature) == (old.signature, old.job_signature):
            entry = old
        else:
            try:
                files = self.store.load(job_dir)
            except (OSError, ValueError):
                raise _not_found(name) from None
            same_job = old if old is not None and old.job_signature == job_signature else None
            entry = self._entry(files, current, job_signature, same_job)
            self._store(key, entry)
        if entry.owner != owner:
            raise _not_found(name)
        return entry.status

    def get(self, name: str, owner: str) -> JobStatus:
        """The job's status, from memory when its files did not change since they were read."""
        job_dir = self.store.job_dir(name, owner)
        with self._lock:
            seen = self._seen.get(job_dir.name)
        if (
            seen is not None
            and seen.job_signature is not None
            and signature(job_dir / "job.json") == seen.job_signature
            and status_signature(job_dir) == seen.signature
        ):
            if seen.owner != owner:
                raise _not_found(name)
            return seen.status
        return self.read_through(name, owner)
