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
import os
import re
import shutil
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, cast

import urllib3
from kubernetes import client
from kubernetes.client.exceptions import ApiException
from traitlets import Bool, Dict, Enum, Float, Int, List, Unicode, default

from paddle_nbext.contract import (
    CANCELLED_ANNOTATION,
    JOB_LABEL,
    MANAGED_BY_LABEL,
    MANAGER,
    OWNER_LABEL,
    RECORD_UID_LABEL,
    ROLES,
    STATUS_ANNOTATION,
    Phase,
    ReplicaPhase,
    now_iso,
    parse_time,
)
from paddle_nbext.quota import QuotaCheck, Verdict
from paddle_nbext.spec import JobSpec, SpecError
from paddle_nbext.status import JobStatus, ReplicaStatus

from ... import package, runtime_files
from ...events import DELETED as EV_DELETED
from ...events import UPDATED, JobEvent
from ...metrics import MetricsFile
from ...runtime import cluster_master, policy, replicas
from ..base import (
    Backend,
    BackendUnavailable,
    Forbidden,
    InvalidRequest,
    InvalidState,
    JobExists,
    JobNotFound,
    SubmitRequest,
    replica_not_found,
)
from . import home_volume as homes
from . import jobset as jobsets
from . import logs as replica_logs
from . import manifests, queue_positions, queue_status, quota_reads, volcano, volcano_status
from . import metrics as replica_metrics
from .cache import WORKLOADS, WatchCache, describe_failure
from .connection import Connection, connect
from .settings import GANG_SCHEDULERS, JOBSET_MODE, WORKLOAD_MODES, ManifestSettings, role_job_name
from .status import final_of, job_status
from .usernames import Scheme

SELECTOR = f"{MANAGED_BY_LABEL}={MANAGER}"
HUB_SELECTOR = "app=jupyterhub,component=hub"  # Zero to JupyterHub's hub pod and ConfigMap
_ROLE = "|".join(ROLES)
JOB_OF_JOB = re.compile(rf"^(.+)-(?:{_ROLE})(?:-0)?$")  # <job>-<role>, JobSet's <job>-<role>-0
JOB_OF_POD = re.compile(rf"^(.+)-(?:{_ROLE})(?:-0)?-\d+-[a-z0-9]+$")  # <job>-<role>[-0]-<index>-<random>
#: The API groups a workload mode or a queue needs, (group, version).
JOBSET_API = (jobsets.GROUP, jobsets.VERSION)
KUEUE_API = ("kueue.x-k8s.io", "v1beta2")
PODGROUP_API = (volcano.GROUP, volcano.VERSION)
#: The kinds of a plan that are custom resources: (group, version, plural).
CUSTOM_OBJECTS = {"JobSet": (jobsets.GROUP, jobsets.VERSION, jobsets.PLURAL), volcano.KIND: (*PODGROUP_API, volcano.PLURAL)}
#: A pod's phases that end it (Kubernetes' words, not the job's `Phase`).
POD_ENDED = (replicas.POD_SUCCEEDED, replicas.POD_FAILED)
WARNING_TEXT = re.compile(r'\d{3} \S+ "((?:[^"\\]|\\.)*)"')  # RFC 7234: warn-code warn-agent "warn-text"
JOBS_DIR = ".paddle-jobs"


