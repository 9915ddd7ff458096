"""Cluster contract of the `kubernetes` backend, through the `cluster` fixture (the suite's own
control plane by default, another cluster with PADDLE_NBEXT_TEST_KUBECONFIG).  Objects come and
go asynchronously (Job controller, scheduler, garbage collector), so the suite waits for
states, never for durations.

The backend always runs under the shipped Role (deploy/rbac/notebook-role.yaml), the master
under deploy/rbac/master-role.yaml, each with a token minted for its service account.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import dataclasses
import json
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import pytest
import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from cluster.k8s_objects import meta, name_of, present
from paddle_nbext.model.spec import JobSpec
from paddle_nbext.model.status import JobStatus, ReplicaStatus
from paddle_nbext_server.backends.base import SubmitRequest
from paddle_nbext_server.backends.kubernetes import KubernetesBackend
from paddle_nbext_server.backends.kubernetes.build import manifests
from paddle_nbext_server.errors import BackendUnavailable, Forbidden, JobExists, JobNotFound, ReplicaNotFound
from paddle_nbext_server.events import DELETED, UPDATED, EventHub, JobEvent

if TYPE_CHECKING:
    from cluster.conftest import Cluster

pytestmark = pytest.mark.cluster

REPO = Path(__file__).resolve().parents[2]
MASTER = REPO / "server_ext" / "paddle_nbext_server" / "runtime" / "cluster_master.py"
SELECTOR = "app.kubernetes.io/managed-by=paddle-nbext"
WAIT = 60.0
T = TypeVar("T")


def deploy_docs(name: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((REPO / "deploy" / "rbac" / name).read_text()) if d]


NOTEBOOK_ROLE = next(d for d in deploy_docs("notebook-role.yaml") if d["kind"] == "Role")
MASTER_ROLE = next(d for d in deploy_docs("master-role.yaml") if d["kind"] == "Role")


def without_verb(role: dict[str, Any], resource: str, verb: str) -> dict[str, Any]:
    copy: dict[str, Any] = json.loads(json.dumps(role))
    for rule in copy["rules"]:
        if resource in rule["resources"]:
            rule["verbs"] = [v for v in rule["verbs"] if v != verb]
    return copy


async def eventually(check: Callable[[], Awaitable[T]], what: str, timeout: float = WAIT) -> T:
    """Wait for `check` to return a truthy value (asserting errors are retried until timeout).

    On timeout the message carries what was last seen (the last error, e.g. the job status
    `_where` rejected, or the last falsy value), so a failure in CI says which state it stuck in."""
    deadline = time.monotonic() + timeout
    last: str = ""
    while time.monotonic() < deadline:
        try:
            value = await check()
            if value:
                return value
            last = f"last value {value!r}"
        except (AssertionError, BackendUnavailable, JobNotFound, KeyError, StopIteration) as error:
            last = f"{type(error).__name__}: {error}" if not isinstance(error, AssertionError) else str(error)
        await asyncio.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}" + (f"; last seen: {last}" if last else ""))


def describe_status(status: JobStatus) -> str:
    """One line for a failure message: phase, message and every replica's state."""
    replicas = ", ".join(
        f"{r.role} {r.index} {r.phase}" + (f" ({r.reason})" if r.reason else "") + (f" restarts={r.restarts}" if r.restarts else "")
        for r in status.replicas
    )
    return f"job {status.name} {status.phase} {status.message!r} [{replicas}]"


