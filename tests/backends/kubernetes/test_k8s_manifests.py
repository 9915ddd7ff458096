"""The Kubernetes objects of a job: schema-valid for every supported Kubernetes minor (1.30 to
1.37, the test control plane's), and carrying the launcher's
environment contract per role (docs/architecture.md), labels and ownership of docs/admin-guide.md ("A job's objects")."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

import kubernetes_validate
import pytest

from paddle_nbext.model.spec import JobSpec
from paddle_nbext_server.backends.kubernetes.build import manifests
from paddle_nbext_server.backends.kubernetes.build.home_volume import HomeVolume
from paddle_nbext_server.backends.kubernetes.settings import ManifestSettings
from paddle_nbext_server.jobfiles import runtime_files
from paddle_nbext_server.jobfiles.runtime_files import NAMES, config_key, read_bundle

# Every minor we support: 1.30 (podFailurePolicy and backoffLimitPerIndex are on by default
# from there) up to the control plane the cluster suite runs (support.controlplane).
K8S_VERSIONS = [f"1.{minor}.0" for minor in range(30, 38)]
RUNTIME = read_bundle()
HOME = HomeVolume({"persistentVolumeClaim": {"claimName": "claim-alice"}}, "/home/jovyan")
SETTINGS = ManifestSettings(
    namespace="team-a",
    default_image="paddlepaddle/paddle:3.0.0",
    home_path="/home/jovyan",
    node_selector={"pool": "cpu"},
    tolerations=({"key": "dedicated", "operator": "Equal", "value": "paddle", "effect": "NoSchedule"},),
    image_pull_secrets=("regcred",),
    priority_class_name="batch-low",
    extra_labels={"team": "ml"},
    extra_annotations={"cost-center": "42"},
    ttl_seconds_after_finished=3600,
    pod_security_context={"runAsUser": 1000, "fsGroup": 100},
)
OWNER = "alice@example.org"
OBJ = manifests.object_name("mnist-ps", OWNER)  # every object is named from it: mnist-ps-<owner tag>


def plan(settings: ManifestSettings = SETTINGS, **fields: Any) -> tuple[JobSpec, list[dict[str, Any]]]:
    data: dict[str, Any] = {
        "job_name": "mnist-ps",
        "entry_point": "python train.py --epochs 3",
        "pservers": 2,
        "trainers": 3,
        "trainer_gpu": 1,
        "trainer_mem": "1.5Gi",
        "pserver_cpu": "500m",
        "max_restarts": 2,
        "env": {"LR": "0.1"},
    }
    data.update(fields)
    spec = JobSpec.from_dict(data)
    objects = manifests.build_plan(spec, OWNER, settings, home=HOME, workdir="/home/jovyan/.paddle-jobs/mnist-ps/package", runtime=RUNTIME)
    return spec, objects


def by_name(objects: Iterable[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(o["kind"], o["metadata"]["name"]): o for o in objects}


def env_of(job: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value") for e in job["spec"]["template"]["spec"]["containers"][0]["env"]}


@pytest.mark.parametrize("version", K8S_VERSIONS)
@pytest.mark.parametrize("shared_master_account", [True, False])
@pytest.mark.parametrize("mode", ["ps", "collective"])
def test_every_object_is_valid_for_every_supported_kubernetes(mode: str, shared_master_account: bool, version: str) -> None:
    settings = SETTINGS if shared_master_account else ManifestSettings(**{**SETTINGS.__dict__, "master_service_account_name": ""})
    extra = {} if mode == "ps" else {"mode": "collective", "pservers": 0}
    _, objects = plan(settings, **extra)
    for obj in objects:
        uid_filled = manifests.set_owner_uid(obj, "3f1c2a9e-0000-4000-8000-000000000001")
        kubernetes_validate.validate(uid_filled, version, strict=True)  # raises with the bad path


def test_objects_names_labels_and_ownership() -> None:
    _, objects = plan()
    names = [(o["kind"], o["metadata"]["name"]) for o in objects]
    assert names == [
        ("ConfigMap", OBJ),
        ("Service", OBJ),
        ("Job", f"{OBJ}-master"),
        ("Job", f"{OBJ}-pserver"),
        ("Job", f"{OBJ}-trainer"),
    ]
    for obj in objects:
        labels = obj["metadata"]["labels"]
        assert labels["app.kubernetes.io/managed-by"] == "paddle-nbext"
        assert labels["paddle-nbext/job"] == OBJ
        assert labels["team"] == "ml"
        assert obj["metadata"]["annotations"]["paddle-nbext/owner"] == "alice@example.org"
        assert obj["metadata"]["annotations"]["cost-center"] == "42"
        assert obj["metadata"]["namespace"] == "team-a"
        owners = obj["metadata"].get("ownerReferences", [])
        if obj["kind"] == "ConfigMap":
            assert owners == []
        else:
            assert [(r["kind"], r["name"]) for r in owners] == [("ConfigMap", OBJ)]
    # "alice@example.org" is no label value; the label is a safe, distinct form of it
    owner_label = objects[0]["metadata"]["labels"]["paddle-nbext/owner"]
    assert owner_label.startswith("alice-example.org-") and owner_label != manifests.owner_label("alice-example.org")


def test_the_record_holds_the_spec_and_the_replica_jobs_and_the_pods_mount_the_releases_runtime() -> None:
    spec, objects = plan()
    record = by_name(objects)[("ConfigMap", OBJ)]
    assert json.loads(record["data"]["spec.json"]) == spec.to_dict()
    assert set(record["data"]) == {"spec.json", "replica-jobs.json"}  # small: no runtime code per job
    # What a whole-job restart makes again: the replica Jobs exactly as submitted.
    submitted = [o for o in objects if o["kind"] == "Job" and o["metadata"]["labels"]["paddle-nbext/role"] != "master"]
    assert json.loads(record["data"]["replica-jobs.json"]) == json.loads(json.dumps(submitted))
    # One immutable ConfigMap per bundle (release and digest) holds the runtime every pod mounts.
    runtime = manifests.runtime_configmap(RUNTIME, SETTINGS)
    assert runtime["immutable"] is True and runtime["metadata"]["name"] == runtime_files.configmap_name(RUNTIME)
    assert re.fullmatch(r"paddle-nbext-runtime-[a-z0-9-]+-[0-9a-f]{12}", runtime["metadata"]["name"])
    assert set(runtime["data"]) == {config_key(name) for name in NAMES}
    assert runtime["data"]["pylib.paddle_nbext_job.py"] == RUNTIME["pylib/paddle_nbext_job.py"]  # report(), mounted at pylib/
    assert runtime["data"]["launcher.py"] == RUNTIME["launcher.py"]
    assert runtime["data"]["contract.py"] == RUNTIME["contract.py"]  # the runtime imports it from beside itself
    assert "app.kubernetes.io/managed-by" not in runtime["metadata"]["labels"]  # no job's object: never in a job list
    for job in (o for o in objects if o["kind"] == "Job"):
        volume = next(v for v in job["spec"]["template"]["spec"]["volumes"] if v["name"] == "paddle-nbext-runtime")
        assert volume["configMap"]["name"] == runtime["metadata"]["name"]
    patched = {**RUNTIME, "launcher.py": RUNTIME["launcher.py"] + "# patched\n"}
    assert runtime_files.configmap_name(patched) != runtime["metadata"]["name"]  # another bundle, another ConfigMap


def test_pserver_and_trainer_jobs() -> None:
    _, objects = plan()
    jobs = by_name(objects)
    pserver, trainer = jobs[("Job", f"{OBJ}-pserver")], jobs[("Job", f"{OBJ}-trainer")]
    assert pserver["spec"]["completionMode"] == trainer["spec"]["completionMode"] == "Indexed"
    assert (pserver["spec"]["completions"], pserver["spec"]["parallelism"]) == (2, 2)
    assert (trainer["spec"]["completions"], trainer["spec"]["parallelism"]) == (3, 3)
    # Never a pod replaced alone into a running gang: the first failure fails the Job, and the
    # master restarts the whole job; attempt 0 as submitted.
    assert pserver["spec"]["backoffLimit"] == trainer["spec"]["backoffLimit"] == 0
    assert "backoffLimitPerIndex" not in trainer["spec"]
    for job in (pserver, trainer):
        assert (
            job["metadata"]["labels"]["paddle-nbext/attempt"]
            == job["spec"]["template"]["metadata"]["labels"]["paddle-nbext/attempt"]
            == "0"
        )
    assert trainer["spec"]["ttlSecondsAfterFinished"] == 3600
    for job in (pserver, trainer):
        pod = job["spec"]["template"]["spec"]
        assert pod["restartPolicy"] == "Never"
        assert pod["subdomain"] == OBJ
        assert pod["nodeSelector"] == {"pool": "cpu"}
        assert pod["imagePullSecrets"] == [{"name": "regcred"}]
        assert pod["priorityClassName"] == "batch-low"
        # The notebook's uid, and what Pod Security's `restricted` profile asks of every pod.
        assert pod["securityContext"] == {
            "runAsUser": 1000,
            "fsGroup": 100,
            "fsGroupChangePolicy": "OnRootMismatch",
            "runAsNonRoot": True,
            "seccompProfile": {"type": "RuntimeDefault"},
        }
        container = pod["containers"][0]
        assert container["securityContext"] == {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}
        assert container["workingDir"] == "/home/jovyan/.paddle-jobs/mnist-ps/package"
        assert {"name": "home", "mountPath": "/home/jovyan"} in container["volumeMounts"]
        assert {"name": "home", "persistentVolumeClaim": {"claimName": "claim-alice"}} in pod["volumes"]
        assert job["spec"]["template"]["metadata"]["labels"]["paddle-nbext/role"] == job["metadata"]["labels"]["paddle-nbext/role"]
    trainer_resources = trainer["spec"]["template"]["spec"]["containers"][0]["resources"]
    assert trainer_resources["requests"]["memory"] == trainer_resources["limits"]["memory"] == "1536Mi"
    assert trainer_resources["limits"]["nvidia.com/gpu"] == "1"
    pserver_resources = pserver["spec"]["template"]["spec"]["containers"][0]["resources"]
    assert pserver_resources["requests"]["cpu"] == "500m"
    assert "nvidia.com/gpu" not in pserver_resources["limits"]


def test_env_contract_per_role() -> None:
    _, objects = plan()
    jobs = by_name(objects)
    for role in ("pserver", "trainer"):
        env = env_of(jobs[("Job", f"{OBJ}-{role}")])
        assert env["PADDLE_NBEXT_ROLE"] == role
        assert env["PADDLE_NBEXT_JOB"] == "mnist-ps"
        assert env["PADDLE_NBEXT_MODE"] == "ps"
        assert env["PADDLE_NBEXT_PSERVER_ENDPOINTS"] == f"{OBJ}-pserver-0.{OBJ}:6174,{OBJ}-pserver-1.{OBJ}:6174"
        assert env["PADDLE_NBEXT_TRAINER_ENDPOINTS"].split(",")[2] == f"{OBJ}-trainer-2.{OBJ}:6175"
        assert env["PADDLE_NBEXT_ENTRY"] == "python train.py --epochs 3"
        assert env["PADDLE_NBEXT_WORKDIR"] == "/home/jovyan/.paddle-jobs/mnist-ps/package"
        assert env["LR"] == "0.1"
        assert "PADDLE_NBEXT_INDEX" not in env  # from JOB_COMPLETION_INDEX of the Indexed Job
        # Checkpoints in the job's folder in the home, the same path for every attempt (issue 26).
        assert env["PADDLE_NBEXT_CHECKPOINT_DIR"] == "/home/jovyan/.paddle-jobs/mnist-ps/checkpoints"
        assert env["PADDLE_NBEXT_KEEP_CHECKPOINTS"] == "3"
    assert env_of(jobs[("Job", f"{OBJ}-pserver")])["PADDLE_NBEXT_CPU"] == "1"  # 500m -> 1 thread
    # A PS trainer waits for the pservers as long as a cold image pull may take (a server setting).
    assert env_of(jobs[("Job", f"{OBJ}-trainer")])["PADDLE_NBEXT_WAIT_TIMEOUT"] == "900"
    service = jobs[("Service", OBJ)]
    assert service["spec"]["clusterIP"] == "None" and service["spec"]["publishNotReadyAddresses"] is True
    assert {p["port"] for p in service["spec"]["ports"]} == {6174, 6175}


def test_collective_mode_has_no_pservers() -> None:
    _, objects = plan(mode="collective", pservers=0, trainers=2)
    jobs = by_name(objects)
    assert ("Job", f"{OBJ}-pserver") not in jobs
    env = env_of(jobs[("Job", f"{OBJ}-trainer")])
    assert env["PADDLE_NBEXT_MODE"] == "collective"
    assert env["PADDLE_NBEXT_PSERVER_ENDPOINTS"] == ""
    assert env["PADDLE_NBEXT_TRAINER_ENDPOINTS"] == f"{OBJ}-trainer-0.{OBJ}:6175,{OBJ}-trainer-1.{OBJ}:6175"


def test_master_runs_cluster_master_with_its_service_account() -> None:
    _, objects = plan()
    master = by_name(objects)[("Job", f"{OBJ}-master")]
    pod = master["spec"]["template"]["spec"]
    assert pod["restartPolicy"] == "OnFailure"
    assert pod["serviceAccountName"] == "paddle-nbext-master"
    assert pod["containers"][0]["command"][-1].endswith("/cluster_master.py")
    _, own = plan(ManifestSettings(**{**SETTINGS.__dict__, "master_service_account_name": ""}))
    kinds = [(o["kind"], o["metadata"]["name"]) for o in own]
    assert ("ServiceAccount", f"{OBJ}-master") in kinds and ("RoleBinding", f"{OBJ}-master") in kinds
    role = by_name(own)[("Role", f"{OBJ}-master")]
    assert {"apiGroups": [""], "resources": ["configmaps"], "resourceNames": [OBJ], "verbs": ["get", "patch"]} in role["rules"]


def test_the_master_never_runs_the_requests_image_nor_deletes_pods() -> None:
    """The master holds an API token: it runs in an image the admin chose, never the job's."""
    _, objects = plan(image="someone/own-image:1")
    master = by_name(objects)[("Job", f"{OBJ}-master")]["spec"]["template"]["spec"]["containers"][0]
    assert master["image"] == "paddlepaddle/paddle:3.0.0"
    assert by_name(objects)[("Job", f"{OBJ}-trainer")]["spec"]["template"]["spec"]["containers"][0]["image"] == "someone/own-image:1"
    _, own = plan(ManifestSettings(**{**SETTINGS.__dict__, "master_service_account_name": "", "master_image": "python:3.12-slim"}))
    assert by_name(own)[("Job", f"{OBJ}-master")]["spec"]["template"]["spec"]["containers"][0]["image"] == "python:3.12-slim"
    rules = by_name(own)[("Role", f"{OBJ}-master")]["rules"]
    assert not [r for r in rules if "pods" in r["resources"] and "delete" in r["verbs"]]