class KubernetesBackend(Backend):
    """Runs each job as a record ConfigMap, a headless Service, a master Job and Indexed Jobs."""

    name = "kubernetes"

    namespace = Unicode("", help="Namespace for jobs; default: the service account's, else the kubeconfig context's.").tag(config=True)
    kubeconfig = Unicode("", help="Path of a kubeconfig; when set it wins over the in-cluster service account.").tag(config=True)
    context = Unicode("", help="kubeconfig context to use (default: its current context).").tag(config=True)
    home_volume = Enum(
        ["auto", "pvc", "cephfs"],
        "auto",
        help="How job pods mount the user's home: copy the notebook pod's volume (auto), a PVC template, or a cephfs source.",
    ).tag(config=True)
    home_pvc_template = Unicode("claim-{username}", help="PVC name for home_volume='pvc'; {username} is the job owner.").tag(config=True)
    cephfs = Dict(
        help="For home_volume='cephfs': {'monitors': [...], 'path': '/home/{username}', 'user': 'admin', 'secret_ref': 'ceph-secret', 'read_only': False}."
    ).tag(config=True)
    slug_scheme = Enum(
        ["safe", "escape"],
        "safe",
        help="How {username} in home_pvc_template and cephfs['path'] is made Kubernetes-safe: set it to what your hub's KubeSpawner uses (its slug_scheme: 'safe' since KubeSpawner 7, 'escape' before).",
    ).tag(config=True)
    home_path = Unicode(help="Where the home is mounted in job pods (the notebook's home path). Default: $HOME.").tag(config=True)
    pod_name = Unicode(help="The notebook's own pod, read for home_volume='auto'. Default: $HOSTNAME.").tag(config=True)
    default_image = Unicode("paddlepaddle/paddle:3.0.0", help="Image for jobs that name none.").tag(config=True)
    master_image = Unicode(
        "",
        help="Image of each job's master (it needs Python 3.10+ as python3, nothing else); empty: the site's default image. "
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
    image_pull_secrets = List(Unicode(), help="Names of imagePullSecrets for job pods.").tag(config=True)
    service_account_name = Unicode("", help="serviceAccountName for pserver/trainer pods (none: no API token mounted).").tag(config=True)
    master_service_account_name = Unicode(
        "paddle-nbext-master", help="Service account of the job master (deploy/rbac/master-role.yaml); empty: create one per job."
    ).tag(config=True)
    priority_class_name = Unicode("", help="priorityClassName for job pods.").tag(config=True)
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

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._connection: Connection | None = None
        self._connect_lock = asyncio.Lock()
        self._cache: WatchCache | None = None
        self._home: homes.HomeVolume | None = None
        self._home_node: str | None = None  # set when the home can only be mounted on the notebook's node
        self._api_warnings: dict[str, str] = {}  # text -> "Kind name: text", newest last
        self._hub_checked = False
        self._hub_problem: str | None = None
        self._security_context: dict[str, Any] | None = None
        # Keyed by the job's object name (`manifests.object_name`: `<job>-<owner tag>`), the record's
        # name and the pods' job label, so that two owners' jobs of one name never mix.
        self._pods_by_job: dict[str, dict[str, dict[str, Any]]] = {}
        self._statuses: dict[str, JobStatus] = {}
        self._keys: dict[tuple[str, str], str] = {}  # (owner, job name) -> object name
        self._published: dict[str, dict[str, Any]] = {}
        self._dirty: set[str] = set()
        self._flush_scheduled = False
        self._finishing: set[str] = set()
        self._tasks: set[asyncio.Task[Any]] = set()
        self._ticker: asyncio.Task[None] | None = None
        self._apis: dict[tuple[str, str], bool] = {}  # (group, version) -> served (JobSet, Kueue, Volcano)
        self._positions = queue_positions.QueuePositions(interval=self.queue_position_interval, log=self.log)
        self._releasing: set[str] = set()  # jobs whose PodGroup is being deleted

    # ================================================================== connection and cache

    async def _conn(self) -> Connection:
        if self._connection is None:
            async with self._connect_lock:
                if self._connection is None:
                    try:
                        self._connection = await asyncio.to_thread(connect, self.kubeconfig, self.context, self.namespace)
                    except Exception as error:  # noqa: BLE001 - ConfigException, file errors
                        raise BackendUnavailable(f"Kubernetes is not configured: {error}") from None
        return self._connection

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
        if not await self._cache.wait_synced(self.sync_timeout):
            self.log.warning("paddle-nbext: the job cache is not synced yet: %s", self._cache.error or "slow API")

    async def _refuse_a_hub_namespace(self, connection: Connection) -> None:
        """Jobs must not run beside a JupyterHub: the notebook's Role in that namespace would let
        every user's code rewrite the hub's ConfigMap or run a Job as the hub's ServiceAccount.
        Zero to JupyterHub labels its hub pod and ConfigMap `app=jupyterhub,component=hub`;
        checked once per connection (a refusal is re-checked at every submit)."""
        if self._hub_checked or self.allow_hub_namespace:
            return
        core = client.CoreV1Api(connection.api)
        found = []
        for kind, lister in (("pod", core.list_namespaced_pod), ("ConfigMap", core.list_namespaced_config_map)):
            try:
                listed = await self._call(
                    f"look for a JupyterHub in {connection.namespace}",
                    lister,
                    connection.namespace,
                    label_selector=HUB_SELECTOR,
                    limit=1,
                    _preload_content=False,
                )
            except ApiException as error:
                if error.status == 403:
                    continue  # cannot look: the Role is not that wide, so neither is the risk
                raise BackendUnavailable(f"cannot check namespace {connection.namespace}: {describe_failure(error)}") from None
            found += [f"{kind} {item['metadata']['name']}" for item in json.loads(listed.data).get("items") or []]
        if found:
            self._hub_problem = (
                f"namespace {connection.namespace} holds a JupyterHub ({', '.join(found)}): jobs there would run beside "
                "the hub, and the notebook's Role would let user code reach the hub's objects. Set "
                "c.KubernetesBackend.namespace to a namespace for jobs (admin guide: 'Where jobs run'), or "
                "c.KubernetesBackend.allow_hub_namespace = True to accept the risk"
            )
            raise BackendUnavailable(f"refusing to submit: {self._hub_problem}")
        self._hub_checked = True
        self._hub_problem = None

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
            self._start_queue_positions(connection)
        return self._cache

    def _selector(self) -> str:
        """Our objects; only the configured owner's when there is one (`owner`): the watch, the
        memory and the relists then grow with one user's jobs, not the namespace's."""
        return f"{SELECTOR},{OWNER_LABEL}={manifests.owner_label(self.owner)}" if self.owner else SELECTOR

    def _serves(self, owner: str) -> None:
        """Refuse a user this server does not act for (its `owner`): their jobs are not watched here."""
        if self.owner and owner != self.owner:
            raise Forbidden(
                f"this server manages the Kubernetes jobs of {self.owner!r} only (c.KubernetesBackend.owner); "
                f"use your own notebook server for the jobs of {owner!r}"
            )

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

    def _identity(self) -> dict[str, Any]:
        """Whom job pods run as: the whole `pod_security_context` when set, else the uid/gids
        the settings name, else the notebook pod's (read at the first submit), else the image's
        user (the server knows no notebook pod: a server outside the cluster, say)."""
        if self.pod_security_context:
            return dict(self.pod_security_context)
        named = {"runAsUser": self.run_as_user, "runAsGroup": self.run_as_group, "fsGroup": self.fs_group}
        explicit = {key: value for key, value in named.items() if value is not None}
        if explicit:
            return {**(self._security_context or {}), **explicit}
        return dict(self._security_context or {})

    def _settings(self, namespace: str) -> ManifestSettings:
        security = self._identity()
        node_selector = dict(self.node_selector)
        if self._home_node:
            node_selector["kubernetes.io/hostname"] = self._home_node
        return ManifestSettings(
            namespace=namespace,
            default_image=self.default_image,
            home_path=self.home_path,
            gpu_resource_name=self.gpu_resource_name,
            node_selector=node_selector,
            tolerations=tuple(self.tolerations),
            image_pull_secrets=tuple(self.image_pull_secrets),
            service_account_name=self.service_account_name,
            master_service_account_name=self.master_service_account_name,
            priority_class_name=self.priority_class_name,
            extra_labels=dict(self.extra_labels),
            extra_annotations=dict(self.extra_annotations),
            ttl_seconds_after_finished=self.ttl_seconds_after_finished,
            pserver_wait_timeout=self.pserver_wait_timeout,
            pod_security_context=security,
            master_image=self.master_image,
            image_pull_policy=self.image_pull_policy,
            shm_size=self.shm_size,
            workload_mode=self.workload_mode,
            default_queue=self.default_queue,
            gang_scheduler=self.gang_scheduler,
            restricted=self.restricted_pods,
        )

    def _unavailable(self, doing: str, error: BaseException) -> BackendUnavailable:
        host = self._connection.host if self._connection else "the Kubernetes API"
        return BackendUnavailable(f"cannot {doing}: the Kubernetes API at {host} is unreachable ({describe_failure(error)})")

    async def _call(self, doing: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
        """Run one blocking client call in a thread; unreachable API -> BackendUnavailable."""
        kwargs.setdefault("_request_timeout", 30)
        try:
            return await asyncio.to_thread(fn, *args, **kwargs)
        except ApiException:
            raise
        except (urllib3.exceptions.HTTPError, OSError) as error:  # refused, reset, TLS, DNS, timeouts
            raise self._unavailable(doing, error) from None
        except Exception as error:  # noqa: BLE001 - the client itself refused (a model's validation, a bad value)
            raise BackendUnavailable(
                f"cannot {doing}: the Kubernetes client refused the request ({type(error).__name__}: {error}); "
                "this comes from a value in the configuration (c.KubernetesBackend) or the job, not from the API"
            ) from None

    # ================================================================== home volume

    async def _home_volume(self, owner: str, connection: Connection) -> homes.HomeVolume:
        home = await self._configured_home(owner)
        if home is not None:
            await self._notebook_identity(connection)
            return home
        return await self._home_of_the_notebook_pod(connection)

    async def _notebook_identity(self, connection: Connection) -> None:
        """In `pvc` and `cephfs` modes the home comes from settings, but whom the pods run as still
        comes from the notebook's pod when the server runs in one: the files in the home are
        that uid's.  Best effort (the pod read may be refused): the server's own uid and gid,
        which are the notebook's in its pod, stand in; outside a pod, only settings say it."""
        if self._security_context is not None or not self.copy_security_context or not connection.in_cluster:
            return
        identity: dict[str, Any] = {}
        if self.pod_name:
            core = client.CoreV1Api(connection.api)
            try:
                response = await self._call(
                    "read the notebook pod", core.read_namespaced_pod, self.pod_name, connection.namespace, _preload_content=False
                )
                identity = homes.identity_of(json.loads(response.data), self.home_path)
            except (ApiException, BackendUnavailable, ValueError) as error:
                self.log.warning(
                    "paddle-nbext: cannot read the notebook pod %s for its uid and groups (%s); job pods run as this server's uid %s",
                    self.pod_name,
                    error,
                    os.getuid(),
                )
        self._security_context = _with_own_ids(identity)

    async def _configured_home(self, owner: str) -> homes.HomeVolume | None:
        """The home the `pvc` or `cephfs` settings name (None in `auto` mode)."""
        try:
            if self.home_volume == "pvc":
                return homes.from_pvc_template(
                    self.home_pvc_template,
                    owner,
                    self.home_path,
                    scheme=cast(Scheme, self.slug_scheme),
                    servername=os.environ.get("JUPYTERHUB_SERVER_NAME", ""),
                )
            if self.home_volume == "cephfs":
                return homes.from_cephfs(
                    dict(self.cephfs),
                    owner,
                    self.home_path,
                    scheme=cast(Scheme, self.slug_scheme),
                    servername=os.environ.get("JUPYTERHUB_SERVER_NAME", ""),
                )
        except homes.HomeVolumeError as error:
            raise BackendUnavailable(f"the home volume is misconfigured: {error}") from None
        return None

    async def _home_of_the_notebook_pod(self, connection: Connection) -> homes.HomeVolume:
        """`auto` mode: the volume behind the home path in the notebook's own pod."""
        if self._home is None:
            if not self.pod_name:
                raise BackendUnavailable(
                    "home_volume is 'auto' but the notebook's pod name is unknown (no $HOSTNAME); "
                    "set c.KubernetesBackend.pod_name, or use home_volume 'pvc' or 'cephfs'"
                )
            core = client.CoreV1Api(connection.api)
            try:
                response = await self._call(
                    "read the notebook pod", core.read_namespaced_pod, self.pod_name, connection.namespace, _preload_content=False
                )
            except ApiException as error:
                raise BackendUnavailable(
                    f"home_volume 'auto' needs to read the notebook pod {self.pod_name} in {connection.namespace}: "
                    f"{describe_failure(error)}; grant 'get pods' or use home_volume 'pvc' or 'cephfs'"
                ) from None
            pod = json.loads(response.data)
            try:
                self._home = homes.from_pod(pod, self.home_path)
            except homes.HomeVolumeError as error:
                raise BackendUnavailable(str(error)) from None
            if self.copy_security_context:
                identity = homes.identity_of(pod, self.home_path)
                self._security_context = _with_own_ids(identity) if connection.in_cluster else identity
            self._home_node = await self._single_node_home(pod, self._home, connection)
        return self._home

    async def _single_node_home(self, pod: dict[str, Any], home: homes.HomeVolume, connection: Connection) -> str | None:
        """A ReadWriteOnce claim (Zero to JupyterHub's default home) can be mounted only on one
        node at a time: the notebook's.  Job pods are then pinned to that node, where they can
        share it; ReadWriteOncePod allows no second pod at all and is refused."""
        claim = (home.source.get("persistentVolumeClaim") or {}).get("claimName")
        if not claim:
            return None
        core = client.CoreV1Api(connection.api)
        try:
            response = await self._call(
                f"read the home claim {claim}",
                core.read_namespaced_persistent_volume_claim,
                claim,
                connection.namespace,
                _preload_content=False,
            )
        except ApiException as error:
            self.log.warning(
                "paddle-nbext: cannot read the home claim %s (%s); assuming it can be shared across nodes", claim, describe_failure(error)
            )
            return None
        claim_obj = json.loads(response.data)
        modes = set((claim_obj.get("status") or {}).get("accessModes") or (claim_obj.get("spec") or {}).get("accessModes") or [])
        if "ReadWriteMany" in modes or "ReadOnlyMany" in modes:
            return None
        if modes == {"ReadWriteOncePod"}:
            raise BackendUnavailable(
                f"the home claim {claim} is ReadWriteOncePod: no job pod can mount it beside the notebook; ask the "
                "admin for a ReadWriteMany home (e.g. CephFS) or set c.KubernetesBackend.home_volume = 'pvc'"
            )
        node = (pod.get("spec") or {}).get("nodeName")
        if not node:
            raise BackendUnavailable(f"the home claim {claim} is ReadWriteOnce and the notebook pod is on no node yet")
        return str(node)

    # ================================================================== submit

    async def _ensure_runtime(self, connection: Connection, runtime: dict[str, str]) -> None:
        """The release's runtime ConfigMap (`manifests.runtime_configmap`), made when missing (at
        every submit: an admin may have removed it since, and two calls cost little).  One that exists under its name with other files (planted, or damaged) is never used: a
        job's pods would run them."""
        wanted = manifests.runtime_configmap(runtime, self._settings(connection.namespace))
        name = wanted["metadata"]["name"]
        core = client.CoreV1Api(connection.api)
        try:
            await self._call(f"create the runtime ConfigMap {name}", core.create_namespaced_config_map, connection.namespace, wanted)
        except ApiException as error:
            if error.status != 409:
                raise BackendUnavailable(f"cannot create the job runtime ConfigMap {name}: {describe_failure(error)}") from None
            listed = await self._call(
                f"read the runtime ConfigMap {name}",
                core.list_namespaced_config_map,
                connection.namespace,
                field_selector=f"metadata.name={name}",
                _preload_content=False,
            )
            found = (json.loads(listed.data).get("items") or [{}])[0]
            if found.get("data") != wanted["data"]:
                raise BackendUnavailable(
                    f"the ConfigMap {name} in namespace {connection.namespace} holds other files than this release's job "
                    "runtime; jobs cannot run until an admin deletes it (it is made again at the next submit)"
                ) from None

    @staticmethod
    def _runtime_bundle() -> dict[str, str]:
        """The files every pod of the job runs (the record ConfigMap holds them)."""
        try:
            return runtime_files.read_bundle()
        except runtime_files.RuntimeFilesMissing as error:
            raise BackendUnavailable(str(error)) from None

    def _container_path(self, local: Path, notebook_home: Path) -> str:
        """The path a job pod sees for a file in the notebook's home."""
        relative = os.path.relpath(os.path.realpath(local), os.path.realpath(notebook_home))
        return self.home_path if relative == "." else f"{self.home_path.rstrip('/')}/{relative}"

    async def submit(self, request: SubmitRequest, *, dry_run: bool = False) -> dict[str, Any]:
        spec, owner = request.spec, request.owner
        self._serves(owner)
        connection = await self._conn()
        await self._refuse_a_hub_namespace(connection)
        home = await self._home_volume(owner, connection)
        try:
            source = await asyncio.to_thread(package.resolve_package, spec, request.home)
        except SpecError as error:
            raise InvalidRequest(error.message, field=error.field) from None
        snapshot = spec.snapshot or request.entry_script is not None
        job_dir = Path(request.home) / JOBS_DIR / spec.job_name
        workdir_local = job_dir / "package" if snapshot else source
        workdir = self._container_path(workdir_local, request.home)
        runtime = await asyncio.to_thread(self._runtime_bundle)
        self._check_queue(spec)
        await self._require_workload_api(connection)
        plan = manifests.build_plan(spec, owner, self._settings(connection.namespace), home=home, workdir=workdir, runtime=runtime)
        quota_check = await self._check_quota(connection, spec, plan)
        if dry_run:
            preview = self._preview_status(spec, owner)
            return {
                "dry_run": True,
                "job": preview.to_dict(),
                "plan": {"namespace": connection.namespace, "manifests": plan},
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
            for manifest in plan[1:]:
                await self._create(manifests.set_owner_uid(manifest, uid), created, spec.job_name)
        except BaseException:
            await self._rollback(created)
            if snapshot:
                await asyncio.to_thread(shutil.rmtree, job_dir, True)
            raise
        cache.put("configmaps", record)
        self._flush_now(key)
        status = self._statuses.get(key)
        return (status or self._preview_status(spec, owner)).to_dict()

    async def _wait_for_the_old_pods(self, key: str, job: str) -> None:
        """A job of this name was just deleted and some of its pods still run while they stop:
        they write into the job's directory, where the new snapshot would go.  Wait for them
        (`resubmit_wait`), then say why the name cannot be used yet."""

        def still_running() -> list[str]:
            if self._cache is not None and key in self._cache.stores["configmaps"]:
                return []  # a live job of that name: the record's create answers 409 as usual
            return sorted(
                name for name, pod in self._pods_by_job.get(key, {}).items() if (pod.get("status") or {}).get("phase") not in POD_ENDED
            )

        deadline = asyncio.get_running_loop().time() + self.resubmit_wait
        while still_running() and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.2)
        left = still_running()
        if left:
            raise JobExists(
                f"job '{job}' was just deleted and {len(left)} of its pods are still stopping ({', '.join(left[:3])}); "
                "they write into the job's directory, so the name is free once they are gone: submit again in a "
                "moment, or choose another job_name",
                field="job_name",
            )

    def _preview_status(self, spec: JobSpec, owner: str) -> JobStatus:
        views = replicas.observe_replicas([], spec.pservers, spec.trainers)
        return JobStatus(
            name=spec.job_name,
            owner=owner,
            backend=self.name,
            phase=Phase.PENDING,
            message="Waiting for replicas to start.",
            spec=spec.to_dict(),
            created=now_iso(),
            replicas=[ReplicaStatus(**v.public()) for v in views],
        )

    @staticmethod
    def _snapshot(source: Path, job_dir: Path, entry_script: str | None, home: Path) -> None:
        target = job_dir / "package"
        if job_dir.exists():  # left by an earlier job of the same name (its record is gone: we got the name)
            left = _remove_tree(job_dir)
            if left:
                raise InvalidState(
                    f"the folder {job_dir} of an earlier job '{job_dir.name}' cannot be removed for the new one: "
                    f"{len(left)} of its files stay (first: {left[0]}); files a job pod wrote as another user (root?) "
                    "must be removed by that user or an admin, or choose another job_name",
                    field="job_name",
                )
        job_dir.mkdir(parents=True)
        try:
            package.snapshot_package(source, target, entry_script, home=home)  # links: only into the home
        except SpecError as error:
            shutil.rmtree(job_dir, ignore_errors=True)
            raise InvalidRequest(error.message, field=error.field) from None

    def _verb_for(self, verb: str, kind: str) -> Any:
        """The client call `verb` ("create" or "delete") of `kind`, taking (namespace, body) or
        (name, namespace) as the typed APIs do; a JobSet or a PodGroup goes through the custom objects API."""
        if kind in CUSTOM_OBJECTS:
            assert self._connection is not None
            custom = client.CustomObjectsApi(self._connection.api)
            group, version, plural = CUSTOM_OBJECTS[kind]

            def create(namespace: str, body: dict[str, Any], **kwargs: Any) -> Any:
                return custom.create_namespaced_custom_object(group, version, namespace, plural, body, **kwargs)

            def delete(name: str, namespace: str, **kwargs: Any) -> Any:
                return custom.delete_namespaced_custom_object(group, version, namespace, plural, name, **kwargs)

            return create if verb == "create" else delete
        api, suffix = self._api_for(kind)
        return getattr(api, f"{verb}_namespaced_{suffix}")

    async def _check_quota(self, connection: Connection, spec: JobSpec, plan: list[dict[str, Any]]) -> QuotaCheck:
        """Quota before submit (quota_reads.py): the namespace's ResourceQuotas and, for a job
        Kueue queues, its ClusterQueue; read on dry runs and submits only, never per list."""
        return await quota_reads.check_quota(
            self._call,
            connection.api,
            connection.namespace,
            plan,
            queue=(spec.queue or self.default_queue) if self._queued else "",
            gpu_resource=self.gpu_resource_name,
            priority_class=self.priority_class_name,
        )

    # ================================================================== workload modes and queues

    @property
    def _queued(self) -> bool:
        """Whether this deployment sends jobs to Kueue (then Workloads are watched for status); with
        Volcano the queues are Volcano's (named in the PodGroup), not Kueue's."""
        return bool(self.default_queue or self.allowed_queues) and not self.gang_scheduler

    def _role_job(self, job: str, role: str) -> str:
        return role_job_name(self.workload_mode, job, role)

    def _check_queue(self, spec: JobSpec) -> None:
        """A job may name a queue only from `allowed_queues` (or the default)."""
        if not spec.queue or spec.queue == self.default_queue:
            return
        allowed = [self.default_queue, *self.allowed_queues] if self.default_queue else list(self.allowed_queues)
        if spec.queue not in allowed:
            offered = f"allowed queues: {', '.join(allowed)}" if allowed else "this server sends jobs to no queue"
            raise InvalidRequest(f"queue '{spec.queue}' is not allowed on this server; {offered}", field="queue")

    async def _api_exists(self, connection: Connection, group_version: tuple[str, str]) -> bool | None:
        """Whether the API server serves `group_version` (discovery, once per connection; None
        when it could not be asked)."""
        if group_version not in self._apis:
            custom = client.CustomObjectsApi(connection.api)
            try:
                await self._call(
                    f"look for the {'/'.join(group_version)} API", custom.get_api_resources, *group_version, _preload_content=False
                )
                self._apis[group_version] = True
            except ApiException as error:
                if error.status != 404:
                    return None
                self._apis[group_version] = False
            except BackendUnavailable:
                return None
        return self._apis[group_version]

    async def _require_workload_api(self, connection: Connection) -> None:
        if self.workload_mode == JOBSET_MODE and await self._api_exists(connection, JOBSET_API) is False:
            raise BackendUnavailable(
                f"c.KubernetesBackend.workload_mode is 'jobset' but the cluster serves no JobSet API ({jobsets.API_VERSION}): "
                "install JobSet (admin guide: 'Workload modes') or set workload_mode = 'jobs'"
            )
        if problem := await self._gang_problem(connection):
            raise BackendUnavailable(problem)

    # ------------------------------------------------------------------ Volcano (volcano.py)

    async def _gang_problem(self, connection: Connection) -> str | None:
        """Why jobs cannot be gang-scheduled as configured (None: they can, or no gang scheduler),
        asking the cluster (discovery, once per connection) whether it serves PodGroups."""
        if self.gang_scheduler and volcano.combination_problem(self.workload_mode) is None:
            await self._api_exists(connection, PODGROUP_API)
        return self._known_gang_problem()

    def _known_gang_problem(self) -> str | None:
        """`_gang_problem` from the configuration and the last discovery only (for /config)."""
        if not self.gang_scheduler:
            return None
        if problem := volcano.combination_problem(self.workload_mode):
            return problem
        return volcano.missing_api_problem() if self._apis.get(PODGROUP_API) is False else None

    def _describe_gang(self, info: dict[str, Any]) -> None:
        """/config: the gang scheduler, whether its PodGroup API is served, and its queues."""
        info["gang_scheduler"] = self.gang_scheduler or None
        if not self.gang_scheduler:
            return
        info["volcano"] = {
            "scheduler_name": volcano.SCHEDULER_NAME,
            "podgroup_api": self._apis.get(PODGROUP_API),  # None: not asked (yet)
            "default_queue": self.default_queue or None,
            "allowed_queues": list(self.allowed_queues),
        }
        if problem := self._known_gang_problem():
            info["ok"] = False
            info["error"] = problem

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

    def _api_for(self, kind: str) -> tuple[Any, str]:
        assert self._connection is not None
        api = self._connection.api
        return {
            "ConfigMap": (client.CoreV1Api(api), "config_map"),
            "Service": (client.CoreV1Api(api), "service"),
            "ServiceAccount": (client.CoreV1Api(api), "service_account"),
            "Job": (client.BatchV1Api(api), "job"),
            "Role": (client.RbacAuthorizationV1Api(api), "role"),
            "RoleBinding": (client.RbacAuthorizationV1Api(api), "role_binding"),
        }[kind]

    async def _create(self, manifest: dict[str, Any], created: list[dict[str, Any]], job: str) -> dict[str, Any]:
        kind, name = manifest["kind"], manifest["metadata"]["name"]
        namespace = manifest["metadata"]["namespace"]
        create = self._verb_for("create", kind)
        try:
            response = await self._call(f"create {kind} {name}", create, namespace, manifest, _preload_content=False)
        except ApiException as error:
            cause = describe_failure(error)
            if error.status == 409:
                if not created:
                    raise JobExists(
                        f"a job named '{job}' already exists in namespace {namespace}; choose another job_name", field="job_name"
                    ) from None
                raise JobExists(
                    f"creating {kind} {name} failed: it already exists ({cause}); nothing of job '{job}' was left behind", field="job_name"
                ) from None
            if error.status == 403 and "quota" in cause.lower():
                raise InvalidRequest(
                    f"creating {kind} {name} failed: the namespace quota does not allow it ({cause}); ask for less or free resources"
                ) from None
            if error.status == 403:
                raise BackendUnavailable(
                    f"creating {kind} {name} was forbidden by RBAC ({cause}); the notebook's service account needs the Role in deploy/; nothing was left behind"
                ) from None
            if error.status in (400, 422):
                raise InvalidRequest(f"creating {kind} {name} failed: Kubernetes rejected it as invalid ({cause})") from None
            raise BackendUnavailable(f"creating {kind} {name} failed: {cause}") from None
        self._note_warnings(kind, name, response)
        body: dict[str, Any] = json.loads(response.data)
        created.append(body)
        return body

    def _note_warnings(self, kind: str, name: str, response: Any) -> None:
        """The API server's `Warning` headers (deprecated fields such as the in-tree cephfs
        volume, values it will refuse in a later release): logged, and kept for `GET /config`
        so that the admin sees them."""
        headers = getattr(response, "headers", None) or {}
        raw = headers.get("Warning") if hasattr(headers, "get") else None
        if not raw:
            return
        for text in WARNING_TEXT.findall(raw) or [raw]:
            message = f"{kind} {name}: {text}"
            if text not in self._api_warnings:
                self.log.warning("paddle-nbext: the Kubernetes API warns: %s", message)
            self._api_warnings[text] = message
            while len(self._api_warnings) > 20:
                self._api_warnings.pop(next(iter(self._api_warnings)))

    async def _rollback(self, created: list[dict[str, Any]]) -> None:
        """Delete what this submit created, newest first (background cascade for Job pods)."""
        for obj in reversed(created):
            kind, name = obj["kind"], obj["metadata"]["name"]
            delete = self._verb_for("delete", kind)
            try:
                await asyncio.to_thread(
                    delete,
                    name,
                    obj["metadata"]["namespace"],
                    propagation_policy="Background",
                    _request_timeout=30,
                    _preload_content=False,
                )
            except ApiException as error:
                if error.status != 404:
                    self.log.error("paddle-nbext: could not roll back %s %s: %s", kind, name, describe_failure(error))
            except Exception as error:  # noqa: BLE001
                self.log.error("paddle-nbext: could not roll back %s %s: %s", kind, name, describe_failure(error))

    # ================================================================== status from the cache

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
            if name:
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
            )
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

    async def _finish(self, job: str, record: dict[str, Any], views: list[Any], decision: policy.Decision) -> None:
        """The server's share of the master's work: record the end, stop what still runs."""
        try:
            if queue_status.stopped_by_kueue(self._queue_words(job)):
                return  # Kueue evicted it since: its pods end by Kueue's stop, the job waits (`_deciding_pods`)
            failed = replicas.failed_trainer_pod(views, decision)
            if failed:
                tail = await self._log_tail(failed)
                views, decision = replicas.decide_job(
                    record, list(self._pods_by_job.get(job, {}).values()), tail, self._role_notes(job, record), self._pod_notes(job)
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
        if cause.startswith(("HTTP 401", "HTTP 403")):
            return BackendUnavailable(
                f"the service account may not watch paddle-nbext jobs in namespace {namespace} ({cause}); "
                f"{consequence}. Bind the Role in deploy/rbac/notebook-role.yaml to it"
            )
        host = self._connection.host if self._connection else "the Kubernetes API"
        return BackendUnavailable(f"the Kubernetes API at {host} is unreachable ({cause}); {consequence}")

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

    def _key(self, status: JobStatus) -> str:
        """The object name of a job the cache holds (its record's name: `<job>-<owner tag>`, or
        the bare job name for a job submitted before names were per owner)."""
        return self._keys.get((status.owner, status.name)) or manifests.object_name(status.name, status.owner)

    def _name_of(self, key: str) -> str:
        """The user's name of the job whose objects are named `key`."""
        status = self._statuses.get(key)
        return status.name if status is not None else key

    # ================================================================== logs

    def _pod_of(self, status: JobStatus, role: str, index: int) -> str:
        desired = int(status.spec.get(f"{role}s") or 0) if role in ROLES else 0
        if not 0 <= index < desired:
            raise replica_not_found(status.name, role, index, desired)
        pods = [p for p in self._pods_by_job.get(self._key(status), {}).values() if replicas.pod_identity(p) == (role, index)]
        if not pods:
            raise InvalidState(f"{role} {index} of job '{status.name}' has no pod (not started yet, or removed after the job ended)")
        return str(replicas.newest_pod(pods)["metadata"]["name"])

    def _log_source(self, status: JobStatus, role: str, index: int) -> tuple[str | None, list[dict[str, Any]]]:
        """The replica's newest pod (None once it has none, e.g. removed after the job ended) and
        all its pods, oldest first; an index the job does not have is refused."""

        try:
            pod: str | None = self._pod_of(status, role, index)
        except InvalidState:  # the replica has no pod (any more): its file on the home may have the log
            pod = None
        return pod, replica_logs.replica_pods(self._pods_by_job.get(self._key(status), {}).values(), role, index)

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

    async def read_logs(self, name: str, owner: str, role: str, index: int, *, tail: int | None = None, previous: bool = False) -> str:

        status = await self.get_job(name, owner)
        pod, pods = self._log_source(status, role, index)
        what = f"{'previous ' if previous else ''}log for {role} {index} of '{name}'"
        directory = replica_logs.log_dir(self.home_path, name)
        if pod is not None:
            try:
                return await self.read_pod_log(pod, tail=tail, previous=previous)
            except ApiException as error:
                if previous and error.status == 400:
                    raise InvalidState(f"no {what}: it has not been restarted (no earlier attempt in {directory})") from None
                if error.status in (400, 404):
                    raise InvalidState(f"no {what}: {describe_failure(error)}") from None
                raise BackendUnavailable(f"cannot read the log of {role} {index}: {describe_failure(error)}") from None
        text = await asyncio.to_thread(
            replica_logs.read_attempt, self.home_path, name, role, index, pods, None, tail=tail, previous=previous
        )
        if text is None and previous:
            raise InvalidState(f"no {what}: no earlier attempt of it is in {directory}")
        if text is None:
            raise InvalidState(f"no {what}: it has no pod (not started yet, or removed after the job ended) and no log file in {directory}")
        return text

    async def follow_logs(self, name: str, owner: str, role: str, index: int, *, tail: int | None = None) -> AsyncIterator[str]:
        """The pod's log stream from the API while the pod lives (no read timeout: a quiet
        replica is not an ended one; at most `logs.MAX_API_STREAMS` at once).  When it ends before
        the replica does (a retry is a new pod; a lost node breaks the stream) the follow goes on
        in the attempt files, from where the stream stopped; it reads the files alone once the
        pods are gone or when every API stream is taken."""

        status = await self.get_job(name, owner)
        key = self._key(status)
        pod, pods = self._log_source(status, role, index)
        directory = replica_logs.log_dir(self.home_path, name)

        def ended() -> bool:
            return replica_logs.replica_ended(self._statuses.get(key), role, index)

        async def own_file() -> Path | None:
            current = replica_logs.replica_pods(self._pods_by_job.get(key, {}).values(), role, index) or pods
            files = await asyncio.to_thread(replica_logs.attempt_files, directory, role, index)
            return replica_logs.attempt_file(files, current, pod, previous=False)

        streams = replica_logs.API_STREAMS
        if pod is not None and streams.claim():
            try:
                response = await self._open_pod_log(
                    f"follow the log of {pod}", pod, tail, follow=True, _request_timeout=replica_logs.FOLLOW_TIMEOUT
                )
            except (ApiException, BackendUnavailable) as error:
                streams.release()
                if await own_file() is None:  # else: pod or node gone, its file has the lines
                    if isinstance(error, ApiException):
                        cause = describe_failure(error)
                        raise InvalidState(f"no log for {role} {index} of '{name}': {cause}") from None
                    raise
            except BaseException:
                streams.release()
                raise
            else:
                chunks = replica_logs.stream_api(response, streams)
                seen = b""
                # Only whole lines go out while the stream lasts: what a breaking stream sends last
                # may be the kubelet's own words ("context cancelled"), not the replica's output.
                pending = ""
                try:
                    async for chunk in chunks:
                        complete, pending = replica_logs.split_complete(pending + chunk)
                        if complete:
                            seen = (seen + complete.encode("utf-8"))[-replica_logs.RESUME_WINDOW :]
                            yield complete
                finally:
                    await chunks.aclose()  # now, not at garbage collection: it frees a stream thread
                # The container ended, or the stream broke while it runs.  Go on in the pod's file
                # from where the stream stopped, then in the files of the replica's retries (each a
                # new pod), until the replica ends.
                own = await own_file()
                if ended():
                    if pending:
                        yield pending  # the replica's last words, without a final newline
                    return
                if own is None:
                    return
                start = (own, await asyncio.to_thread(replica_logs.resume_offset, own, seen))
                async for chunk in replica_logs.follow_files(directory, role, index, tail=None, ended=ended, start=start):
                    yield chunk
                return
        async for chunk in replica_logs.follow_files(directory, role, index, tail=tail, ended=ended):
            yield chunk

    # ================================================================== cancel and delete

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

    def _flush_now(self, job: str) -> None:
        self._dirty.add(job)
        self._flush()

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

    async def metrics_files(self, name: str, owner: str) -> list[MetricsFile]:
        """The files on the home volume the job's launchers name for `report()` (metrics.py)."""
        return replica_metrics.metrics_files(self.home_path, await self.get_job(name, owner))

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
        if job_dir.is_dir():
            left = await asyncio.to_thread(_remove_tree, job_dir)
            if left:
                self.log.warning("paddle-nbext: job %s deleted, but %d files stay in %s: %s", name, len(left), job_dir, left[0])
                raise InvalidState(
                    f"job '{name}' is deleted, but {len(left)} of its files in {job_dir} could not be removed "
                    f"(first: {left[0]}); files a job pod wrote as another user (root?) must be removed by that user "
                    "or an admin",
                    field=None,
                )


def _with_own_ids(identity: dict[str, Any]) -> dict[str, Any]:
    """`identity` with the uid and gid this server runs as where the notebook pod's spec named
    none (an image whose USER sets them): in the notebook's pod the server is the notebook."""
    if hasattr(os, "getuid"):
        identity = {"runAsUser": os.getuid(), "runAsGroup": os.getgid(), **identity}
    return identity


def _owned_by(obj: dict[str, Any], uid: str | None) -> bool:
    return any(ref.get("uid") == uid for ref in (obj.get("metadata") or {}).get("ownerReferences") or [])


def _labelled_for(obj: dict[str, Any], uid: str | None) -> bool:
    """A JobSet's child Job belongs to the JobSet, and names the record it was made for by label."""
    return bool(uid) and ((obj.get("metadata") or {}).get("labels") or {}).get(RECORD_UID_LABEL) == uid


def _remove_tree(folder: Path) -> list[str]:
    """Remove `folder`; what could not be removed, as "path (error)" lines, never silently kept."""
    failed: dict[str, str] = {}

    def note(_function: Any, path: Any, error: Any) -> None:
        failure = error[1] if isinstance(error, tuple) else error
        failed[str(path)] = f"{path} ({type(failure).__name__}: {failure})"

    shutil.rmtree(folder, onerror=note)  # onerror, not onexc (3.12+): Python 3.10 is supported
    # A folder that stays only because something in it stays is not a leftover of its own.
    return [text for path, text in failed.items() if not any(other.startswith(path.rstrip("/") + "/") for other in failed)]
