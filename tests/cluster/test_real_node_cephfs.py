"""CephFS homes for real (issue 34): a real Ceph, the kubelet mounting the user's home through the
CephFS CSI node plugin, and real Paddle jobs on it.

The user's home is provisioned exactly as the admin guide's "CephFS homes" says, by the shipped
``deploy/cephfs/provision_home.py`` (directory owned by the notebook's uid, a key for that
directory alone, its Secret in ceph-csi's namespace, the static ceph-csi PersistentVolume of
``deploy/cephfs/home.yaml`` bound to ``claim-jovyan``); the notebook side sees the home through a
``ceph-fuse`` mount with the user's key, as the notebook pod's volume is; every job pod mounts it
through the kubelet, which stages it with the node's CSI plugin (``ceph-fuse``) and publishes it
into the pod by a bind mount.  What a pod wrote is then read back from CephFS itself (libcephfs,
the admin's view), not from any mount.

Faults: another user's key against this user's directory, the monitors down when a job starts,
the MDS restarted while a job trains; after each, nothing of the job stays mounted on the node.
"""

from __future__ import annotations

import contextlib
import os
import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from kubernetes import client
from support.ceph import homes
from support.ceph.site import CephSite

from cluster import test_real_node_checkpoints as on_local_checkpoints
from cluster import test_real_node_requirements as on_local_requirements
from cluster.k8s_objects import name_of, present
from cluster.test_real_node_jobs import USER, Notebook, describe, losses, open_notebook
from cluster.test_real_node_requirements import installers_notebook

if TYPE_CHECKING:
    from cluster.conftest import RealCluster

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(900)]

UNMOUNT_WAIT = 120.0
STEPS = 60


def cephfs_home_for(real_cluster: RealCluster, ceph_site: CephSite, root: str, client_prefix: str) -> Callable[[str], Path]:
    """What ``open_notebook`` calls to make the user's home: the recipe's CephFS home under ``root``
    (each notebook of the module a directory and a Ceph client of its own), mounted for the
    notebook side."""
    site = real_cluster.node

    def cephfs_home(namespace: str) -> Path:
        _, mounted = ceph_site.home(USER, namespace, site.uid, site.gid, root=root, client_prefix=client_prefix)
        return mounted

    return cephfs_home


@pytest.fixture(scope="module")
def notebook(real_cluster: RealCluster, ceph_site: CephSite, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Notebook]:
    """The user's notebook on a CephFS home; its jobs' replicas spread over the real nodes, so
    every node mounts the one home (replica_spread "prefer-spread")."""
    home_for = cephfs_home_for(real_cluster, ceph_site, homes.HOMES_ROOT, homes.CLIENT_PREFIX)

    def prefer_spread(_home: Path, settings: dict[str, Any]) -> None:
        settings["KubernetesBackend"]["replica_spread"] = "prefer-spread"

    yield from open_notebook(real_cluster, tmp_path_factory.mktemp("cephfs-notebook-logs"), prefer_spread, home_for)


@pytest.fixture(scope="module")
def book(real_cluster: RealCluster, ceph_site: CephSite, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Notebook]:
    """The requirements tests' notebook (installers image, wheels in the home) on a CephFS home."""
    home_for = cephfs_home_for(real_cluster, ceph_site, "/volumes/requirements", "requirements-")
    yield from installers_notebook(real_cluster, tmp_path_factory.mktemp("cephfs-book-logs"), home_for=home_for)


# The same tests as on the node's local volume, on CephFS: two jobs building one environment at once
# (the environment's `flock` across pods and ceph-fuse mounts) and an evicted job resuming from its
# checkpoint in the home (they run here with this module's `notebook` and `book`).
test_two_jobs_at_once_build_one_environment_on_cephfs = (
    on_local_requirements.test_two_jobs_at_once_build_one_environment_with_uv_which_the_next_job_reuses
)
test_an_evicted_job_resumes_from_its_checkpoint_on_cephfs = (
    on_local_checkpoints.test_an_evicted_collective_job_resumes_from_its_checkpoint_with_one_curve
)


def wait_for(check: Callable[[], Any], what: str, timeout: float = UNMOUNT_WAIT) -> Any:
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(0.25)
    raise AssertionError(f"{what} not seen within {timeout:.0f} s; last: {last!r}")