def test_shm_pull_policy_and_owner_references() -> None:
    _, objects = plan(mode="collective", pservers=0, trainer_gpu=0)
    trainer = by_name(objects)[("Job", f"{OBJ}-trainer")]["spec"]["template"]["spec"]
    assert {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "1Gi"}} in trainer["volumes"]
    assert {"name": "dshm", "mountPath": "/dev/shm"} in trainer["containers"][0]["volumeMounts"]
    assert "imagePullPolicy" not in trainer["containers"][0]
    _, ps = plan(trainer_gpu=0)  # CPU parameter-server trainers share no tensors through /dev/shm
    assert "dshm" not in [v["name"] for v in by_name(ps)[("Job", f"{OBJ}-trainer")]["spec"]["template"]["spec"]["volumes"]]
    _, gpu = plan(trainer_mem="16Gi", settings=ManifestSettings(**{**SETTINGS.__dict__, "shm_size": "8Gi", "image_pull_policy": "Always"}))
    pod = by_name(gpu)[("Job", f"{OBJ}-trainer")]["spec"]["template"]["spec"]
    assert {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "8Gi"}} in pod["volumes"]
    assert pod["containers"][0]["imagePullPolicy"] == "Always"
    for obj in gpu:
        for reference in obj["metadata"].get("ownerReferences", []):
            assert "blockOwnerDeletion" not in reference  # needs finalizers rights on OpenShift; never needed here
    jobs = [o for o in gpu if o["kind"] == "Job" and o["metadata"]["name"] != f"{OBJ}-master"]
    assert all(
        j["spec"]["podFailurePolicy"]["rules"]
        == [{"action": "FailJob", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]}]
        for j in jobs
    )