def home_dir(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    (home / "mnist").mkdir(parents=True)
    (home / "mnist" / "train.py").write_text("print('training')\n")
    return home


def spec(name: str, **fields: Any) -> JobSpec:
    return JobSpec.from_dict({"job_name": name, "entry_point": "python train.py", "trainer_package": "mnist", **fields})


def backend_for(kubeconfig: str, namespace: str, home: Path, events: EventHub | None = None, **traits: Any) -> KubernetesBackend:
    settings = {"home_volume": "pvc", "home_path": str(home), "sync_timeout": WAIT, **traits}
    return KubernetesBackend(events=events or EventHub(), kubeconfig=kubeconfig, namespace=namespace, **settings)


@contextlib.asynccontextmanager
async def running(
    kubeconfig: str, namespace: str, home: Path, events: EventHub | None = None, **traits: Any
) -> AsyncIterator[KubernetesBackend]:
    """`backend_for(...)`, started for the block and stopped after it, whatever happens."""
    backend = backend_for(kubeconfig, namespace, home, events, **traits)
    await backend.start()
    try:
        yield backend
    finally:
        await backend.stop()


def notebook(cluster: Cluster, namespace: str, role: dict[str, Any] = NOTEBOOK_ROLE) -> str:
    return cluster.kubeconfig_for(namespace, "paddle-notebook", role)


def workspace(cluster: Cluster, tmp_path: Path, role: dict[str, Any] = NOTEBOOK_ROLE) -> tuple[str, str, client.ApiClient, Path]:
    """A fresh namespace, the notebook's kubeconfig under `role`, an admin client and a home."""
    namespace = cluster.new_namespace()
    cluster.home_claim(namespace, "claim-alice")
    return namespace, notebook(cluster, namespace, role), cluster.api_client(), home_dir(tmp_path)


def obj(job: str, owner: str = "alice") -> str:
    """The name the objects of `owner`'s job `job` are made from (`<job>-<owner tag>`)."""
    return manifests.object_name(job, owner)


def objects_of(api: client.ApiClient, namespace: str, job: str, owner: str = "alice") -> set[tuple[str, str]]:
    """Every object labelled as part of `owner`'s job `job` (the user's name for it)."""
    core, batch = client.CoreV1Api(api), client.BatchV1Api(api)
    selector = f"paddle-nbext/job={obj(job, owner)}"
    found = {("ConfigMap", name_of(o)) for o in core.list_namespaced_config_map(namespace, label_selector=selector).items}
    found |= {("Service", name_of(o)) for o in core.list_namespaced_service(namespace, label_selector=selector).items}
    found |= {("Job", name_of(o)) for o in batch.list_namespaced_job(namespace, label_selector=selector).items}
    found |= {("Pod", name_of(o)) for o in core.list_namespaced_pod(namespace, label_selector=selector).items}
    return found


def pod_of(api: client.ApiClient, namespace: str, job: str, role: str, index: int, owner: str = "alice") -> str:
    selector = f"paddle-nbext/job={obj(job, owner)},paddle-nbext/role={role}"
    pods = client.CoreV1Api(api).list_namespaced_pod(namespace, label_selector=selector).items

    def newest_first(p: client.V1Pod) -> tuple[Any, bool]:
        return meta(p).creation_timestamp, present(p.status, "status").phase in (None, "Pending", "Running")

    for pod in sorted(pods, key=newest_first, reverse=True):
        marks = {**(meta(pod).labels or {}), **(meta(pod).annotations or {})}
        if marks.get("batch.kubernetes.io/job-completion-index") == str(index) and not meta(pod).deletion_timestamp:
            return name_of(pod)
    raise AssertionError(f"no pod for {role} {index} of {job}")


def ended(api: client.ApiClient, namespace: str, job: str) -> bool:
    """The Job has finished (Complete, or Failed: a stopped role ends through its deadline), so
    ttlSecondsAfterFinished applies to it."""
    conditions = present(client.BatchV1Api(api).read_namespaced_job_status(job, namespace).status, "status").conditions or []
    return any(c.type in ("Complete", "Failed") and c.status == "True" for c in conditions)


def replica(status: JobStatus, role: str, index: int) -> ReplicaStatus:
    return next(r for r in status.replicas if r.role == role and r.index == index)


def run(coro: Awaitable[T]) -> T:
    return asyncio.run(asyncio.wait_for(coro, 180))


def notebook_pod(admin: client.ApiClient, namespace: str, home: Path, container_security: dict[str, Any]) -> None:
    """The notebook's own pod `jupyter-alice`, as KubeSpawner makes it: the home claim mounted at
    the home path, the uid on the container (`container_security`), fsGroup 100 on the pod."""
    client.CoreV1Api(admin).create_namespaced_pod(
        namespace,
        client.V1Pod.model_validate(
            {
                "metadata": {"name": "jupyter-alice"},
                "spec": {
                    "containers": [
                        {
                            "name": "notebook",
                            "image": "jupyter",
                            "volumeMounts": [{"name": "home", "mountPath": str(home)}],
                            "securityContext": container_security,
                        }
                    ],
                    "volumes": [{"name": "home", "persistentVolumeClaim": {"claimName": "claim-alice"}}],
                    "securityContext": {"fsGroup": 100},
                },
            }
        ),
    )


# ------------------------------------------------------------------------------------------ tests


def test_submit_creates_the_job_objects_and_status_follows_the_pods(cluster: Cluster, tmp_path: Path) -> None:
    namespace, kubeconfig, admin, home = workspace(cluster, tmp_path)
    # the notebook's own pod, whose home volume `auto` copies into the job pods
    notebook_pod(
        admin, namespace, home, {"runAsUser": 1000, "allowPrivilegeEscalation": False}
    )  # as KubeSpawner sets them: uid on the container, fsGroup on the pod
    hub = EventHub()

    async def scenario() -> None:
        async with running(kubeconfig, namespace, home, hub, home_volume="auto", pod_name="jupyter-alice") as backend:
            async with hub.subscribe() as events:
                dry = await backend.submit(SubmitRequest(spec("dry", pservers=2, trainers=2), "alice", home), dry_run=True)
                kinds = [(m["kind"], m["metadata"]["name"]) for m in dry["plan"]["manifests"]]
                assert kinds == [
                    ("ConfigMap", obj("dry")),
                    ("Service", obj("dry")),
                    ("Job", obj("dry") + "-master"),
                    ("Job", obj("dry") + "-pserver"),
                    ("Job", obj("dry") + "-trainer"),
                ]
                trainer_pod = dry["plan"]["manifests"][-1]["spec"]["template"]["spec"]
                assert {"name": "home", "persistentVolumeClaim": {"claimName": "claim-alice"}} in trainer_pod["volumes"]
                assert trainer_pod["securityContext"] == {
                    "runAsUser": 1000,
                    "fsGroup": 100,
                    "fsGroupChangePolicy": "OnRootMismatch",
                    "runAsNonRoot": True,
                    "seccompProfile": {"type": "RuntimeDefault"},
                }
                assert objects_of(admin, namespace, "dry") == set()  # a dry run creates nothing

                created = await backend.submit(SubmitRequest(spec("mnist", pservers=1, trainers=2), "alice", home))
                assert created["name"] == "mnist" and created["phase"] == "Pending"
                assert (home / ".paddle-jobs" / "mnist" / "package" / "train.py").is_file()
                expected = {
                    ("ConfigMap", obj("mnist")),
                    ("Service", obj("mnist")),
                    ("Job", obj("mnist") + "-master"),
                    ("Job", obj("mnist") + "-pserver"),
                    ("Job", obj("mnist") + "-trainer"),
                }
                assert (
                    objects_of(admin, namespace, "mnist") - {o for o in objects_of(admin, namespace, "mnist") if o[0] == "Pod"} == expected
                )
                record = client.CoreV1Api(admin).read_namespaced_config_map(obj("mnist"), namespace)
                for job in client.BatchV1Api(admin).list_namespaced_job(namespace, label_selector=f"paddle-nbext/job={obj('mnist')}").items:
                    assert [(o.kind, o.name, o.uid) for o in present(meta(job).owner_references, "ownerReferences")] == [
                        ("ConfigMap", obj("mnist"), meta(record).uid)
                    ]

                with pytest.raises(JobExists):
                    await backend.submit(SubmitRequest(spec("mnist"), "alice", home))

                cluster.await_job_pods(namespace)
                cluster.set_pod_status(
                    namespace,
                    pod_of(admin, namespace, "mnist", "trainer", 1),
                    "Pending",
                    waiting_reason="ImagePullBackOff",
                    message='Back-off pulling image "paddle:nope"',
                )
                await eventually(
                    lambda: _where(
                        backend,
                        "mnist",
                        lambda s: replica(s, "trainer", 1).reason == 'ImagePullBackOff: Back-off pulling image "paddle:nope"',
                    ),
                    "ImagePullBackOff reason",
                )

                for role, index in (("pserver", 0), ("trainer", 0), ("trainer", 1)):
                    cluster.set_pod_status(namespace, pod_of(admin, namespace, "mnist", role, index), "Running")
                await eventually(
                    lambda: _where(backend, "mnist", lambda s: s.phase == "Running" and s.to_dict()["roles"]["trainer"]["running"] == 2),
                    "Running",
                )
                with pytest.raises(ReplicaNotFound, match="no trainer 7"):
                    await backend.read_logs("mnist", "alice", "trainer", 7)

                cluster.set_pod_status(namespace, pod_of(admin, namespace, "mnist", "trainer", 0), "Succeeded")
                await eventually(lambda: _where(backend, "mnist", lambda s: s.message == "1/2 trainers finished."), "1/2 finished")
                cluster.set_pod_status(namespace, pod_of(admin, namespace, "mnist", "trainer", 1), "Succeeded")
                # the server's own reconciliation: Succeeded recorded in the record, pservers stopped
                final = await eventually(lambda: _where(backend, "mnist", lambda s: s.phase == "Succeeded" and s.finished), "Succeeded")
                assert replica(final, "pserver", 0).phase == "Stopped"
                assert final.message == "All 2 trainers finished successfully."
                record = client.CoreV1Api(admin).read_namespaced_config_map(obj("mnist"), namespace)
                assert json.loads(present(meta(record).annotations, "annotations")["paddle-nbext/status"])["phase"] == "Succeeded"
                # A job that went well leaves nothing Failed: the pservers' Job is deleted, not
                # ended through its deadline (DeadlineExceeded would read Failed).
                await eventually(
                    lambda: _async(
                        lambda: (
                            not client.BatchV1Api(admin)
                            .list_namespaced_job(namespace, field_selector=f"metadata.name={obj('mnist')}-pserver")
                            .items
                        )
                    ),
                    "the pserver Job deleted",
                )

                seen: list[JobEvent] = []
                while not events.empty():
                    seen.append(events.get_nowait())
                phases = [present(e.job, "job")["phase"] for e in seen if e.kind == UPDATED and e.name == "mnist"]
                assert phases[0] == "Pending" and "Running" in phases and phases[-1] == "Succeeded"
                assert [j.name for j in await backend.list_jobs("alice")] == ["mnist"]
                assert await backend.list_jobs("bob") == []
                with pytest.raises(JobNotFound):
                    await backend.get_job("mnist", "bob")

                await backend.delete("mnist", "alice")
                with pytest.raises(JobNotFound):
                    await backend.get_job("mnist", "alice")
                assert any(e.kind == DELETED and e.name == "mnist" for e in [await events.get() for _ in range(events.qsize())])
                await eventually(
                    lambda: _async(lambda: objects_of(admin, namespace, "mnist") == set()), "the cascade to remove every object"
                )
                assert not (home / ".paddle-jobs" / "mnist").exists()

    run(scenario())


async def _where(backend: KubernetesBackend, name: str, predicate: Callable[[JobStatus], object], owner: str = "alice") -> JobStatus:
    """The job's status once `predicate` holds; until then an AssertionError saying what it is."""
    status = await backend.get_job(name, owner)
    try:
        ok = predicate(status)
    except StopIteration:  # `replica()` found no such replica
        ok = False
    assert ok, describe_status(status)
    return status


async def _async(fn: Callable[[], T]) -> T:
    return await asyncio.to_thread(fn)


def test_pvc_and_cephfs_homes_run_job_pods_as_the_notebook_pod_or_as_the_settings_say(cluster: Cluster, tmp_path: Path) -> None:
    """In `pvc` mode the home comes from settings, and whom the pods run as from the notebook's
    own pod when the server runs in one (here the server's connection is marked in-cluster, as
    in a notebook pod; the whole path in a real notebook pod is the JupyterHub test's)."""
    namespace, kubeconfig, admin, home = workspace(cluster, tmp_path)
    notebook_pod(admin, namespace, home, {"runAsUser": 1000, "runAsGroup": 100})

    async def pod_security(pod_name: str, **traits: Any) -> dict[str, Any]:
        async with running(kubeconfig, namespace, home, pod_name=pod_name, **traits) as backend:
            backend.api.connection = dataclasses.replace(await backend.api.connect(), in_cluster=True)  # as in the notebook's pod
            dry = await backend.submit(SubmitRequest(spec("dry", trainers=1), "alice", home), dry_run=True)
            trainer = dry["plan"]["manifests"][-1]["spec"]["template"]["spec"]
            assert {"name": "home", "persistentVolumeClaim": {"claimName": "claim-alice"}} in trainer["volumes"]
            return dict(trainer["securityContext"])

    restricted = {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}, "fsGroupChangePolicy": "OnRootMismatch"}
    assert run(pod_security("jupyter-alice")) == {"runAsUser": 1000, "runAsGroup": 100, "fsGroup": 100, **restricted}
    # The settings win where they speak; the rest still comes from the pod.
    assert run(pod_security("jupyter-alice", run_as_user=1234)) == {"runAsUser": 1234, "runAsGroup": 100, "fsGroup": 100, **restricted}
    # No such pod (or no right to read it): the server's own uid and gid, which in a notebook pod are the user's.
    own = {"runAsUser": os.getuid(), "runAsGroup": os.getgid()}
    if os.getuid() != 0:
        own.update(runAsNonRoot=True)
    assert run(pod_security("no-such-pod")) == {**own, "seccompProfile": {"type": "RuntimeDefault"}}

    # Outside a pod and without settings, a server running as root knows no user: the image's
    # user, no runAsNonRoot promised (a server of another uid runs the pods as itself: the
    # CephFS test's server outside a pod).
    async def outside() -> dict[str, Any]:
        async with running(kubeconfig, namespace, home, pod_name="jupyter-alice") as backend:
            dry = await backend.submit(SubmitRequest(spec("dry", trainers=1), "alice", home), dry_run=True)
            return dict(dry["plan"]["manifests"][-1]["spec"]["template"]["spec"]["securityContext"])

    assert run(outside()) == {"seccompProfile": {"type": "RuntimeDefault"}}


