"""The `kubernetes` backend: a job is a set of objects in the user's namespace (docs/admin-guide.md, "A job's objects").

Writes go through the official client in threads (`asyncio.to_thread`); reads come from the
watch-backed cache, so listing costs no API call.  While the server runs it applies the same
lifecycle policy as the in-cluster master (record the end, stop the pservers), so a job ends
cleanly even if the master pod is lost.

`KubernetesBackend` is the settings (`backend_config.py`, `c.KubernetesBackend.*`) and the
operations of `Backend`; the work is done by parts it makes once, each from the frozen settings
and the parts it needs, passed to it: `client/` (the API), `job_view.py` (what is known of the
jobs), `lifecycle/` (the home, the queue and gang objects, the reconcile loop, the admission of
a submit), `logs/`, `usage/`, with `build/`, `status/`, `quota/` and `timeline/` as their tools.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import shutil
from collections.abc import AsyncGenerator
from pathlib import Path
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from paddle_nbext.model.contract import CANCELLED_ANNOTATION, ROLES
from paddle_nbext.model.quota import Verdict
from paddle_nbext.model.spec import JobSpec, SpecError
from paddle_nbext.model.status import JobStatus

from ... import job_requirements, package
from ...events import JobEvent
from ...metrics import MetricsFile
from ...runtime import replicas
from ..base import BackendUnavailable, InvalidRequest, InvalidState, JobNotFound, SubmitRequest
from .backend_config import KubernetesBackendConfig
from .build import jobset as jobsets
from .build import manifests, volcano
from .client.api_calls import KubernetesClient
from .client.api_names import JOBS_DIR, JOBSET_API, KUEUE_API, PODGROUP_API
from .client.cache import describe_failure
from .job_view import JobView
from .lifecycle.admission import Admission
from .lifecycle.home_setup import HomeSetup, remove_tree
from .lifecycle.reconcile import Reconciler
from .lifecycle.workloads import Workloads
from .logs import replica_logs
from .logs.pod_logs import PodLogs
from .logs.reading import LogReading
from .settings import JOBSET_MODE
from .status.job_status import link_record
from .usage import metrics as replica_metrics
from .usage.resource_usage import ResourceUsage

#: Seconds a delete waits for the job's pods that are bound to a node but not started yet (see
#: `delete`), and how often it looks.
DELETE_POD_WAIT = 30.0
DELETE_POD_POLL = 0.2


class KubernetesBackend(KubernetesBackendConfig):
    """Runs each job as a record ConfigMap, a headless Service, a master Job and Indexed Jobs.

    The settings are frozen when the backend is made (`settings`); each part gets them and the
    parts it needs, and reaches no other part's internals."""

    name = "kubernetes"

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.settings = settings = self.frozen_settings()
        self.api = KubernetesClient(settings, self.log)
        self.view = JobView()
        self.homes = HomeSetup(settings, self.api, self.log)
        self.workloads = Workloads(settings, self.api, self.view, self.log)
        self.pod_logs = PodLogs(settings, self.api, self.view)
        self.reconciler = Reconciler(settings, self.api, self.view, self.workloads, self.pod_logs, self._publish, self.log)
        self.admission = Admission(settings, self.api, self.homes, self.view, self.name, self.log)
        self.log_reading = LogReading(settings, self.view, self.pod_logs)
        self.resource_usage = ResourceUsage(self.api, self.view)

    def _publish(self, event: JobEvent) -> None:
        """A status changed or a job is gone: tell the event hub the backend has now."""
        self.events.publish(event)

    async def start(self) -> None:
        try:
            cache = await self.reconciler.ensure_cache()
        except BackendUnavailable as error:
            self.log.warning("paddle-nbext kubernetes backend: %s", error.message)
            return
        connection = await self.api.connect()
        if self.settings.workload_mode == JOBSET_MODE:
            await self.api.api_exists(connection, JOBSET_API)
        if self.settings.queued:
            await self.api.api_exists(connection, KUEUE_API)
        if self.settings.gang_scheduler:
            await self.api.api_exists(connection, PODGROUP_API)
        if self.settings.home_volume == "cephfs":
            # Said at start too (GET /config, the log), not only at the first submit.
            self.homes.home_problem = await self.homes.intree_cephfs_problem(connection)
            if self.homes.home_problem:
                self.log.error("paddle-nbext kubernetes backend: %s", self.homes.home_problem)
        if not await cache.wait_synced(self.settings.sync_timeout):
            self.log.warning("paddle-nbext: the job cache is not synced yet: %s", cache.error or "slow API")

    async def stop(self) -> None:
        self.reconciler.stop()
        for task in list(self.view.tasks):
            task.cancel()
        if self.view.cache is not None:
            await asyncio.to_thread(self.view.cache.stop)
            self.view.cache = None
        if self.api.connection is not None:
            await asyncio.to_thread(self.api.close)

    def describe(self) -> dict[str, Any]:
        settings = self.settings
        info: dict[str, Any] = {"name": self.name, "ok": False, "error": None, "home_volume": settings.home_volume}
        info["quota_check"] = True  # a dry run answers with `quota` (forms show it before submit)
        if self.api.connection is not None:
            info.update(namespace=self.api.connection.namespace, source=self.api.connection.source)
        if self.admission.hub_problem:
            info["unsafe_namespace"] = self.admission.hub_problem
        if warnings := self.api.warnings():
            info["api_warnings"] = warnings
        if self.homes.home is not None:
            info["home"] = self.homes.home.describe()
        cache = self.view.cache
        if cache is None:
            info["error"] = "not connected to the Kubernetes API yet"
        else:
            info["ok"] = cache.connected and cache.synced
            info["error"] = cache.error
            if cache.denials:  # the cause in parts: who may not do what, where, and the Role
                info["forbidden"] = [denial.to_dict() for denial in cache.denials]
        if self.homes.home_problem:
            info["ok"] = False
            info["error"] = self.homes.home_problem
        info["workload_mode"] = settings.workload_mode
        info["jobset_api"] = self.api.apis.get(JOBSET_API)  # None: not asked (yet)
        if settings.workload_mode == JOBSET_MODE and self.api.apis.get(JOBSET_API) is False:
            info["ok"] = False
            info["error"] = (
                f"workload_mode is 'jobset' but the cluster serves no JobSet API ({jobsets.API_VERSION}): "
                "install JobSet (admin guide: 'Workload modes') or set c.KubernetesBackend.workload_mode = 'jobs'"
            )
        if settings.queued:
            info["queues"] = {
                "default": settings.default_queue,
                "allowed": list(settings.allowed_queues),
                "kueue_api": self.api.apis.get(KUEUE_API),
            }
            info["queues"]["positions"] = self.workloads.positions.describe()
        self.admission.describe_gang(info)
        return info

    async def submit(self, request: SubmitRequest, *, dry_run: bool = False) -> dict[str, Any]:
        spec, owner = request.spec, request.owner
        self.admission.serves(owner)
        connection = await self.api.connect()
        await self.admission.refuse_a_hub_namespace(connection)
        home = await self.homes.home_volume(owner, connection)
        try:
            source = await asyncio.to_thread(package.resolve_package, spec, request.home)
            requirements = await asyncio.to_thread(job_requirements.find_requirements, spec, source)
        except SpecError as error:
            raise InvalidRequest(error.message, field=error.field) from None
        if requirements is not None:  # the file found, for the launchers (and the record)
            spec = dataclasses.replace(spec, requirements=requirements.file)
        snapshot = spec.snapshot or request.entry_script is not None
        job_dir = Path(request.home) / JOBS_DIR / spec.job_name
        workdir_local = job_dir / "package" if snapshot else source
        workdir = self.homes.container_path(workdir_local, request.home)
        runtime = await asyncio.to_thread(self.admission.runtime_bundle)
        self.admission.check_queue(spec)
        await self.admission.require_workload_api(connection)
        plan = manifests.build_plan(
            spec, owner, self.admission.manifest_settings(connection.namespace), home=home, workdir=workdir, runtime=runtime
        )
        if request.resumed_from is not None:  # the link to the ended job, kept with the record
            link_record(plan[0], request.resumed_from)
        quota_check = await self.admission.check_quota(connection, spec, plan)
        if dry_run:
            preview = self.admission.preview_status(spec, owner)
            return {
                "dry_run": True,
                "job": preview.to_dict(),
                "plan": {
                    "namespace": connection.namespace,
                    "manifests": plan,
                    "environment": await self._environment_preview(requirements, request, spec),
                },
                "quota": quota_check.to_dict(),
            }
        if quota_check.verdict == Verdict.NEVER:  # refused before anything is created
            raise InvalidRequest(quota_check.words, field=quota_check.field)
        cache = await self.reconciler.ensure_cache()
        key = manifests.object_name(spec.job_name, owner)
        await self.admission.wait_for_the_old_pods(key, spec.job_name)
        await self.admission.ensure_runtime(connection, runtime)
        created: list[dict[str, Any]] = []
        record = await self.api.create(plan[0], created, spec.job_name)
        uid = record["metadata"]["uid"]
        try:
            if snapshot:
                await asyncio.to_thread(self.homes.snapshot, source, job_dir, request.entry_script, request.home)
            if requirements is not None:
                await asyncio.to_thread(self._write_index_file, job_dir)
            for manifest in plan[1:]:
                await self.api.create(manifests.set_owner_uid(manifest, uid), created, spec.job_name)
        except BaseException:
            await self.api.rollback(created)
            if snapshot:
                await asyncio.to_thread(shutil.rmtree, job_dir, True)
            elif requirements is not None:
                await asyncio.to_thread(job_requirements.remove_index_file, job_dir)
            raise
        cache.put("configmaps", record)
        self.reconciler.flush_now(key)
        status = self.view.statuses.get(key)
        return (status or self.admission.preview_status(spec, owner)).to_dict()

    def _site(self) -> job_requirements.Site:
        """The site's settings for jobs' requirements (`c.PaddleNbext.pip_*`)."""
        return job_requirements.Site.from_config(self.parent)

    def _write_index_file(self, job_dir: Path) -> None:
        """The site's index settings for the job's launchers, in its folder in the home (0600)."""
        job_dir.mkdir(parents=True, exist_ok=True)
        job_requirements.write_index_file(job_dir, self._site())

    async def _environment_preview(
        self, requirements: job_requirements.Requirements | None, request: SubmitRequest, spec: JobSpec
    ) -> dict[str, Any] | None:
        """What a dry run says about the job's environment (`job_requirements.preview`)."""
        envs = Path(request.home) / JOBS_DIR / job_requirements.ENVS_DIR
        image = spec.image or self.settings.default_image or ""
        return await asyncio.to_thread(job_requirements.preview, requirements, envs, self._site(), image)

    async def list_jobs(self, owner: str) -> list[JobStatus]:
        self.admission.serves(owner)
        await self.reconciler.synced_cache()
        jobs = [s for s in self.view.statuses.values() if s.owner == owner]
        return sorted(jobs, key=lambda s: s.created, reverse=True)

    async def get_job(self, name: str, owner: str) -> JobStatus:
        self.admission.serves(owner)
        await self.reconciler.synced_cache()
        status = self.view.statuses.get(self.view.keys.get((owner, name), ""))
        if status is None or status.owner != owner or status.name != name:
            raise JobNotFound(f"no job named '{name}'")
        return status

    async def cancel(self, name: str, owner: str) -> JobStatus:
        status = await self.get_job(name, owner)
        if status.terminal:
            return status
        key = self.view.key(status)
        record = self.view.store("configmaps")[key]
        pods = self.view.pods(key)
        cancelled = json.loads(json.dumps(record))
        cancelled.setdefault("metadata", {}).setdefault("annotations", {})[CANCELLED_ANNOTATION] = "true"
        views, decision = replicas.decide_job(cancelled, pods, "", self.reconciler.role_notes(key, record), self.reconciler.pod_notes(key))
        if await self.reconciler.record_final(key, replicas.final_status(views, decision), record, cancelled=True):
            await self.workloads.deactivate(key)
            await self.reconciler.stop_roles(key, [manifests.MASTER, *ROLES])
        self.reconciler.flush_now(key)  # ended first some other way: that end is what the job shows
        return self.view.statuses[key]

    async def _delete_parts(self, key: str, name: str, connection: Any) -> None:
        """Delete the Jobs (or JobSet) and the Service of the job whose objects are named `key`."""
        batch, core = client.BatchV1Api(connection.api), client.CoreV1Api(connection.api)
        parts: list[tuple[str, Any]] = []
        if self.settings.workload_mode == JOBSET_MODE:
            custom = client.CustomObjectsApi(connection.api)

            def delete_jobset(jobset: str, namespace: str, **kwargs: Any) -> Any:
                return custom.delete_namespaced_custom_object(jobsets.GROUP, jobsets.VERSION, namespace, jobsets.PLURAL, jobset, **kwargs)

            parts.append((key, delete_jobset))
        parts += [(self.settings.role_job(key, role), batch.delete_namespaced_job) for role in (*reversed(ROLES), manifests.MASTER)]
        parts.append((key, core.delete_namespaced_service))
        if self.settings.gang_scheduler:
            parts.append((key, self.api.verb_for("delete", volcano.KIND)))  # the PodGroup `<obj>`
        for part, delete in parts:
            try:
                await self.api.call(
                    f"delete {part}", delete, part, connection.namespace, propagation_policy="Background", _preload_content=False
                )
            except ApiException as error:
                if error.status != 404:
                    raise BackendUnavailable(f"cannot delete job '{name}': deleting {part} failed: {describe_failure(error)}") from None

    async def _pods_gone(self, key: str, timeout: float = DELETE_POD_WAIT) -> bool:
        """Wait (without blocking the server) until the watch cache holds no pod of the job
        `key` that may still start its container, or `timeout` passed; whether none is left."""
        deadline = asyncio.get_running_loop().time() + timeout
        while any(replicas.may_still_start(pod) for pod in self.view.pods(key)):
            if asyncio.get_running_loop().time() >= deadline:
                return False
            await asyncio.sleep(DELETE_POD_POLL)
        return True

    async def read_logs(self, name: str, owner: str, role: str, index: int, *, tail: int | None = None, previous: bool = False) -> str:
        return await self.log_reading.read(await self.get_job(name, owner), role, index, tail=tail, previous=previous)

    async def follow_logs(self, name: str, owner: str, role: str, index: int, *, tail: int | None = None) -> AsyncGenerator[str, None]:
        status = await self.get_job(name, owner)
        async for chunk in self.log_reading.follow(status, role, index, tail=tail):
            yield chunk

    async def read_pod_log(self, pod: str, *, tail: int | None, previous: bool) -> str:
        """One pod's log (logs/pod_logs.py): from the API, else from the launcher's file in the home."""
        return await self.pod_logs.read(pod, tail=tail, previous=previous)

    async def usage(self, name: str, owner: str) -> dict[str, Any]:
        return await self.resource_usage.answer(await self.get_job(name, owner))

    async def metrics_files(self, name: str, owner: str) -> list[MetricsFile]:
        """The files on the home volume the job's launchers name for `report()` (metrics.py)."""
        return replica_metrics.metrics_files(self.settings.home_path, await self.get_job(name, owner))

    async def timeline(self, name: str, owner: str, since: int = 0) -> dict[str, Any]:
        """What happened to the job, from the `timeline.jsonl` this server writes in its logs dir
        in the home (timeline/keeper.py), by time; `JobNotFound` for anyone else's job."""
        status = await self.get_job(name, owner)
        logs_dir = replica_logs.log_dir(self.settings.home_path, status.name)
        return await asyncio.to_thread(self.reconciler.timelines.answer, self.view.key(status), logs_dir, status.name, since)

    async def delete(self, name: str, owner: str) -> None:
        key = self.view.key(await self.get_job(name, owner))
        self.metrics.forget(name)
        connection = await self.api.connect()
        # The Jobs and the Service go first, by name: the garbage collector would remove them after
        # the record, but only a moment later, and a resubmit of the name in that moment would
        # collide with them.  Their pods terminate in the background (the status of a new job of
        # the same name ignores them: they carry the old record's uid).
        await self._delete_parts(key, name, connection)
        try:
            await self.reconciler.delete_record(connection, key, f"delete job {name}")
        except ApiException as error:
            raise BackendUnavailable(f"cannot delete job '{name}': {describe_failure(error)}") from None
        job_dir = Path(self.settings.home_path) / JOBS_DIR / name
        # A pod already bound to a node may still start after its Job is gone, and the container
        # runtime makes a missing working directory (the job's package/) as root: the folder is
        # removed once the job's pods are (or after DELETE_POD_WAIT, for pods of a lost node).
        await self._pods_gone(key)
        await asyncio.to_thread(self.reconciler.timelines.close, key)  # no timeline write brings the folder back
        if job_dir.is_dir():
            left = await asyncio.to_thread(remove_tree, job_dir)
            if left:
                self.log.warning("paddle-nbext: job %s deleted, but %d files stay in %s: %s", name, len(left), job_dir, left[0])
                raise InvalidState(
                    f"job '{name}' is deleted, but {len(left)} of its files in {job_dir} could not be removed "
                    f"(first: {left[0]}); files a job pod wrote as another user (root?) must be removed by that user "
                    "or an admin",
                    field=None,
                )
