"""The ``cluster`` fixture: the Kubernetes contract suite on a real control plane.

By default the suite starts its own control plane once per session (``support.controlplane``:
kube-apiserver, kube-controller-manager, kube-scheduler and etcd built from source, KWOK nodes)
and everything it checks comes from those components: the Job controller makes the pods, the
scheduler binds them, the garbage collector cascades, RBAC and admission refuse.  The suite
plays only the kubelet's reports (pod status and container logs, see
``support.controlplane.kubelet``).  If the control plane cannot be built or started, every
cluster test errors with the reason: "no control plane" is never a pass or a skip.

``PADDLE_NBEXT_TEST_KUBECONFIG=/path/to/admin-kubeconfig`` points the same suite at another
cluster (kind, a cloud cluster); there the suite still writes pod status as the kubelet, and
the checks that need our own processes (API server restarts, etcd compaction, container logs
served by KWOK) skip, saying so.

Fixtures
--------
``cluster``           function scope: a :class:`Cluster`; namespaces it creates are deleted after the test.
``module_cluster``    the same for module-scoped fixtures (namespaces deleted after the module).
``cluster_substrate`` session scope: the running control plane (or the other cluster's admin config).
``real_cluster``      module scope: a :class:`Cluster` on a third control plane with a **real node** beside
                      its KWOK nodes (``support.controlplane.realnode``: kubelet, containerd, runc, CNI,
                      kube-proxy and CoreDNS in a network namespace, the Paddle image built here);
                      ``real_cluster.node`` says how pods get there (image, node selector, tolerations) and
                      makes homes that the notebook side and the pods share.  If the node cannot start,
                      every real-node test errors naming the component and its log.
``hub``               module scope: a :class:`support.hub_site.HubSite`, the one JupyterHub of the session
                      (``hub_site``, started on the real node's cluster the first time a module asks
                      for it, with the shipped RBAC and the users of ``HUB_USERS``); each module's
                      users' notebook servers are stopped when the module ends.
``hub_user_namespaces`` module scope: a second hub from the same recipe with one namespace per user
                      (``PADDLE_NBEXT_HUB_USER_NAMESPACES=1``: ``paddle-alice``, ``paddle-bob``), beside
                      the first on ports of its own; its users' namespaces are deleted after the module.
``ceph_site``         session scope: a :class:`support.ceph.site.CephSite`, a real Ceph (monitor, OSD, MDS)
                      beside the real node with ceph-csi's cluster objects of ``deploy/cephfs/`` applied
                      and the node's CephFS CSI plugin configured; ``ceph_site.home(user, ns, uid, gid)``
                      provisions a user's CephFS home with the shipped ``provision_home.py``.
``queued_cluster``    module scope: a :class:`Cluster` on a second control plane of its own with the JobSet
                      and Kueue controllers beside it (``support.controlplane.queueing``), started only
                      when a test asks for it; ``queued_cluster.queues`` are those controllers.

Contract (what backend tests code against)
------------------------------------------
``cluster.external``                   True when PADDLE_NBEXT_TEST_KUBECONFIG names another cluster.
``cluster.admin_kubeconfig()``         path of a kubeconfig with full rights.
``cluster.new_namespace(labels=None)`` a fresh namespace (deleted at teardown of the fixture's scope).
``cluster.kubeconfig_for(ns, sa, role)`` creates ServiceAccount ``sa`` in ``ns``; if ``role`` (a Role
                                       manifest dict, name defaults to ``sa``) is given, the Role and a
                                       RoleBinding of ``sa`` to it; mints a token with TokenRequest and
                                       returns a kubeconfig path for that identity (context namespace ``ns``).
``cluster.home_claim(ns, claim)``      a ReadWriteMany PersistentVolumeClaim bound (by the PV controller) to
                                       a static ceph-csi PersistentVolume, as a CephFS home is provisioned.
``cluster.kubeconfig_with_token(token, ns)`` a kubeconfig for a token minted elsewhere.
``cluster.api_client(kubeconfig=None)`` a ``kubernetes.client.ApiClient`` (admin when None); closed at teardown.
``cluster.await_job_pods(ns)``         waits until kube-controller-manager has made the pods every
                                       unfinished Indexed Job of ``ns`` wants, and the scheduler has
                                       bound them (or marked them unschedulable).
``cluster.set_pod_status(ns, pod, phase, *, exit_code, reason, message, waiting_reason, restart_count, log)``
                                       reports ``pod``'s status as its kubelet would (the pod must be bound);
                                       ``log`` becomes what ``pods/log`` returns (a restart_count increase
                                       keeps the old log as ``previous``).
``cluster.report_pod_event(ns, pod, reason, message)`` an Event about the pod as its kubelet records one.
``cluster.evict(ns, pod)``             the Eviction API: ``DisruptionTarget`` condition, graceful deletion.
``cluster.api_down()``                 context manager: the kube-apiserver process stopped inside, started
                                       again on the same port after.
``cluster.expire_watch_history()``     etcd compacted to its current revision and the API server
                                       restarted: every open watch ends, and resuming one from an older
                                       resourceVersion gets 410 Gone.
"""

