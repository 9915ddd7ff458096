"""The kubernetes backend's settings (`c.KubernetesBackend.*`): the whole configuration surface, apart
from any behaviour.  `KubernetesBackend` (backend.py) is this class with the operations; its parts
get the settings as one frozen value (`frozen_settings`, `settings.BackendSettings`)."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any

from traitlets import Bool, Dict, Enum, Float, Int, List, Unicode, default

from ..base import Backend
from .settings import GANG_SCHEDULERS, WORKLOAD_MODES, BackendSettings


class KubernetesBackendConfig(Backend):
    """Every setting of the kubernetes backend, with its default and its help."""

    name = "kubernetes"

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
        "naming the image and stops what runs; an image the node may never pull (ErrImageNeverPull) fails it at once. "
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


def _frozen(value: Any) -> Any:
    if isinstance(value, list):
        return tuple(dict(item) if isinstance(item, dict) else item for item in value)
    if isinstance(value, dict):
        return dict(value)
    return value
