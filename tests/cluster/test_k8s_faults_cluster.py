"""Issue 24's "Bad input and faults" on a real API server and scheduler (the suite's control plane):
a notebook whose ServiceAccount has no Role (the namespace's `default` account, as a hub config
that forgot `service_account` leaves it) or a Role short of one verb gets the API's refusal in
words naming the verb, the resource, the namespace and the fix, as `GET /config` (describe),
the job list and a submit say it, and a submit leaves nothing behind; a home claim that does not
exist or does not bind is named in the job's replica reason and message.  The unit tests of the
words: tests/backends/kubernetes/test_k8s_faults.py."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import pytest
import yaml
from kubernetes import client

from cluster.k8s_objects import meta
from paddle_nbext.model.spec import JobSpec
from paddle_nbext.model.status import JobStatus
from paddle_nbext_server.backends.base import SubmitRequest
from paddle_nbext_server.backends.kubernetes import KubernetesBackend
from paddle_nbext_server.backends.kubernetes.build import manifests
from paddle_nbext_server.errors import BackendForbidden
from paddle_nbext_server.events import EventHub

if TYPE_CHECKING:
    from cluster.conftest import Cluster

pytestmark = pytest.mark.cluster
T = TypeVar("T")

REPO = Path(__file__).resolve().parents[2]
SELECTOR = "app.kubernetes.io/managed-by=paddle-nbext"
WAIT = 60.0
NOTEBOOK_ROLE = next(
    d for d in yaml.safe_load_all((REPO / "deploy" / "rbac" / "notebook-role.yaml").read_text()) if d and d["kind"] == "Role"
)


def without_verb(role: dict[str, Any], resource: str, verb: str) -> dict[str, Any]:
    copy: dict[str, Any] = json.loads(json.dumps(role))
    for rule in copy["rules"]:
        if resource in rule["resources"]:
            rule["verbs"] = [v for v in rule["verbs"] if v != verb]
    return copy


async def eventually(check: Callable[[], Awaitable[T]], what: str, timeout: float = WAIT) -> T:
    """Wait for `check` to return a truthy value; on timeout say what was last seen."""
    deadline = time.monotonic() + timeout
    last = ""
    while time.monotonic() < deadline:
        try:
            value = await check()
            if value:
                return value
            last = f"last value {value!r}"
        except Exception as error:  # noqa: BLE001 - retried until the deadline, then reported
            last = f"{type(error).__name__}: {error}"
        await asyncio.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}; last seen: {last}")


def home_dir(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    (home / "mnist").mkdir(parents=True)
    (home / "mnist" / "train.py").write_text("print('training')\n")
    return home


def spec(name: str, **fields: Any) -> JobSpec:
    return JobSpec.from_dict(
        {
            "job_name": name,
            "entry_point": "python train.py",
            "trainer_package": "mnist",
            "mode": "collective",
            "pservers": 0,
            "trainers": 1,
            **fields,
        }
    )


@contextlib.asynccontextmanager
async def running(kubeconfig: str, namespace: str, home: Path, **traits: Any) -> AsyncIterator[KubernetesBackend]:
    settings = {"home_volume": "pvc", "home_path": str(home), "sync_timeout": 5.0, **traits}
    backend = KubernetesBackend(events=EventHub(), kubeconfig=kubeconfig, namespace=namespace, **settings)
    await backend.start()
    try:
        yield backend
    finally:
        await backend.stop()


def ours(admin: client.ApiClient, namespace: str) -> list[str]:
    """Every object of paddle-nbext's in `namespace` but the release's runtime ConfigMap."""
    core, batch = client.CoreV1Api(admin), client.BatchV1Api(admin)
    found = [f"ConfigMap {meta(o).name}" for o in core.list_namespaced_config_map(namespace, label_selector=SELECTOR).items]
    found = [f for f in found if "paddle-nbext-runtime-" not in f]
    found += [f"Service {meta(o).name}" for o in core.list_namespaced_service(namespace, label_selector=SELECTOR).items]
    found += [f"Job {meta(o).name}" for o in batch.list_namespaced_job(namespace, label_selector=SELECTOR).items]
    found += [f"Pod {meta(o).name}" for o in core.list_namespaced_pod(namespace, label_selector=SELECTOR).items]
    return found


def test_a_notebook_running_as_the_default_account_is_told_which_permission_is_missing(cluster: Cluster, tmp_path: Path) -> None:
    """The hub config forgot the notebook's ServiceAccount: the pod runs as `default`, bound to nothing."""
    namespace = cluster.new_namespace()
    kubeconfig = cluster.kubeconfig_for(namespace, "default")  # no Role, no binding
    admin, home = cluster.api_client(), home_dir(tmp_path)
    account = f"system:serviceaccount:{namespace}:default"

    async def scenario() -> None:
        async with running(kubeconfig, namespace, home) as backend:
            info = await eventually(lambda: _async(lambda: backend.describe() if backend.describe()["error"] else None), "/config's error")
            assert info is not None  # eventually returns a truthy value
            assert info["ok"] is False
            error = info["error"]
            assert error.startswith(f"the notebook's ServiceAccount {account} may not list "), error
            for kind in ("configmaps", "jobs.batch", "pods"):

                def named(kind: str = kind) -> Awaitable[bool]:
                    return _async(lambda: kind in backend.describe()["error"])

                await eventually(named, f"/config naming {kind}")
            error = backend.describe()["error"]
            assert f"in namespace {namespace} (HTTP 403): " in error
            assert f"kubectl -n {namespace} apply -f deploy/rbac/notebook-role.yaml" in error
            assert "singleuser.serviceAccountName" in error  # the default account: the hub's setting is named
            forbidden = backend.describe()["forbidden"]
            assert {(f["verb"], f["resource"], f["namespace"], f["user"]) for f in forbidden} >= {
                ("list", "configmaps", namespace, account)
            }

            with pytest.raises(BackendForbidden) as listed:
                await backend.list_jobs("alice")
            assert (listed.value.status, listed.value.code) == (503, "forbidden_by_cluster")
            assert listed.value.message.startswith("The job list could not be read: ")
            assert f"{account} may not list " in listed.value.message and "configmaps" in listed.value.message

            with pytest.raises(BackendForbidden) as submitted:
                await backend.submit(SubmitRequest(spec("half"), "alice", home))
            assert (submitted.value.status, submitted.value.code) == (503, "forbidden_by_cluster")
            assert f"{account} may not create configmaps in namespace {namespace} (HTTP 403)" in submitted.value.message
        assert ours(admin, namespace) == []  # nothing half made
        assert not (home / ".paddle-jobs" / "half").exists()

    asyncio.run(scenario())