def test_failure_reasons_in_words_and_cancel(cluster: Cluster, tmp_path: Path) -> None:
    namespace, kubeconfig, admin, home = workspace(cluster, tmp_path)

    async def scenario() -> None:
        async with running(kubeconfig, namespace, home) as backend:
            await backend.submit(SubmitRequest(spec("oom", pservers=1, trainers=1), "alice", home))
            await backend.submit(SubmitRequest(spec("stopme", mode="collective", pservers=0, trainers=2), "alice", home))
            cluster.await_job_pods(namespace)
            cluster.set_pod_status(namespace, pod_of(admin, namespace, "oom", "pserver", 0), "Running")
            cluster.set_pod_status(namespace, pod_of(admin, namespace, "oom", "trainer", 0), "Failed", exit_code=137, reason="OOMKilled")
            failed = await eventually(lambda: _where(backend, "oom", lambda s: s.phase == "Failed" and s.finished), "Failed")
            assert failed.message.startswith("trainer 0 failed with OOMKilled")
            assert replica(failed, "trainer", 0).reason == "OOMKilled" and replica(failed, "trainer", 0).exit_code == 137
            assert replica(failed, "pserver", 0).phase == "Stopped"

            cluster.set_pod_status(namespace, pod_of(admin, namespace, "stopme", "trainer", 0), "Running")
            await eventually(lambda: _where(backend, "stopme", lambda s: s.phase == "Running"), "Running")
            cancelled = await backend.cancel("stopme", "alice")
            assert cancelled.phase == "Cancelled"
            assert {r.phase for r in cancelled.replicas} == {"Stopped"}
            await eventually(lambda: _async(lambda: ended(admin, namespace, obj("stopme") + "-trainer")), "the trainer Job to end")
            # the record is kept: the job still lists as Cancelled
            assert (await backend.get_job("stopme", "alice")).phase == "Cancelled"
            assert (await backend.cancel("stopme", "alice")).phase == "Cancelled"  # again: a no-op

    run(scenario())


