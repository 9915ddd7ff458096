"""The `kubernetes` backend: a job is a set of objects in the user's namespace (docs/admin-guide.md, "A job's objects").

Writes go through the official client in threads (`asyncio.to_thread`); reads come from the
watch-backed cache, so listing costs no API call.  While the server runs it applies the same
lifecycle policy as the in-cluster master (record the end, stop the pservers), so a job ends
cleanly even if the master pod is lost.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import shutil
from pathlib import Path
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from paddle_nbext.model.contract import CANCELLED_ANNOTATION, ROLES
from paddle_nbext.model.quota import Verdict
from paddle_nbext.model.spec import JobSpec, SpecError
from paddle_nbext.model.status import JobStatus

from ... import job_requirements, package
from ...metrics import MetricsFile
from ...runtime import replicas
from ..base import BackendUnavailable, InvalidRequest, InvalidState, JobNotFound, SubmitRequest
from .build import jobset as jobsets
from .build import manifests, volcano
from .client.api_names import JOBS_DIR, JOBSET_API, KUEUE_API, PODGROUP_API
from .client.cache import describe_failure
from .lifecycle.home_setup import remove_tree
from .logs import replica_logs
from .settings import JOBSET_MODE
from .status.job_status import link_record
from .usage import metrics as replica_metrics
from .usage.resource_usage import ResourceUsage

#: Seconds a delete waits for the job's pods that are bound to a node but not started yet (see
#: `delete`), and how often it looks.
DELETE_POD_WAIT = 30.0
DELETE_POD_POLL = 0.2


class KubernetesBackend(ResourceUsage):
    """Runs each job as a record ConfigMap, a headless Service, a master Job and Indexed Jobs.

    The backend is built in layers, each a class of its own module over the one below:
    `backend_config` (settings) -> `api_calls` (connection, writes) -> `home_setup` (home
    volume, identity, snapshot) -> `reconcile` (status cache, ends, history) -> `admission`
    (checks before a submit writes) -> `log_reading` -> `resource_usage` (metrics.k8s.io) -> this
    class (the operations of `Backend`).
    """

    name = "kubernetes"

    async def start(self) -> None:
        try:
            await self._ensure_cache()
        except BackendUnavailable as error:
            self.log.warning("paddle-nbext kubernetes backend: %s", error.message)
            return
        assert self._cache is not None
        connection = await self._conn()
        if self.workload_mode == JOBSET_MODE:
            await self._api_exists(connection, JOBSET_API)
        if self._queued:
            await self._api_exists(connection, KUEUE_API)
        if self.gang_scheduler:
            await self._api_exists(connection, PODGROUP_API)
        if self.home_volume == "cephfs":
            # Said at start too (GET /config, the log), not only at the first submit.
            self._home_problem = await self._intree_cephfs_problem(connection)
            if self._home_problem:
                self.log.error("paddle-nbext kubernetes backend: %s", self._home_problem)
        if not await self._cache.wait_synced(self.sync_timeout):
            self.log.warning("paddle-nbext: the job cache is not synced yet: %s", self._cache.error or "slow API")

    async def stop(self) -> None:
        if self._ticker:
            self._ticker.cancel()
            self._ticker = None
        for task in list(self._tasks):
            task.cancel()
        if self._cache is not None:
            await asyncio.to_thread(self._cache.stop)
            self._cache = None
        if self._connection is not None:
            await asyncio.to_thread(self._connection.api.close)
            self._connection = None

    def describe(self) -> dict[str, Any]:
        info: dict[str, Any] = {"name": self.name, "ok": False, "error": None, "home_volume": self.home_volume}
        info["quota_check"] = True  # a dry run answers with `quota` (forms show it before submit)
        if self._connection is not None:
            info.update(namespace=self._connection.namespace, source=self._connection.source)
        if self._hub_problem:
            info["unsafe_namespace"] = self._hub_problem
        if self._api_warnings:
            info["api_warnings"] = list(self._api_warnings.values())
        if self._home is not None:
            info["home"] = self._home.describe()
        if self._cache is None:
            info["error"] = "not connected to the Kubernetes API yet"
        else:
            info["ok"] = self._cache.connected and self._cache.synced
            info["error"] = self._cache.error
            if self._cache.denials:  # the cause in parts: who may not do what, where, and the Role
                info["forbidden"] = [denial.to_dict() for denial in self._cache.denials]
        if self._home_problem:
            info["ok"] = False
            info["error"] = self._home_problem
        info["workload_mode"] = self.workload_mode
        info["jobset_api"] = self._apis.get(JOBSET_API)  # None: not asked (yet)
        if self.workload_mode == JOBSET_MODE and self._apis.get(JOBSET_API) is False:
            info["ok"] = False
            info["error"] = (
                f"workload_mode is 'jobset' but the cluster serves no JobSet API ({jobsets.API_VERSION}): "
                "install JobSet (admin guide: 'Workload modes') or set c.KubernetesBackend.workload_mode = 'jobs'"
            )
        if self._queued:
            info["queues"] = {"default": self.default_queue, "allowed": list(self.allowed_queues), "kueue_api": self._apis.get(KUEUE_API)}
            info["queues"]["positions"] = self._positions.describe()
        self._describe_gang(info)
        return info

    async def submit(self, request: SubmitRequest, *, dry_run: bool = False) -> dict[str, Any]:
        spec, owner = request.spec, request.owner
        self._serves(owner)
        connection = await self._conn()
        await self._refuse_a_hub_namespace(connection)
        home = await self._home_volume(owner, connection)
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
        workdir = self._container_path(workdir_local, request.home)
        runtime = await asyncio.to_thread(self._runtime_bundle)
        self._check_queue(spec)
        await self._require_workload_api(connection)
        plan = manifests.build_plan(spec, owner, self._settings(connection.namespace), home=home, workdir=workdir, runtime=runtime)
        if request.resumed_from is not None:  # the link to the ended job, kept with the record
            link_record(plan[0], request.resumed_from)
        quota_check = await self._check_quota(connection, spec, plan)
        if dry_run:
            preview = self._preview_status(spec, owner)
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
        cache = await self._ensure_cache()
        key = manifests.object_name(spec.job_name, owner)
        await self._wait_for_the_old_pods(key, spec.job_name)
        await self._ensure_runtime(connection, runtime)
        created: list[dict[str, Any]] = []
        record = await self._create(plan[0], created, spec.job_name)
        uid = record["metadata"]["uid"]
        try:
            if snapshot:
                await asyncio.to_thread(self._snapshot, source, job_dir, request.entry_script, request.home)
            if requirements is not None:
                await asyncio.to_thread(self._write_index_file, job_dir)
            for manifest in plan[1:]:
                await self._create(manifests.set_owner_uid(manifest, uid), created, spec.job_name)
        except BaseException:
            await self._rollback(created)
            if snapshot:
                await asyncio.to_thread(shutil.rmtree, job_dir, True)
            elif requirements is not None:
                await asyncio.to_thread(job_requirements.remove_index_file, job_dir)
            raise
        cache.put("configmaps", record)
        self._flush_now(key)
        status = self._statuses.get(key)
        return (status or self._preview_status(spec, owner)).to_dict()

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
        image = spec.image or self.default_image or ""
        return await asyncio.to_thread(job_requirements.preview, requirements, envs, self._site(), image)

    async def list_jobs(self, owner: str) -> list[JobStatus]:
        self._serves(owner)
        await self._synced_cache()
        jobs = [s for s in self._statuses.values() if s.owner == owner]
        return sorted(jobs, key=lambda s: s.created, reverse=True)

    async def get_job(self, name: str, owner: str) -> JobStatus:
        self._serves(owner)
        await self._synced_cache()
        status = self._statuses.get(self._keys.get((owner, name), ""))
        if status is None or status.owner != owner or status.name != name:
            raise JobNotFound(f"no job named '{name}'")
        return status

    async def cancel(self, name: str, owner: str) -> JobStatus:
        status = await self.get_job(name, owner)
        if status.terminal:
            return status
        assert self._cache is not None
        key = self._key(status)
        record = self._cache.stores["configmaps"][key]
        pods = list(self._pods_by_job.get(key, {}).values())
        cancelled = json.loads(json.dumps(record))
        cancelled.setdefault("metadata", {}).setdefault("annotations", {})[CANCELLED_ANNOTATION] = "true"
        views, decision = replicas.decide_job(cancelled, pods, "", self._role_notes(key, record), self._pod_notes(key))
        if await self._record_final(key, replicas.final_status(views, decision), record, cancelled=True):
            await self._deactivate_workloads(key)
            await self._stop_roles(key, [manifests.MASTER, *ROLES])
        self._flush_now(key)  # ended first some other way: that end is what the job shows
        return self._statuses[key]

    async def _delete_parts(self, key: str, name: str, connection: Any) -> None:
        """Delete the Jobs (or JobSet) and the Service of the job whose objects are named `key`."""
        batch, core = client.BatchV1Api(connection.api), client.CoreV1Api(connection.api)
        parts: list[tuple[str, Any]] = []
        if self.workload_mode == JOBSET_MODE:
            custom = client.CustomObjectsApi(connection.api)

            def delete_jobset(jobset: str, namespace: str, **kwargs: Any) -> Any:
                return custom.delete_namespaced_custom_object(jobsets.GROUP, jobsets.VERSION, namespace, jobsets.PLURAL, jobset, **kwargs)

            parts.append((key, delete_jobset))
        parts += [(self._role_job(key, role), batch.delete_namespaced_job) for role in (*reversed(ROLES), manifests.MASTER)]
        parts.append((key, core.delete_namespaced_service))
        if self.gang_scheduler:
            parts.append((key, self._verb_for("delete", volcano.KIND)))  # the PodGroup `<obj>`
        for part, delete in parts:
            try:
                await self._call(
                    f"delete {part}", delete, part, connection.namespace, propagation_policy="Background", _preload_content=False
                )
            except ApiException as error:
                if error.status != 404:
                    raise BackendUnavailable(f"cannot delete job '{name}': deleting {part} failed: {describe_failure(error)}") from None

    async def _pods_gone(self, key: str, timeout: float = DELETE_POD_WAIT) -> bool:
        """Wait (without blocking the server) until the watch cache holds no pod of the job
        `key` that may still start its container, or `timeout` passed; whether none is left."""
        deadline = asyncio.get_running_loop().time() + timeout
        while any(replicas.may_still_start(pod) for pod in self._pods_by_job.get(key, {}).values()):
            if asyncio.get_running_loop().time() >= deadline:
                return False
            await asyncio.sleep(DELETE_POD_POLL)
        return True

    async def metrics_files(self, name: str, owner: str) -> list[MetricsFile]:
        """The files on the home volume the job's launchers name for `report()` (metrics.py)."""
        return replica_metrics.metrics_files(self.home_path, await self.get_job(name, owner))

    async def timeline(self, name: str, owner: str, since: int = 0) -> dict[str, Any]:
        """What happened to the job, from the `timeline.jsonl` this server writes in its logs dir
        in the home (timeline/keeper.py), by time; `JobNotFound` for anyone else's job."""
        status = await self.get_job(name, owner)
        logs_dir = replica_logs.log_dir(self.home_path, status.name)
        return await asyncio.to_thread(self._timelines.answer, self._key(status), logs_dir, status.name, since)

    async def delete(self, name: str, owner: str) -> None:
        key = self._key(await self.get_job(name, owner))
        self.metrics.forget(name)
        connection = await self._conn()
        # The Jobs and the Service go first, by name: the garbage collector would remove them after
        # the record, but only a moment later, and a resubmit of the name in that moment would
        # collide with them.  Their pods terminate in the background (the status of a new job of
        # the same name ignores them: they carry the old record's uid).
        await self._delete_parts(key, name, connection)
        try:
            await self._delete_record(connection, key, f"delete job {name}")
        except ApiException as error:
            raise BackendUnavailable(f"cannot delete job '{name}': {describe_failure(error)}") from None
        job_dir = Path(self.home_path) / JOBS_DIR / name
        # A pod already bound to a node may still start after its Job is gone, and the container
        # runtime makes a missing working directory (the job's package/) as root: the folder is
        # removed once the job's pods are (or after DELETE_POD_WAIT, for pods of a lost node).
        await self._pods_gone(key)
        await asyncio.to_thread(self._timelines.close, key)  # no timeline write brings the folder back
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
