"""The Kubernetes objects of a job: schema-valid for every supported Kubernetes minor (1.30 to
1.37, the test control plane's), and carrying the launcher's
environment contract per role (docs/architecture.md), labels and ownership of docs/admin-guide.md ("A job's objects")."""

from __future__ import annotations

import json

import kubernetes_validate
import pytest

from paddle_nbext.spec import JobSpec
from paddle_nbext_server.backends.kubernetes import manifests
from paddle_nbext_server.backends.kubernetes.home_volume import HomeVolume
from paddle_nbext_server.backends.kubernetes.settings import ManifestSettings
from paddle_nbext_server.runtime_files import NAMES, config_key, read_bundle

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


def plan(settings: ManifestSettings = SETTINGS, **fields):
    data = {
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
    objects = manifests.build_plan(
        spec, "alice@example.org", settings, home=HOME, workdir="/home/jovyan/.paddle-jobs/mnist-ps/package", runtime=RUNTIME
    )
    return spec, objects


def by_name(objects):
    return {(o["kind"], o["metadata"]["name"]): o for o in objects}


def env_of(job):
    return {e["name"]: e.get("value") for e in job["spec"]["template"]["spec"]["containers"][0]["env"]}


@pytest.mark.parametrize("version", K8S_VERSIONS)
@pytest.mark.parametrize("shared_master_account", [True, False])
@pytest.mark.parametrize("mode", ["ps", "collective"])
def test_every_object_is_valid_for_every_supported_kubernetes(mode, shared_master_account, version):
    settings = SETTINGS if shared_master_account else ManifestSettings(**{**SETTINGS.__dict__, "master_service_account_name": ""})
    extra = {} if mode == "ps" else {"mode": "collective", "pservers": 0}
    _, objects = plan(settings, **extra)
    for obj in objects:
        uid_filled = manifests.set_owner_uid(obj, "3f1c2a9e-0000-4000-8000-000000000001")
        kubernetes_validate.validate(uid_filled, version, strict=True)  # raises with the bad path


def test_objects_names_labels_and_ownership():
    _, objects = plan()
    names = [(o["kind"], o["metadata"]["name"]) for o in objects]
    assert names == [
        ("ConfigMap", "mnist-ps"),
        ("Service", "mnist-ps"),
        ("Job", "mnist-ps-master"),
        ("Job", "mnist-ps-pserver"),
        ("Job", "mnist-ps-trainer"),
    ]
    for obj in objects:
        labels = obj["metadata"]["labels"]
        assert labels["app.kubernetes.io/managed-by"] == "paddle-nbext"
        assert labels["paddle-nbext/job"] == "mnist-ps"
        assert labels["team"] == "ml"
        assert obj["metadata"]["annotations"]["paddle-nbext/owner"] == "alice@example.org"
        assert obj["metadata"]["annotations"]["cost-center"] == "42"
        assert obj["metadata"]["namespace"] == "team-a"
        owners = obj["metadata"].get("ownerReferences", [])
        if obj["kind"] == "ConfigMap":
            assert owners == []
        else:
            assert [(r["kind"], r["name"]) for r in owners] == [("ConfigMap", "mnist-ps")]
    # "alice@example.org" is no label value; the label is a safe, distinct form of it
    owner_label = objects[0]["metadata"]["labels"]["paddle-nbext/owner"]
    assert owner_label.startswith("alice-example.org-") and owner_label != manifests.owner_label("alice-example.org")


def test_record_holds_spec_and_runtime_files():
    spec, objects = plan()
    record = by_name(objects)[("ConfigMap", "mnist-ps")]
    assert json.loads(record["data"]["spec.json"]) == spec.to_dict()
    assert set(record["data"]) == {"spec.json", *(config_key(name) for name in NAMES)}
    assert record["data"]["pylib.paddle_nbext_job.py"] == RUNTIME["pylib/paddle_nbext_job.py"]  # report(), mounted at pylib/
    assert record["data"]["launcher.py"] == RUNTIME["launcher.py"]
    assert record["data"]["contract.py"] == RUNTIME["contract.py"]  # the runtime imports it from beside itself


def test_pserver_and_trainer_jobs():
    _, objects = plan()
    jobs = by_name(objects)
    pserver, trainer = jobs[("Job", "mnist-ps-pserver")], jobs[("Job", "mnist-ps-trainer")]
    assert pserver["spec"]["completionMode"] == trainer["spec"]["completionMode"] == "Indexed"
    assert (pserver["spec"]["completions"], pserver["spec"]["parallelism"]) == (2, 2)
    assert (trainer["spec"]["completions"], trainer["spec"]["parallelism"]) == (3, 3)
    assert trainer["spec"]["backoffLimitPerIndex"] == 2
    assert trainer["spec"]["ttlSecondsAfterFinished"] == 3600
    for job in (pserver, trainer):
        pod = job["spec"]["template"]["spec"]
        assert pod["restartPolicy"] == "Never"
        assert pod["subdomain"] == "mnist-ps"
        assert pod["nodeSelector"] == {"pool": "cpu"}
        assert pod["imagePullSecrets"] == [{"name": "regcred"}]
        assert pod["priorityClassName"] == "batch-low"
        assert pod["securityContext"] == {"runAsUser": 1000, "fsGroup": 100}
        container = pod["containers"][0]
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


def test_env_contract_per_role():
    _, objects = plan()
    jobs = by_name(objects)
    for role in ("pserver", "trainer"):
        env = env_of(jobs[("Job", f"mnist-ps-{role}")])
        assert env["PADDLE_NBEXT_ROLE"] == role
        assert env["PADDLE_NBEXT_JOB"] == "mnist-ps"
        assert env["PADDLE_NBEXT_MODE"] == "ps"
        assert env["PADDLE_NBEXT_PSERVER_ENDPOINTS"] == "mnist-ps-pserver-0.mnist-ps:6174,mnist-ps-pserver-1.mnist-ps:6174"
        assert env["PADDLE_NBEXT_TRAINER_ENDPOINTS"].split(",")[2] == "mnist-ps-trainer-2.mnist-ps:6175"
        assert env["PADDLE_NBEXT_ENTRY"] == "python train.py --epochs 3"
        assert env["PADDLE_NBEXT_WORKDIR"] == "/home/jovyan/.paddle-jobs/mnist-ps/package"
        assert env["LR"] == "0.1"
        assert "PADDLE_NBEXT_INDEX" not in env  # from JOB_COMPLETION_INDEX of the Indexed Job
    assert env_of(jobs[("Job", "mnist-ps-pserver")])["PADDLE_NBEXT_CPU"] == "1"  # 500m -> 1 thread
    service = jobs[("Service", "mnist-ps")]
    assert service["spec"]["clusterIP"] == "None" and service["spec"]["publishNotReadyAddresses"] is True
    assert {p["port"] for p in service["spec"]["ports"]} == {6174, 6175}


def test_collective_mode_has_no_pservers():
    _, objects = plan(mode="collective", pservers=0, trainers=2)
    jobs = by_name(objects)
    assert ("Job", "mnist-ps-pserver") not in jobs
    env = env_of(jobs[("Job", "mnist-ps-trainer")])
    assert env["PADDLE_NBEXT_MODE"] == "collective"
    assert env["PADDLE_NBEXT_PSERVER_ENDPOINTS"] == ""
    assert env["PADDLE_NBEXT_TRAINER_ENDPOINTS"] == "mnist-ps-trainer-0.mnist-ps:6175,mnist-ps-trainer-1.mnist-ps:6175"


def test_master_runs_cluster_master_with_its_service_account():
    _, objects = plan()
    master = by_name(objects)[("Job", "mnist-ps-master")]
    pod = master["spec"]["template"]["spec"]
    assert pod["restartPolicy"] == "OnFailure"
    assert pod["serviceAccountName"] == "paddle-nbext-master"
    assert pod["containers"][0]["command"][-1].endswith("/cluster_master.py")
    _, own = plan(ManifestSettings(**{**SETTINGS.__dict__, "master_service_account_name": ""}))
    kinds = [(o["kind"], o["metadata"]["name"]) for o in own]
    assert ("ServiceAccount", "mnist-ps-master") in kinds and ("RoleBinding", "mnist-ps-master") in kinds
    role = by_name(own)[("Role", "mnist-ps-master")]
    assert {"apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["mnist-ps"], "verbs": ["get", "patch"]} in role["rules"]


def test_the_master_never_runs_the_requests_image_nor_deletes_pods():
    """The master holds an API token: it runs in an image the admin chose, never the job's."""
    _, objects = plan(image="someone/own-image:1")
    master = by_name(objects)[("Job", "mnist-ps-master")]["spec"]["template"]["spec"]["containers"][0]
    assert master["image"] == "paddlepaddle/paddle:3.0.0"
    assert by_name(objects)[("Job", "mnist-ps-trainer")]["spec"]["template"]["spec"]["containers"][0]["image"] == "someone/own-image:1"
    _, own = plan(ManifestSettings(**{**SETTINGS.__dict__, "master_service_account_name": "", "master_image": "python:3.12-slim"}))
    assert by_name(own)[("Job", "mnist-ps-master")]["spec"]["template"]["spec"]["containers"][0]["image"] == "python:3.12-slim"
    rules = by_name(own)[("Role", "mnist-ps-master")]["rules"]
    assert not [r for r in rules if "pods" in r["resources"] and "delete" in r["verbs"]]


def test_shm_pull_policy_and_owner_references():
    _, objects = plan(mode="collective", pservers=0, trainer_gpu=0)
    trainer = by_name(objects)[("Job", "mnist-ps-trainer")]["spec"]["template"]["spec"]
    assert {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "1Gi"}} in trainer["volumes"]
    assert {"name": "dshm", "mountPath": "/dev/shm"} in trainer["containers"][0]["volumeMounts"]
    assert "imagePullPolicy" not in trainer["containers"][0]
    _, ps = plan(trainer_gpu=0)  # CPU parameter-server trainers share no tensors through /dev/shm
    assert "dshm" not in [v["name"] for v in by_name(ps)[("Job", "mnist-ps-trainer")]["spec"]["template"]["spec"]["volumes"]]
    _, gpu = plan(settings=ManifestSettings(**{**SETTINGS.__dict__, "shm_size": "8Gi", "image_pull_policy": "Always"}))
    pod = by_name(gpu)[("Job", "mnist-ps-trainer")]["spec"]["template"]["spec"]
    assert {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "8Gi"}} in pod["volumes"]
    assert pod["containers"][0]["imagePullPolicy"] == "Always"
    for obj in gpu:
        for reference in obj["metadata"].get("ownerReferences", []):
            assert "blockOwnerDeletion" not in reference  # needs finalizers rights on OpenShift; never needed here
    jobs = [o for o in gpu if o["kind"] == "Job" and o["metadata"]["name"] != "mnist-ps-master"]
    assert all(
        j["spec"]["podFailurePolicy"]["rules"][0]["onPodConditions"] == [{"type": "DisruptionTarget", "status": "True"}] for j in jobs
    )