def no_job_mounts(ceph_site: CephSite) -> None:
    """Every staged and published CephFS mount of the node is gone once no pod uses it."""
    wait_for(lambda: not ceph_site.node_ceph_mounts() or None, "no ceph-fuse mount left on the node")
    assert ceph_site.node_ceph_mounts() == []


def in_cephfs(notebook: Notebook, home: Path) -> str:
    """The CephFS path of a file under the notebook's mounted home."""
    return homes.HOMES_ROOT + f"/{USER}/" + str(home.relative_to(notebook.home))


def test_a_job_on_a_cephfs_home_trains_and_its_files_are_the_users_in_cephfs(notebook: Notebook, ceph_site: CephSite) -> None:
    # A file of the user's whose group is not the pods' fsGroup: a recursive fsGroup change by
    # the kubelet at a pod's start would give it group 100.
    notebook.write("own-group.txt", "mine\n")
    os.lchown(notebook.home / "own-group.txt", notebook.cluster.node.uid, 1000)
    entry = f"python collective_train.py --steps {STEPS} --step-delay 0.05 --checkpoint-every 20 --print-every 10"
    notebook.submit("ceph-train", mode="collective", trainers=2, entry_point=entry)
    ended = notebook.ended("ceph-train")
    assert ended["phase"] == "Succeeded", describe(ended)
    nodes = {str(present(p.spec, "spec").node_name) for p in notebook.job_pods("ceph-train") if "-trainer-" in name_of(p)}
    assert len(nodes) == min(2, len(notebook.cluster.node.node_names)), nodes  # the one home, mounted on every node

    # The pods mounted the user's claim, and the claim is the recipe's ceph-csi volume.
    core = client.CoreV1Api(notebook.admin)
    claim = core.read_namespaced_persistent_volume_claim(f"claim-{USER}", notebook.namespace)
    volume = core.read_persistent_volume(present(present(claim.spec, "spec").volume_name, "volumeName"))
    csi = present(present(volume.spec, "spec").csi, "csi")
    assert csi.driver == "cephfs.csi.ceph.com" and (csi.volume_attributes or {})["staticVolume"] == "true", csi
    assert (csi.volume_attributes or {})["rootPath"] == f"{homes.HOMES_ROOT}/{USER}"

    # What the job wrote is in CephFS itself, owned by the notebook's uid, and the notebook's
    # own mount shows it: the logs and the checkpoints.
    job_dir = notebook.home / ".paddle-jobs" / "ceph-train"
    trainer_log = next(p for p in (job_dir / "logs").iterdir() if "trainer" in p.name and p.name.endswith("0.log"))
    written = homes.read_file(ceph_site.cluster, in_cephfs(notebook, trainer_log)).decode(errors="replace")
    assert len(losses(written)) >= 2, written[-2000:]
    assert written == trainer_log.read_text()
    checkpoints = sorted(p for p in (job_dir / "checkpoints").iterdir() if p.name.startswith("step-"))
    assert checkpoints, list((job_dir / "checkpoints").iterdir())
    for path in (trainer_log, checkpoints[-1]):
        assert homes.owner(ceph_site.cluster, in_cephfs(notebook, path))[0] == notebook.cluster.node.uid, path
    # The kubelet changed no group in the home: the pods ask for fsGroup only on a root mismatch.
    assert homes.owner(ceph_site.cluster, in_cephfs(notebook, notebook.home / "own-group.txt")) == (notebook.cluster.node.uid, 1000)

    no_job_mounts(ceph_site)
    notebook.delete("ceph-train")


def test_the_job_pods_ask_for_their_fs_group_only_when_the_homes_root_does_not_match(notebook: Notebook) -> None:
    body = {
        "job_name": "ceph-dry",
        "trainer_package": "examples",
        "mode": "collective",
        "trainers": 1,
        "entry_point": "python collective_train.py",
    }
    answer = notebook.server.api("POST", "jobs", body=body, params={"dry_run": "true"})
    assert answer.status_code == 200, answer.text
    manifests = answer.json()["plan"]["manifests"]
    pods = [m for m in manifests if m["kind"] == "Job" and m["metadata"]["name"].endswith("-trainer")]
    assert pods, manifests
    security = pods[0]["spec"]["template"]["spec"]["securityContext"]
    assert security["fsGroup"] == notebook.cluster.node.gid and security["fsGroupChangePolicy"] == "OnRootMismatch", security


