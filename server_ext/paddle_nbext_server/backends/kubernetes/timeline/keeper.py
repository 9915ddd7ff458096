"""The server's side of Kubernetes jobs' timelines: what the reconcile pass derives from the
objects (timeline_objects) and what the home says (timeline_home) goes into each job's
`timeline.jsonl` (timeline_store), written in a worker thread, never on the event loop; and the
warnings that stand now (the replicas' health files) for the job's message.

The reconcile pass `offer`s a job's object-derived entries whenever it recomputes the job (a
watched object changed); a pass in a thread runs only when some key is new or the home is due a
look (`home=True`: the reconciler asks every `HOME_INTERVAL` seconds for running jobs, and once
more when a job ends).  At most one pass per job runs at a time; an offer made meanwhile runs
one more pass after it, with the newest objects.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from paddle_nbext.model.contract import Phase
from paddle_nbext.model.status import JobStatus

from ....jobfiles.metrics import MetricsFile
from .home import ActiveWarning, HomeReader
from .objects import Derived
from .store import KeyedTimeline, TimelineFiles, ensure_dir

#: Seconds between looks at a running job's folder in the home (stat signatures: cheap).
HOME_INTERVAL = 2.0
#: Jobs forgotten (record gone) whose last pass a delete may still have to wait for.
KEEP_GONE = 100


@dataclass
class _Job:
    name: str
    logs_dir: Path
    scope: str  # the record's uid: keys are this job's, not an earlier one's of the same name
    reader: HomeReader
    lock: threading.Lock = field(default_factory=threading.Lock)
    writer: KeyedTimeline | None = None
    written: frozenset[str] = frozenset()
    objects: list[Derived] = field(default_factory=list)
    pending: list[Derived] = field(default_factory=list)  # read from the home, not written yet
    replicas: list[tuple[str, int]] = field(default_factory=list)
    metrics: list[MetricsFile] = field(default_factory=list)
    attempt: int = 0
    home_due: bool = True
    running: bool = False
    again: bool = False
    closed: bool = False
    warnings: tuple[ActiveWarning, ...] = ()
    problem: str | None = None


class TimelineKeeper:
    """Every job's timeline writer and home reader, keyed by the job's object name."""

    def __init__(self, on_change: Callable[[str], None], log: logging.Logger | logging.LoggerAdapter[Any]) -> None:
        self._on_change = on_change
        self._log = log
        self._jobs: dict[str, _Job] = {}
        self._gone: dict[str, _Job] = {}  # forgotten, newest last: `close` still waits for their pass
        self._files = TimelineFiles()
        self._tasks: set[asyncio.Task[None]] = set()

    def offer(
        self,
        job: str,
        name: str,
        scope: str,
        logs_dir: Path,
        checkpoint_dir: Path,
        derived: list[Derived],
        *,
        replicas: list[tuple[str, int]],
        metrics: list[MetricsFile],
        attempt: int,
        home: bool,
    ) -> None:
        """The newest entries the objects of `job` say (on the loop); a pass writes the new ones."""
        state = self._jobs.get(job)
        if state is None or state.logs_dir != logs_dir or state.scope != scope:
            state = self._jobs[job] = _Job(name, logs_dir, scope, HomeReader(logs_dir, checkpoint_dir))
        state.objects, state.replicas, state.metrics, state.attempt = derived, replicas, metrics, attempt
        state.home_due = state.home_due or home
        if not state.home_due and all(entry.key in state.written for entry in derived):
            return
        if state.running:
            state.again = True
            return
        state.running = True
        task = asyncio.create_task(self._run(job, state))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def warnings(self, job: str) -> tuple[ActiveWarning, ...]:
        state = self._jobs.get(job)
        return state.warnings if state is not None else ()

    def forget(self, job: str) -> None:
        """The job is gone (its record deleted): no pass writes for it any more."""
        state = self._jobs.pop(job, None)
        if state is not None:
            state.closed = True
            self._files.forget(state.logs_dir)
            self._gone[job] = state
            while len(self._gone) > KEEP_GONE:
                del self._gone[next(iter(self._gone))]

    def close(self, job: str) -> None:
        """Blocking (a thread): wait for the job's running pass, then let none write again (a
        delete removes the job's folder next)."""
        for state in (self._jobs.get(job), self._gone.get(job)):
            if state is not None:
                with state.lock:
                    state.closed = True

    def answer(self, job: str, logs_dir: Path, name: str, since: int) -> dict[str, Any]:
        """Blocking (a thread): `GET /jobs/{name}/timeline` of the job."""
        state = self._jobs.get(job)
        return self._files.answer(logs_dir, name, since, state.problem if state is not None else None)

    async def _run(self, job: str, state: _Job) -> None:
        try:
            while not state.closed:
                state.again = False
                home, state.home_due = state.home_due, False
                before = state.warnings
                try:
                    await asyncio.to_thread(self._pass, state, list(state.objects), home)
                except Exception as error:  # never the status's problem: the next pass tries again
                    self._log.warning("paddle-nbext: could not write the timeline of %s: %s", state.name, error)
                if state.warnings != before and not state.closed:
                    self._on_change(job)
                if not state.again:
                    break
        finally:
            state.running = False

    def _pass(self, state: _Job, objects: list[Derived], home: bool) -> None:
        with state.lock:
            if state.closed:
                return
            if state.writer is None:
                state.problem = ensure_dir(state.logs_dir)
                if state.problem is not None:
                    state.home_due = True  # look again with the next offer
                    return
                state.writer = KeyedTimeline(state.logs_dir, state.scope)
            found = [*objects, *state.pending]
            if home:
                read = state.reader.read(state.replicas, state.metrics)
                found.extend(read)
                state.warnings = tuple(state.reader.active_warnings(state.attempt))
            state.writer.add_new(found)
            writer = state.writer
            derived_now = {entry.key for entry in objects}  # offered again with every pass anyway
            state.pending = [entry for entry in found if not writer.has(entry.key) and entry.key not in derived_now]
            state.written = frozenset(entry.key for entry in found if writer.has(entry.key)) | state.written


def with_warnings(status: JobStatus, warnings: tuple[ActiveWarning, ...]) -> JobStatus:
    """A running job's message with what its replicas' launchers say is wrong right now, as the
    local master's: "Training is stalled: ..." first, then the message, then each other warning
    ("Warning: trainer 1 uses 1.8 GiB of its 2 GiB limit.")."""
    if status.phase != Phase.RUNNING or not warnings:
        return status
    parts = [status.message]
    stalls = [f"Training is stalled: {_words(w.text, 'Stalled:')}." for w in warnings if w.stall]
    others = [f"Warning: {_words(w.text, 'Memory:')}." for w in warnings if not w.stall]
    message = " ".join([*stalls, *parts, *others]).strip()
    return dataclasses.replace(status, message=message)


def _words(text: str, prefix: str) -> str:
    text = text.strip()
    if text.lower().startswith(prefix.lower()):
        text = text[len(prefix) :].strip()
    return text.rstrip(".")