from __future__ import annotations

import contextlib
import copy
import datetime
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import kubernetes
import pytest
import yaml
from kubernetes.client.exceptions import ApiException
from support.ceph.site import CephSite
from support.controlplane import ControlPlane, ControlPlaneError
from support.controlplane.kubelet import cri_log, logs_object, pod_status
from support.controlplane.queueing import QueueControllers
from support.hub_site import HUB_ROLE, OTHER_PORTS, HubSite, grant_user_namespaces
from support.realnode_notebook import apply_shipped_rbac
from support.realnode_site import RealNodeSite
from support.volumes import create_bound_claim
from support.waiting import eventually

from cluster.k8s_objects import meta, name_of, present

KUBECONFIG_ENV = "PADDLE_NBEXT_TEST_KUBECONFIG"
WAIT_SECONDS = 60.0
INDEX_KEY = "batch.kubernetes.io/job-completion-index"
#: The hub's users, each with a home claim: alice and bob for the API tests, carol for the browser's day.
HUB_USERS = ("alice", "bob", "carol")


def _write_kubeconfig(
    path: Path, cluster: dict[str, Any], token: str | None, namespace: str | None, user: dict[str, Any] | None = None
) -> str:
    context: dict[str, Any] = {"cluster": "cluster", "user": "user"}
    if namespace:
        context["namespace"] = namespace
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": "ctx",
        "clusters": [{"name": "cluster", "cluster": cluster}],
        "users": [{"name": "user", "user": user if user is not None else {"token": token}}],
        "contexts": [{"name": "ctx", "context": context}],
    }
    path.write_text(yaml.safe_dump(doc))
    return str(path)


