"""The `kubernetes` backend: a job is a set of objects in the user's namespace (docs/admin-guide.md, "A job's objects").

Writes go through the official client in threads (`asyncio.to_thread`); reads come from the
watch-backed cache, so listing costs no API call.  While the server runs it applies the same
lifecycle policy as the in-cluster master (record the end, stop the pservers), so a job ends
cleanly even if the master pod is lost.

`KubernetesBackend` is the settings (its traitlets, `c.KubernetesBackend.*`) and the
operations of `Backend`; the work is done by parts it makes once, each from the frozen settings
and the parts it needs, passed to it: `client/` (the API), `job_view.py` (what is known of the
jobs), `lifecycle/` (the home, the queue and gang objects, the reconcile loop, the admission of
a submit), `logs/`, `usage/`, with `build/`, `status/`, `quota/` and `timeline/` as their tools.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import shutil
from collections.abc import AsyncGenerator
from pathlib import Path
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException
from traitlets import Bool, Dict, Enum, Float, Int, List, Unicode, default

from paddle_nbext.model.contract import CANCELLED_ANNOTATION, ROLES
from paddle_nbext.model.quota import Verdict
from paddle_nbext.model.spec import JobSpec, SpecError
from paddle_nbext.model.status import JobStatus

from ...jobfiles import job_requirements, package
from ...jobfiles.metrics import MetricsFile
from ...runtime import replicas
from ..base import Backend, BackendUnavailable, InvalidRequest, InvalidState, JobNotFound, SubmitRequest
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
from .settings import GANG_SCHEDULERS, JOBSET_MODE, WORKLOAD_MODES, BackendSettings
from .status.job_status import link_record
from .usage import metrics as replica_metrics
from .usage.resource_usage import ResourceUsage

#: Seconds a delete waits for the job's pods that are bound to a node but not started yet (see
#: `delete`), and how often it looks.
DELETE_POD_WAIT = 30.0
DELETE_POD_POLL = 0.2


class KubernetesBackend(Backend):
    """Runs each job as a record ConfigMap, a headless Service, a master Job and Indexed Jobs.

    The settings are frozen when the backend is made (`settings`); each part gets them and the
    parts it needs, and reaches no other part's internals."""

    name = "kubernetes"

    # ---- the settings: every `c.KubernetesBackend.*`, with its default and its help

    namespace = Unicode("", help="Namespace for jobs; default: the service account's, else the kubeconfig context's.").tag(config=True)
    kubeconfig = Unicode("", help="Path of a kubeconfig; when set it wins over the in-cluster service account.").tag(config=True)
    context = Unicode("", help="kubeconfig context to use (default: its current context).").tag(config=True)
    home_volume = Enum(
        ["auto", "pvc", "cephfs"],
        "auto",
        help="How job pods mount the user's home: copy the notebook pod's volume (auto), a PVC template (pvc: CephFS through ceph-csi too), "
        "or the in-tree cephfs volume (cephfs: deprecated, refused on Kubernetes 1.31 and later, which removed it).",
    ).tag(config=True)
    home_pvc_template = Unicode("claim-{username}", help="PVC name for home_volume='pvc'; {username} is the job owner.").tag(config=True)
    cephfs = Dict(
        help="For home_volume='cephfs' (Kubernetes before 1.31 only): {'monitors': [...], 'path': '/home/{username}', 'user': 'admin', 'secret_ref': 'ceph-secret', 'read_only': False}."
    ).tag(config=True)
    slug_scheme = Enum(
        ["safe", "escape"],
        "safe",
        help="How {username} in home_pvc_template and cephfs['path'] is made Kubernetes-safe: set it to what your hub's KubeSpawner uses (its slug_scheme: 'safe' since KubeSpawner 7, 'escape' before).",
    ).tag(config=True)
    home_path = Unicode(help="Where the home is mounted in job pods (the notebook's home path). Default: $HOME.").tag(config=True)
    pod_name = Unicode(
        help="The notebook's own pod, read for its home volume (home_volume='auto') and, in every mode, the uid and groups job pods run as (copy_security_context). Default: $HOSTNAME."
    ).tag(config=True)
    default_image = Unicode("paddlepaddle/paddle:3.0.0", help="Image for jobs that name none.").tag(config=True)
    master_image = Unicode(
        "",
        help="Image of each job's master (it needs Python 3.10 or later as python3, nothing else); empty: the site's default image. "
        "Must be in allowed_images when that is set. Never the job's own image: the master holds an API token.",
    ).tag(config=True)
    image_pull_policy = Enum(
        ["", "Always", "IfNotPresent", "Never"], "", help="imagePullPolicy of the replicas ('' leaves Kubernetes' default)."
    ).tag(config=True)
    shm_size = Unicode(
        "1Gi", help="Size of the memory-backed /dev/shm of collective and GPU trainers ('' keeps the container's 64 MiB)."
    ).tag(config=True)
    gpu_resource_name = Unicode("nvidia.com/gpu", help="Extended resource name for trainer GPUs.").tag(config=True)
    node_selector = Dict(help="nodeSelector for job pods.").tag(config=True)
    tolerations = List(Dict(), help="tolerations for job pods.").tag(config=True)
    node_lost_seconds = Int(
        30,
        allow_none=True,
        help="Seconds a job's pods stay bound to a node that stopped responding (its not-ready / unreachable "
        "NoExecute taints) before Kubernetes evicts them and the job restarts whole; Kubernetes' own default is 300. "
        "None: leave Kubernetes' default.",
    ).tag(config=True)
    image_pull_seconds = Int(
        300,
        allow_none=True,
        help="Seconds a replica's image may keep failing to pull (ErrImagePull, ImagePullBackOff) before the job fails "
        "naming the image and stops what runs; an image the node may never pull (ErrImageNeverPull) or a name that is no image "
        "reference (InvalidImageName) fails it at once. "
        "None: wait for ever.",
    ).tag(config=True)
    image_pull_secrets = List(Unicode(), help="Names of imagePullSecrets for job pods.").tag(config=True)
    service_account_name = Unicode("", help="serviceAccountName for pserver/trainer pods (none: no API token mounted).").tag(config=True)
    master_service_account_name = Unicode(
        "paddle-nbext-master", help="Service account of the job master (deploy/rbac/master-role.yaml); empty: create one per job."
    ).tag(config=True)
    priority_class_name = Unicode("", help="priorityClassName for job pods.").tag(config=True)
    replica_spread = Enum(
        ["scheduler", "prefer-spread", "spread"],
        "scheduler",
        help="How a job's replicas of one role spread over nodes: 'scheduler' (default: kube-scheduler's own soft spreading), "
        "'prefer-spread' (evenly over spread_topology_key's domains when it can), 'spread' (evenly or not at all: "
        "a replica waits Pending rather than doubling up).",
    ).tag(config=True)
    spread_topology_key = Unicode(
        "kubernetes.io/hostname",
        help="The node label whose values replica_spread spreads over (a node each, or e.g. topology.kubernetes.io/zone).",
    ).tag(config=True)
    extra_labels = Dict(Unicode(), help="Extra labels on every object.").tag(config=True)
    extra_annotations = Dict(Unicode(), help="Extra annotations on every object.").tag(config=True)
    ttl_seconds_after_finished = Int(None, allow_none=True, help="ttlSecondsAfterFinished of the Jobs (the record stays).").tag(config=True)
    owner = Unicode(
        help="The one user whose jobs this server watches and acts on (by their label paddle-nbext/owner), so that in a "
        "namespace shared by many notebooks each server holds and reconciles only its own user's jobs. "
        "Default: $JUPYTERHUB_USER (a hub's single-user server). Empty: every user's jobs in the namespace.",
    ).tag(config=True)

    @default("owner")
    def _default_owner(self) -> str:
        return os.environ.get("JUPYTERHUB_USER", "")

    pserver_wait_timeout = Float(
        900.0,
        min=1.0,
        help="Seconds a parameter-server trainer waits for every pserver to accept connections before it fails "
        "(long enough for a pserver pod's cold image pull).",
    ).tag(config=True)
    pod_security_context = Dict(
        help="securityContext of job pods, whole (it wins over run_as_user/run_as_group/fs_group and the notebook pod's)."
    ).tag(config=True)
    copy_security_context = Bool(
        True,
        help="When the server runs in the notebook's pod, job pods run as that pod does (its runAsUser/runAsGroup/fsGroup) "
        "in every home_volume mode, unless run_as_user/run_as_group/fs_group or pod_security_context say otherwise.",
    ).tag(config=True)
    run_as_user = Int(None, allow_none=True, help="uid of job pods (the owner of the user's home files); default: the notebook's.").tag(
        config=True
    )
    run_as_group = Int(None, allow_none=True, help="Primary gid of job pods; default: the notebook's.").tag(config=True)
    fs_group = Int(None, allow_none=True, help="fsGroup of job pods (Zero to JupyterHub sets 100); default: the notebook's.").tag(
        config=True
    )
    restricted_pods = Bool(
        True,
        help="Shape job and master pods to pass Pod Security's 'restricted' profile: no privilege escalation, every "
        "capability dropped, seccomp RuntimeDefault, runAsNonRoot when the uid is known (the master runs as 65534). "
        "Turn off only for images or devices that need a capability (e.g. IPC_LOCK for RDMA).",
    ).tag(config=True)
    resubmit_wait = Float(
        20.0, help="Seconds a submit waits for the still-stopping pods of a just-deleted job of the same name before it answers 409."
    ).tag(config=True)
    allow_hub_namespace = Bool(
        False,
        help="Run jobs even in a namespace that holds a JupyterHub (unsafe: the notebook's Role there reaches the hub's objects; see the admin guide's 'Where jobs run').",
    ).tag(config=True)
    sync_timeout = Float(10.0, help="Seconds start() waits for the first list of the cache.").tag(config=True)
    reconcile_interval = Float(5.0, help="Seconds between checks of job timeouts and of the finished jobs' history limit.").tag(config=True)
    keep_finished = Int(
        100,
        min=0,
        help="Finished jobs kept per user: past this many (the oldest first) a finished job's record is removed, its Jobs "
        "and pods with it; its logs stay in the home. 0 keeps every one.",
    ).tag(config=True)
    keep_finished_days = Float(
        30.0,
        min=0.0,
        help="Days a finished job is kept: an older one's record is removed (its logs stay in the home). 0 keeps them.",
    ).tag(config=True)
    queue_position_interval = Float(
        3.0,
        help="Seconds between reads of Kueue's visibility API for the queue positions of waiting jobs (only while some wait).",
    ).tag(config=True)
    workload_mode = Enum(
        list(WORKLOAD_MODES),
        "jobs",
        help="How a job's replicas are created: 'jobs' (a native Job per role, no operator needed) or 'jobset' (one JobSet, "
        "jobset.x-k8s.io/v1alpha2, that a queue such as Kueue admits whole; needs JobSet installed).",
    ).tag(config=True)
    default_queue = Unicode(
        "", help="Kueue LocalQueue (label kueue.x-k8s.io/queue-name) of jobs that name none; empty: jobs are not queued."
    ).tag(config=True)
    allowed_queues = List(
        Unicode(), help="LocalQueues a job may name in its 'queue' field; empty: only default_queue (and none if that is empty)."
    ).tag(config=True)
    gang_scheduler = Enum(
        list(GANG_SCHEDULERS),
        "",
        help="Gang scheduler of the pservers and trainers: '' (the default scheduler) or 'volcano' (schedulerName volcano "
        "and one scheduling.volcano.sh PodGroup per job covering all of them; needs Volcano installed and workload_mode "
        "'jobs'; default_queue, allowed_queues and a job's queue then name Volcano Queues, not Kueue LocalQueues).",
    ).tag(config=True)

    @default("home_path")
    def _default_home_path(self) -> str:
        return os.environ.get("HOME") or str(Path.home())

    @default("pod_name")
    def _default_pod_name(self) -> str:
        return os.environ.get("HOSTNAME", "")

    def frozen_settings(self) -> BackendSettings:
        """The settings as they are now, as one immutable value (lists become tuples, dicts copies)."""
        return BackendSettings(**{each.name: _frozen(getattr(self, each.name)) for each in dataclasses.fields(BackendSettings)})

    # ---- the parts

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.settings = settings = self.frozen_settings()
        self.api = KubernetesClient(settings, self.log)
        self.view = JobView()
        self.homes = HomeSetup(settings, self.api, self.log)
        self.workloads = Workloads(settings, self.api, self.view, self.log)
        self.pod_logs = PodLogs(settings, self.api, self.view)
        self.reconciler = Reconciler(settings, self.api, self.view, self.workloads, self.pod_logs, self.events.publish, self.log)
        self.admission = Admission(settings, self.api, self.homes, self.view, self.name, self.log)
        self.log_reading = LogReading(settings, self.view, self.pod_logs)
        self.resource_usage = ResourceUsage(self.api, self.view)

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
        chunks = self.log_reading.follow(await self.get_job(name, owner), role, index, tail=tail)
        try:
            async for chunk in chunks:
                yield chunk
        finally:
            await chunks.aclose()  # now, not at garbage collection: it frees an API stream's thread

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


def _frozen(value: Any) -> Any:
    if isinstance(value, list):
        return tuple(dict(item) if isinstance(item, dict) else item for item in value)
    if isinstance(value, dict):
        return dict(value)
    return value
