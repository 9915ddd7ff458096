"""Pure functions: a job spec -> the exact Kubernetes objects of that job (docs/admin-guide.md, "A job's objects").

Every object is named from `<obj>` = `object_name(job_name, owner)`, the job's name plus a tag
of its owner (`train-3f9a0c`): users who share a namespace may each have a job `train`.
Objects, in creation order (the record first, so every other object can point at it):
  ConfigMap `<obj>`           the job record: spec.json, and the replica Jobs a whole restart
                              makes again (the runtime the pods run is the release's immutable
                              ConfigMap `paddle-nbext-runtime-<release>-<digest>`, made when missing)
  Service `<obj>`             headless, publishNotReadyAddresses: stable DNS for every replica
  Job `<obj>-master`          one pod (restartPolicy OnFailure, so Kubernetes restarts it) that
                              runs cluster_master.py and ends the job cleanly without the server
  Job `<obj>-pserver`         Indexed, completions = parallelism = pservers (ps mode only)
  Job `<obj>-trainer`         Indexed, backoffLimit 0, restartPolicy Never: a failed or evicted
                              replica fails its Job, and the master restarts the whole job
                              (every replica Job made again from the record, next attempt)
With `master_service_account_name` empty, a ServiceAccount, Role and RoleBinding `<obj>-master`
(limited to this job's objects by resourceNames) are created for the master as well.
Every object carries the label `paddle-nbext/job=<obj>` and the owner's name as an annotation.

Everything except the record carries an ownerReference to the record, so deleting the record
is one call and the garbage collector removes the rest.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from typing import Any

from paddle_nbext.model.contract import (
    ATTEMPT_LABEL,
    IMAGE_PULL_KEY,
    JOB_LABEL,
    MANAGED_BY_LABEL,
    MANAGER,
    OWNER_ANNOTATION,
    OWNER_LABEL,
    RECORD_UID_LABEL,
    REPLICA_JOBS_KEY,
    ROLE_LABEL,
    ROLES,
    SPEC_KEY,
    Mode,
    Role,
)
from paddle_nbext.model.quantity import Quantity
from paddle_nbext.model.spec import JobSpec

from ....jobfiles import runtime_files
from ....jobfiles.job_requirements import ENVS_DIR, INDEX_FILE
from ....runtime import environments, log_progress, paddle_nbext_job, replica_health, replicas
from ..client.api_names import JOBS_DIR
from ..settings import JOBS_MODE, JOBSET_MODE, RUNTIME_MOUNT, VOLCANO, ManifestSettings
from . import pod_shape, volcano
from .home_volume import HomeVolume
from .jobset import QUEUE_LABEL, jobset_of

CONTAINER = "main"
#: The role label of the master's Job (and its account): a part of every job, not a replica `Role`.
MASTER = "master"
UID_PLACEHOLDER = "<uid of the record ConfigMap, filled in at creation>"
_LABEL_VALUE = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")


#: Hex digits of the owner's SHA-256 in object names: with the 40-character job name the longest
#: object name is 47, which leaves room under Kubernetes' 63 for `-pserver-0-<index>` (JobSet).
OWNER_TAG_LENGTH = 6


def owner_tag(owner: str) -> str:
    """A short, stable tag of `owner` for object names: a hash (any user name, any length, a
    DNS-safe result), not the name itself (which may be long or hold characters names cannot)."""
    return hashlib.sha256(owner.encode()).hexdigest()[:OWNER_TAG_LENGTH]


def object_name(job: str, owner: str) -> str:
    """The name the Kubernetes objects of `owner`'s job `job` are made from, `<job>-<owner tag>`:
    a job name is the user's own, so two users of one namespace may both have `train` (and a
    dry run never learns whether another user has a name).  Still a DNS-1035 label, as a
    Service name must be, because a job name starts with a letter."""
    return f"{job}-{owner_tag(owner)}"


def owner_label(owner: str) -> str:
    """A label value for `owner`: the name itself when it is a valid label value, else a
    readable cleaned form plus a short hash so distinct names never share a label."""
    if _LABEL_VALUE.match(owner):
        return owner
    cleaned = re.sub(r"[^A-Za-z0-9_.-]+", "-", owner).strip("-_.")[:50].strip("-_.") or "user"
    digest = hashlib.sha256(owner.encode()).hexdigest()[:8]
    return f"{cleaned}-{digest}"


def labels(job: str, owner: str, role: str, extra: dict[str, str] | None = None) -> dict[str, str]:
    return {
        **(extra or {}),
        MANAGED_BY_LABEL: MANAGER,
        JOB_LABEL: job,
        OWNER_LABEL: owner_label(owner),
        ROLE_LABEL: role,
    }


def endpoints(job: str, role: str, count: int, port: int, role_job: str | None = None) -> str:
    """`<role job>-<i>.<job>:<port>` for every index (`job` is the object name): the Indexed Job
    hostnames (the role's Job is `<job>-<role>` unless told) under the headless Service, stable
    across pod restarts."""
    prefix = role_job or f"{job}-{role}"
    return ",".join(f"{prefix}-{index}.{job}:{port}" for index in range(count))


def _metadata(name: str, job: str, owner: str, role: str, settings: ManifestSettings, owned: bool) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": name,
        "namespace": settings.namespace,
        "labels": labels(job, owner, role, settings.extra_labels),
        "annotations": {**settings.extra_annotations, OWNER_ANNOTATION: owner},
    }
    if owned:
        meta["ownerReferences"] = [
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "name": job,
                "uid": UID_PLACEHOLDER,
                "controller": True,
                # No blockOwnerDeletion: it only matters for foreground deletion, which the backend
                # never asks for, and with OwnerReferencesPermissionEnforcement (OpenShift) it
                # needs `update` on the record's finalizers.
            }
        ]
    return meta


def record(spec: JobSpec, owner: str, settings: ManifestSettings) -> dict[str, Any]:
    """The job record: the spec (what `GET /jobs/{name}` shows even after the pods are gone);
    `build_plan` adds the replica Jobs a whole restart makes again.  The runtime the pods run is
    in the release's runtime ConfigMap (`runtime_configmap`), not in every record."""
    name = object_name(spec.job_name, owner)
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": _metadata(name, name, owner, "record", settings, owned=False),
        "data": {SPEC_KEY: json.dumps(spec.to_dict(), sort_keys=True)},
    }


