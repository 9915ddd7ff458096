"""The deployment facts the manifests need, as one immutable value.

The backend's traitlets (`c.KubernetesBackend.*`) are turned into a `ManifestSettings` once, so
`manifests.build_plan` stays a pure function of (spec, owner, settings, home volume) that unit
tests call without any server or cluster.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

RUNTIME_MOUNT = "/opt/paddle-nbext"
#: Workload modes (`c.KubernetesBackend.workload_mode`): one native Job per role, or one JobSet
#: with a replicated Job per role (admitted by a queue as one whole).
JOBS_MODE = "jobs"
JOBSET_MODE = "jobset"
WORKLOAD_MODES = (JOBS_MODE, JOBSET_MODE)
#: Gang schedulers (`c.KubernetesBackend.gang_scheduler`): none (the default scheduler, pods one
#: by one) or Volcano (a PodGroup per job, its replicas placed all together or not at all).
VOLCANO = "volcano"
GANG_SCHEDULERS = ("", VOLCANO)


def role_job_name(mode: str, job: str, role: str) -> str:
    """The name of the Job that runs `role`: `<job>-<role>`, or JobSet's `<job>-<role>-0`
    (JobSet names each child `<jobset>-<replicatedJob>-<index>`; every role has one)."""
    return f"{job}-{role}-0" if mode == JOBSET_MODE else f"{job}-{role}"


PSERVER_PORT = 6174
TRAINER_PORT = 6175


@dataclass(frozen=True)
class ManifestSettings:
    namespace: str
    default_image: str
    home_path: str
    gpu_resource_name: str = "nvidia.com/gpu"
    node_selector: dict[str, str] = field(default_factory=dict)
    tolerations: tuple[dict[str, Any], ...] = ()
    node_lost_seconds: int | None = None  # tolerationSeconds of the node-lost taints (None: Kubernetes' 300)
    image_pull_seconds: int | None = None  # a failing image pull fails the job after this long (None: never)
    image_pull_secrets: tuple[str, ...] = ()
    service_account_name: str = ""
    master_service_account_name: str = "paddle-nbext-master"
    priority_class_name: str = ""
    replica_spread: str = "scheduler"  # or "prefer-spread" / "spread": topology spread of each role's replicas
    spread_topology_key: str = "kubernetes.io/hostname"
    extra_labels: dict[str, str] = field(default_factory=dict)
    extra_annotations: dict[str, str] = field(default_factory=dict)
    ttl_seconds_after_finished: int | None = None
    pserver_wait_timeout: float = 900.0  # PADDLE_NBEXT_WAIT_TIMEOUT: a trainer's wait for the pservers
    pod_security_context: dict[str, Any] = field(default_factory=dict)
    master_image: str = ""  # empty: default_image; never the request's image (the master holds an API token)
    image_pull_policy: str = ""  # empty: Kubernetes' default
    shm_size: str = "1Gi"  # memory-backed /dev/shm for collective and GPU replicas; "" keeps the 64 MiB default
    pserver_port: int = PSERVER_PORT
    trainer_port: int = TRAINER_PORT
    workload_mode: str = JOBS_MODE
    default_queue: str = ""  # Kueue LocalQueue (Volcano Queue with gang_scheduler 'volcano') of jobs that name none
    gang_scheduler: str = ""  # "" or VOLCANO (volcano.py)
    restricted: bool = True  # pods shaped for Pod Security's `restricted` profile (build/pod_shape.RESTRICTED_CONTAINER)

    def queue_of(self, requested: str | None) -> str:
        """The LocalQueue a job goes to: its own, else the deployment's default ("" for none)."""
        return requested or self.default_queue

    def role_job(self, job: str, role: str) -> str:
        return role_job_name(self.workload_mode, job, role)


@dataclass(frozen=True)
class BackendSettings:
    """Every `c.KubernetesBackend.*` value, frozen once when the backend is made (the traitlets'
    help and defaults are in backend.py, and only there).  The backend's parts read this value, never the
    traitlets, so each part can be made and tested alone and none sees a setting change under it."""

    namespace: str
    kubeconfig: str
    context: str
    home_volume: str
    home_pvc_template: str
    cephfs: dict[str, Any]
    slug_scheme: str
    home_path: str
    pod_name: str
    default_image: str
    master_image: str
    image_pull_policy: str
    shm_size: str
    gpu_resource_name: str
    node_selector: dict[str, str]
    tolerations: tuple[dict[str, Any], ...]
    node_lost_seconds: int | None
    image_pull_seconds: int | None
    image_pull_secrets: tuple[str, ...]
    service_account_name: str
    master_service_account_name: str
    priority_class_name: str
    replica_spread: str
    spread_topology_key: str
    extra_labels: dict[str, str]
    extra_annotations: dict[str, str]
    ttl_seconds_after_finished: int | None
    owner: str
    pserver_wait_timeout: float
    pod_security_context: dict[str, Any]
    copy_security_context: bool
    run_as_user: int | None
    run_as_group: int | None
    fs_group: int | None
    restricted_pods: bool
    resubmit_wait: float
    allow_hub_namespace: bool
    sync_timeout: float
    reconcile_interval: float
    keep_finished: int
    keep_finished_days: float
    queue_position_interval: float
    workload_mode: str
    default_queue: str
    allowed_queues: tuple[str, ...]
    gang_scheduler: str

    @property
    def queued(self) -> bool:
        """Whether this deployment sends jobs to Kueue (then Workloads are watched for status); with
        Volcano the queues are Volcano's (named in the PodGroup), not Kueue's."""
        return bool(self.default_queue or self.allowed_queues) and not self.gang_scheduler

    @property
    def queues(self) -> list[str]:
        """Every queue a job may go to: the default first, then the allowed ones."""
        return [queue for queue in (self.default_queue, *self.allowed_queues) if queue]

    def role_job(self, job: str, role: str) -> str:
        return role_job_name(self.workload_mode, job, role)