def master_env(cluster: Cluster, namespace: str, tmp_path: Path, job: str) -> dict[str, str]:
    """Environment for cluster_master.py as a process on this machine, with the master's token."""
    config = yaml.safe_load(Path(cluster.kubeconfig_for(namespace, "paddle-nbext-master", MASTER_ROLE)).read_text())
    entry, user = config["clusters"][0]["cluster"], config["users"][0]["user"]
    token = tmp_path / f"{job}-token"
    token.write_text(user["token"])
    env = {
        **os.environ,
        "PADDLE_NBEXT_RECORD": obj(job),
        "PADDLE_NBEXT_ROLE_JOBS": json.dumps({role: f"{obj(job)}-{role}" for role in ("pserver", "trainer")}),
        "PADDLE_NBEXT_NAMESPACE": namespace,
        "PADDLE_NBEXT_KUBE_API": entry["server"],
        "PADDLE_NBEXT_KUBE_TOKEN_FILE": str(token),
        "PADDLE_NBEXT_MASTER_INTERVAL": "0.2",
    }
    env.pop("KUBERNETES_SERVICE_HOST", None)
    if entry.get("certificate-authority-data"):
        ca = tmp_path / f"{job}-ca.crt"
        ca.write_bytes(base64.b64decode(entry["certificate-authority-data"]))
        env["PADDLE_NBEXT_KUBE_CA_FILE"] = str(ca)
    if entry.get("insecure-skip-tls-verify"):
        env["PADDLE_NBEXT_KUBE_INSECURE"] = "1"
    return env


@contextlib.contextmanager
def master_running(cluster: Cluster, namespace: str, tmp_path: Path, job: str) -> Iterator[subprocess.Popen[bytes]]:
    """The job's in-cluster master (cluster_master.py) as a process on this machine with the
    master's token, for the block (KWOK runs no pod of it); killed after it, whatever happens."""
    master = subprocess.Popen([sys.executable, str(MASTER)], env=master_env(cluster, namespace, tmp_path, job), stdout=subprocess.DEVNULL)
    try:
        yield master
    finally:
        master.kill()
        master.wait(timeout=30)


