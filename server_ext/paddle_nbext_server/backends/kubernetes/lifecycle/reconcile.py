"""Job status from the watch cache, and the server's share of the lifecycle: every change of a job's
objects is turned into one status (one snapshot), published as an event, and a job that is over gets
its end recorded and its remaining replicas stopped, as the in-cluster master does; finished jobs
past the history limit are removed.

A part of `KubernetesBackend` (backend.py): it fills the job view (job_view.py) that the other parts read."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from paddle_nbext.model.contract import (
    CANCELLED_ANNOTATION,
    JOB_LABEL,
    OWNER_LABEL,
    ROLES,
    STATUS_ANNOTATION,
    Phase,
    ReplicaPhase,
    parse_time,
)
from paddle_nbext.model.status import JobStatus

from ....events import DELETED as EV_DELETED
from ....events import UPDATED, JobEvent
from ....runtime import cluster_master, policy, replicas
from ...base import BackendForbidden, BackendUnavailable
from ..build import manifests
from ..client.api_calls import KubernetesClient
from ..client.api_names import JOB_OF_JOB, JOB_OF_POD, SELECTOR
from ..client.cache import WatchCache
from ..client.connection import Connection
from ..job_view import JobView
from ..logs import replica_logs
from ..logs.pod_logs import PodLogs
from ..settings import BackendSettings
from ..status import node_answers, queue_status, volcano_status
from ..status.home_notes import HomeNotes
from ..status.job_status import final_of, job_status
from ..timeline import keeper as timeline_keeper
from ..timeline import objects as timeline_objects
from ..usage import metrics as replica_metrics
from .workloads import Workloads, labelled_for, owned_by

#: A pod the Job controller names in its FailedCreate message (`Error creating: pods "x-trainer-0-ab12c" is forbidden`).
_NAMED_POD = re.compile(r'\bpods? "[^"]*"')


def role_words(message: str) -> str:
    """A role's FailedCreate message as every replica of the role may say it: the controller's
    event names the one pod it tried last, which is not trainer 1's when trainer 0's was."""
    return _NAMED_POD.sub("its pod", message)


class Reconciler:
    """Job status from the watch cache, and the server's share of the lifecycle."""

    def __init__(
        self,
        settings: BackendSettings,
        api: KubernetesClient,
        view: JobView,
        workloads: Workloads,
        pod_logs: PodLogs,
        publish: Callable[[JobEvent], None],
        log: logging.Logger,
    ) -> None:
        self.settings = settings
        self.api = api
        self.view = view
        self.workloads = workloads
        self.pod_logs = pod_logs
        self.publish = publish  # the backend's event hub: a status changed, a job is gone
        self.log = log
        self._published: dict[str, dict[str, Any]] = {}
        self._dirty: set[str] = set()
        self._flush_scheduled = False
        self._finishing: set[str] = set()
        # Running pods whose node did not answer while a failure hung on them (`node_answers`).
        self._unanswered: dict[str, frozenset[str]] = {}
        self._ticker: asyncio.Task[None] | None = None
        # What the home says into the message: where a restart resumed, the environment's build.
        self.notes = HomeNotes(settings, view, self.mark, log)
        # Each job's timeline, written into its logs dir in the home (timeline/keeper.py), and
        # the jobs whose end has had its last look at the home.
        self.timelines = timeline_keeper.TimelineKeeper(self.mark, log)
        self._timeline_ended: set[str] = set()

    async def ensure_cache(self) -> WatchCache:
        if self.view.cache is None:
            connection = await self.api.connect()
            self.view.cache = WatchCache(
                connection.api,
                connection.namespace,
                self._selector(),
                asyncio.get_running_loop(),
                self.on_change,
                workloads=self.settings.queued,
                podgroups=bool(self.settings.gang_scheduler),
            )
            self.view.cache.start()
            self._ticker = asyncio.create_task(self._tick())
            self.view.spawn(self._timeline_tick())
            self.workloads.start_queue_positions(connection, lambda workload: self.on_change("workloads", "MODIFIED", workload))
        return self.view.cache

    def stop(self) -> None:
        """Stop the periodic look at the jobs (server shutdown; the view's tasks are the backend's)."""
        if self._ticker:
            self._ticker.cancel()
            self._ticker = None

    def _selector(self) -> str:
        """Our objects; only the configured owner's when there is one (`owner`): the watch, the
        memory and the relists then grow with one user's jobs, not the namespace's."""
        return f"{SELECTOR},{OWNER_LABEL}={manifests.owner_label(self.settings.owner)}" if self.settings.owner else SELECTOR

    async def _tick(self) -> None:
        """Some jobs end without any pod change: one past its timeout, and one whose failed
        trainer was aborted by another's failure and waits (`policy.SETTLE_SECONDS`) for the
        cause to show.  Look at those now and then."""
        while True:
            await asyncio.sleep(self.settings.reconcile_interval)
            for name, status in list(self.view.statuses.items()):
                if status.terminal:
                    continue
                if status.spec.get("timeout") or any(r.phase == ReplicaPhase.FAILED for r in status.replicas):
                    self.mark(name)
            try:
                await self._expire_finished()
            except (ApiException, BackendUnavailable) as error:
                self.log.warning("paddle-nbext: could not remove finished jobs past the history limit yet: %s", error)

    async def _timeline_tick(self) -> None:
        """Running jobs' folders in the home change without any object changing (a checkpoint
        saved, a launcher's health warning): look at them now and then (stat signatures)."""
        while True:
            await asyncio.sleep(timeline_keeper.HOME_INTERVAL)
            records = self.view.store("configmaps") if self.view.cache else {}
            for job, status in list(self.view.statuses.items()):
                record = records.get(job)
                if record is not None and not status.terminal:
                    try:
                        self.offer_timeline(job, record, status, home=True)
                    except Exception as error:  # as in `_flush`: the next look tries again
                        self.log.warning("paddle-nbext: could not derive the timeline of %s: %s", job, error)

    def offer_timeline(self, job: str, record: dict[str, Any], status: JobStatus, *, home: bool) -> None:
        """Hand what the job's objects say to its timeline (written in a thread, when new)."""
        cache = self.view.cache
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
        if self.settings.queued:
            every = list(cache.stores["workloads"].values())
            for label, kind, name in self.workloads.owners(job):
                workloads.extend((label, found) for found in queue_status.owned_workloads(every, kind, name))
        resumed = self.notes.resumed(job)
        derived = timeline_objects.derive(
            record, self.view.pods(job), events, workloads, self.workloads.pod_group(job), resumed, job_events
        )
        spec = status.spec
        counts = [
            ("pserver", int(spec.get("pservers") or 0) if spec.get("mode") == "ps" else 0),
            ("trainer", int(spec.get("trainers") or 0)),
        ]
        self.timelines.offer(
            job,
            status.name,
            str((record.get("metadata") or {}).get("uid") or ""),
            replica_logs.log_dir(self.settings.home_path, status.name),
            Path(manifests.checkpoint_dir(self.settings.home_path, status.name)),
            derived,
            replicas=[(role, index) for role, count in counts for index in range(count)],
            metrics=[each for each in replica_metrics.metrics_files(self.settings.home_path, status) if each.role == "trainer"],
            attempt=replicas.Restarts.of(record).attempt,
            home=home,
        )

    def _expired(self, now: float) -> list[str]:
        """Records of finished jobs past the history limit (`keep_finished` per user, newest
        kept; `keep_finished_days`)."""
        by_owner: dict[str, list[tuple[str, JobStatus]]] = {}
        for key, status in self.view.statuses.items():
            if status.terminal and status.finished:
                by_owner.setdefault(status.owner, []).append((key, status))
        doomed: list[str] = []
        for ended in by_owner.values():
            ended.sort(key=lambda item: item[1].finished or "", reverse=True)
            for rank, (key, status) in enumerate(ended):
                finished = parse_time(status.finished)
                too_old = (
                    bool(self.settings.keep_finished_days)
                    and finished is not None
                    and now - finished.timestamp() > self.settings.keep_finished_days * 86400
                )
                if (self.settings.keep_finished and rank >= self.settings.keep_finished) or too_old:
                    doomed.append(key)
        return doomed

    async def _expire_finished(self) -> None:
        """Remove the records past the history limit (`_expired`): the garbage collector takes
        their Jobs and pods; their logs and metrics stay in the home (`~/.paddle-jobs/<job>`)."""
        doomed = self._expired(time.time())
        if not doomed:
            return
        connection = await self.api.connect()
        for key in doomed:
            await self.delete_record(connection, key, f"remove the finished job {key}")

    async def delete_record(self, connection: Connection, key: str, doing: str) -> None:
        """Delete a job's record (the garbage collector takes what it owns; gone already is fine)
        and drop it from the cache at once, so it leaves the list when this returns."""
        try:
            await self.api.call(
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
        if self.view.cache is not None:
            self.view.cache.forget("configmaps", key)
            self.flush_now(key)

    def on_change(self, kind: str, event_type: str, obj: dict[str, Any]) -> None:
        meta = obj.get("metadata") or {}
        if kind == "workloads":
            self.workloads.positions.poke()
            for reference in meta.get("ownerReferences") or []:
                owner = str(reference.get("name") or "")
                named = JOB_OF_JOB.match(owner) if reference.get("kind") == "Job" else None
                self.mark(named.group(1) if named else owner)
            return
        if kind in ("events", "pod_events"):
            involved = (obj.get("involvedObject") or {}).get("name") or ""
            named = (JOB_OF_JOB if kind == "events" else JOB_OF_POD).match(involved)
            if named:
                self.mark(named.group(1))
            return
        job = (meta.get("labels") or {}).get(JOB_LABEL)
        if not job:
            return
        if kind == "pods":
            pods = self.view.pods_by_job.setdefault(job, {})
            pod = str(meta.get("name") or "")
            if event_type == "DELETED":
                pods.pop(pod, None)
            else:
                pods[pod] = obj
        elif kind == "configmaps" and meta.get("name") != job:
            return
        self.mark(job)

    def role_notes(self, job: str, record: dict[str, Any]) -> dict[str, replicas.RoleNote]:
        """What this job's current Jobs (owned by this record) say beyond their pods: failed for
        good (its pods may be gone: node loss, deleted), suspended, or pods that could not be
        created (the Job controller's latest FailedCreate event)."""
        if self.view.cache is None:
            return {}
        uid = (record.get("metadata") or {}).get("uid")
        attempt = replicas.Restarts.of(record).attempt
        jobs = self.view.store("jobs")
        queued_words = self.workloads.queue_words(job)
        notes: dict[str, replicas.RoleNote] = {}
        current: dict[str, str] = {}
        for role in map(str, ROLES):
            obj = jobs.get(self.settings.role_job(job, role))
            if obj is None or not (owned_by(obj, uid) or labelled_for(obj, uid)) or replicas.attempt_of(obj) != attempt:
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
        for event in self.view.store("events").values():
            involved = event.get("involvedObject") or {}
            for role, job_uid in current.items():
                if involved.get("uid") == job_uid:
                    stamp = event.get("lastTimestamp") or event.get("eventTime") or ""
                    if role not in latest or stamp >= latest[role][0]:
                        latest[role] = (stamp, str(event.get("message") or "").strip())
        for role, (_, message) in latest.items():
            if not notes.get(role, replicas.RoleNote()).reason:  # keeps the indexes that completed
                notes[role] = dataclasses.replace(notes.get(role, replicas.RoleNote()), reason=f"FailedCreate: {role_words(message)}")
        for role in map(str, ROLES):
            # A queued JobSet's child Jobs appear only a moment after its Workload has Kueue's
            # words (the JobSet controller makes them): a role without its Job yet waits for the
            # same reason, so it says so, and the replicas never contradict the job's message.
            queued = queued_words.get(role) or queued_words.get("job")
            if role not in notes and role not in current and queued is not None and queued.waiting:
                notes[role] = replicas.RoleNote(f"{queued.state}: {queued.text}")
        return notes

    def pod_notes(self, job: str) -> dict[str, str]:
        """Pod name -> the kubelet's latest FailedMount message, for this job's pods."""
        if self.view.cache is None:
            return {}
        pods = {(p.get("metadata") or {}).get("uid"): name for name, p in self.view.pods_by_job.get(job, {}).items()}
        latest: dict[str, tuple[str, str]] = {}
        for event in self.view.store("pod_events").values():
            name = pods.get((event.get("involvedObject") or {}).get("uid"))
            if name and event.get("reason") == "FailedMount":
                stamp = event.get("lastTimestamp") or event.get("eventTime") or ""
                if name not in latest or stamp >= latest[name][0]:
                    latest[name] = (stamp, str(event.get("message") or "").strip())
        mounts = {name: f"FailedMount: {message}" for name, (_, message) in latest.items()}
        return {**volcano_status.pod_notes(self.view.pods_by_job.get(job, {}).values(), self.workloads.pod_group(job)), **mounts}

    def mark(self, job: str) -> None:
        self._dirty.add(job)
        if not self._flush_scheduled:
            self._flush_scheduled = True
            asyncio.get_running_loop().call_soon(self._flush)

    def _flush(self) -> None:
        """Recompute the status of changed jobs; publish what changed; act on decided ends."""
        self._flush_scheduled = False
        dirty, self._dirty = self._dirty, set()
        records = self.view.store("configmaps") if self.view.cache else {}
        for job in dirty:
            record = records.get(job)
            if record is None:
                status = self.view.statuses.pop(job, None)
                self._published.pop(job, None)
                self.notes.forget(job)
                self._unanswered.pop(job, None)
                self.timelines.forget(job)
                self._timeline_ended.discard(job)
                if status is not None:
                    if self.view.keys.get((status.owner, status.name)) == job:
                        del self.view.keys[(status.owner, status.name)]
                    self.publish(JobEvent(EV_DELETED, status.owner, status.name))
                if not self.view.pods_by_job.get(job):
                    self.view.pods_by_job.pop(job, None)
                continue
            status, decision, views = job_status(
                record,
                self.workloads.deciding_pods(job),
                self.role_notes(job, record),
                self.pod_notes(job),
                queue_note=queue_status.summary(self.workloads.queue_words(job)) or self.workloads.gang_note(job),
                unreachable=self._unanswered.get(job, frozenset()),
            )
            status = self.notes.with_resume_note(job, record, status)
            status = self.notes.with_environment_note(job, status)
            # The end gets one last look at the home (its last checkpoint, the environment's end).
            ended = status.terminal and job not in self._timeline_ended
            if ended:
                self._timeline_ended.add(job)
            try:
                self.offer_timeline(job, record, status, home=ended or job not in self.view.statuses)
            except Exception as error:  # never the status's problem: a damaged object loses its entries only
                self.log.warning("paddle-nbext: could not derive the timeline of %s: %s", job, error)
            status = timeline_keeper.with_warnings(status, self.timelines.warnings(job))
            self.view.statuses[job] = status
            if status.terminal:
                self.workloads.release_gang(job)
            self.view.keys[(status.owner, status.name)] = job
            data = status.to_dict()
            if self._published.get(job) != data:
                self._published[job] = data
                self.publish(JobEvent(UPDATED, status.owner, status.name, data))
            if decision is not None and decision.terminal and job not in self._finishing:
                self._finishing.add(job)
                self.view.spawn(self._finish(job, record, views, decision))

    async def _finish(self, job: str, record: dict[str, Any], views: list[Any], decision: policy.Decision) -> None:
        """The server's share of the master's work: record the end, stop what still runs."""
        try:
            if queue_status.stopped_by_kueue(self.workloads.queue_words(job)):
                return  # Kueue evicted it since: its pods end by Kueue's stop, the job waits (`Workloads.deciding_pods`)
            silent = await node_answers.unanswered(self.pod_logs.open, replicas.pods_to_ask(views, decision))
            if silent:  # a peer's node stopped answering: hold the failure until Kubernetes declares it lost
                self._unanswered[job] = silent
                self.mark(job)
                asyncio.get_running_loop().call_later(node_answers.RECHECK_SECONDS, self._ask_again, job)
                return
            candidates = replicas.explaining_candidates(views, decision)
            if candidates:
                failed, tail = replicas.pick_explanation([(pod, await self.pod_logs.last_lines(pod)) for pod in candidates])
                views, decision = replicas.decide_job(
                    record,
                    self.view.pods(job),
                    tail,
                    self.role_notes(job, record),
                    self.pod_notes(job),
                    explaining_pod=failed,
                )
            if await self.record_final(job, replicas.final_status(views, decision), record):
                # The master's Job too: it has nothing left to do, and a master pod that never ran
                # (an image it cannot pull) would otherwise keep its Job, and the TTL, waiting.
                roles = sorted({role for role, _ in decision.stop} | {manifests.MASTER})
                await self.stop_roles(job, roles, succeeded=decision.phase == Phase.SUCCEEDED)
        except (ApiException, BackendUnavailable) as error:
            self.log.warning("paddle-nbext: could not finish job %s yet: %s", job, error)
        finally:
            self._finishing.discard(job)

    def _ask_again(self, job: str) -> None:
        """Ask the silent nodes of a held failure again: one that answers now lets it end."""
        self.view.spawn(self._reask(job))

    async def _reask(self, job: str) -> None:
        asked = self._unanswered.get(job)
        if not asked:
            return
        try:
            still = await node_answers.unanswered(self.pod_logs.open, sorted(asked))
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
            self.mark(job)

    async def record_final(self, job: str, final: dict[str, Any], record: dict[str, Any], cancelled: bool = False) -> bool:
        """Write the job's end into its record, once: the patch carries the resourceVersion of the
        record the end was decided on, so if anything wrote first (the master's "Succeeded", a
        cancel) the API refuses ours and the first end stays.  Returns whether ours was written."""
        connection = await self.api.connect()
        annotations = {STATUS_ANNOTATION: json.dumps(final)}
        if cancelled:
            annotations[CANCELLED_ANNOTATION] = "true"
        version = (record.get("metadata") or {}).get("resourceVersion")
        core = client.CoreV1Api(connection.api)
        try:
            response = await self.api.call(
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
            listed = await self.api.call(
                f"read job {job}",
                core.list_namespaced_config_map,
                connection.namespace,
                field_selector=f"metadata.name={job}",
                _preload_content=False,
            )
            for item in json.loads(listed.data).get("items") or []:
                if self.view.cache is not None:
                    self.view.cache.put("configmaps", item)
                if final_of(item) is None:  # changed, but not ended: write it on the new version
                    return await self.record_final(job, final, item, cancelled)
            return False
        if self.view.cache is not None:
            self.view.cache.put("configmaps", json.loads(response.data))
        return True

    async def stop_roles(self, job: str, roles: list[str], succeeded: bool = False) -> None:
        """End each role's Job through its deadline (`cluster_master.STOP_PATCH`): the Job
        controller stops the live pods; finished pods stay for their logs.  After a success the
        Jobs are deleted instead (as the master does, `Api.stop_role`): a deadline would mark
        them Failed, an alert for a job that went well."""
        connection = await self.api.connect()
        batch = client.BatchV1Api(connection.api)
        for role in roles:
            try:
                if succeeded:
                    await self.api.call(
                        f"stop the {role}s of {job}",
                        batch.delete_namespaced_job,
                        self.settings.role_job(job, role),
                        connection.namespace,
                        propagation_policy="Background",
                        _preload_content=False,
                    )
                    continue
                await self.api.call(
                    f"stop the {role}s of {job}",
                    batch.patch_namespaced_job,
                    self.settings.role_job(job, role),
                    connection.namespace,
                    cluster_master.STOP_PATCH,
                    _preload_content=False,
                )
            except ApiException as error:
                if error.status != 404:
                    raise

    async def synced_cache(self) -> WatchCache:
        cache = await self.ensure_cache()
        if not cache.synced and not await cache.wait_synced(self.settings.sync_timeout):
            raise self.cache_unavailable(cache, "the job list could not be read")
        if not cache.connected:
            raise self.cache_unavailable(cache, "job states may be stale")
        return cache

    def cache_unavailable(self, cache: WatchCache, consequence: str) -> BackendUnavailable:
        cause = cache.error or "no answer yet"
        namespace = cache.namespace
        if cache.denials:
            return BackendForbidden(f"{consequence[0].upper()}{consequence[1:]}: {cause}")
        if cause.startswith(("HTTP 401", "HTTP 403")):
            return BackendUnavailable(
                f"the service account may not watch paddle-nbext jobs in namespace {namespace} ({cause}); "
                f"{consequence}. Bind the Role in deploy/rbac/notebook-role.yaml to it"
            )
        host = self.api.host()
        return BackendUnavailable(f"the Kubernetes API at {host} is unreachable ({cause}); {consequence}")

    def flush_now(self, job: str) -> None:
        self._dirty.add(job)
        self._flush()