def test_another_users_key_cannot_mount_this_users_directory(notebook: Notebook, ceph_site: CephSite) -> None:
    """bob's home is provisioned by the same recipe; a volume that points bob's key at alice's
    (here jovyan's) directory cannot be mounted by any node: Ceph refuses the path."""
    site = notebook.cluster.node
    other = notebook.cluster.new_namespace(labels={"pod-security.kubernetes.io/enforce": "restricted"})
    bob, bob_mount = ceph_site.home("bob", other, site.uid, site.gid, claim=False)
    try:
        # bob's own mount shows his empty home, none of jovyan's files.
        assert not (bob_mount / "examples").exists() and list(bob_mount.iterdir()) == []
        core = client.CoreV1Api(notebook.admin)
        root = f"{homes.HOMES_ROOT}/{USER}"
        core.create_persistent_volume(csi_home_volume(f"steal-{other}", other, "stolen", "ceph-home-bob", root, ceph_site.cluster.fsid))
        core.create_namespaced_persistent_volume_claim(other, claim_of("stolen", f"steal-{other}"))
        core.create_namespaced_pod(other, client.V1Pod.model_validate(reader_pod("thief", "stolen", site)))

        def refused() -> str | None:
            events = core.list_namespaced_event(other, field_selector="involvedObject.name=thief,reason=FailedMount").items
            return next((e.message for e in events if e.message and "Operation not permitted" in e.message), None)

        message = wait_for(refused, "the kubelet's FailedMount naming Ceph's refusal", timeout=180)
        assert "cephfs.csi.ceph.com" in message or "MountVolume" in message, message
        phase = present(core.read_namespaced_pod("thief", other).status, "status").phase
        assert phase == "Pending", phase
        core.delete_namespaced_pod("thief", other, grace_period_seconds=0)
        no_job_mounts(ceph_site)
    finally:
        ceph_site.unmount(bob_mount)
        with contextlib.suppress(client.ApiException):
            client.CoreV1Api(notebook.admin).delete_persistent_volume(f"steal-{other}")


def csi_home_volume(name: str, namespace: str, claim: str, secret: str, root_path: str, cluster_id: str) -> client.V1PersistentVolume:
    """A static ceph-csi volume shaped as the recipe's (deploy/cephfs/home.yaml), bound to ``claim``."""
    return client.V1PersistentVolume.model_validate(
        {
            "metadata": {"name": name},
            "spec": {
                "capacity": {"storage": "1Gi"},
                "accessModes": ["ReadWriteMany"],
                "persistentVolumeReclaimPolicy": "Retain",
                "storageClassName": "",
                "claimRef": {"namespace": namespace, "name": claim},
                "csi": {
                    "driver": "cephfs.csi.ceph.com",
                    "volumeHandle": name,
                    "nodeStageSecretRef": {"name": secret, "namespace": homes.CSI_NAMESPACE},
                    "volumeAttributes": {
                        "clusterID": cluster_id,
                        "fsName": "cephfs",
                        "staticVolume": "true",
                        "rootPath": root_path,
                        "mounter": "fuse",
                    },
                },
            },
        }
    )


def claim_of(name: str, volume: str) -> client.V1PersistentVolumeClaim:
    return client.V1PersistentVolumeClaim.model_validate(
        {
            "metadata": {"name": name},
            "spec": {
                "accessModes": ["ReadWriteMany"],
                "storageClassName": "",
                "volumeName": volume,
                "resources": {"requests": {"storage": "1Gi"}},
            },
        }
    )


def failed_mount(core: client.CoreV1Api, namespace: str, pod: str, words: str) -> str:
    """The kubelet's FailedMount message about ``pod`` once it contains ``words``."""

    def said() -> str | None:
        events = core.list_namespaced_event(namespace, field_selector=f"involvedObject.name={pod},reason=FailedMount").items
        return next((e.message for e in events if e.message and words in e.message), None)

    seen = wait_for(said, f"the kubelet's FailedMount of {pod} saying {words!r}", timeout=180)
    return str(seen)


