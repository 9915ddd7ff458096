"""The ``cluster`` fixture: one Kubernetes contract suite, run against the in-memory API or a real cluster.

By default the suite talks over real HTTP to ``tests/kubeapi`` (an in-memory kube-apiserver on
127.0.0.1). When ``PADDLE_NBEXT_TEST_KUBECONFIG`` names a kubeconfig, the same tests run against that
cluster instead (kube-apiserver + kube-controller-manager; no kubelet, no scheduler, no DNS), and the
suite plays the kubelet by writing ``pods/status``.

Fixtures
--------
``cluster``          function scope: a :class:`Cluster`; namespaces it creates are deleted after the test.
``module_cluster``   the same for module-scoped fixtures (namespaces deleted after the module).
``cluster_substrate`` session scope: the running emulator (or the real cluster's admin config).

Contract (what backend tests code against)
------------------------------------------
``cluster.real``                       True when PADDLE_NBEXT_TEST_KUBECONFIG is set.
``cluster.admin_kubeconfig()``         path of a kubeconfig with full rights.
``cluster.new_namespace()``            a fresh namespace (deleted at teardown of the fixture's scope).
``cluster.kubeconfig_for(ns, sa, role)`` creates ServiceAccount ``sa`` in ``ns``; if ``role`` (a Role
                                       manifest dict, name defaults to ``sa``) is given, the Role and a
                                       RoleBinding of ``sa`` to it; mints a token with TokenRequest and
                                       returns a kubeconfig path for that identity (context namespace ``ns``).
``cluster.api_client(kubeconfig=None)`` a ``kubernetes.client.ApiClient`` (admin when None); closed at teardown.
``cluster.play_job_controller(ns)``    emulator: runs the Indexed Job controller for ``ns`` from now on
                                       (pods created before it returns); real cluster: waits for the
                                       controller-manager's pods instead.
``cluster.set_pod_status(ns, pod, phase, *, exit_code, reason, message, waiting_reason, restart_count, log)``
                                       plays the kubelet (see ``kubeapi.kubelet.pod_status``); ``log`` sets
                                       what ``pods/log`` returns (emulator only; a restart_count increase
                                       moves the old log to ``previous``).
``cluster.api_down()``                 context manager: emulator unreachable inside, same port and state
                                       after; real cluster: ``pytest.skip``.
``cluster.compact_history()``          emulator: forget watch history (old resourceVersions get 410 Expired).
``cluster.drop_watches()``             emulator: end all open watch streams.
``cluster.request_counts()`` / ``reset_request_counts()`` emulator: requests by ``(verb, resource)``.
Emulator-only helpers skip the calling test on a real cluster.
"""

from __future__ import annotations

import contextlib
import copy
import os
import sys
import time
from pathlib import Path
from typing import Any, Iterator

import kubernetes
import pytest
import yaml
from kubernetes.client.rest import ApiException

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kubeapi import KubeAPIServer  # noqa: E402
from kubeapi.jobcontroller import INDEX_KEY, JobController  # noqa: E402
from kubeapi.kubelet import pod_status  # noqa: E402
from kubeapi.resources import by_kind  # noqa: E402

KUBECONFIG_ENV = "PADDLE_NBEXT_TEST_KUBECONFIG"
WAIT_SECONDS = 30.0


def _write_kubeconfig(path: Path, cluster: dict[str, Any], token: str | None, namespace: str | None,
                      user: dict[str, Any] | None = None) -> str:
    context: dict[str, Any] = {"cluster": "cluster", "user": "user"}
    if namespace:
        context["namespace"] = namespace
    doc = {"apiVersion": "v1", "kind": "Config", "current-context": "ctx",
           "clusters": [{"name": "cluster", "cluster": cluster}],
           "users": [{"name": "user", "user": user if user is not None else {"token": token}}],
           "contexts": [{"name": "ctx", "context": context}]}
    path.write_text(yaml.safe_dump(doc))
    return str(path)