def test_a_role_short_of_one_verb_names_it_and_the_submit_is_rolled_back(cluster: Cluster, tmp_path: Path) -> None:
    namespace = cluster.new_namespace()
    cluster.home_claim(namespace, "claim-alice")
    kubeconfig = cluster.kubeconfig_for(namespace, "paddle-notebook", without_verb(NOTEBOOK_ROLE, "services", "create"))
    admin, home = cluster.api_client(), home_dir(tmp_path)

    async def scenario() -> None:
        async with running(kubeconfig, namespace, home, sync_timeout=WAIT) as backend:
            assert backend.describe()["ok"] is True  # it can watch: the list works, only creating a Service is refused
            with pytest.raises(BackendForbidden) as error:
                await backend.submit(SubmitRequest(spec("half", snapshot=True), "alice", home))
            message = error.value.message
            assert f"creating Service {manifests.object_name('half', 'alice')} was forbidden by RBAC: " in message
            assert (
                f"ServiceAccount system:serviceaccount:{namespace}:paddle-notebook may not create services in namespace {namespace}"
                in message
            )
            assert "subject set to ServiceAccount paddle-notebook" in message and "nothing of job 'half' was left behind" in message
            assert "singleuser.serviceAccountName" not in message  # an account of its own: only the Role is missing
        await eventually(lambda: _async(lambda: ours(admin, namespace) == []), "the rollback of the record")
        assert not (home / ".paddle-jobs" / "half").exists()

    asyncio.run(scenario())


def test_a_home_claim_that_does_not_exist_or_does_not_bind_is_the_jobs_reason(cluster: Cluster, tmp_path: Path) -> None:
    namespace = cluster.new_namespace()
    kubeconfig = cluster.kubeconfig_for(namespace, "paddle-notebook", NOTEBOOK_ROLE)
    home = home_dir(tmp_path)
    # bob's claim names a storageClass that does not exist: it stays Pending; alice has none at all
    client.CoreV1Api(cluster.api_client()).create_namespaced_persistent_volume_claim(
        namespace,
        client.V1PersistentVolumeClaim.model_validate(
            {
                "metadata": {"name": "claim-bob"},
                "spec": {
                    "accessModes": ["ReadWriteMany"],
                    "storageClassName": "no-such-class",
                    "resources": {"requests": {"storage": "1Gi"}},
                },
            }
        ),
    )

    async def reason(backend: KubernetesBackend, job: str, owner: str, words: str) -> JobStatus:
        status = await backend.get_job(job, owner)
        trainer = next(r for r in status.replicas if r.role == "trainer")
        assert status.phase == "Pending" and trainer.reason and words in trainer.reason, (
            f"{status.phase} {status.message!r} trainer: {trainer.reason!r}"
        )
        assert words in status.message, status.message
        return status

    async def scenario() -> None:
        async with running(kubeconfig, namespace, home, sync_timeout=WAIT) as backend:
            await backend.submit(SubmitRequest(spec("nohome"), "alice", home))
            await backend.submit(SubmitRequest(spec("unbound"), "bob", home))
            cluster.await_job_pods(namespace)
            missing = await eventually(
                lambda: reason(backend, "nohome", "alice", "the home claim claim-alice does not exist in the job's namespace"),
                "alice's job to name her missing claim",
            )
            assert 'persistentvolumeclaim "claim-alice" not found' in missing.message  # the scheduler's own words follow
            unbound = await eventually(
                lambda: reason(backend, "unbound", "bob", "the home claim claim-bob is not bound to a volume"),
                "bob's job to name his unbound claim",
            )
            assert "kubectl describe pvc claim-bob" in unbound.message and "unbound immediate PersistentVolumeClaims" in unbound.message

    asyncio.run(scenario())


async def _async(fn: Callable[[], T]) -> T:
    return fn()