def test_a_home_that_cannot_be_mounted_is_named_in_the_storages_own_words(notebook: Notebook, ceph_site: CephSite) -> None:
    """The user's directory missing, the Secret missing, the key wrong: each pod stays Pending and
    the kubelet's FailedMount event (what a job's message quotes) says which, in Ceph's or
    Kubernetes' words; nothing stays mounted."""
    site = notebook.cluster.node
    namespace = notebook.cluster.new_namespace(labels={"pod-security.kubernetes.io/enforce": "restricted"})
    core = client.CoreV1Api(notebook.admin)
    user_secret = f"ceph-{homes.CLIENT_PREFIX}{USER}"
    wrong = f"ceph-wrong-key-{namespace}"
    key = homes.key_of(ceph_site.cluster, homes.CephHome(USER, notebook.namespace, "", f"{homes.CLIENT_PREFIX}{USER}"))
    core.create_namespaced_secret(
        homes.CSI_NAMESPACE,
        client.V1Secret.model_validate(
            {"metadata": {"name": wrong}, "stringData": {"userID": f"{homes.CLIENT_PREFIX}{USER}", "userKey": key[:-8] + "AAAAAAA="}}
        ),
    )
    cases = {
        "no-dir": (user_secret, f"{homes.HOMES_ROOT}/{USER}/no-such-directory", "(2) No such file or directory"),
        "no-secret": (f"ceph-nobody-{namespace}", f"{homes.HOMES_ROOT}/{USER}", "not found"),
        # ceph-fuse's words for a key the monitors refuse (its first step is fetching their config)
        "bad-key": (wrong, f"{homes.HOMES_ROOT}/{USER}", "failed to fetch mon config"),
    }
    volumes = []
    try:
        for case, (secret, root_path, _) in cases.items():
            volume = f"broken-{case}-{namespace}"
            core.create_persistent_volume(csi_home_volume(volume, namespace, case, secret, root_path, ceph_site.cluster.fsid))
            volumes.append(volume)
            core.create_namespaced_persistent_volume_claim(namespace, claim_of(case, volume))
            core.create_namespaced_pod(namespace, client.V1Pod.model_validate(reader_pod(case, case, site)))
        said = {case: failed_mount(core, namespace, case, words) for case, (_, _, words) in cases.items()}
        assert "ceph-fuse" in said["no-dir"] and "ceph mount failed with (2) No such file or directory" in said["no-dir"], said
        assert f'secrets "ceph-nobody-{namespace}" not found' in said["no-secret"], said
        for case in cases:
            assert present(core.read_namespaced_pod(case, namespace).status, "status").phase == "Pending", case
            core.delete_namespaced_pod(case, namespace, grace_period_seconds=0)
        no_job_mounts(ceph_site)
    finally:
        for volume in volumes:
            with contextlib.suppress(client.ApiException):
                core.delete_persistent_volume(volume)
        with contextlib.suppress(client.ApiException):
            core.delete_namespaced_secret(wrong, homes.CSI_NAMESPACE)


def reader_pod(name: str, claim: str, site: Any) -> dict[str, Any]:
    """A pod that lists the home it mounts, passing Pod Security's `restricted` profile."""
    return {
        "metadata": {"name": name},
        "spec": {
            "restartPolicy": "Never",
            **{"nodeSelector": site.placement()["node_selector"], "tolerations": site.placement()["tolerations"]},
            "securityContext": {
                "runAsUser": site.uid,
                "runAsGroup": site.gid,
                "runAsNonRoot": True,
                "seccompProfile": {"type": "RuntimeDefault"},
            },
            "containers": [
                {
                    "name": "reader",
                    "image": site.image,
                    "imagePullPolicy": site.pull_policy,
                    "command": ["python3", "-c", "import os; print(sorted(os.listdir('/home/x')))"],
                    "volumeMounts": [{"name": "home", "mountPath": "/home/x"}],
                    "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
                }
            ],
            "volumes": [{"name": "home", "persistentVolumeClaim": {"claimName": claim}}],
        },
    }