#: The component label of the runtime ConfigMap.  It has no `managed-by` label: it is no job's
#: object, so the backend's watches (and a user's job list) never see it.
RUNTIME_COMPONENT = "paddle-nbext-runtime"


def runtime_configmap(runtime: dict[str, str], settings: ManifestSettings) -> dict[str, Any]:
    """The runtime bundle (`runtime_files.read_bundle()`) every pod of this release's jobs mounts:
    one immutable ConfigMap per bundle (`runtime_files.configmap_name`), made when missing."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": runtime_files.configmap_name(runtime),
            "namespace": settings.namespace,
            "labels": {"app.kubernetes.io/name": "paddle-nbext", "app.kubernetes.io/component": RUNTIME_COMPONENT},
        },
        "immutable": True,
        "data": {runtime_files.config_key(name): runtime[name] for name in runtime_files.NAMES},
    }


def service(spec: JobSpec, owner: str, settings: ManifestSettings) -> dict[str, Any]:
    name = object_name(spec.job_name, owner)
    ports = []
    if spec.pservers:
        ports.append({"name": Role.PSERVER.value, "port": settings.pserver_port, "targetPort": settings.pserver_port})
    ports.append({"name": Role.TRAINER.value, "port": settings.trainer_port, "targetPort": settings.trainer_port})
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _metadata(name, name, owner, "service", settings, owned=True),
        "spec": {
            "clusterIP": "None",
            "publishNotReadyAddresses": True,  # peers must resolve before they are "ready"
            "selector": {JOB_LABEL: name, MANAGED_BY_LABEL: MANAGER},
            "ports": ports,
        },
    }


def _threads(cpu: str) -> str:
    return str(max(1, math.ceil(Quantity.parse(cpu).value)))


#: The two pod labels `PADDLE_NBEXT_ATTEMPT` is made of (`role_env`).
ATTEMPT_PARTS = ("PADDLE_NBEXT_ATTEMPT_JOBS", "PADDLE_NBEXT_ATTEMPT_JOBSET")


def job_folder(home_path: str, job_name: str) -> str:
    """A job's folder on the home volume as pods see it: `<home>/.paddle-jobs/<job>`."""
    return f"{home_path.rstrip('/')}/{JOBS_DIR}/{job_name}"


