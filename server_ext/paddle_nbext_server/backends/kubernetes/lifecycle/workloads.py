"""The objects a queue or a gang scheduler adds to a job: Kueue's Workloads (their words, their queue
positions, Kueue's own stop) and Volcano's PodGroup (its note, its release when the job ends).

A part of `KubernetesBackend` (backend.py): the reconciler asks it what the queue says about a job,
the backend's cancel deactivates a job's Workloads through it."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from paddle_nbext.model.contract import RECORD_UID_LABEL, ROLES

from ...base import BackendUnavailable
from ..build import manifests, volcano
from ..client.api_calls import KubernetesClient
from ..client.cache import WORKLOADS, describe_failure
from ..client.connection import Connection
from ..job_view import JobView
from ..settings import JOBSET_MODE, BackendSettings
from ..status import queue_positions, queue_status, volcano_status


class Workloads:
    """Kueue's Workloads and Volcano's PodGroup of the jobs."""

    def __init__(self, settings: BackendSettings, api: KubernetesClient, view: JobView, log: logging.Logger) -> None:
        self.settings = settings
        self.api = api
        self.view = view
        self.log = log
        self.positions = queue_positions.QueuePositions(interval=settings.queue_position_interval, log=log)
        self._releasing: set[str] = set()  # jobs whose PodGroup is being deleted

    def pod_group(self, job: str) -> dict[str, Any] | None:
        """The job's PodGroup from the cache (one of an earlier job of the same name is not it)."""
        if self.view.cache is None or not self.settings.gang_scheduler:
            return None
        record = self.view.store("configmaps").get(job)
        found = self.view.store("podgroups").get(job)
        if record is None or found is None or not owned_by(found, (record.get("metadata") or {}).get("uid")):
            return None
        return found

    def gang_note(self, job: str) -> str | None:
        return volcano_status.job_note(self.view.pods(job), self.pod_group(job))

    def release_gang(self, job: str) -> None:
        """An ended job's PodGroup goes at once: Volcano keeps the gang's `minResources` reserved
        in its queue while a PodGroup waits, so a cancelled job would hold the queue.  The record
        stays (the garbage collector would remove the PodGroup only with the record)."""
        found = self.pod_group(job)
        if found is None or job in self._releasing:
            return
        self._releasing.add(job)

        async def release() -> None:
            try:
                connection = await self.api.connect()
                await self.api.call(
                    f"delete the PodGroup of {job}",
                    self.api.verb_for("delete", volcano.KIND),
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

        self.view.spawn(release())

    def owners(self, job: str) -> list[tuple[str, str, str]]:
        """(label, kind, name) of the objects Kueue makes a Workload for: the JobSet, or each role's Job."""
        if self.settings.workload_mode == JOBSET_MODE:
            return [("job", "JobSet", job)]
        return [(role, "Job", self.settings.role_job(job, role)) for role in (manifests.MASTER, *ROLES)]

    def queue_words(self, job: str) -> dict[str, queue_status.QueueWords]:
        if self.view.cache is None or not self.settings.queued:
            return {}
        return queue_status.job_words(self.view.store("workloads").values(), self.owners(job), self.positions.words_of)

    def deciding_pods(self, job: str) -> list[dict[str, Any]]:
        """The pods the job's status is decided on: none while Kueue has evicted (preempted) its
        Workload, because Kueue is then stopping them (SIGTERM: exit code 143) and the job is
        queued to run again, not failed; the replicas then say why (`Reconciler`'s role notes)."""
        if queue_status.stopped_by_kueue(self.queue_words(job)):
            return []
        return self.view.pods(job)

    def start_queue_positions(self, connection: Connection, changed: Callable[[dict[str, Any]], None]) -> None:
        """Queue positions of waiting jobs, refreshed in the background (status/queue_positions.py);
        a Workload whose position moved is handed to `changed`, like a change of the Workload."""
        if not self.settings.queued:
            return

        def workloads() -> list[dict[str, Any]]:
            return list(self.view.store("workloads").values()) if self.view.cache is not None else []

        self.view.spawn(self.positions.run(connection.api, connection.namespace, workloads, self.settings.queues, changed))

    async def deactivate(self, job: str) -> None:
        """Kueue's own stop for a job it manages: `spec.active=false` on its Workloads (Kueue then
        suspends the JobSet or Jobs, removes their pods and frees the quota)."""
        if self.view.cache is None or not self.settings.queued:
            return
        connection = await self.api.connect()
        custom = client.CustomObjectsApi(connection.api)
        workloads = list(self.view.store("workloads").values())
        for _, kind, name in self.owners(job):
            for workload in queue_status.owned_workloads(workloads, kind, name):
                try:
                    await self.api.call(
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


def owned_by(obj: dict[str, Any], uid: str | None) -> bool:
    """Whether `obj` is owned (ownerReferences) by the object of `uid` (a job's record)."""
    return any(ref.get("uid") == uid for ref in (obj.get("metadata") or {}).get("ownerReferences") or [])


def labelled_for(obj: dict[str, Any], uid: str | None) -> bool:
    """A JobSet's child Job belongs to the JobSet, and names the record it was made for by label."""
    return bool(uid) and ((obj.get("metadata") or {}).get("labels") or {}).get(RECORD_UID_LABEL) == uid