def test_a_job_started_while_ceph_is_down_says_its_home_could_not_be_mounted(notebook: Notebook, ceph_site: CephSite) -> None:
    ceph_site.cluster.kill("mon.a")
    try:
        notebook.submit("ceph-down", mode="collective", trainers=1, entry_point="python collective_train.py --steps 5")
        said = notebook.wait(
            "ceph-down",
            lambda s: "could not mount" in s.get("message", "") and "ceph-fuse" in s.get("message", ""),
            "the job saying its home could not be mounted, with ceph-fuse's words",
            timeout=240,
        )
        assert said["phase"] == "Pending", describe(said)
        assert re.search(r"trainer 0 cannot start: the kubelet could not mount its volumes: MountVolume\.", said["message"]), describe(said)
        notebook.server.api("POST", "jobs/ceph-down/cancel")
        notebook.ended("ceph-down")
    finally:
        ceph_site.cluster.restart("mon.a")
    no_job_mounts(ceph_site)
    # Ceph is back: the same job submitted again trains.
    notebook.delete("ceph-down")
    notebook.submit("ceph-back", mode="collective", trainers=1, entry_point="python collective_train.py --steps 5")
    ended = notebook.ended("ceph-back")
    assert ended["phase"] == "Succeeded", describe(ended)
    notebook.delete("ceph-back")
    no_job_mounts(ceph_site)


def test_a_job_goes_on_training_while_the_mds_restarts(notebook: Notebook, ceph_site: CephSite) -> None:
    entry = "python collective_train.py --steps 400 --step-delay 0.1 --checkpoint-every 50 --print-every 10"
    notebook.submit("ceph-mds", mode="collective", trainers=1, entry_point=entry)
    notebook.wait_log("ceph-mds", r"step 20\b")
    ceph_site.cluster.restart_mds()
    ended = notebook.ended("ceph-mds")
    assert ended["phase"] == "Succeeded", describe(ended)
    # Every step ran and was logged into the home across the restart (the log is read from CephFS).
    text = notebook.log("ceph-mds")
    assert re.search(r"step 399 loss", text) and "trainer 0 done" in text, text[-2000:]
    steps = [int(n) for n in re.findall(r"^step (\d+) loss", text, re.MULTILINE)]
    assert steps == [*range(0, 400, 10), 399], steps
    notebook.delete("ceph-mds")
    no_job_mounts(ceph_site)


def test_a_server_outside_a_pod_without_run_as_user_runs_the_pods_as_its_own_uid(notebook: Notebook, ceph_site: CephSite) -> None:
    """The suite's server runs outside any pod (a kubeconfig) as the notebook's uid 1000: with no
    run_as_user / run_as_group / fs_group set, the job pods run as that uid and gid (not as the
    image's root), so what they write is the user's and the user's DELETE removes it all."""
    site = notebook.cluster.node
    saved = dict(notebook.settings["KubernetesBackend"])
    notebook.server.stop()
    for key in ("run_as_user", "run_as_group", "fs_group"):
        notebook.settings["KubernetesBackend"].pop(key)
    notebook.start_server()
    try:
        notebook.submit("ceph-own", mode="collective", trainers=1, entry_point="python collective_train.py --steps 5 --checkpoint-every 5")
        ended = notebook.ended("ceph-own")
        assert ended["phase"] == "Succeeded", describe(ended)
        pods = notebook.job_pods("ceph-own")
        trainer = next(p for p in pods if "-trainer-" in name_of(p))
        security = present(present(trainer.spec, "spec").security_context, "securityContext")
        assert (security.run_as_user, security.run_as_group, security.fs_group) == (site.uid, site.gid, None), security
        job_dir = notebook.home / ".paddle-jobs" / "ceph-own"
        checkpoint = next(p for p in (job_dir / "checkpoints").iterdir() if p.name.startswith("step-"))
        assert homes.owner(ceph_site.cluster, in_cephfs(notebook, checkpoint)) == (site.uid, site.gid)
        answer = notebook.server.api("DELETE", "jobs/ceph-own")
        assert answer.status_code == 204, answer.text
        assert not job_dir.exists()
    finally:
        notebook.server.stop()
        notebook.settings["KubernetesBackend"] = saved
        notebook.start_server()
    no_job_mounts(ceph_site)