def checkpoint_dir(home_path: str, job_name: str) -> str:
    """A job's checkpoint directory on the home volume: `<home>/.paddle-jobs/<job>/checkpoints`."""
    return f"{job_folder(home_path, job_name)}/{paddle_nbext_job.CHECKPOINTS_SUBDIR}"


def envs_dir(home_path: str) -> str:
    """Where jobs' environments live on the home volume: `<home>/.paddle-jobs/envs`."""
    return f"{home_path.rstrip('/')}/{JOBS_DIR}/{ENVS_DIR}"


def role_env(spec: JobSpec, owner: str, role: str, settings: ManifestSettings, workdir: str) -> list[dict[str, Any]]:
    """The launcher's environment contract (docs/architecture.md) for one role; the index comes
    from JOB_COMPLETION_INDEX, which Kubernetes sets in Indexed Job pods.  PADDLE_NBEXT_JOB is
    the user's job name (the job's folder in the home, PADDLE_JOB_NAME); the endpoints use the
    object names."""
    job = object_name(spec.job_name, owner)
    values = {
        "PADDLE_NBEXT_JOB": spec.job_name,
        "PADDLE_NBEXT_MODE": spec.mode,
        "PADDLE_NBEXT_ROLE": role,
        "PADDLE_NBEXT_PSERVER_ENDPOINTS": endpoints(
            job, Role.PSERVER, spec.pservers, settings.pserver_port, settings.role_job(job, Role.PSERVER)
        ),
        "PADDLE_NBEXT_TRAINER_ENDPOINTS": endpoints(
            job, Role.TRAINER, spec.trainers, settings.trainer_port, settings.role_job(job, Role.TRAINER)
        ),
        "PADDLE_NBEXT_ENTRY": spec.entry_point,
        "PADDLE_NBEXT_WORKDIR": workdir,
        "PADDLE_NBEXT_CPU": _threads(spec.pserver_cpu if role == Role.PSERVER else spec.trainer_cpu),
        "PADDLE_NBEXT_WAIT_TIMEOUT": f"{settings.pserver_wait_timeout:g}",
        # Ranks per trainer (one process each, on the trainer port and the ones after it; the
        # pservers count every rank as a trainer) and the GPUs of this role's pods.
        "PADDLE_NBEXT_PROCS": str(spec.ranks_per_trainer()),
        "PADDLE_NBEXT_GPUS": str(spec.trainer_gpu if role == Role.TRAINER else 0),
        "HOME": settings.home_path,
        # Checkpoints (`paddle_nbext_job.save_checkpoint`): in the job's folder in the home, the
        # same path in every pod and the notebook, the same for every attempt.
        paddle_nbext_job.CHECKPOINT_DIR_VAR: checkpoint_dir(settings.home_path, spec.job_name),
        paddle_nbext_job.KEEP_VAR: str(spec.keep_checkpoints),
    }
    if role == Role.TRAINER:
        # The trainer's launcher watches its own progress (`replica_health`): quiet this long
        # (0: never) after a report() in this attempt is a stall, and on_stall says what follows.
        values[replica_health.STALL_TIMEOUT_VAR] = str(spec.stall_timeout or 0)
        values[replica_health.ON_STALL_VAR] = spec.on_stall
        if spec.progress_pattern:  # the trainer's printed progress lines (runtime/log_progress.py)
            values[log_progress.PATTERN_VAR] = spec.progress_pattern
    if spec.requirements:  # resolved at submit: the launcher builds or reuses the job's environment first
        values.update(
            {
                environments.REQUIREMENTS_VAR: spec.requirements,
                environments.ENVS_DIR_VAR: envs_dir(settings.home_path),
                environments.INDEX_FILE_VAR: f"{job_folder(settings.home_path, spec.job_name)}/{INDEX_FILE}",
                "PADDLE_NBEXT_IMAGE": spec.image or settings.default_image or "",
            }
        )
    user = [{"name": key, "value": value} for key, value in sorted(spec.env.items()) if key not in values]
    # The whole-job attempt, new on every restart: a checkpoint an earlier attempt published is
    # the one to resume from (`paddle_nbext_job.resume_from`).  From the pod's labels: ours (the
    # master's restarts, `jobs` mode) and JobSet's (its restarts, `jobset` mode, where ours stays
    # 0); a label a pod lacks reads as "".
    attempt = [
        {"name": name, "valueFrom": {"fieldRef": {"fieldPath": f"metadata.labels['{label}']"}}}
        for name, label in ((ATTEMPT_PARTS[0], ATTEMPT_LABEL), (ATTEMPT_PARTS[1], replicas.JOBSET_RESTART_LABEL))
    ]
    attempt.append({"name": paddle_nbext_job.ATTEMPT_VAR, "value": f"$({ATTEMPT_PARTS[0]}).$({ATTEMPT_PARTS[1]})"})
    return [*user, *({"name": key, "value": value} for key, value in values.items()), *attempt]