class ClusterSubstrate:
    """Session-wide: our control plane (started here) or the other cluster named by the environment."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        other = os.environ.get(KUBECONFIG_ENV)
        self.external = bool(other)
        self.plane: ControlPlane | None = None
        if other:
            if not Path(other).is_file():
                raise pytest.UsageError(
                    f"{KUBECONFIG_ENV}={other}: no such kubeconfig file; unset it to use the "
                    "suite's own control plane or point it at a readable kubeconfig"
                )
            self.admin_path = other
        else:
            try:
                self.plane = ControlPlane(workdir / "controlplane").start()
            except ControlPlaneError as error:
                raise RuntimeError(f"no control plane for the cluster suite: {error}") from error
            self.admin_path = str(self.plane.admin_kubeconfig)
        doc = yaml.safe_load(Path(self.admin_path).read_text())
        current = doc.get("current-context")
        context = next(c["context"] for c in doc["contexts"] if c["name"] == current)
        self.cluster_entry = copy.deepcopy(next(c["cluster"] for c in doc["clusters"] if c["name"] == context["cluster"]))

    def close(self) -> None:
        if self.plane is not None:
            self.plane.stop()


class Cluster:
    """One fixture scope's view of the substrate; see the module docstring for the contract."""

    def __init__(self, substrate: ClusterSubstrate) -> None:
        self._sub = substrate
        self.external = substrate.external
        self._namespaces: list[str] = []
        self._clients: list[kubernetes.client.ApiClient] = []
        self._admin: kubernetes.client.ApiClient | None = None
        self._counter = 0
        self._volumes: list[str] = []

    # --- configuration --------------------------------------------------------------------------
    @property
    def plane(self) -> ControlPlane:
        """Our own control plane (skips the calling test on another cluster, saying why)."""
        if self._sub.plane is None:
            pytest.skip(f"needs the suite's own control plane (unset {KUBECONFIG_ENV})")
        return self._sub.plane

    def admin_kubeconfig(self) -> str:
        return self._sub.admin_path

    def api_client(self, kubeconfig: str | None = None) -> kubernetes.client.ApiClient:
        client: kubernetes.client.ApiClient = kubernetes.config.new_client_from_config(config_file=kubeconfig or self._sub.admin_path)
        self._clients.append(client)
        return client

    def _core(self) -> kubernetes.client.CoreV1Api:
        if self._admin is None:
            self._admin = self.api_client()
        return kubernetes.client.CoreV1Api(self._admin)

    def new_namespace(self, labels: dict[str, str] | None = None) -> str:
        ns = self._core().create_namespace(
            kubernetes.client.V1Namespace.model_validate(
                {"metadata": {"generateName": "pnb-test-", "labels": {"paddle-nbext/test": "true", **(labels or {})}}}
            )
        )
        name: str = name_of(ns)
        self._namespaces.append(name)
        return name

    def kubeconfig_for(self, namespace: str, service_account: str, role: dict[str, Any] | None = None) -> str:
        core = self._core()
        with contextlib.suppress(ApiException):
            core.create_namespaced_service_account(
                namespace, kubernetes.client.V1ServiceAccount.model_validate({"metadata": {"name": service_account}})
            )
        if role is not None:
            rbac = kubernetes.client.RbacAuthorizationV1Api(self._admin)
            manifest = copy.deepcopy(role)
            manifest.setdefault("metadata", {}).setdefault("name", service_account)
            manifest["metadata"]["namespace"] = namespace
            manifest.setdefault("apiVersion", "rbac.authorization.k8s.io/v1")
            manifest.setdefault("kind", "Role")
            rbac.create_namespaced_role(namespace, kubernetes.client.V1Role.model_validate(manifest))
            rbac.create_namespaced_role_binding(
                namespace,
                kubernetes.client.V1RoleBinding.model_validate(
                    {
                        "metadata": {"name": manifest["metadata"]["name"]},
                        "subjects": [{"kind": "ServiceAccount", "name": service_account, "namespace": namespace}],
                        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": manifest["metadata"]["name"]},
                    }
                ),
            )
            self._await_rbac(namespace, service_account, manifest)
        status = core.create_namespaced_service_account_token(
            service_account, namespace, kubernetes.client.AuthenticationV1TokenRequest.model_validate({"spec": {"expirationSeconds": 3600}})
        ).status
        token = present(present(status, "status").token, "token")
        return self.kubeconfig_with_token(token, namespace)

    def _await_rbac(self, namespace: str, service_account: str, role: dict[str, Any]) -> None:
        """The API server authorizes from its own cache of Roles and RoleBindings, a moment behind
        their creation: a first call made at once can be refused (403), and the backend then
        takes an optional kind as unreadable for a while.  Wait until the new binding is in force
        (its Role's first rule allowed for the account)."""
        rule = next((r for r in role.get("rules") or [] if r.get("verbs") and r.get("resources")), None)
        if rule is None:
            return
        resource, _, subresource = rule["resources"][0].partition("/")
        attributes = {"namespace": namespace, "verb": rule["verbs"][0], "group": (rule.get("apiGroups") or [""])[0], "resource": resource}
        if subresource:
            attributes["subresource"] = subresource
        if rule.get("resourceNames"):
            attributes["name"] = rule["resourceNames"][0]
        review = {
            "spec": {
                "user": f"system:serviceaccount:{namespace}:{service_account}",
                "groups": ["system:serviceaccounts", f"system:serviceaccounts:{namespace}", "system:authenticated"],
                "resourceAttributes": attributes,
            }
        }
        authorization = kubernetes.client.AuthorizationV1Api(self._admin)

        def allowed() -> bool:
            return present(
                authorization.create_subject_access_review(kubernetes.client.V1SubjectAccessReview.model_validate(review)).status, "status"
            ).allowed

        eventually(
            allowed,
            f"the Role of {service_account} in {namespace} to be in force",
            seconds=30,
        )

    def kubeconfig_with_token(self, token: str, namespace: str) -> str:
        """A kubeconfig for this cluster that authenticates with ``token`` (context namespace ``namespace``)."""
        self._counter += 1
        path = self._sub.workdir / f"{namespace}-token-{self._counter}.kubeconfig"
        return _write_kubeconfig(path, self._sub.cluster_entry, token, namespace)

    def home_claim(self, namespace: str, claim: str) -> None:
        source = {"csi": {"driver": "cephfs.csi.ceph.com", "volumeHandle": f"home-{namespace}-{claim}"}}
        self._volumes.append(create_bound_claim(self._core(), namespace, claim, source))

    # --- the controllers' work ------------------------------------------------------------------
    def _unmade_jobset_children(self, namespace: str, jobs: list[kubernetes.client.V1Job]) -> list[str]:
        """Child Jobs an admitted (unsuspended, unfinished) JobSet should have running but that the
        JobSet controller has not made or resumed yet; [] where no JobSet API is served."""
        custom = kubernetes.client.CustomObjectsApi(self._core().api_client)
        try:
            jobsets = cast(dict[str, Any], custom.list_namespaced_custom_object("jobset.x-k8s.io", "v1alpha2", namespace, "jobsets"))[
                "items"
            ]
        except ApiException as error:
            if error.status == 404:
                return []
            raise
        live = {name_of(job) for job in jobs if not present(job.spec, "spec").suspend}
        unmade = []
        for jobset in jobsets:
            conditions = (jobset.get("status") or {}).get("conditions") or []
            if jobset["spec"].get("suspend") or any(c["type"] in ("Completed", "Failed") and c["status"] == "True" for c in conditions):
                continue
            for replicated in jobset["spec"]["replicatedJobs"]:
                for index in range(int(replicated.get("replicas", 1))):
                    child = f"{jobset['metadata']['name']}-{replicated['name']}-{index}"
                    if child not in live:
                        unmade.append(child)
        return unmade

    def await_job_pods(self, namespace: str) -> None:
        """Waits until kube-controller-manager has made (and kube-scheduler placed) the pods of
        every unfinished, unsuspended Indexed Job in `namespace`, and, for an admitted JobSet,
        until the JobSet controller has made and resumed its child Jobs first."""
        batch = kubernetes.client.BatchV1Api(self._core().api_client)
        deadline = time.monotonic() + WAIT_SECONDS
        while True:
            listed = batch.list_namespaced_job(namespace).items
            missing = self._unmade_jobset_children(namespace, listed)
            for job in listed:
                spec, status = present(job.spec, "spec"), present(job.status, "status")
                done = any(c.type in ("Complete", "Failed") and c.status == "True" for c in (status.conditions or []))
                if spec.completion_mode != "Indexed" or spec.suspend or done:
                    continue
                want = min(spec.parallelism or 0, (spec.completions or 0) - (status.succeeded or 0))
                pods = (
                    self._core().list_namespaced_pod(namespace, label_selector=f"batch.kubernetes.io/controller-uid={meta(job).uid}").items
                )
                placed = [
                    p
                    for p in pods
                    if present(p.status, "status").phase in ("Pending", "Running")
                    and not meta(p).deletion_timestamp
                    and INDEX_KEY in (meta(p).annotations or {})
                    and _placed(p)
                ]
                if len(placed) < want:
                    missing.append(name_of(job))
            if not missing:
                return
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"kube-controller-manager and kube-scheduler did not create and place the pods "
                    f"of {missing} within {WAIT_SECONDS:.0f}s (see the control plane's logs in "
                    f"{self._sub.workdir})"
                )
            time.sleep(0.1)

    # --- the kubelet's reports ------------------------------------------------------------------
    def set_pod_status(
        self,
        namespace: str,
        pod: str,
        phase: str,
        *,
        exit_code: int | None = None,
        reason: str | None = None,
        message: str | None = None,
        waiting_reason: str | None = None,
        restart_count: int = 0,
        log: str | None = None,
    ) -> None:
        core = self._core()
        deadline = time.monotonic() + WAIT_SECONDS
        while True:
            current = core.api_client.sanitize_for_serialization(core.read_namespaced_pod(pod, namespace))
            if not (current.get("spec") or {}).get("nodeName"):
                if time.monotonic() > deadline:
                    raise AssertionError(
                        f"pod {pod} was never bound to a node, so no kubelet reports its status: "
                        f"{(current.get('status') or {}).get('conditions')}"
                    )
                time.sleep(0.1)
                continue
            if log is not None:
                self._write_log(namespace, current, log, restart_count)
            current["status"] = pod_status(
                current,
                phase,
                exit_code=exit_code,
                reason=reason,
                message=message,
                waiting_reason=waiting_reason,
                restart_count=restart_count,
            )
            try:
                core.replace_namespaced_pod_status(pod, namespace, current)
                return
            except ApiException as error:
                if error.status != 409 or time.monotonic() > deadline:  # someone else wrote first: read again
                    raise

    def _write_log(self, namespace: str, pod: dict[str, Any], text: str, restart_count: int) -> None:
        plane = self._sub.plane
        if plane is None:
            pytest.skip(f"container logs are served by the suite's own KWOK (unset {KUBECONFIG_ENV})")
        name = pod["metadata"]["name"]
        folder = plane.kwok_logs_dir() / namespace
        folder.mkdir(parents=True, exist_ok=True)
        current = folder / f"{name}-{restart_count}.log"
        previous = folder / f"{name}-{restart_count - 1}.log" if restart_count > 0 else None
        current.write_text(cri_log(text))
        custom = kubernetes.client.CustomObjectsApi(self._core().api_client)
        body = logs_object(namespace, name, current, previous if previous and previous.exists() else None)
        try:
            custom.create_namespaced_custom_object("kwok.x-k8s.io", "v1alpha1", namespace, "logs", body)
        except ApiException as error:
            if error.status != 409:
                raise
            existing = cast(dict[str, Any], custom.get_namespaced_custom_object("kwok.x-k8s.io", "v1alpha1", namespace, "logs", name))
            body["metadata"]["resourceVersion"] = existing["metadata"]["resourceVersion"]
            custom.replace_namespaced_custom_object("kwok.x-k8s.io", "v1alpha1", namespace, "logs", name, body)
        # KWOK reads Logs objects through its own watch: wait until pods/log answers from the file.
        deadline = time.monotonic() + WAIT_SECONDS
        expected = text.splitlines()[-1] if text.strip() else ""
        while True:
            try:
                served = self._core().read_namespaced_pod_log(name, namespace, tail_lines=1)
                if expected in served:
                    return
            except ApiException:
                pass
            if time.monotonic() > deadline:
                raise AssertionError(f"KWOK did not serve the log of {name} within {WAIT_SECONDS:.0f}s")
            time.sleep(0.1)

    def report_pod_event(self, namespace: str, pod: str, reason: str, message: str) -> None:
        """An Event about ``pod`` as its kubelet records one (e.g. FailedMount)."""
        core = self._core()
        obj = core.read_namespaced_pod(pod, namespace)
        core.create_namespaced_event(
            namespace,
            kubernetes.client.CoreV1Event.model_validate(
                {
                    "metadata": {"generateName": f"{pod}.", "namespace": namespace},
                    "involvedObject": {"kind": "Pod", "apiVersion": "v1", "name": pod, "namespace": namespace, "uid": meta(obj).uid},
                    "reason": reason,
                    "message": message,
                    "type": "Warning",
                    "count": 1,
                    "source": {"component": "kubelet", "host": present(obj.spec, "spec").node_name or ""},
                    "firstTimestamp": datetime.datetime.now(datetime.timezone.utc).isoformat(),
                    "lastTimestamp": datetime.datetime.now(datetime.timezone.utc).isoformat(),
                }
            ),
        )

    def evict(self, namespace: str, pod: str) -> None:
        self._core().create_namespaced_pod_eviction(
            pod,
            namespace,
            kubernetes.client.V1Eviction.model_validate(
                {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": pod, "namespace": namespace}}
            ),
        )

    # --- faults -----------------------------------------------------------------------------------
    def api_down(self) -> contextlib.AbstractContextManager[None]:
        return self.plane.apiserver_down()

    def expire_watch_history(self) -> None:
        plane = self.plane
        plane.compact_etcd()
        with plane.apiserver_down():
            pass

    # --- teardown -------------------------------------------------------------------------------
    def cleanup(self) -> None:
        for namespace in self._namespaces:
            # The API server answers with the Terminating Namespace, which the typed client may fail
            # to parse as a Status; the deletion has happened either way.
            with contextlib.suppress(ApiException, ValueError):
                self._core().delete_namespace(namespace)
        self._namespaces.clear()
        for volume in self._volumes:
            with contextlib.suppress(ApiException):
                self._core().delete_persistent_volume(volume)
        self._volumes.clear()
        for client in self._clients:
            client.close()
        self._clients.clear()
        self._admin = None


class QueuedCluster(Cluster):
    """The ``queued_cluster`` fixture: a :class:`Cluster` whose ``queues`` are the JobSet and Kueue controllers."""

    queues: QueueControllers


class RealCluster(Cluster):
    """The ``real_cluster`` fixture: a :class:`Cluster` whose ``node`` is the real node's site."""

    node: RealNodeSite


class QueuedSubstrate(ClusterSubstrate):
    """Our control plane with JobSet and Kueue started beside it (never another cluster's:
    there the suite cannot start controllers, so the queued tests skip, saying why)."""

    def __init__(self, workdir: Path) -> None:
        if os.environ.get(KUBECONFIG_ENV):
            pytest.skip(f"queued tests start JobSet and Kueue beside the suite's own control plane (unset {KUBECONFIG_ENV})")
        super().__init__(workdir)
        assert self.plane is not None
        try:
            self.queues = QueueControllers(self.plane).start()
        except ControlPlaneError as error:
            self.plane.stop()
            raise RuntimeError(f"no JobSet and Kueue controllers for the queued tests: {error}") from error

    def close(self) -> None:
        self.queues.stop()
        super().close()


class RealNodeSubstrate(ClusterSubstrate):
    """Our control plane with a real node joined to it, or another cluster with real nodes
    (PADDLE_NBEXT_TEST_KUBECONFIG with PADDLE_NBEXT_TEST_IMAGE and the node settings, see
    ``RealNodeSite.from_environment``)."""

    def __init__(self, workdir: Path) -> None:
        super().__init__(workdir)
        try:
            self.site = RealNodeSite.start(self.plane, workdir)
        except ControlPlaneError as error:
            if self.plane is None:  # another cluster, not set up for these tests: they are opt-in there
                pytest.skip(str(error))
            self.plane.stop()
            raise RuntimeError(f"no real node for the real-node tests: {error}") from error

    def close(self) -> None:
        try:
            self.site.stop()
        finally:
            super().close()


def _placed(pod: kubernetes.client.V1Pod) -> bool:
    """Bound to a node, or judged unschedulable by the scheduler (its PodScheduled=False)."""
    if present(pod.spec, "spec").node_name:
        return True
    return any(c.type == "PodScheduled" and c.status == "False" for c in present(pod.status, "status").conditions or [])


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


@pytest.fixture(scope="session")
def queued_substrate(tmp_path_factory: pytest.TempPathFactory) -> Iterator[QueuedSubstrate]:
    substrate = QueuedSubstrate(tmp_path_factory.mktemp("queued-cluster"))
    yield substrate
    substrate.close()


@pytest.fixture(scope="module")
def queued_cluster(queued_substrate: QueuedSubstrate) -> Iterator[QueuedCluster]:
    view = QueuedCluster(queued_substrate)
    view.queues = queued_substrate.queues
    yield view
    view.cleanup()


@pytest.fixture(scope="session")
def real_substrate(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealNodeSubstrate]:
    substrate = RealNodeSubstrate(tmp_path_factory.mktemp("real-cluster"))
    yield substrate
    substrate.close()


@pytest.fixture(scope="module")
def real_cluster(real_substrate: RealNodeSubstrate) -> Iterator[RealCluster]:
    view = RealCluster(real_substrate)
    view.node = real_substrate.site
    yield view
    view.cleanup()


@pytest.fixture(scope="session")
def hub_site(real_substrate: RealNodeSubstrate, tmp_path_factory: pytest.TempPathFactory) -> Iterator[HubSite]:
    """One JupyterHub for the session, shared by every module that runs users through it (the
    API tests and the browser's day): the notebook image, the hub and its proxy start once."""
    view = Cluster(real_substrate)
    site = real_substrate.site
    namespace = view.new_namespace()
    admin = view.api_client()
    apply_shipped_rbac(admin, namespace)
    hub_kubeconfig = view.kubeconfig_for(namespace, "jupyterhub", HUB_ROLE)
    hub = HubSite(site, admin, namespace, tmp_path_factory.mktemp("jupyterhub"))
    try:
        hub.prepare(hub_kubeconfig, list(HUB_USERS))
        hub.start()
        yield hub
    finally:
        hub.stop()
        site.release_volumes(admin)
        view.cleanup()


@pytest.fixture(scope="module")
def hub(hub_site: HubSite) -> Iterator[HubSite]:
    """The session's hub for one module; the notebook servers its tests started stop after it."""
    yield hub_site
    hub_site.stop_servers()


@pytest.fixture(scope="module")
def hub_user_namespaces(real_substrate: RealNodeSubstrate, tmp_path_factory: pytest.TempPathFactory) -> Iterator[HubSite]:
    """The recipe with PADDLE_NBEXT_HUB_USER_NAMESPACES=1: the hub holds the shipped ClusterRole
    (deploy/rbac/hub-user-namespaces.yaml) and provisions each user's namespace itself."""
    view = Cluster(real_substrate)
    namespace = view.new_namespace()
    admin = view.api_client()
    hub_kubeconfig = view.kubeconfig_for(namespace, "jupyterhub")
    revoke = grant_user_namespaces(admin, namespace, "jupyterhub")
    hub = HubSite(
        real_substrate.site, admin, namespace, tmp_path_factory.mktemp("jupyterhub-user-ns"), user_namespaces=True, ports=OTHER_PORTS
    )
    try:
        hub.prepare(hub_kubeconfig, ["alice", "bob"])
        hub.start()
        yield hub
    finally:
        hub.stop()
        hub.remove_user_namespaces()
        revoke()
        view.cleanup()


@pytest.fixture(scope="session")
def ceph_site(real_substrate: RealNodeSubstrate) -> Iterator[CephSite]:
    """A real Ceph beside the real node, with ceph-csi's cluster objects applied and the node's
    CephFS CSI plugin configured (tests/support/ceph/site.py); started once, for the CephFS tests."""
    plane, nodes = real_substrate.plane, real_substrate.site.nodes
    if plane is None or not nodes:
        pytest.skip("the CephFS tests start a Ceph beside the suite's own real nodes (unset PADDLE_NBEXT_TEST_KUBECONFIG)")
    try:
        site = CephSite(plane, nodes, real_substrate.admin_path).start()
    except ControlPlaneError as error:
        raise RuntimeError(f"no Ceph for the CephFS tests: {error}") from error
    yield site
    site.stop()