def test_two_owners_may_each_have_a_job_of_one_name_in_a_shared_namespace() -> None:
    """Names are the user's own: alice's and bob's `mnist-ps` share no object name, label or
    Service selector, so neither submit collides with (or learns about) the other."""
    _, alice = plan()
    spec = JobSpec.from_dict({"job_name": "mnist-ps", "entry_point": "python train.py", "pservers": 2, "trainers": 3})
    bob = manifests.build_plan(spec, "bob", SETTINGS, home=HOME, workdir="/home/jovyan/w", runtime=RUNTIME)
    assert not set(by_name(alice)) & set(by_name(bob))
    assert OBJ.startswith("mnist-ps-") and OBJ != manifests.object_name("mnist-ps", "bob")
    assert {o["metadata"]["labels"]["paddle-nbext/job"] for o in bob} == {manifests.object_name("mnist-ps", "bob")}
    assert by_name(bob)[("Service", manifests.object_name("mnist-ps", "bob"))]["spec"]["selector"]["paddle-nbext/job"] != OBJ
    assert manifests.object_name("mnist-ps", OWNER) == OBJ  # stable: the same owner always finds its objects


@pytest.mark.parametrize("mode", ["jobs", "jobset"])
def test_the_longest_job_name_still_gives_names_kubernetes_accepts(mode: str) -> None:
    """Job names (the pods' job-name label) and pod hostnames are limited to 63 characters:
    a 40-character job name plus the owner tag leaves room for every role and 5-digit index."""
    import dataclasses

    longest = "a" * 40
    settings = dataclasses.replace(SETTINGS, workload_mode=mode)
    spec = JobSpec.from_dict({"job_name": longest, "entry_point": "python t.py", "pservers": 1, "trainers": 1})
    objects = manifests.build_plan(spec, "a-user-with-a-long-name@example.org", settings, home=HOME, workdir="/w", runtime=RUNTIME)
    obj = manifests.object_name(longest, "a-user-with-a-long-name@example.org")
    assert len(obj) == 47
    for role in ("master", "pserver", "trainer"):
        job = settings.role_job(obj, role)
        assert len(job) <= 63 and len(f"{job}-99999") <= 63
    for o in objects:
        assert len(o["metadata"]["name"]) <= 63