def _resources(spec: JobSpec, role: str, settings: ManifestSettings) -> dict[str, Any]:
    cpu = Quantity.parse(spec.pserver_cpu if role == Role.PSERVER else spec.trainer_cpu).canonical()
    memory = Quantity.parse(spec.pserver_mem if role == Role.PSERVER else spec.trainer_mem).canonical()
    requests: dict[str, str] = {"cpu": cpu, "memory": memory}
    limits: dict[str, str] = {"memory": memory}  # request = limit: no surprise OOM kills under pressure
    if role == Role.TRAINER and spec.trainer_gpu:
        requests[settings.gpu_resource_name] = str(spec.trainer_gpu)
        limits[settings.gpu_resource_name] = str(spec.trainer_gpu)
    return {"requests": requests, "limits": limits}


SHM_VOLUME = "dshm"


def _needs_shm(spec: JobSpec, role: str, settings: ManifestSettings) -> bool:
    """Collective trainers and GPU replicas share tensors through /dev/shm, which a container
    gets at 64 MiB unless a memory-backed volume is mounted there."""
    return bool(settings.shm_size) and role == Role.TRAINER and (spec.mode == Mode.COLLECTIVE or spec.trainer_gpu > 0)


def shm_size(spec: JobSpec, role: str, settings: ManifestSettings) -> str | None:
    """The size of the role's memory-backed /dev/shm, or None for none: the server's `shm_size`,
    at most the replica's memory.  What a tmpfs holds is charged to the container's memory, so
    /dev/shm is counted in trainer_mem (the pod's request = limit) and more could never be used:
    a trainer that fills it is OOMKilled like one that allocates that much."""
    if not _needs_shm(spec, role, settings):
        return None
    wanted = Quantity.parse(settings.shm_size)
    memory = Quantity.parse(spec.pserver_mem if role == Role.PSERVER else spec.trainer_mem)
    return (memory if memory < wanted else wanted).canonical()


def _runtime_volume(runtime: str) -> dict[str, Any]:
    """The runtime ConfigMap `runtime` as the pod volume mounted at RUNTIME_MOUNT."""
    return {
        "name": "paddle-nbext-runtime",
        "configMap": {"name": runtime, "items": [{"key": runtime_files.config_key(f), "path": f} for f in runtime_files.NAMES]},
    }


def _volumes(runtime: str, home: HomeVolume, shm_size: str | None = None) -> list[dict[str, Any]]:
    volumes = [home.volume(), _runtime_volume(runtime)]
    if shm_size:
        volumes.append({"name": SHM_VOLUME, "emptyDir": {"medium": "Memory", "sizeLimit": shm_size}})
    return volumes


def _mounts(home: HomeVolume, shm: bool = False) -> list[dict[str, Any]]:
    mounts = [
        home.mount(),
        {"name": "paddle-nbext-runtime", "mountPath": RUNTIME_MOUNT, "readOnly": True},
    ]
    if shm:
        mounts.append({"name": SHM_VOLUME, "mountPath": "/dev/shm"})
    return mounts


def _job(
    name: str, spec: JobSpec, owner: str, role: str, settings: ManifestSettings, pod_spec: dict[str, Any], job_spec: dict[str, Any]
) -> dict[str, Any]:
    meta = _metadata(name, object_name(spec.job_name, owner), owner, role, settings, owned=True)
    body: dict[str, Any] = {
        **job_spec,
        "template": {
            "metadata": {"labels": dict(meta["labels"]), "annotations": dict(meta["annotations"])},
            "spec": pod_spec,
        },
    }
    if settings.ttl_seconds_after_finished is not None:
        body["ttlSecondsAfterFinished"] = settings.ttl_seconds_after_finished
    queue = settings.queue_of(spec.queue)
    if queue and settings.workload_mode == JOBS_MODE:
        meta["labels"][QUEUE_LABEL] = queue  # Kueue admits (unsuspends) each Job on its own
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta, "spec": body}