def test_master_stops_pservers_after_trainers_succeed_and_survives_its_restart(cluster: Cluster, tmp_path: Path) -> None:
    """The server is stopped after submit: the master process alone ends the job."""
    namespace, kubeconfig, admin, home = workspace(cluster, tmp_path)
    env = master_env(cluster, namespace, tmp_path, "mastered")

    async def submit() -> None:
        async with running(kubeconfig, namespace, home) as backend:
            await backend.submit(SubmitRequest(spec("mastered", pservers=2, trainers=2), "alice", home))

    run(submit())
    cluster.await_job_pods(namespace)
    for role, index in (("pserver", 0), ("pserver", 1), ("trainer", 0), ("trainer", 1)):
        cluster.set_pod_status(namespace, pod_of(admin, namespace, "mastered", role, index), "Running")
    core = client.CoreV1Api(admin)

    first = subprocess.Popen([sys.executable, str(MASTER)], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        assert "watching job mastered" in (first.stdout.readline() if first.stdout else "")
        cluster.set_pod_status(namespace, pod_of(admin, namespace, "mastered", "trainer", 0), "Succeeded")
    finally:
        first.kill()  # the pod dies; Kubernetes would start the master again
        first.communicate(timeout=30)
    assert "paddle-nbext/status" not in (meta(core.read_namespaced_config_map(obj("mastered"), namespace)).annotations or {})

    cluster.set_pod_status(namespace, pod_of(admin, namespace, "mastered", "trainer", 1), "Succeeded")
    second = subprocess.run([sys.executable, str(MASTER)], env=env, capture_output=True, text=True, timeout=120, check=False)
    assert second.returncode == 0, second.stderr
    assert f"job {obj('mastered')} is over" in second.stdout
    final = json.loads(
        present(meta(core.read_namespaced_config_map(obj("mastered"), namespace)).annotations, "annotations")["paddle-nbext/status"]
    )
    assert final["phase"] == "Succeeded"
    assert {(r["role"], r["phase"]) for r in final["replicas"]} == {("pserver", "Stopped"), ("trainer", "Succeeded")}

    def pservers_gone() -> bool:
        live = [
            p
            for p in core.list_namespaced_pod(
                namespace, label_selector=f"paddle-nbext/job={obj('mastered')},paddle-nbext/role=pserver"
            ).items
            if present(p.status, "status").phase in ("Pending", "Running") and not meta(p).deletion_timestamp
        ]
        return (
            not live
            and not client.BatchV1Api(admin).list_namespaced_job(namespace, field_selector=f"metadata.name={obj('mastered')}-pserver").items
        )

    # After a success the pservers' Job is deleted, not failed through its deadline (no alert
    # for a job that went well); the trainers' Job stays Complete.
    run(eventually(lambda: _async(pservers_gone), "the master to delete the pserver Job and its pods"))

    def trainers_complete() -> bool:
        job = client.BatchV1Api(admin).read_namespaced_job_status(obj("mastered") + "-trainer", namespace)
        conditions = {c.type for c in present(job.status, "status").conditions or [] if c.status == "True"}
        assert "Failed" not in conditions, conditions
        return "Complete" in conditions

    run(eventually(lambda: _async(trainers_complete), "the trainers' Job Complete"))

    async def server_view() -> None:
        async with running(kubeconfig, namespace, home) as backend:
            status = await backend.get_job("mastered", "alice")
            assert status.phase == "Succeeded" and status.message == "All 2 trainers finished successfully."

    run(server_view())


def test_a_failed_trainer_restarts_the_whole_job_through_the_master(cluster: Cluster, tmp_path: Path) -> None:
    """max_restarts=1: the trainer's failure fails its Job (no pod replaced alone); the master
    deletes every replica Job, and only once their pods are gone makes them again (attempt 1);
    every replica counts the restart; the next failure ends the job."""
    namespace, kubeconfig, admin, home = workspace(cluster, tmp_path)
    core = client.CoreV1Api(admin)

    def live_pods() -> list[client.V1Pod]:
        selector = f"paddle-nbext/job={obj('retry')}"
        return [
            p
            for p in core.list_namespaced_pod(namespace, label_selector=selector).items
            if present(meta(p).labels, "labels").get("paddle-nbext/role") != "master"
        ]

    async def scenario() -> None:
        async with running(kubeconfig, namespace, home) as backend:
            await backend.submit(SubmitRequest(spec("retry", pservers=1, trainers=1, max_restarts=1), "alice", home))
            cluster.await_job_pods(namespace)
            cluster.set_pod_status(namespace, pod_of(admin, namespace, "retry", "pserver", 0), "Running")
            first = {name_of(p) for p in live_pods()}
            with master_running(cluster, namespace, tmp_path, "retry"):
                cluster.set_pod_status(namespace, pod_of(admin, namespace, "retry", "trainer", 0), "Failed", exit_code=3)
                generations: list[set[str | None]] = []

                def new_attempt_running() -> bool:
                    pods = live_pods()
                    attempts = {
                        present(meta(p).labels, "labels").get("paddle-nbext/attempt") for p in pods if not meta(p).deletion_timestamp
                    }
                    generations.append(attempts)
                    return attempts == {"1"} and len(pods) == 2

                await eventually(lambda: _async(new_attempt_running), "both replicas made again for attempt 1")
                assert all(len(seen) <= 1 for seen in generations), f"two attempts at once: {generations}"
                assert not first & {name_of(p) for p in live_pods()}  # the pserver was restarted too
                cluster.await_job_pods(namespace)
                for role in ("pserver", "trainer"):
                    cluster.set_pod_status(namespace, pod_of(admin, namespace, "retry", role, 0), "Running")
                retried = await eventually(
                    lambda: _where(backend, "retry", lambda s: s.phase == "Running" and {r.restarts for r in s.replicas} == {1}),
                    "every replica counting the whole restart",
                )
                assert retried.message == "Training is running."
                cluster.set_pod_status(namespace, pod_of(admin, namespace, "retry", "trainer", 0), "Failed", exit_code=3)
                gave_up = await eventually(lambda: _where(backend, "retry", lambda s: s.phase == "Failed"), "Failed after the restart")
                assert gave_up.message.startswith("trainer 0 failed with Exit code 3 after 1 restart")

    run(scenario())


def test_in_a_shared_namespace_each_server_watches_and_ends_only_its_own_users_jobs(cluster: Cluster, tmp_path: Path) -> None:
    """`c.KubernetesBackend.owner` ($JUPYTERHUB_USER on a hub): alice's server holds only alice's
    objects (its watches select her label), never ends bob's job, and refuses to act for bob."""
    namespace, kubeconfig, admin, alice_home = workspace(cluster, tmp_path)
    cluster.home_claim(namespace, "claim-bob")
    bob_home = home_dir(tmp_path / "bob")

    async def scenario() -> None:
        async with (
            running(kubeconfig, namespace, alice_home, owner="alice") as alice,
            running(kubeconfig, namespace, bob_home, owner="bob") as bob,
        ):
            await alice.submit(SubmitRequest(spec("mine", mode="collective", pservers=0, trainers=1), "alice", alice_home))
            await bob.submit(SubmitRequest(spec("theirs", mode="collective", pservers=0, trainers=1), "bob", bob_home))
            await eventually(
                lambda: _async(lambda: len(bob.view.statuses) == 1 and len(alice.view.statuses) == 1), "each job in its server"
            )
            cluster.await_job_pods(namespace)
            cached = alice.view.cache.stores if alice.view.cache is not None else {}
            owners = {
                (obj.get("metadata") or {}).get("labels", {}).get("paddle-nbext/owner")
                for kind in ("configmaps", "jobs", "pods")
                for obj in cached.get(kind, {}).values()
            }
            assert owners == {"alice"}, owners  # bob's record, Jobs and pods never reach alice's server
            assert [j.name for j in await alice.list_jobs("alice")] == ["mine"]
            with pytest.raises(Forbidden, match="manages the Kubernetes jobs of 'alice' only"):
                await alice.list_jobs("bob")
            with pytest.raises(Forbidden):
                await alice.submit(SubmitRequest(spec("sneaky", mode="collective", pservers=0, trainers=1), "bob", bob_home))
            # bob's job fails: bob's server records it; alice's never sees it, let alone ends it
            cluster.set_pod_status(namespace, pod_of(admin, namespace, "theirs", "trainer", 0, owner="bob"), "Failed", exit_code=3)
            ended = await eventually(lambda: _async(lambda: bob.view.statuses[obj("theirs", "bob")].phase == "Failed"), "bob's job Failed")
            assert ended
            assert obj("theirs", "bob") not in alice.view.statuses

    run(scenario())


def test_jobs_share_the_releases_runtime_configmap_and_never_run_a_planted_one(cluster: Cluster, tmp_path: Path) -> None:
    """Records stay small: the runtime lives once per release in an immutable ConfigMap made by
    the first submit; a ConfigMap of that name with other files stops submits with a 503."""
    from paddle_nbext_server.backends.kubernetes.build import manifests
    from paddle_nbext_server.jobfiles.runtime_files import configmap_name, read_bundle

    namespace, kubeconfig, admin, home = workspace(cluster, tmp_path)
    core = client.CoreV1Api(admin)
    name = configmap_name(read_bundle())

    async def scenario() -> None:
        async with running(kubeconfig, namespace, home) as backend:
            for job in ("first", "second"):
                await backend.submit(SubmitRequest(spec(job, mode="collective", pservers=0, trainers=1), "alice", home))
            runtime = core.read_namespaced_config_map(name, namespace)
            assert runtime.immutable is True and "launcher.py" in present(runtime.data, "data")
            record = core.read_namespaced_config_map(obj("first"), namespace)
            # The spec, the Jobs a restart makes again, the admin's image pull bound: nothing of the runtime.
            assert set(present(record.data, "data")) == {"spec.json", "replica-jobs.json", "image-pull-seconds"}
            for job in ("first", "second"):
                trainer = client.BatchV1Api(admin).read_namespaced_job(obj(job) + "-trainer", namespace)
                pod_spec = present(present(trainer.spec, "spec").template.spec, "template.spec")
                volumes = {v.name: v for v in present(pod_spec.volumes, "volumes")}
                assert present(volumes["paddle-nbext-runtime"].config_map, "configMap").name == name
            assert [j.name for j in await backend.list_jobs("alice")] == ["second", "first"] or {
                j.name for j in await backend.list_jobs("alice")
            } == {"first", "second"}  # the runtime ConfigMap is no job

            core.delete_namespaced_config_map(name, namespace)
            planted = manifests.runtime_configmap(
                {**read_bundle(), "launcher.py": "import os; os.system('steal')\n"}, backend.admission.manifest_settings(namespace)
            )
            planted["metadata"]["name"] = name
            core.create_namespaced_config_map(namespace, client.V1ConfigMap.model_validate(planted))
            with pytest.raises(BackendUnavailable, match=f"the ConfigMap {name} in namespace {namespace} holds other files"):
                await backend.submit(SubmitRequest(spec("third", mode="collective", pservers=0, trainers=1), "alice", home))
            assert not core.list_namespaced_config_map(namespace, field_selector=f"metadata.name={obj('third')}").items

    run(scenario())


def test_finished_jobs_past_the_history_limit_are_removed_and_their_logs_stay(cluster: Cluster, tmp_path: Path) -> None:
    """`keep_finished = 1`: once a second job of the user ends, the older one's record goes (its
    Jobs and pods with it, by the garbage collector); its folder in the home, logs and all, stays."""
    namespace, kubeconfig, admin, home = workspace(cluster, tmp_path)

    async def scenario() -> None:
        async with running(kubeconfig, namespace, home, keep_finished=1, reconcile_interval=0.3) as backend:
            for name in ("older", "newer"):
                await backend.submit(SubmitRequest(spec(name, mode="collective", pservers=0, trainers=1), "alice", home))
            cluster.await_job_pods(namespace)
            cluster.set_pod_status(namespace, pod_of(admin, namespace, "older", "trainer", 0), "Succeeded")
            await eventually(lambda: _where(backend, "older", lambda s: s.phase == "Succeeded" and s.finished), "older recorded")
            assert {j.name for j in await backend.list_jobs("alice")} == {"older", "newer"}  # one finished: within the limit
            cluster.set_pod_status(namespace, pod_of(admin, namespace, "newer", "trainer", 0), "Succeeded")

            async def only_the_newest() -> bool:
                return [j.name for j in await backend.list_jobs("alice")] == ["newer"]

            await eventually(only_the_newest, "the older finished job removed")
            gone = client.CoreV1Api(admin).list_namespaced_config_map(namespace, field_selector=f"metadata.name={obj('older')}").items
            assert gone == []
            assert (home / ".paddle-jobs" / "older" / "package").is_dir()  # the job's folder, logs and all, stays

    run(scenario())


def test_two_users_of_one_namespace_may_each_have_a_job_named_train(cluster: Cluster, tmp_path: Path) -> None:
    """Names are per user: alice's and bob's servers share the jobs namespace (one Role, one
    notebook account, as a hub without per-user namespaces has it); both submit `train`, each
    sees and deletes only their own, and bob's dry run says nothing about alice's job."""
    namespace, kubeconfig, admin, alice_home = workspace(cluster, tmp_path)
    cluster.home_claim(namespace, "claim-bob")
    bob_home = home_dir(tmp_path / "bob")
    hub = EventHub()

    async def scenario() -> None:
        async with running(kubeconfig, namespace, alice_home, hub) as alice, running(kubeconfig, namespace, bob_home) as bob:
            async with hub.subscribe() as events:
                await alice.submit(SubmitRequest(spec("train", mode="collective", pservers=0, trainers=1), "alice", alice_home))
                dry = await bob.submit(
                    SubmitRequest(spec("train", mode="collective", pservers=0, trainers=1), "bob", bob_home), dry_run=True
                )
                assert dry["job"]["name"] == "train" and "alice" not in json.dumps(dry)
                created = await bob.submit(SubmitRequest(spec("train", mode="collective", pservers=0, trainers=1), "bob", bob_home))
                assert created["name"] == "train" and created["owner"] == "bob"
                update = await asyncio.wait_for(events.get(), WAIT)
                assert (update.kind, update.owner, update.name) == (UPDATED, "alice", "train")  # the user's name, not the object's
            await eventually(lambda: _async(lambda: bool(objects_of(admin, namespace, "train", "bob"))), "bob's objects")
            assert obj("train") != obj("train", "bob")
            for backend in (alice, bob):

                def both_cached(b: KubernetesBackend = backend) -> Awaitable[bool]:
                    return _async(lambda: len(b.view.statuses) == 2)

                await eventually(both_cached, "both jobs in each server's cache")
                assert [(j.name, j.owner) for j in await backend.list_jobs("alice")] == [("train", "alice")]
                assert [(j.name, j.owner) for j in await backend.list_jobs("bob")] == [("train", "bob")]
            cluster.await_job_pods(namespace)
            cluster.set_pod_status(namespace, pod_of(admin, namespace, "train", "trainer", 0, owner="bob"), "Running")
            await eventually(lambda: _async(lambda: bob.view.statuses[obj("train", "bob")].phase == "Running"), "bob's train Running")
            assert (await alice.get_job("train", "alice")).phase == "Pending"  # alice's pod was not touched
            await bob.delete("train", "bob")
            with pytest.raises(JobNotFound):
                await bob.get_job("train", "bob")
            assert (await alice.get_job("train", "alice")).owner == "alice"
            assert ("ConfigMap", obj("train")) in objects_of(admin, namespace, "train")
            await eventually(lambda: _async(lambda: objects_of(admin, namespace, "train", "bob") == set()), "only bob's objects gone")

    run(scenario())


def test_a_job_submitted_before_names_were_per_owner_is_still_shown_run_and_deleted(cluster: Cluster, tmp_path: Path) -> None:
    """An upgrade finds jobs whose objects carry the bare job name (`old`, `old-trainer`): the
    server still lists them under their name, follows their pods and deletes every object."""
    namespace, kubeconfig, admin, home = workspace(cluster, tmp_path)
    core = client.CoreV1Api(admin)

    def legacy_objects() -> set[str]:
        selector = "paddle-nbext/job=old"
        found = {f"ConfigMap {name_of(o)}" for o in core.list_namespaced_config_map(namespace, label_selector=selector).items}
        found |= {f"Job {name_of(o)}" for o in client.BatchV1Api(admin).list_namespaced_job(namespace, label_selector=selector).items}
        return found

    async def scenario() -> None:
        async with running(kubeconfig, namespace, home) as backend:
            dry = await backend.submit(SubmitRequest(spec("old", mode="collective", pservers=0, trainers=1), "alice", home), dry_run=True)
            plan = json.loads(json.dumps(dry["plan"]["manifests"]).replace(obj("old"), "old"))  # names as 0.1 made them
            record = core.create_namespaced_config_map(namespace, plan[0])
            for manifest in plan[1:]:
                body = manifests.set_owner_uid(manifest, present(meta(record).uid, "uid"))
                if body["kind"] == "Job":
                    client.BatchV1Api(admin).create_namespaced_job(namespace, client.V1Job.model_validate(body))
                else:
                    core.create_namespaced_service(namespace, client.V1Service.model_validate(body))
            listed = await eventually(lambda: _async(lambda: [(j.name, j.phase) for j in backend.view.statuses.values()]), "the old job")
            assert listed == [("old", "Pending")]
            assert [j.name for j in await backend.list_jobs("alice")] == ["old"]
            cluster.await_job_pods(namespace)
            pod = client.CoreV1Api(admin).list_namespaced_pod(namespace, label_selector="paddle-nbext/job=old,paddle-nbext/role=trainer")
            cluster.set_pod_status(namespace, name_of(pod.items[0]), "Running")
            await eventually(lambda: _where(backend, "old", lambda s: s.phase == "Running"), "the old job Running")
            await backend.delete("old", "alice")
            with pytest.raises(JobNotFound):
                await backend.get_job("old", "alice")
            await eventually(lambda: _async(lambda: legacy_objects() == set()), "every object of the old job deleted")

    run(scenario())


def test_a_second_user_can_neither_see_nor_touch_the_first_users_jobs(cluster: Cluster, tmp_path: Path) -> None:
    first_ns, second_ns = cluster.new_namespace(), cluster.new_namespace()
    alice, bob = notebook(cluster, first_ns), notebook(cluster, second_ns)
    home = home_dir(tmp_path)

    async def scenario() -> None:
        async with running(alice, first_ns, home) as backend:
            await backend.submit(SubmitRequest(spec("private"), "alice", home))
        async with running(bob, second_ns, home) as own:
            assert await own.list_jobs("bob") == [] and await own.list_jobs("alice") == []
        async with running(bob, first_ns, home, sync_timeout=2) as intruder:
            with pytest.raises(BackendUnavailable, match="403"):
                await intruder.list_jobs("alice")
            with pytest.raises(BackendUnavailable):
                await intruder.delete("private", "alice")

    run(scenario())
    with pytest.raises(ApiException) as denied:
        client.CoreV1Api(cluster.api_client(bob)).delete_namespaced_config_map(obj("private"), first_ns)
    assert denied.value.status == 403
    assert ("ConfigMap", obj("private")) in objects_of(cluster.api_client(), first_ns, "private")


def test_a_role_missing_one_verb_fails_clearly_and_leaves_nothing(cluster: Cluster, tmp_path: Path) -> None:
    namespace, kubeconfig, admin, home = workspace(cluster, tmp_path, without_verb(NOTEBOOK_ROLE, "jobs", "create"))

    async def scenario() -> None:
        async with running(kubeconfig, namespace, home) as backend:
            with pytest.raises(BackendUnavailable, match=f"creating Job {obj('refused')}-master was forbidden by RBAC") as error:
                await backend.submit(SubmitRequest(spec("refused"), "alice", home))
            assert "403" in error.value.message
            await eventually(lambda: _async(lambda: objects_of(admin, namespace, "refused") == set()), "the rollback")
            assert not (home / ".paddle-jobs" / "refused").exists()

    run(scenario())


def test_api_unreachable_is_503_with_the_cause_and_recovers(cluster: Cluster, tmp_path: Path) -> None:
    namespace, kubeconfig, admin, home = workspace(cluster, tmp_path)

    async def scenario() -> None:
        async with running(kubeconfig, namespace, home) as backend:
            await backend.submit(SubmitRequest(spec("steady", pservers=1, trainers=1), "alice", home))
            cluster.await_job_pods(namespace)
            pod = pod_of(admin, namespace, "steady", "trainer", 0)
            with cluster.api_down():
                with pytest.raises(BackendUnavailable, match="unreachable") as error:
                    await backend.submit(SubmitRequest(spec("during"), "alice", home))
                assert "Connection" in error.value.message or "refused" in error.value.message
                await eventually(lambda: _raises_unavailable(backend.list_jobs("alice")), "list to report the outage")
            cluster.set_pod_status(namespace, pod, "Running")  # a change made right after the API returns
            await eventually(lambda: _where(backend, "steady", lambda s: s.phase == "Running"), "recovery")
            # Writes the backend does not watch move etcd on; after compaction and a restart the
            # API server's watch cache starts there, so resuming from the backend's older
            # resourceVersion gets 410 Gone and the cache must re-list.
            client.CoreV1Api(admin).create_namespaced_config_map(
                cluster.new_namespace(), client.V1ConfigMap.model_validate({"metadata": {"name": "elsewhere"}})
            )
            cluster.expire_watch_history()
            cluster.set_pod_status(namespace, pod, "Succeeded")
            cluster.set_pod_status(namespace, pod_of(admin, namespace, "steady", "pserver", 0), "Running")
            await eventually(lambda: _where(backend, "steady", lambda s: s.phase == "Succeeded"), "the change after 410 Gone")

    run(scenario())


async def _raises_unavailable(call: Awaitable[Any]) -> bool:
    try:
        await call
    except BackendUnavailable as error:
        return "unreachable" in error.message
    return False


def test_an_unschedulable_replica_says_what_the_scheduler_said(cluster: Cluster, tmp_path: Path) -> None:
    """kube-scheduler judges the request against the KWOK nodes' capacity (16 and 32 CPUs)."""
    namespace, kubeconfig, _, home = workspace(cluster, tmp_path)

    async def scenario() -> None:
        async with running(kubeconfig, namespace, home) as backend:
            await backend.submit(SubmitRequest(spec("huge", mode="collective", pservers=0, trainers=1, trainer_cpu="64"), "alice", home))
            cluster.await_job_pods(namespace)
            # (the scheduler may first report the home volume its informer has not seen yet)
            status = await eventually(
                lambda: _where(backend, "huge", lambda s: "Insufficient cpu" in (replica(s, "trainer", 0).reason or "")),
                "the scheduler's reason",
            )
            assert present(replica(status, "trainer", 0).reason, "reason").startswith(
                "Unschedulable: 0/3 nodes are available: 3 Insufficient cpu"
            )
            assert status.phase == "Pending"

    run(scenario())


def test_replica_logs_tail_and_follow_through_the_api_server(cluster: Cluster, tmp_path: Path) -> None:
    """pods/log goes API server -> KWOK's kubelet endpoint, which reads the container's log file."""
    cluster.plane  # noqa: B018 - container logs are served by the suite's own KWOK
    namespace, kubeconfig, admin, home = workspace(cluster, tmp_path)

    async def scenario() -> None:
        async with running(kubeconfig, namespace, home) as backend:
            await backend.submit(SubmitRequest(spec("talk", mode="collective", pservers=0, trainers=2), "alice", home))
            cluster.await_job_pods(namespace)
            for index in (0, 1):
                lines = "".join(f"trainer {index} step {step}\n" for step in range(1, 6))
                cluster.set_pod_status(namespace, pod_of(admin, namespace, "talk", "trainer", index), "Running", log=lines)
            await eventually(lambda: _where(backend, "talk", lambda s: s.phase == "Running"), "Running")
            tail = await backend.read_logs("talk", "alice", "trainer", 1, tail=2)
            assert tail.splitlines() == ["trainer 1 step 4", "trainer 1 step 5"]
            async with contextlib.aclosing(backend.follow_logs("talk", "alice", "trainer", 0)) as stream:
                assert "trainer 0 step 1" in await anext(stream)
            with pytest.raises(ReplicaNotFound, match="no trainer 7"):
                await backend.read_logs("talk", "alice", "trainer", 7)

    run(scenario())


def test_gpu_trainers_land_on_the_gpu_node_and_its_capacity_is_accounted(cluster: Cluster, tmp_path: Path) -> None:
    """kube-scheduler places `nvidia.com/gpu` requests on the KWOK node that has 8 of them, and
    refuses more than are free with its own words."""
    namespace, kubeconfig, admin, home = workspace(cluster, tmp_path)

    async def scenario() -> None:
        async with running(kubeconfig, namespace, home) as backend:
            await backend.submit(SubmitRequest(spec("gpus", mode="collective", pservers=0, trainers=2, trainer_gpu=4), "alice", home))
            cluster.await_job_pods(namespace)
            core = client.CoreV1Api(admin)
            for index in (0, 1):
                # A pod the scheduler could not place at once (a transient Unschedulable) is bound on its retry.
                name = pod_of(admin, namespace, "gpus", "trainer", index)

                def bound(n: str = name) -> Awaitable[str | None]:
                    return _async(lambda: present(core.read_namespaced_pod(n, namespace).spec, "spec").node_name)

                await eventually(bound, f"{name} bound")
                pod = core.read_namespaced_pod(name, namespace)
                pod_spec = present(pod.spec, "spec")
                assert pod_spec.node_name == "kwok-gpu-0"
                assert present(present(pod_spec.containers[0].resources, "resources").limits, "limits")["nvidia.com/gpu"] == "4"
            await backend.submit(SubmitRequest(spec("more", mode="collective", pservers=0, trainers=1, trainer_gpu=1), "alice", home))
            cluster.await_job_pods(namespace)
            status = await eventually(
                lambda: _where(backend, "more", lambda s: "Insufficient nvidia.com/gpu" in (replica(s, "trainer", 0).reason or "")),
                "the scheduler's GPU reason",
            )
            assert status.phase == "Pending"

    run(scenario())