def test_the_master_is_told_its_records_and_role_jobs_names() -> None:
    """The master reads the record and patches the role Jobs by these names (cluster_master.JobObjects)."""
    _, objects = plan()
    env = {
        e["name"]: e.get("value") for e in by_name(objects)[("Job", f"{OBJ}-master")]["spec"]["template"]["spec"]["containers"][0]["env"]
    }
    assert env["PADDLE_NBEXT_RECORD"] == OBJ
    assert json.loads(env["PADDLE_NBEXT_ROLE_JOBS"]) == {"pserver": f"{OBJ}-pserver", "trainer": f"{OBJ}-trainer"}


def test_the_master_runs_as_nobody_and_every_pod_passes_the_restricted_profile_unless_turned_off() -> None:
    _, objects = plan()
    master = by_name(objects)[("Job", f"{OBJ}-master")]["spec"]["template"]["spec"]
    assert master["securityContext"] == {
        "runAsUser": 65534,
        "runAsGroup": 65534,
        "runAsNonRoot": True,
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    assert master["containers"][0]["securityContext"] == {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}

    # A pod whose uid is unknown (the image's user) or root cannot promise runAsNonRoot.
    for identity in ({}, {"runAsUser": 0}):
        _, objects = plan(ManifestSettings(**{**SETTINGS.__dict__, "pod_security_context": identity}))
        trainer = by_name(objects)[("Job", f"{OBJ}-trainer")]["spec"]["template"]["spec"]
        assert "runAsNonRoot" not in trainer["securityContext"]
        assert trainer["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}

    # restricted_pods = False: the pods are as the admin's identity says; only the fsGroup is
    # applied on a root mismatch alone (below).
    _, objects = plan(ManifestSettings(**{**SETTINGS.__dict__, "restricted": False}))
    jobs = by_name(objects)
    trainer = jobs[("Job", f"{OBJ}-trainer")]["spec"]["template"]["spec"]
    assert trainer["securityContext"] == {"runAsUser": 1000, "fsGroup": 100, "fsGroupChangePolicy": "OnRootMismatch"}
    assert "securityContext" not in trainer["containers"][0]
    assert "securityContext" not in jobs[("Job", f"{OBJ}-master")]["spec"]["template"]["spec"]


def test_an_fs_group_is_applied_to_the_home_only_when_its_root_does_not_match() -> None:
    """fsGroup with the kubelet's default policy (Always) re-groups every file of the home at each
    pod start (ceph-csi's CSIDriver has fsGroupPolicy File): job pods ask for OnRootMismatch,
    unless the admin's own pod_security_context says otherwise; no fsGroup, no policy."""
    cases = (
        ({"runAsUser": 1000, "fsGroup": 100}, "OnRootMismatch"),
        ({"runAsUser": 1000, "fsGroup": 100, "fsGroupChangePolicy": "Always"}, "Always"),
        ({"runAsUser": 1000}, None),
    )
    for identity, expected in cases:
        _, objects = plan(ManifestSettings(**{**SETTINGS.__dict__, "pod_security_context": identity}))
        for role in ("trainer", "pserver"):
            pod = by_name(objects)[("Job", f"{OBJ}-{role}")]["spec"]["template"]["spec"]
            assert pod["securityContext"].get("fsGroupChangePolicy") == expected, (identity, pod["securityContext"])


def test_shm_is_counted_in_the_pods_memory() -> None:
    """A tmpfs is charged to the container's memory: /dev/shm is never sized past the trainer's
    memory (request = limit), where it could not be used anyway."""
    settings = ManifestSettings(**{**SETTINGS.__dict__, "shm_size": "8Gi"})
    _, objects = plan(trainer_gpu=2, trainer_mem="1.5Gi", settings=settings)
    pod = by_name(objects)[("Job", f"{OBJ}-trainer")]["spec"]["template"]["spec"]
    assert {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "1536Mi"}} in pod["volumes"]
    assert pod["containers"][0]["resources"]["limits"] == {"memory": "1536Mi", "nvidia.com/gpu": "2"}
    _, ps = plan(trainer_gpu=2)  # GPU trainers get one in ps mode too
    assert "dshm" in [v["name"] for v in by_name(ps)[("Job", f"{OBJ}-trainer")]["spec"]["template"]["spec"]["volumes"]]
    pservers = by_name(ps)[("Job", f"{OBJ}-pserver")]["spec"]["template"]["spec"]
    assert "dshm" not in [v["name"] for v in pservers["volumes"]]


def _env_of(objects: Iterable[dict[str, Any]], role: str) -> dict[str, Any]:
    container = by_name(objects)[("Job", f"{OBJ}-{role}")]["spec"]["template"]["spec"]["containers"][0]
    return {item["name"]: item.get("value") for item in container["env"]}


def test_ranks_reach_the_launcher_of_every_role() -> None:
    """The launcher of every replica learns the ranks per trainer (pservers count every rank as a
    trainer) and its role's GPUs; the ranks listen on the trainer port and the ones after it."""
    _, collective = plan(mode="collective", pservers=0, trainer_gpu=0, procs_per_trainer=3)
    trainer = _env_of(collective, "trainer")
    assert (trainer["PADDLE_NBEXT_PROCS"], trainer["PADDLE_NBEXT_GPUS"]) == ("3", "0")
    assert trainer["PADDLE_NBEXT_TRAINER_ENDPOINTS"].split(",")[0].endswith(f":{SETTINGS.trainer_port}")
    _, gpu = plan(trainer_gpu=4)  # one rank per GPU, in ps mode too
    assert (_env_of(gpu, "trainer")["PADDLE_NBEXT_PROCS"], _env_of(gpu, "trainer")["PADDLE_NBEXT_GPUS"]) == ("4", "4")
    assert (_env_of(gpu, "pserver")["PADDLE_NBEXT_PROCS"], _env_of(gpu, "pserver")["PADDLE_NBEXT_GPUS"]) == ("4", "0")


def test_replica_spread_spreads_each_roles_replicas_of_one_attempt_over_the_nodes() -> None:
    """`replica_spread`: the scheduler's own soft spreading by default (nothing added); 'spread'
    and 'prefer-spread' put at most one more replica of a role in any node (or the admin's
    topology domain) than in another, counting only this job's pods of that role and attempt;
    a node that died (tainted unreachable) is no domain (nodeTaintsPolicy Honor), so a restart
    after a node loss places its replicas on the survivors; the master is never spread."""
    _, objects = plan(SETTINGS)
    for role in ("pserver", "trainer"):
        assert "topologySpreadConstraints" not in by_name(objects)[("Job", f"{OBJ}-{role}")]["spec"]["template"]["spec"]
    for mode, when in (("spread", "DoNotSchedule"), ("prefer-spread", "ScheduleAnyway")):
        settings = ManifestSettings(**{**SETTINGS.__dict__, "replica_spread": mode, "spread_topology_key": "topology.kubernetes.io/zone"})
        _, objects = plan(settings)
        jobs = by_name(objects)
        for role in ("pserver", "trainer"):
            template = jobs[("Job", f"{OBJ}-{role}")]["spec"]["template"]
            assert template["spec"]["topologySpreadConstraints"] == [
                {
                    "maxSkew": 1,
                    "topologyKey": "topology.kubernetes.io/zone",
                    "whenUnsatisfiable": when,
                    "labelSelector": {"matchLabels": {"paddle-nbext/job": OBJ, "paddle-nbext/role": role}},
                    "matchLabelKeys": ["paddle-nbext/attempt"],
                    "nodeTaintsPolicy": "Honor",
                }
            ]
            labels = template["metadata"]["labels"]
            assert labels["paddle-nbext/job"] == OBJ and labels["paddle-nbext/role"] == role and "paddle-nbext/attempt" in labels
        assert "topologySpreadConstraints" not in jobs[("Job", f"{OBJ}-master")]["spec"]["template"]["spec"]


def test_pods_on_a_node_that_stopped_responding_are_evicted_after_node_lost_seconds() -> None:
    """Kubernetes tolerates a lost node's not-ready / unreachable taints for 300 s by default; job
    pods (and the master) tolerate them `node_lost_seconds`, after the admin's own tolerations; a
    toleration the admin set for one of those taints is kept as it is; None adds nothing."""
    own = {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 600}
    settings = ManifestSettings(**{**SETTINGS.__dict__, "node_lost_seconds": 30})
    _, objects = plan(settings)
    for name in (f"{OBJ}-trainer", f"{OBJ}-pserver", f"{OBJ}-master"):
        tolerations = by_name(objects)[("Job", name)]["spec"]["template"]["spec"]["tolerations"]
        assert tolerations == [
            *SETTINGS.tolerations,
            {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 30},
            {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 30},
        ], tolerations
    _, objects = plan(ManifestSettings(**{**settings.__dict__, "tolerations": (own,)}))
    tolerations = by_name(objects)[("Job", f"{OBJ}-trainer")]["spec"]["template"]["spec"]["tolerations"]
    assert tolerations == [
        own,
        {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 30},
    ]
    _, objects = plan(ManifestSettings(**{**SETTINGS.__dict__, "node_lost_seconds": None}))
    assert by_name(objects)[("Job", f"{OBJ}-trainer")]["spec"]["template"]["spec"]["tolerations"] == list(SETTINGS.tolerations)


def test_the_record_tells_the_master_how_long_an_image_may_fail_to_pull() -> None:
    settings = ManifestSettings(**{**SETTINGS.__dict__, "image_pull_seconds": 120})
    _, objects = plan(settings)
    assert objects[0]["kind"] == "ConfigMap" and objects[0]["data"]["image-pull-seconds"] == "120"
    _, unbounded = plan(ManifestSettings(**{**SETTINGS.__dict__, "image_pull_seconds": None}))
    assert "image-pull-seconds" not in unbounded[0]["data"]


def test_trainers_are_told_the_stall_timeout_and_on_stall_and_pservers_are_not() -> None:
    """The trainer's launcher watches its own progress (runtime/replica_health.py): the job's
    stall_timeout in seconds (0: never) and on_stall reach it; a dry run shows the same."""
    _, objects = plan(stall_timeout="15m", on_stall="restart")
    jobs = by_name(objects)
    trainer = env_of(jobs[("Job", f"{OBJ}-trainer")])
    assert (trainer["PADDLE_NBEXT_STALL_TIMEOUT"], trainer["PADDLE_NBEXT_ON_STALL"]) == ("900", "restart")
    pserver = env_of(jobs[("Job", f"{OBJ}-pserver")])
    assert "PADDLE_NBEXT_STALL_TIMEOUT" not in pserver and "PADDLE_NBEXT_ON_STALL" not in pserver
    _, objects = plan()  # the defaults: 10 min, warn
    trainer = env_of(by_name(objects)[("Job", f"{OBJ}-trainer")])
    assert (trainer["PADDLE_NBEXT_STALL_TIMEOUT"], trainer["PADDLE_NBEXT_ON_STALL"]) == ("600", "warn")
    # The record's replica Jobs (what every whole restart makes again) carry them too.
    record = by_name(objects)[("ConfigMap", OBJ)]
    again = {job["metadata"]["name"]: env_of(job) for job in json.loads(record["data"]["replica-jobs.json"])}
    assert again[f"{OBJ}-trainer"]["PADDLE_NBEXT_STALL_TIMEOUT"] == "600"