def replica_job(
    spec: JobSpec, owner: str, role: str, settings: ManifestSettings, home: HomeVolume, workdir: str, runtime: str
) -> dict[str, Any]:
    job = object_name(spec.job_name, owner)
    count = spec.pservers if role == Role.PSERVER else spec.trainers
    port = settings.pserver_port if role == Role.PSERVER else settings.trainer_port
    container = {
        "name": CONTAINER,
        "image": spec.image or settings.default_image,
        "command": ["python3", f"{RUNTIME_MOUNT}/launcher.py"],
        "workingDir": workdir,
        "env": role_env(spec, owner, role, settings, workdir),
        "ports": [{"name": role, "containerPort": port}],
        "resources": _resources(spec, role, settings),
        "volumeMounts": _mounts(home, shm=shm_size(spec, role, settings) is not None),
    }
    if settings.image_pull_policy:
        container["imagePullPolicy"] = settings.image_pull_policy
    pod_spec = {
        "restartPolicy": "Never",  # a failed pod is replaced by the Job controller, counted per index
        "subdomain": job,  # hostname <obj>-<role>-<i>.<obj> through the headless Service
        "containers": [pod_shape.restrict(container, settings)],
        "volumes": _volumes(runtime, home, shm_size(spec, role, settings)),
        **pod_shape.pod_extras(settings, settings.service_account_name),
    }
    job_spec: dict[str, Any] = {
        "completionMode": "Indexed",
        "completions": count,
        "parallelism": count,
        # No pod is ever replaced alone: it would join a running gang that cannot take it back
        # (collective ranks abort, PS peers lose their state).  The first failed pod fails the
        # Job; the master (JobSet in `jobset` mode) restarts the whole job, up to max_restarts.
        "backoffLimit": 0,
        # An eviction, drain or preemption fails the Job by this rule, so the Job says so
        # (reason PodFailurePolicy) even once the pod is gone: such a restart does not use up
        # max_restarts.
        "podFailurePolicy": {"rules": [{"action": "FailJob", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]}]},
    }
    manifest = _job(f"{job}-{role}", spec, owner, role, settings, pod_spec, job_spec)
    manifest["metadata"]["labels"][ATTEMPT_LABEL] = "0"
    template = manifest["spec"]["template"]
    template["metadata"]["labels"][ATTEMPT_LABEL] = "0"
    spread = pod_shape.spread(settings, template["metadata"]["labels"])
    if spread:
        template["spec"]["topologySpreadConstraints"] = spread
    return manifest


def master_job(spec: JobSpec, owner: str, settings: ManifestSettings, runtime: str) -> dict[str, Any]:
    job = object_name(spec.job_name, owner)
    service_account = settings.master_service_account_name or f"{job}-master"
    container = {
        "name": CONTAINER,
        # Never the request's image: the master holds an API token, and an image the user chose
        # could hand it to user code.  It needs only Python 3.10+ (the master is stdlib-only).
        "image": settings.master_image or settings.default_image,
        "command": ["python3", f"{RUNTIME_MOUNT}/cluster_master.py"],
        "env": [
            {"name": "PADDLE_NBEXT_RECORD", "value": job},
            {"name": "PADDLE_NBEXT_ROLE_JOBS", "value": json.dumps({role: settings.role_job(job, role) for role in ROLES})},
            {"name": "PADDLE_NBEXT_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
            {"name": "PYTHONDONTWRITEBYTECODE", "value": "1"},
        ],
        "resources": {"requests": {"cpu": "10m", "memory": "128Mi"}, "limits": {"memory": "128Mi"}},
        "volumeMounts": [{"name": "paddle-nbext-runtime", "mountPath": RUNTIME_MOUNT, "readOnly": True}],
    }
    extras = pod_shape.pod_extras(settings, service_account)
    extras.pop("securityContext", None)  # the master touches no user files
    security = pod_shape.pod_security(settings, pod_shape.MASTER_IDENTITY if settings.restricted else {})
    if security:
        extras["securityContext"] = security
    pod_spec = {
        "restartPolicy": "OnFailure",  # Kubernetes restarts the master; it re-derives all from the API
        "containers": [pod_shape.restrict(container, settings)],
        "volumes": [_runtime_volume(runtime)],
        **extras,
    }
    return _job(f"{job}-{MASTER}", spec, owner, MASTER, settings, pod_spec, {"completions": 1, "parallelism": 1, "backoffLimit": 1000})


def master_rbac(spec: JobSpec, owner: str, settings: ManifestSettings) -> list[dict[str, Any]]:
    """A per-job ServiceAccount + Role + RoleBinding, limited to this job's objects."""
    job = object_name(spec.job_name, owner)
    name = f"{job}-master"

    def meta() -> dict[str, Any]:
        return _metadata(name, job, owner, MASTER, settings, owned=True)

    rules = [
        {"apiGroups": [""], "resources": ["configmaps"], "resourceNames": [job], "verbs": ["get", "patch"]},
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["list", "watch"]},
        {"apiGroups": [""], "resources": ["pods/log"], "verbs": ["get"]},
        # a whole restart points the job's headless Service at the new attempt's pods only
        {"apiGroups": [""], "resources": ["services"], "resourceNames": [job], "verbs": ["patch"]},
        {
            "apiGroups": ["batch"],
            "resources": ["jobs"],
            "resourceNames": [settings.role_job(job, role) for role in ROLES],
            "verbs": ["patch", "delete"],  # stop a role; delete the Jobs of an attempt to restart
        },
        # Jobs: failed or suspended by a queue (preemption)?  And a whole restart makes the
        # replica Jobs again (a create cannot be limited to names: RBAC knows no name yet).
        {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["list", "create"]},
    ]
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta()},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": meta(), "rules": rules},
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": meta(),
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
            "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": settings.namespace}],
        },
    ]


