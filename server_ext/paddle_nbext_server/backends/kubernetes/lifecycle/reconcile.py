"""Job status from the watch cache, and the server's share of the lifecycle: every change of a job's
objects is turned into one status (one snapshot), published as an event, and a job that is over gets
its end recorded and its remaining replicas stopped, as the in-cluster master does; finished jobs
past the history limit are removed.

One layer of `KubernetesBackend` (backend.py lists them)."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import time
from pathlib import Path
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from paddle_nbext.model.contract import (
    CANCELLED_ANNOTATION,
    JOB_LABEL,
    OWNER_LABEL,
    RECORD_UID_LABEL,
    ROLES,
    STATUS_ANNOTATION,
    Phase,
    ReplicaPhase,
    parse_time,
)
from paddle_nbext.model.status import JobStatus

from .... import checkpoints
from ....events import DELETED as EV_DELETED
from ....events import UPDATED, JobEvent
from ....runtime import cluster_master, environments, policy, replicas
from ...base import BackendForbidden, BackendUnavailable
from ..build import manifests, volcano
from ..client.api_names import JOB_OF_JOB, JOB_OF_POD, SELECTOR
from ..client.cache import WORKLOADS, WatchCache, describe_failure
from ..client.connection import Connection
from ..logs import replica_logs
from ..settings import JOBSET_MODE, role_job_name
from ..status import node_answers, queue_positions, queue_status, resume_note, volcano_status
from ..status.job_status import final_of, job_status
from ..timeline import keeper as timeline_keeper
from ..timeline import objects as timeline_objects
from ..usage import metrics as replica_metrics
from .home_setup import HomeSetup

#: When the checkpoint a job's current attempt resumed from is not found, its checkpoints are read
#: again this many times, this many seconds apart (a Resume links its checkpoint just after the
#: submit, so the first read may come before it).
RESUME_RECHECKS = 3
RESUME_RECHECK = 5.0
#: Seconds between reads of a job's environment status while its launchers build it.
ENVIRONMENT_RECHECK = 1.0


class Reconciler(HomeSetup):
    """Job status from the watch cache, and the server's share of the lifecycle."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._cache: WatchCache | None = None
        # Keyed by the job's object name (`manifests.object_name`: `<job>-<owner tag>`), the record's
        # name and the pods' job label, so that two owners' jobs of one name never mix.
        self._pods_by_job: dict[str, dict[str, dict[str, Any]]] = {}
        self._statuses: dict[str, JobStatus] = {}
        self._keys: dict[tuple[str, str], str] = {}  # (owner, job name) -> object name
        self._published: dict[str, dict[str, Any]] = {}
        self._dirty: set[str] = set()
        self._flush_scheduled = False
        self._finishing: set[str] = set()
        # Running pods whose node did not answer while a failure hung on them (`node_answers`).
        self._unanswered: dict[str, frozenset[str]] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        self._ticker: asyncio.Task[None] | None = None
        self._positions = queue_positions.QueuePositions(interval=self.queue_position_interval, log=self.log)
        self._releasing: set[str] = set()  # jobs whose PodGroup is being deleted
        # The checkpoint each job's current attempt resumed from (`resume_note`), read from the
        # home in a thread: job -> (attempt, its note or "" for none, reads of that attempt).
        self._resume_notes: dict[str, tuple[str, str, int]] = {}
        self._resume_reading: set[str] = set()
        # While a job's launchers build its environment (`runtime/environments.py`), the status
        # file they write in the home: job -> (the step has ended, "Preparing environment: ..." or "").
        self._environment_notes: dict[str, tuple[bool, str]] = {}
        self._environment_reading: set[str] = set()
        # Each job's timeline, written into its logs dir in the home (timeline/keeper.py), and
        # the jobs whose end has had its last look at the home.
        self._timelines = timeline_keeper.TimelineKeeper(self._mark, self.log)
        self._timeline_ended: set[str] = set()

    async def _ensure_cache(self) -> WatchCache:
        if self._cache is None:
            connection = await self._conn()
            self._cache = WatchCache(
                connection.api,
                connection.namespace,
                self._selector(),
                asyncio.get_running_loop(),
                self._on_change,
                workloads=self._queued,
                podgroups=bool(self.gang_scheduler),
            )
            self._cache.start()
            self._ticker = asyncio.create_task(self._tick())
            timelines = asyncio.create_task(self._timeline_tick())
            self._tasks.add(timelines)
            timelines.add_done_callback(self._tasks.discard)
            self._start_queue_positions(connection)
        return self._cache

    def _selector(self) -> str:
        """Our objects; only the configured owner's when there is one (`owner`): the watch, the
        memory and the relists then grow with one user's jobs, not the namespace's."""
        return f"{SELECTOR},{OWNER_LABEL}={manifests.owner_label(self.owner)}" if self.owner else SELECTOR

    async def _tick(self) -> None:
        """Some jobs end without any pod change: one past its timeout, and one whose failed
        trainer was aborted by another's failure and waits (`policy.SETTLE_SECONDS`) for the
        cause to show.  Look at those now and then."""
        while True:
            await asyncio.sleep(self.reconcile_interval)
            for name, status in list(self._statuses.items()):
                if status.terminal:
                    continue
                if status.spec.get("timeout") or any(r.phase == ReplicaPhase.FAILED for r in status.replicas):
                    self._mark(name)
            try:
                await self._expire_finished()
            except (ApiException, BackendUnavailable) as error:
                self.log.warning("paddle-nbext: could not remove finished jobs past the history limit yet: %s", error)

    async def _timeline_tick(self) -> None:
        """Running jobs' folders in the home change without any object changing (a checkpoint
        saved, a launcher's health warning): look at them now and then (stat signatures)."""
        while True:
            await asyncio.sleep(timeline_keeper.HOME_INTERVAL)
            records = self._cache.stores["configmaps"] if self._cache else {}
            for job, status in list(self._statuses.items()):
                record = records.get(job)
                if record is not None and not status.terminal:
                    try:
                        self._offer_timeline(job, record, status, home=True)
                    except Exception as error:  # as in `_flush`: the next look tries again
                        self.log.warning("paddle-nbext: could not derive the timeline of %s: %s", job, error)

    def _offer_timeline(self, job: str, record: dict[str, Any], status: JobStatus, *, home: bool) -> None:
        """Hand what the job's objects say to its timeline (written in a thread, when new)."""
        cache = self._cache
        if cache is None:
            return
        events = [
            event
            for event in cache.stores["pod_events"].values()
            if (named := JOB_OF_POD.match(str((event.get("involvedObject") or {}).get("name") or ""))) and named.group(1) == job
        ]
        job_events = [
            event
            for event in cache.stores["events"].values()
            if (named := JOB_OF_JOB.match(str((event.get("involvedObject") or {}).get("name") or ""))) and named.group(1) == job
        ]
        workloads: list[tuple[str, dict[str, Any]]] = []
        if self._queued:
            every = list(cache.stores["workloads"].values())
            for label, kind, name in self._workload_owners(job):
                workloads.extend((label, found) for found in queue_status.owned_workloads(every, kind, name))
        known = self._resume_notes.get(job)
        resumed = (known[0], known[1].rsplit("; ", 1)[-1]) if known and known[1] else None
        derived = timeline_objects.derive(
            record, list(self._pods_by_job.get(job, {}).values()), events, workloads, self._pod_group(job), resumed, job_events
        )
        spec = status.spec
        counts = [
            ("pserver", int(spec.get("pservers") or 0) if spec.get("mode") == "ps" else 0),
            ("trainer", int(spec.get("trainers") or 0)),
        ]
        self._timelines.offer(
            job,
            status.name,
            str((record.get("metadata") or {}).get("uid") or ""),
            replica_logs.log_dir(self.home_path, status.name),
            Path(manifests.checkpoint_dir(self.home_path, status.name)),
            derived,
            replicas=[(role, index) for role, count in counts for index in range(count)],
            metrics=[each for each in replica_metrics.metrics_files(self.home_path, status) if each.role == "trainer"],
            attempt=replicas.Restarts.of(record).attempt,
            home=home,
        )

    def _expired(self, now: float) -> list[str]:
        """Records of finished jobs past the history limit (`keep_finished` per user, newest
        kept; `keep_finished_days`)."""
        by_owner: dict[str, list[tuple[str, JobStatus]]] = {}
        for key, status in self._statuses.items():
            if status.terminal and status.finished:
                by_owner.setdefault(status.owner, []).append((key, status))
        doomed: list[str] = []
        for ended in by_owner.values():
            ended.sort(key=lambda item: item[1].finished or "", reverse=True)
            for rank, (key, status) in enumerate(ended):
                finished = parse_time(status.finished)
                too_old = (
                    bool(self.keep_finished_days) and finished is not None and now - finished.timestamp() > self.keep_finished_days * 86400
                )
                if (self.keep_finished and rank >= self.keep_finished) or too_old:
                    doomed.append(key)
        return doomed

    async def _expire_finished(self) -> None:
        """Remove the records past the history limit (`_expired`): the garbage collector takes
        their Jobs and pods; their logs and metrics stay in the home (`~/.paddle-jobs/<job>`)."""
        doomed = self._expired(time.time())
        if not doomed:
            return
        connection = await self._conn()
        for key in doomed:
            await self._delete_record(connection, key, f"remove the finished job {key}")

    async def _delete_record(self, connection: Connection, key: str, doing: str) -> None:
        """Delete a job's record (the garbage collector takes what it owns; gone already is fine)
        and drop it from the cache at once, so it leaves the list when this returns."""
        try:
            await self._call(
                doing,
                client.CoreV1Api(connection.api).delete_namespaced_config_map,
                key,
                connection.namespace,
                propagation_policy="Background",
                _preload_content=False,
            )
        except ApiException as error:
            if error.status != 404:
                raise
        if self._cache is not None:
            self._cache.forget("configmaps", key)
            self._flush_now(key)

    @property
    def _queued(self) -> bool:
        """Whether this deployment sends jobs to Kueue (then Workloads are watched for status); with
        Volcano the queues are Volcano's (named in the PodGroup), not Kueue's."""
        return bool(self.default_queue or self.allowed_queues) and not self.gang_scheduler

    def _role_job(self, job: str, role: str) -> str:
        return role_job_name(self.workload_mode, job, role)

    def _pod_group(self, job: str) -> dict[str, Any] | None:
        """The job's PodGroup from the cache (one of an earlier job of the same name is not it)."""
        if self._cache is None or not self.gang_scheduler:
            return None
        record = self._cache.stores["configmaps"].get(job)
        found = self._cache.stores["podgroups"].get(job)
        if record is None or found is None or not _owned_by(found, (record.get("metadata") or {}).get("uid")):
            return None
        return found

    def _gang_note(self, job: str) -> str | None:
        return volcano_status.job_note(self._pods_by_job.get(job, {}).values(), self._pod_group(job))

    def _release_gang(self, job: str) -> None:
        """An ended job's PodGroup goes at once: Volcano keeps the gang's `minResources` reserved
        in its queue while a PodGroup waits, so a cancelled job would hold the queue.  The record
        stays (the garbage collector would remove the PodGroup only with the record)."""
        found = self._pod_group(job)
        if found is None or job in self._releasing:
            return
        self._releasing.add(job)

        async def release() -> None:
            try:
                connection = await self._conn()
                await self._call(
                    f"delete the PodGroup of {job}",
                    self._verb_for("delete", volcano.KIND),
                    found["metadata"]["name"],
                    connection.namespace,
                    _preload_content=False,
                )
            except ApiException as error:
                if error.status != 404:
                    self.log.warning("paddle-nbext: could not delete the PodGroup of %s: %s", job, describe_failure(error))
            except BackendUnavailable as error:
                self.log.warning("paddle-nbext: could not delete the PodGroup of %s: %s", job, error.message)
            finally:
                self._releasing.discard(job)

        task = asyncio.create_task(release())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _workload_owners(self, job: str) -> list[tuple[str, str, str]]:
        """(label, kind, name) of the objects Kueue makes a Workload for: the JobSet, or each role's Job."""
        if self.workload_mode == JOBSET_MODE:
            return [("job", "JobSet", job)]
        return [(role, "Job", self._role_job(job, role)) for role in (manifests.MASTER, *ROLES)]

    def _queue_words(self, job: str) -> dict[str, queue_status.QueueWords]:
        if self._cache is None or not self._queued:
            return {}
        return queue_status.job_words(self._cache.stores["workloads"].values(), self._workload_owners(job), self._positions.words_of)

    def _deciding_pods(self, job: str) -> list[dict[str, Any]]:
        """The pods the job's status is decided on: none while Kueue has evicted (preempted) its
        Workload, because Kueue is then stopping them (SIGTERM: exit code 143) and the job is
        queued to run again, not failed; the replicas then say why (`_role_notes`)."""
        if queue_status.stopped_by_kueue(self._queue_words(job)):
            return []
        return list(self._pods_by_job.get(job, {}).values())

    def _start_queue_positions(self, connection: Connection) -> None:
        """Queue positions of waiting jobs, refreshed in the background (queue_positions.py);
        a Workload whose position moved re-marks its job, like a change of the Workload."""
        if not self._queued:
            return

        def workloads() -> list[dict[str, Any]]:
            return list(self._cache.stores["workloads"].values()) if self._cache is not None else []

        queues = [q for q in (self.default_queue, *self.allowed_queues) if q]
        task = asyncio.create_task(
            self._positions.run(
                connection.api, connection.namespace, workloads, queues, lambda w: self._on_change("workloads", "MODIFIED", w)
            )
        )
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _deactivate_workloads(self, job: str) -> None:
        """Kueue's own stop for a job it manages: `spec.active=false` on its Workloads (Kueue then
        suspends the JobSet or Jobs, removes their pods and frees the quota)."""
        if self._cache is None or not self._queued:
            return
        connection = await self._conn()
        custom = client.CustomObjectsApi(connection.api)
        workloads = list(self._cache.stores["workloads"].values())
        for _, kind, name in self._workload_owners(job):
            for workload in queue_status.owned_workloads(workloads, kind, name):
                try:
                    await self._call(
                        f"deactivate the Kueue Workload of {name}",
                        custom.patch_namespaced_custom_object,
                        *WORKLOADS[:2],
                        connection.namespace,
                        WORKLOADS[2],
                        workload["metadata"]["name"],
                        {"spec": {"active": False}},
                        _preload_content=False,
                    )
                except ApiException as error:
                    if error.status != 404:
                        self.log.warning("paddle-nbext: could not deactivate Workload of %s: %s", name, describe_failure(error))

    def _on_change(self, kind: str, event_type: str, obj: dict[str, Any]) -> None:
        meta = obj.get("metadata") or {}
        if kind == "workloads":
            self._positions.poke()
            for reference in meta.get("ownerReferences") or []:
                owner = str(reference.get("name") or "")
                named = JOB_OF_JOB.match(owner) if reference.get("kind") == "Job" else None
                self._mark(named.group(1) if named else owner)
            return
        if kind in ("events", "pod_events"):
            involved = (obj.get("involvedObject") or {}).get("name") or ""
            named = (JOB_OF_JOB if kind == "events" else JOB_OF_POD).match(involved)
            if named:
                self._mark(named.group(1))
            return
        job = (meta.get("labels") or {}).get(JOB_LABEL)
        if not job:
            return
        if kind == "pods":
            pods = self._pods_by_job.setdefault(job, {})
            pod = str(meta.get("name") or "")
            if event_type == "DELETED":
                pods.pop(pod, None)
            else:
                pods[pod] = obj
        elif kind == "configmaps" and meta.get("name") != job:
            return
        self._mark(job)

    def _role_notes(self, job: str, record: dict[str, Any]) -> dict[str, replicas.RoleNote]:
        """What this job's current Jobs (owned by this record) say beyond their pods: failed for
        good (its pods may be gone: node loss, deleted), suspended, or pods that could not be
        created (the Job controller's latest FailedCreate event)."""
        if self._cache is None:
            return {}
        uid = (record.get("metadata") or {}).get("uid")
        attempt = replicas.Restarts.of(record).attempt
        jobs = self._cache.stores["jobs"]
        queued_words = self._queue_words(job)
        notes: dict[str, replicas.RoleNote] = {}
        current: dict[str, str] = {}
        for role in map(str, ROLES):
            obj = jobs.get(self._role_job(job, role))
            if obj is None or not (_owned_by(obj, uid) or _labelled_for(obj, uid)) or replicas.attempt_of(obj) != attempt:
                continue
            current[role] = (obj.get("metadata") or {}).get("uid", "")
            note = replicas.job_note(role, obj)
            if note is not None:
                notes[role] = note
            if not (note and note.failed) and (obj.get("spec") or {}).get("suspend"):
                queued = queued_words.get(role) or queued_words.get("job")
                if queued is not None and queued.waiting:
                    notes[role] = replicas.RoleNote(f"{queued.state}: {queued.text}")
                else:
                    notes[role] = replicas.RoleNote("Suspended: its Job is suspended (waiting to be admitted, e.g. by a queue)")
        latest: dict[str, tuple[str, str]] = {}
        for event in self._cache.stores["events"].values():
            involved = event.get("involvedObject") or {}
            for role, job_uid in current.items():
                if involved.get("uid") == job_uid:
                    stamp = event.get("lastTimestamp") or event.get("eventTime") or ""
                    if role not in latest or stamp >= latest[role][0]:
                        latest[role] = (stamp, str(event.get("message") or "").strip())
        for role, (_, message) in latest.items():
            if not notes.get(role, replicas.RoleNote()).reason:  # keeps the indexes that completed
                notes[role] = dataclasses.replace(notes.get(role, replicas.RoleNote()), reason=f"FailedCreate: {message}")
        for role in map(str, ROLES):
            # A queued JobSet's child Jobs appear only a moment after its Workload has Kueue's
            # words (the JobSet controller makes them): a role without its Job yet waits for the
            # same reason, so it says so, and the replicas never contradict the job's message.
            queued = queued_words.get(role) or queued_words.get("job")
            if role not in notes and role not in current and queued is not None and queued.waiting:
                notes[role] = replicas.RoleNote(f"{queued.state}: {queued.text}")
        return notes

    def _pod_notes(self, job: str) -> dict[str, str]:
        """Pod name -> the kubelet's latest FailedMount message, for this job's pods."""
        if self._cache is None:
            return {}
        pods = {(p.get("metadata") or {}).get("uid"): name for name, p in self._pods_by_job.get(job, {}).items()}
        latest: dict[str, tuple[str, str]] = {}
        for event in self._cache.stores["pod_events"].values():
            name = pods.get((event.get("involvedObject") or {}).get("uid"))
            if name and event.get("reason") == "FailedMount":
                stamp = event.get("lastTimestamp") or event.get("eventTime") or ""
                if name not in latest or stamp >= latest[name][0]:
                    latest[name] = (stamp, str(event.get("message") or "").strip())
        mounts = {name: f"FailedMount: {message}" for name, (_, message) in latest.items()}
        return {**volcano_status.pod_notes(self._pods_by_job.get(job, {}).values(), self._pod_group(job)), **mounts}

    def _mark(self, job: str) -> None:
        self._dirty.add(job)
        if not self._flush_scheduled:
            self._flush_scheduled = True
            asyncio.get_running_loop().call_soon(self._flush)

    def _flush(self) -> None:
        """Recompute the status of changed jobs; publish what changed; act on decided ends."""
        self._flush_scheduled = False
        dirty, self._dirty = self._dirty, set()
        records = self._cache.stores["configmaps"] if self._cache else {}
        for job in dirty:
            record = records.get(job)
            if record is None:
                status = self._statuses.pop(job, None)
                self._published.pop(job, None)
                self._resume_notes.pop(job, None)
                self._environment_notes.pop(job, None)
                self._unanswered.pop(job, None)
                self._timelines.forget(job)
                self._timeline_ended.discard(job)
                if status is not None:
                    if self._keys.get((status.owner, status.name)) == job:
                        del self._keys[(status.owner, status.name)]
                    self.events.publish(JobEvent(EV_DELETED, status.owner, status.name))
                if not self._pods_by_job.get(job):
                    self._pods_by_job.pop(job, None)
                continue
            status, decision, views = job_status(
                record,
                self._deciding_pods(job),
                self._role_notes(job, record),
                self._pod_notes(job),
                queue_note=queue_status.summary(self._queue_words(job)) or self._gang_note(job),
                unreachable=self._unanswered.get(job, frozenset()),
            )
            status = self._with_resume_note(job, record, status)
            status = self._with_environment_note(job, status)
            # The end gets one last look at the home (its last checkpoint, the environment's end).
            ended = status.terminal and job not in self._timeline_ended
            if ended:
                self._timeline_ended.add(job)
            try:
                self._offer_timeline(job, record, status, home=ended or job not in self._statuses)
            except Exception as error:  # never the status's problem: a damaged object loses its entries only
                self.log.warning("paddle-nbext: could not derive the timeline of %s: %s", job, error)
            status = timeline_keeper.with_warnings(status, self._timelines.warnings(job))
            self._statuses[job] = status
            if status.terminal:
                self._release_gang(job)
            self._keys[(status.owner, status.name)] = job
            data = status.to_dict()
            if self._published.get(job) != data:
                self._published[job] = data
                self.events.publish(JobEvent(UPDATED, status.owner, status.name, data))
            if decision is not None and decision.terminal and job not in self._finishing:
                self._finishing.add(job)
                task = asyncio.create_task(self._finish(job, record, views, decision))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)

    def _with_resume_note(self, job: str, record: dict[str, Any], status: JobStatus) -> JobStatus:
        """After a whole-job restart (or in a job Resume started), the message says which
        checkpoint the replicas resumed from, as the local master's does (`resume_note`).  The
        home is read in a thread, once per attempt (a found checkpoint stays the answer: a
        later save of the attempt or retention does not change where it resumed from; none
        found is read again `RESUME_RECHECKS` times, `RESUME_RECHECK` seconds apart); until then,
        and whenever the home cannot be read, the message is the policy's alone."""
        asked = resume_note.question(record, list(self._pods_by_job.get(job, {}).values()), status)
        known = self._resume_notes.get(job)
        if asked is None:
            # A success whose pods are gone already: the note its run had.
            return resume_note.with_note(status, known[1]) if known and status.phase == Phase.SUCCEEDED else status
        if known is not None and known[0] == asked.attempt and (known[1] or known[2] > RESUME_RECHECKS):
            return resume_note.with_note(status, known[1])
        if job not in self._resume_reading:
            self._resume_reading.add(job)
            task = asyncio.create_task(self._read_resume(job, status.name, asked))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        return resume_note.with_note(status, known[1]) if known is not None and known[0] == asked.attempt else status

    def _with_environment_note(self, job: str, status: JobStatus) -> JobStatus:
        """While the replicas of a job with a requirements file build its environment, the
        message says so ("Preparing environment: 12 packages (uv)"), as the local master's does.
        The in-cluster master cannot read the home; the server reads the launchers' status file
        there in a thread, again every `ENVIRONMENT_RECHECK` seconds until the step has ended."""
        if not status.spec.get("requirements") or status.phase != Phase.RUNNING:
            return status
        ended, note = self._environment_notes.get(job, (False, ""))
        if not ended and job not in self._environment_reading:
            self._environment_reading.add(job)
            task = asyncio.create_task(self._read_environment(job, status.name))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        return dataclasses.replace(status, message=note) if note else status

    async def _read_environment(self, job: str, name: str) -> None:
        logs_dir = Path(manifests.job_folder(self.home_path, name)) / "logs"
        try:
            state = await asyncio.to_thread(environments.read_status, str(logs_dir))
        finally:
            self._environment_reading.discard(job)
        ended = state is not None and state.get("state") in ("ready", "failed")
        note = (environments.phase_message(state) or "") if state else ""
        before = self._environment_notes.get(job)
        self._environment_notes[job] = (ended, note)
        if job not in self._statuses:
            return
        if before is None or before[1] != note:
            self._mark(job)
        if not ended:
            asyncio.get_running_loop().call_later(ENVIRONMENT_RECHECK, self._mark, job)

    async def _read_resume(self, job: str, name: str, asked: resume_note.Question) -> None:
        directory = Path(manifests.checkpoint_dir(self.home_path, name))

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
        if job not in self._statuses:
            return  # deleted meanwhile
        if note and (before is None or before[:2] != (asked.attempt, note)):
            self._mark(job)
        elif not note and reads <= RESUME_RECHECKS:
            asyncio.get_running_loop().call_later(RESUME_RECHECK, self._mark, job)

    async def _finish(self, job: str, record: dict[str, Any], views: list[Any], decision: policy.Decision) -> None:
        """The server's share of the master's work: record the end, stop what still runs."""
        try:
            if queue_status.stopped_by_kueue(self._queue_words(job)):
                return  # Kueue evicted it since: its pods end by Kueue's stop, the job waits (`_deciding_pods`)
            silent = await node_answers.unanswered(self._open_pod_log, replicas.pods_to_ask(views, decision))
            if silent:  # a peer's node stopped answering: hold the failure until Kubernetes declares it lost
                self._unanswered[job] = silent
                self._mark(job)
                asyncio.get_running_loop().call_later(node_answers.RECHECK_SECONDS, self._ask_again, job)
                return
            candidates = replicas.explaining_candidates(views, decision)
            if candidates:
                failed, tail = replicas.pick_explanation([(pod, await self._log_tail(pod)) for pod in candidates])
                views, decision = replicas.decide_job(
                    record,
                    list(self._pods_by_job.get(job, {}).values()),
                    tail,
                    self._role_notes(job, record),
                    self._pod_notes(job),
                    explaining_pod=failed,
                )
            if await self._record_final(job, replicas.final_status(views, decision), record):
                # The master's Job too: it has nothing left to do, and a master pod that never ran
                # (an image it cannot pull) would otherwise keep its Job, and the TTL, waiting.
                roles = sorted({role for role, _ in decision.stop} | {manifests.MASTER})
                await self._stop_roles(job, roles, succeeded=decision.phase == Phase.SUCCEEDED)
        except (ApiException, BackendUnavailable) as error:
            self.log.warning("paddle-nbext: could not finish job %s yet: %s", job, error)
        finally:
            self._finishing.discard(job)

    def _ask_again(self, job: str) -> None:
        """Ask the silent nodes of a held failure again: one that answers now lets it end."""
        task = asyncio.create_task(self._reask(job))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _reask(self, job: str) -> None:
        asked = self._unanswered.get(job)
        if not asked:
            return
        try:
            still = await node_answers.unanswered(self._open_pod_log, sorted(asked))
        except Exception as error:  # never the status's problem: ask again later
            self.log.debug("paddle-nbext: could not ask the nodes of %s: %s", job, error)
            still = asked
        if job not in self._unanswered:
            return  # deleted meanwhile
        if still:
            self._unanswered[job] = still
            asyncio.get_running_loop().call_later(node_answers.RECHECK_SECONDS, self._ask_again, job)
        else:
            del self._unanswered[job]
        if still != asked:
            self._mark(job)

    async def _open_pod_log(self, doing: str, pod: str, tail: int | None, **options: Any) -> Any:
        """One `pods/log` request of the main container (the raw response: read or streamed)."""
        kwargs: dict[str, Any] = {"container": manifests.CONTAINER, "_preload_content": False, **options}
        if tail is not None:
            kwargs["tail_lines"] = tail
        connection = await self._conn()
        core = client.CoreV1Api(connection.api)
        return await self._call(doing, core.read_namespaced_pod_log, pod, connection.namespace, **kwargs)

    async def read_pod_log(self, pod: str, *, tail: int | None, previous: bool) -> str:
        """The pod's log from the API.  When the API cannot give it (the pod is gone, its node is
        lost), and for `previous` (a retry is a new pod, so the API has none), the launcher's file
        of that attempt on the home volume (logs.py).  The API's error when neither has it."""

        replica = replica_logs.replica_of(pod, self._pods_by_job)

        async def from_file() -> str | None:
            if replica is None:
                return None
            key, role, index, pods = replica
            return await asyncio.to_thread(
                replica_logs.read_attempt, self.home_path, self._name_of(key), role, index, pods, pod, tail=tail, previous=previous
            )

        if previous and (text := await from_file()) is not None:
            return text
        try:
            response = await self._open_pod_log(f"read the log of {pod}", pod, tail, previous=previous)
        except (ApiException, BackendUnavailable):
            text = None if previous else await from_file()
            if text is None:
                raise
            return text
        served = str(response.data.decode("utf-8", errors="replace"))
        if replica_logs.KUBELET_LOG_GONE.fullmatch(served.strip()):
            # A real kubelet answers 200 with this sentence once the container is removed (the pod
            # is being deleted): the launcher's file has what it said.
            return (None if previous else await from_file()) or served
        return served

    async def _log_tail(self, pod: str) -> str:
        try:
            # Enough lines to reach back past Paddle's fatal-signal block to the Python traceback.
            return await self.read_pod_log(pod, tail=cluster_master.FAILURE_TAIL_LINES, previous=False)
        except (ApiException, BackendUnavailable):
            return ""

    async def _record_final(self, job: str, final: dict[str, Any], record: dict[str, Any], cancelled: bool = False) -> bool:
        """Write the job's end into its record, once: the patch carries the resourceVersion of the
        record the end was decided on, so if anything wrote first (the master's "Succeeded", a
        cancel) the API refuses ours and the first end stays.  Returns whether ours was written."""
        connection = await self._conn()
        annotations = {STATUS_ANNOTATION: json.dumps(final)}
        if cancelled:
            annotations[CANCELLED_ANNOTATION] = "true"
        version = (record.get("metadata") or {}).get("resourceVersion")
        core = client.CoreV1Api(connection.api)
        try:
            response = await self._call(
                f"record the end of job {job}",
                core.patch_namespaced_config_map,
                job,
                connection.namespace,
                {"metadata": {"annotations": annotations, **({"resourceVersion": version} if version else {})}},
                _preload_content=False,
            )
        except ApiException as error:
            if error.status != 409:
                raise
            # Someone wrote the record since: read it (list: the Role has no `get`) into the cache.
            listed = await self._call(
                f"read job {job}",
                core.list_namespaced_config_map,
                connection.namespace,
                field_selector=f"metadata.name={job}",
                _preload_content=False,
            )
            for item in json.loads(listed.data).get("items") or []:
                if self._cache is not None:
                    self._cache.put("configmaps", item)
                if final_of(item) is None:  # changed, but not ended: write it on the new version
                    return await self._record_final(job, final, item, cancelled)
            return False
        if self._cache is not None:
            self._cache.put("configmaps", json.loads(response.data))
        return True

    async def _stop_roles(self, job: str, roles: list[str], succeeded: bool = False) -> None:
        """End each role's Job through its deadline (`cluster_master.STOP_PATCH`): the Job
        controller stops the live pods; finished pods stay for their logs.  After a success the
        Jobs are deleted instead (as the master does, `Api.stop_role`): a deadline would mark
        them Failed, an alert for a job that went well."""
        connection = await self._conn()
        batch = client.BatchV1Api(connection.api)
        for role in roles:
            try:
                if succeeded:
                    await self._call(
                        f"stop the {role}s of {job}",
                        batch.delete_namespaced_job,
                        self._role_job(job, role),
                        connection.namespace,
                        propagation_policy="Background",
                        _preload_content=False,
                    )
                    continue
                await self._call(
                    f"stop the {role}s of {job}",
                    batch.patch_namespaced_job,
                    self._role_job(job, role),
                    connection.namespace,
                    cluster_master.STOP_PATCH,
                    _preload_content=False,
                )
            except ApiException as error:
                if error.status != 404:
                    raise

    async def _synced_cache(self) -> WatchCache:
        cache = await self._ensure_cache()
        if not cache.synced and not await cache.wait_synced(self.sync_timeout):
            raise self._cache_unavailable(cache, "the job list could not be read")
        if not cache.connected:
            raise self._cache_unavailable(cache, "job states may be stale")
        return cache

    def _cache_unavailable(self, cache: WatchCache, consequence: str) -> BackendUnavailable:
        cause = cache.error or "no answer yet"
        namespace = cache.namespace
        if cache.denials:
            return BackendForbidden(f"{consequence[0].upper()}{consequence[1:]}: {cause}")
        if cause.startswith(("HTTP 401", "HTTP 403")):
            return BackendUnavailable(
                f"the service account may not watch paddle-nbext jobs in namespace {namespace} ({cause}); "
                f"{consequence}. Bind the Role in deploy/rbac/notebook-role.yaml to it"
            )
        host = self._connection.host if self._connection else "the Kubernetes API"
        return BackendUnavailable(f"the Kubernetes API at {host} is unreachable ({cause}); {consequence}")

    def _key(self, status: JobStatus) -> str:
        """The object name of a job the cache holds (its record's name: `<job>-<owner tag>`, or
        the bare job name for a job submitted before names were per owner)."""
        return self._keys.get((status.owner, status.name)) or manifests.object_name(status.name, status.owner)

    def _name_of(self, key: str) -> str:
        """The user's name of the job whose objects are named `key`."""
        status = self._statuses.get(key)
        return status.name if status is not None else key

    def _flush_now(self, job: str) -> None:
        self._dirty.add(job)
        self._flush()


def _owned_by(obj: dict[str, Any], uid: str | None) -> bool:
    return any(ref.get("uid") == uid for ref in (obj.get("metadata") or {}).get("ownerReferences") or [])


def _labelled_for(obj: dict[str, Any], uid: str | None) -> bool:
    """A JobSet's child Job belongs to the JobSet, and names the record it was made for by label."""
    return bool(uid) and ((obj.get("metadata") or {}).get("labels") or {}).get(RECORD_UID_LABEL) == uid