class ClusterSubstrate:
    """Session-wide: the emulator (started here) or the real cluster named by the environment."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        real = os.environ.get(KUBECONFIG_ENV)
        self.real = bool(real)
        self.server: KubeAPIServer | None = None
        self.jobs: JobController | None = None
        if real:
            if not Path(real).is_file():
                raise pytest.UsageError(f"{KUBECONFIG_ENV}={real}: no such kubeconfig file; unset it to use the "
                                        "in-memory API or point it at a readable kubeconfig")
            self.admin_path = real
            doc = yaml.safe_load(Path(real).read_text())
            current = doc.get("current-context")
            context = next(c["context"] for c in doc["contexts"] if c["name"] == current)
            self.cluster_entry = copy.deepcopy(next(c["cluster"] for c in doc["clusters"]
                                                    if c["name"] == context["cluster"]))
        else:
            self.server = KubeAPIServer()
            self.server.start()
            self.jobs = JobController(self.server.store)
            self.cluster_entry = {"server": self.server.url}
            self.admin_path = _write_kubeconfig(workdir / "admin.kubeconfig", self.cluster_entry,
                                                self.server.admin_token, None)

    def close(self) -> None:
        if self.jobs is not None:
            self.jobs.stop()
        if self.server is not None:
            self.server.close()


class Cluster:
    """One fixture scope's view of the substrate; see the module docstring for the contract."""

    def __init__(self, substrate: ClusterSubstrate) -> None:
        self._sub = substrate
        self.real = substrate.real
        self._namespaces: list[str] = []
        self._clients: list[kubernetes.client.ApiClient] = []
        self._admin: kubernetes.client.ApiClient | None = None
        self._counter = 0

    # --- configuration --------------------------------------------------------------------------
    def admin_kubeconfig(self) -> str:
        return self._sub.admin_path

    def api_client(self, kubeconfig: str | None = None) -> kubernetes.client.ApiClient:
        client = kubernetes.config.new_client_from_config(config_file=kubeconfig or self._sub.admin_path)
        self._clients.append(client)
        return client

    def _core(self) -> kubernetes.client.CoreV1Api:
        if self._admin is None:
            self._admin = self.api_client()
        return kubernetes.client.CoreV1Api(self._admin)

    def new_namespace(self) -> str:
        ns = self._core().create_namespace({"metadata": {"generateName": "pnb-test-",
                                                         "labels": {"paddle-nbext/test": "true"}}})
        name: str = ns.metadata.name
        self._namespaces.append(name)
        return name

    def kubeconfig_for(self, namespace: str, service_account: str, role: dict[str, Any] | None = None) -> str:
        core = self._core()
        with contextlib.suppress(ApiException):
            core.create_namespaced_service_account(namespace, {"metadata": {"name": service_account}})
        if role is not None:
            rbac = kubernetes.client.RbacAuthorizationV1Api(self._admin)
            manifest = copy.deepcopy(role)
            manifest.setdefault("metadata", {}).setdefault("name", service_account)
            manifest["metadata"]["namespace"] = namespace
            manifest.setdefault("apiVersion", "rbac.authorization.k8s.io/v1")
            manifest.setdefault("kind", "Role")
            rbac.create_namespaced_role(namespace, manifest)
            rbac.create_namespaced_role_binding(namespace, {
                "metadata": {"name": manifest["metadata"]["name"]},
                "subjects": [{"kind": "ServiceAccount", "name": service_account, "namespace": namespace}],
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                            "name": manifest["metadata"]["name"]}})
        token = core.create_namespaced_service_account_token(
            service_account, namespace, {"spec": {"audiences": [], "expirationSeconds": 3600}}).status.token
        self._counter += 1
        path = self._sub.workdir / f"{namespace}-{service_account}-{self._counter}.kubeconfig"
        return _write_kubeconfig(path, self._sub.cluster_entry, token, namespace)

    # --- played controllers ---------------------------------------------------------------------
    def play_job_controller(self, namespace: str) -> None:
        if self._sub.jobs is not None:
            self._sub.jobs.watch_namespace(namespace)
            return
        batch = kubernetes.client.BatchV1Api(self._core().api_client)
        deadline = time.monotonic() + WAIT_SECONDS
        while True:
            missing = []
            for job in batch.list_namespaced_job(namespace).items:
                spec, status = job.spec, job.status
                done = any(c.type in ("Complete", "Failed") and c.status == "True"
                           for c in (status.conditions or []))
                if spec.completion_mode != "Indexed" or spec.suspend or done:
                    continue
                want = min(spec.parallelism or 0, (spec.completions or 0) - (status.succeeded or 0))
                pods = self._core().list_namespaced_pod(
                    namespace, label_selector=f"batch.kubernetes.io/job-name={job.metadata.name}").items
                active = [p for p in pods if p.status.phase in ("Pending", "Running")
                          and INDEX_KEY in (p.metadata.annotations or {})]
                if len(active) < want:
                    missing.append(job.metadata.name)
            if not missing:
                return
            if time.monotonic() > deadline:
                raise AssertionError(f"the cluster's Job controller did not create the pods of {missing} within "
                                     f"{WAIT_SECONDS:.0f}s; is kube-controller-manager running?")
            time.sleep(0.2)

    def set_pod_status(self, namespace: str, pod: str, phase: str, *, exit_code: int | None = None,
                       reason: str | None = None, message: str | None = None, waiting_reason: str | None = None,
                       restart_count: int = 0, log: str | None = None) -> None:
        kwargs = dict(exit_code=exit_code, reason=reason, message=message, waiting_reason=waiting_reason,
                      restart_count=restart_count)
        if self._sub.server is not None:
            store = self._sub.server.store
            resource = by_kind("Pod")

            def change(obj: dict[str, Any]) -> dict[str, Any]:
                old_restarts = max([c.get("restartCount", 0) for c in
                                    (obj.get("status") or {}).get("containerStatuses") or []] + [0])
                containers = [c["name"] for c in obj["spec"]["containers"]]
                if restart_count > old_restarts:
                    for container in containers:
                        store.rotate_log(namespace, pod, container)
                if log is not None:
                    for container in containers:
                        store.set_log(namespace, pod, container, log)
                obj["status"] = pod_status(obj, phase, **kwargs)  # type: ignore[arg-type]
                return obj
            store.replace_with(resource, namespace, pod, change, "status")
            return
        core = self._core()
        current = core.api_client.sanitize_for_serialization(core.read_namespaced_pod(pod, namespace))
        current["status"] = pod_status(current, phase, **kwargs)  # type: ignore[arg-type]
        core.replace_namespaced_pod_status(pod, namespace, current)

    # --- emulator-only controls -----------------------------------------------------------------
    def _emulator(self, what: str) -> KubeAPIServer:
        if self._sub.server is None:
            pytest.skip(f"{what} needs the in-memory API (unset {KUBECONFIG_ENV})")
        return self._sub.server

    def api_down(self) -> contextlib.AbstractContextManager[None]:
        return self._emulator("api_down()").down()

    def compact_history(self) -> None:
        self._emulator("compact_history()").compact_history()

    def drop_watches(self) -> None:
        self._emulator("drop_watches()").drop_watches()

    def request_counts(self) -> dict[tuple[str, str], int]:
        return self._emulator("request_counts()").request_counts()

    def reset_request_counts(self) -> None:
        self._emulator("reset_request_counts()").reset_request_counts()

    @property
    def server(self) -> KubeAPIServer:
        """The emulator itself (skips on a real cluster), for benchmarks that need more than the helpers."""
        return self._emulator("the emulator")

    # --- teardown -------------------------------------------------------------------------------
    def cleanup(self) -> None:
        for namespace in self._namespaces:
            if self._sub.jobs is not None:
                self._sub.jobs.forget_namespace(namespace)
            # The apiserver answers with the Terminating Namespace, which the typed client may fail to
            # parse as a Status; the deletion has happened either way.
            with contextlib.suppress(ApiException, ValueError):
                self._core().delete_namespace(namespace)
        self._namespaces.clear()
        for client in self._clients:
            client.close()
        self._clients.clear()
        self._admin = None


@pytest.fixture(scope="session")
def cluster_substrate(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterSubstrate]:
    substrate = ClusterSubstrate(tmp_path_factory.mktemp("cluster"))
    yield substrate
    substrate.close()


@pytest.fixture(scope="module")
def module_cluster(cluster_substrate: ClusterSubstrate) -> Iterator[Cluster]:
    view = Cluster(cluster_substrate)
    yield view
    view.cleanup()


@pytest.fixture
def cluster(cluster_substrate: ClusterSubstrate) -> Iterator[Cluster]:
    view = Cluster(cluster_substrate)
    yield view
    view.cleanup()