def build_plan(
    spec: JobSpec,
    owner: str,
    settings: ManifestSettings,
    *,
    home: HomeVolume,
    workdir: str,
    runtime: dict[str, str],
) -> list[dict[str, Any]]:
    """Every object of the job, in creation order (record first).  In `jobset` mode the Service
    and the Jobs are one JobSet (`jobset.jobset_of`), which makes them."""
    bundle = runtime_files.configmap_name(runtime)  # `runtime_configmap`, made when missing
    jobs = [master_job(spec, owner, settings, bundle)]
    if spec.pservers:
        jobs.append(replica_job(spec, owner, Role.PSERVER.value, settings, home, workdir, bundle))
    jobs.append(replica_job(spec, owner, Role.TRAINER.value, settings, home, workdir, bundle))
    objects = [record(spec, owner, settings)]
    if settings.image_pull_seconds is not None:
        objects[0]["data"][IMAGE_PULL_KEY] = str(settings.image_pull_seconds)
    if settings.workload_mode != JOBSET_MODE:
        # What the master makes again on a whole restart (JobSet restarts its own children).
        replicas = [j for j in jobs if j["metadata"]["labels"][ROLE_LABEL] in ROLES]
        objects[0]["data"][REPLICA_JOBS_KEY] = json.dumps(replicas, sort_keys=True)
        objects.append(service(spec, owner, settings))
    if not settings.master_service_account_name:
        objects += master_rbac(spec, owner, settings)
    if settings.workload_mode == JOBSET_MODE:
        objects.append(jobset_of(spec, settings, jobs))
    else:
        objects += jobs
    if settings.gang_scheduler == VOLCANO:
        objects = volcano.with_pod_group(objects, spec, settings)  # a PodGroup, pods scheduled by Volcano
    return objects


def set_owner_uid(manifest: dict[str, Any], uid: str) -> dict[str, Any]:
    """A copy of `manifest` whose ownerReference points at the created record, and whose pods
    (for a Job) carry the record's uid."""
    copy: dict[str, Any] = json.loads(json.dumps(manifest))
    for reference in copy["metadata"].get("ownerReferences", []):
        reference["uid"] = uid
    if copy.get("kind") == "Job":
        copy["spec"]["template"]["metadata"].setdefault("labels", {})[RECORD_UID_LABEL] = uid
    if copy.get("kind") == "JobSet":
        for replicated in copy["spec"]["replicatedJobs"]:
            job = replicated["template"]
            job.setdefault("metadata", {}).setdefault("labels", {})[RECORD_UID_LABEL] = uid
            job["spec"]["template"]["metadata"].setdefault("labels", {})[RECORD_UID_LABEL] = uid
    return copy
