"""The checks a submit passes before anything is written: a namespace without a hub, the user this
server serves, quota and queue, the workload and gang APIs, the runtime bundle, no old pods of a job
of the same name; and the settings each plan is made with.

A part of `KubernetesBackend` (backend.py): its submit runs these checks in order."""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from paddle_nbext.model.contract import Phase, now_iso
from paddle_nbext.model.quota import QuotaCheck
from paddle_nbext.model.spec import JobSpec
from paddle_nbext.model.status import JobStatus, ReplicaStatus

from ....jobfiles import runtime_files
from ....runtime import replicas
from ...base import BackendForbidden, BackendUnavailable, Forbidden, InvalidRequest, JobExists
from ..build import jobset as jobsets
from ..build import manifests, volcano
from ..client.api_calls import KubernetesClient
from ..client.api_names import HUB_SELECTOR, JOBSET_API, POD_ENDED, PODGROUP_API
from ..client.cache import describe_failure
from ..client.connection import Connection
from ..client.forbidden import denial_of
from ..job_view import JobView
from ..quota import quota_reads
from ..settings import JOBSET_MODE, BackendSettings, ManifestSettings
from .home_setup import HomeSetup


class Admission:
    """The checks a submit passes before anything is written."""

    def __init__(
        self, settings: BackendSettings, api: KubernetesClient, homes: HomeSetup, view: JobView, backend: str, log: logging.Logger
    ) -> None:
        self.settings = settings
        self.api = api
        self.homes = homes
        self.view = view
        self.backend = backend  # the backend's name, in the statuses it previews
        self.log = log
        self._hub_checked = False
        self.hub_problem: str | None = None  # why the namespace is refused (a JupyterHub in it), for /config

    async def refuse_a_hub_namespace(self, connection: Connection) -> None:
        """Jobs must not run beside a JupyterHub: the notebook's Role in that namespace would let
        every user's code rewrite the hub's ConfigMap or run a Job as the hub's ServiceAccount.
        Zero to JupyterHub labels its hub pod and ConfigMap `app=jupyterhub,component=hub`;
        checked once per connection (a refusal is re-checked at every submit)."""
        if self._hub_checked or self.settings.allow_hub_namespace:
            return
        core = client.CoreV1Api(connection.api)
        found = []
        for kind, lister in (("pod", core.list_namespaced_pod), ("ConfigMap", core.list_namespaced_config_map)):
            try:
                listed = await self.api.call(
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
            self.hub_problem = (
                f"namespace {connection.namespace} holds a JupyterHub ({', '.join(found)}): jobs there would run beside "
                "the hub, and the notebook's Role would let user code reach the hub's objects. Set "
                "c.KubernetesBackend.namespace to a namespace for jobs (admin guide: 'Where jobs run'), or "
                "c.KubernetesBackend.allow_hub_namespace = True to accept the risk"
            )
            raise BackendUnavailable(f"refusing to submit: {self.hub_problem}")
        self._hub_checked = True
        self.hub_problem = None

    def serves(self, owner: str) -> None:
        """Refuse a user this server does not act for (its `owner`): their jobs are not watched here."""
        if self.settings.owner and owner != self.settings.owner:
            raise Forbidden(
                f"this server manages the Kubernetes jobs of {self.settings.owner!r} only (c.KubernetesBackend.owner); "
                f"use your own notebook server for the jobs of {owner!r}"
            )

    def manifest_settings(self, namespace: str) -> ManifestSettings:
        security = self.homes.identity()
        node_selector = dict(self.settings.node_selector)
        if self.homes.home_node:
            node_selector["kubernetes.io/hostname"] = self.homes.home_node
        return ManifestSettings(
            namespace=namespace,
            default_image=self.settings.default_image,
            home_path=self.settings.home_path,
            gpu_resource_name=self.settings.gpu_resource_name,
            node_selector=node_selector,
            tolerations=tuple(self.settings.tolerations),
            node_lost_seconds=self.settings.node_lost_seconds,
            image_pull_seconds=self.settings.image_pull_seconds,
            image_pull_secrets=tuple(self.settings.image_pull_secrets),
            service_account_name=self.settings.service_account_name,
            master_service_account_name=self.settings.master_service_account_name,
            priority_class_name=self.settings.priority_class_name,
            replica_spread=self.settings.replica_spread,
            spread_topology_key=self.settings.spread_topology_key,
            extra_labels=dict(self.settings.extra_labels),
            extra_annotations=dict(self.settings.extra_annotations),
            ttl_seconds_after_finished=self.settings.ttl_seconds_after_finished,
            pserver_wait_timeout=self.settings.pserver_wait_timeout,
            pod_security_context=security,
            master_image=self.settings.master_image,
            image_pull_policy=self.settings.image_pull_policy,
            shm_size=self.settings.shm_size,
            workload_mode=self.settings.workload_mode,
            default_queue=self.settings.default_queue,
            gang_scheduler=self.settings.gang_scheduler,
            restricted=self.settings.restricted_pods,
        )

    async def ensure_runtime(self, connection: Connection, runtime: dict[str, str]) -> None:
        """The release's runtime ConfigMap (`manifests.runtime_configmap`), made when missing (at
        every submit: an admin may have removed it since, and two calls cost little).  One that exists under its name with other files (planted, or damaged) is never used: a
        job's pods would run them."""
        wanted = manifests.runtime_configmap(runtime, self.manifest_settings(connection.namespace))
        name = wanted["metadata"]["name"]
        core = client.CoreV1Api(connection.api)
        try:
            await self.api.call(f"create the runtime ConfigMap {name}", core.create_namespaced_config_map, connection.namespace, wanted)
        except ApiException as error:
            if (denial := denial_of(error)) is not None:
                raise BackendForbidden(
                    f"cannot create the job runtime ConfigMap {name}: {denial.sentence()}; nothing was created"
                ) from None
            if error.status != 409:
                raise BackendUnavailable(f"cannot create the job runtime ConfigMap {name}: {describe_failure(error)}") from None
            listed = await self.api.call(
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
    def runtime_bundle() -> dict[str, str]:
        """The files every pod of the job runs (the record ConfigMap holds them)."""
        try:
            return runtime_files.read_bundle()
        except runtime_files.RuntimeFilesMissing as error:
            raise BackendUnavailable(str(error)) from None

    async def wait_for_the_old_pods(self, key: str, job: str) -> None:
        """A job of this name was just deleted and some of its pods still run while they stop:
        they write into the job's directory, where the new snapshot would go.  Wait for them
        (`resubmit_wait`), then say why the name cannot be used yet."""

        def still_running() -> list[str]:
            if key in self.view.store("configmaps"):
                return []  # a live job of that name: the record's create answers 409 as usual
            return sorted(
                name for name, pod in self.view.pods_by_job.get(key, {}).items() if (pod.get("status") or {}).get("phase") not in POD_ENDED
            )

        deadline = asyncio.get_running_loop().time() + self.settings.resubmit_wait
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

    def preview_status(self, spec: JobSpec, owner: str) -> JobStatus:
        views = replicas.observe_replicas([], spec.pservers, spec.trainers)
        return JobStatus(
            name=spec.job_name,
            owner=owner,
            backend=self.backend,
            phase=Phase.PENDING,
            message="Waiting for replicas to start.",
            spec=spec.to_dict(),
            created=now_iso(),
            replicas=[ReplicaStatus(**v.public()) for v in views],
        )

    async def check_quota(self, connection: Connection, spec: JobSpec, plan: list[dict[str, Any]]) -> QuotaCheck:
        """Quota before submit (quota_reads.py): the namespace's ResourceQuotas and, for a job
        Kueue queues, its ClusterQueue; read on dry runs and submits only, never per list."""
        return await quota_reads.check_quota(
            self.api.call,
            connection.api,
            connection.namespace,
            plan,
            queue=(spec.queue or self.settings.default_queue) if self.settings.queued else "",
            gpu_resource=self.settings.gpu_resource_name,
            priority_class=self.settings.priority_class_name,
        )

    def check_queue(self, spec: JobSpec) -> None:
        """A job may name a queue only from `allowed_queues` (or the default)."""
        if not spec.queue or spec.queue == self.settings.default_queue:
            return
        allowed = (
            [self.settings.default_queue, *self.settings.allowed_queues]
            if self.settings.default_queue
            else list(self.settings.allowed_queues)
        )
        if spec.queue not in allowed:
            offered = f"allowed queues: {', '.join(allowed)}" if allowed else "this server sends jobs to no queue"
            raise InvalidRequest(f"queue '{spec.queue}' is not allowed on this server; {offered}", field="queue")

    async def require_workload_api(self, connection: Connection) -> None:
        if self.settings.workload_mode == JOBSET_MODE and await self.api.api_exists(connection, JOBSET_API) is False:
            raise BackendUnavailable(
                f"c.KubernetesBackend.workload_mode is 'jobset' but the cluster serves no JobSet API ({jobsets.API_VERSION}): "
                "install JobSet (admin guide: 'Workload modes') or set workload_mode = 'jobs'"
            )
        if problem := await self._gang_problem(connection):
            raise BackendUnavailable(problem)

    async def _gang_problem(self, connection: Connection) -> str | None:
        """Why jobs cannot be gang-scheduled as configured (None: they can, or no gang scheduler),
        asking the cluster (discovery, once per connection) whether it serves PodGroups."""
        if self.settings.gang_scheduler and volcano.combination_problem(self.settings.workload_mode) is None:
            await self.api.api_exists(connection, PODGROUP_API)
        return self._known_gang_problem()

    def _known_gang_problem(self) -> str | None:
        """`_gang_problem` from the configuration and the last discovery only (for /config)."""
        if not self.settings.gang_scheduler:
            return None
        if problem := volcano.combination_problem(self.settings.workload_mode):
            return problem
        return volcano.missing_api_problem() if self.api.apis.get(PODGROUP_API) is False else None

    def describe_gang(self, info: dict[str, Any]) -> None:
        """/config: the gang scheduler, whether its PodGroup API is served, and its queues."""
        info["gang_scheduler"] = self.settings.gang_scheduler or None
        if not self.settings.gang_scheduler:
            return
        info["volcano"] = {
            "scheduler_name": volcano.SCHEDULER_NAME,
            "podgroup_api": self.api.apis.get(PODGROUP_API),  # None: not asked (yet)
            "default_queue": self.settings.default_queue or None,
            "allowed_queues": list(self.settings.allowed_queues),
        }
        if problem := self._known_gang_problem():
            info["ok"] = False
            info["error"] = problem
