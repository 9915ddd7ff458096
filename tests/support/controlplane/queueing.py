"""The queueing controllers beside a running control plane: JobSet (gang workloads made of
several Jobs) and Kueue (queues, quotas, all-or-nothing admission), built from source at pinned
versions (``build.QUEUE_COMPONENTS``) and run as local processes on 127.0.0.1.

Both controllers serve admission webhooks that the API server must call.  There is no pod
network here, so nothing is reached through a Service: each controller serves its webhooks on a
loopback port with a certificate of the test CA, its own certificate management is off, and the
upstream webhook registrations (copied beside the binaries at build time) are registered with
``clientConfig.url`` pointing at that port and the CA as ``caBundle``.  Only the webhooks of the
kinds this suite uses (Jobs, JobSets, Kueue's own objects) are registered: Kueue's integrations
for other frameworks are off, and a registered webhook nobody serves would refuse every object.

Kueue's visibility API (pending workloads and their positions) is an aggregated API server: the
API server's aggregator proxies ``/apis/visibility.kueue.x-k8s.io/...`` to it, authenticating
with the front proxy's client certificate (``cluster.py``'s requestheader flags).  The
aggregator finds it through the APIService's Service; with no pod network that Service is of
type ExternalName naming 127.0.0.1 (the aggregator then dials ``<externalName>:<APIService
port>``), and the visibility server listens on 127.0.0.1 only, with a certificate of the test CA
for ``visibility-server.kueue-system.svc``, the name the aggregator checks against the
APIService's ``caBundle``.

Started only for the tests that ask for a queued cluster (``queued_cluster`` fixture), on a
control plane of their own, so the rest of the suite never runs behind these webhooks.
"""

from __future__ import annotations

import base64
import contextlib
import copy
import socket
import ssl
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from . import pki
from .build import ASSETS, KUEUE_METRICS_CERTS_ENV, KUEUE_VISIBILITY_CERTS_ENV, QUEUE_COMPONENTS, binary_dir, find_queue_binaries
from .cluster import START_TIMEOUT, ControlPlane, free_port
from .errors import ControlPlaneError
from .kubeconfigs import write_client_kubeconfig
from .processes import Process

KUEUE_NAMESPACE = "kueue-system"
#: API groups whose webhooks are registered; Kueue's integrations are exactly the matching kinds.
SERVED_GROUPS = frozenset({"batch", "jobset.x-k8s.io", "kueue.x-k8s.io"})
KUEUE_INTEGRATIONS = ("batch/job", "jobset.x-k8s.io/jobset")
VISIBILITY_GROUP = "visibility.kueue.x-k8s.io"
VISIBILITY_VERSIONS = ("v1beta1", "v1beta2")  # what Kueue v0.17 serves
VISIBILITY_SERVICE = "visibility-server"  # upstream's name (config/components/visibility)


def _assets(module: str) -> Path:
    component = next(c for c in QUEUE_COMPONENTS if c.module == module)
    return binary_dir(component) / ASSETS


def _documents(path: Path) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc]


def webhook_configurations(manifest: Path, port: int, ca_bundle: str, prefix: str) -> list[dict[str, Any]]:
    """The upstream Mutating/ValidatingWebhookConfigurations of ``manifest``, renamed with
    ``prefix``, reduced to the webhooks of ``SERVED_GROUPS`` and pointed at 127.0.0.1:``port``."""
    configurations = []
    for doc in _documents(manifest):
        doc = copy.deepcopy(doc)
        doc["metadata"] = {"name": f"{prefix}-{doc['metadata']['name']}"}
        kept = []
        for hook in doc.get("webhooks") or []:
            groups = {group for rule in hook.get("rules") or [] for group in rule.get("apiGroups") or []}
            if not groups or not groups <= SERVED_GROUPS | {""}:
                continue
            if "" in groups and prefix == "kueue":
                continue  # Kueue's pod integration is off: nobody serves its pod webhooks
            path = (hook["clientConfig"].get("service") or {}).get("path", "/")
            hook["clientConfig"] = {"url": f"https://127.0.0.1:{port}{path}", "caBundle": ca_bundle}
            kept.append(hook)
        if kept:
            doc["webhooks"] = kept
            configurations.append(doc)
    return configurations


def _tls_answers(port: int, ca_file: Path) -> bool:
    context = ssl.create_default_context(cafile=str(ca_file))
    with socket.create_connection(("127.0.0.1", port), timeout=2) as sock, context.wrap_socket(sock, server_hostname="127.0.0.1"):
        return True


def _healthy(port: int) -> bool:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as response:
        return bool(response.status == 200)


class QueueControllers:
    """JobSet's and Kueue's controller managers for ``plane``; ``start()`` returns once their
    CRDs are Established, their webhooks registered and answering, and Kueue admits objects."""

    def __init__(self, plane: ControlPlane) -> None:
        found = find_queue_binaries()
        if found is None:
            raise ControlPlaneError(
                "no queueing controllers: JobSet and Kueue are not built for the pinned versions; run "
                "`bash scripts/controlplane.sh build` (builds once into the cache)"
            )
        self.plane = plane
        self.binaries = found
        self.directory = plane.state_dir / "queueing"
        self.ports = {
            name: free_port() for name in ("jobset-webhook", "jobset-health", "kueue-webhook", "kueue-health", "kueue-visibility")
        }
        self.processes: dict[str, Process] = {}
        self.startup_seconds: float | None = None

    def start(self) -> QueueControllers:
        started = time.monotonic()
        self.directory.mkdir(parents=True, exist_ok=True)
        try:
            self._install_crds()
            self.plane.api("POST", "/api/v1/namespaces", {"metadata": {"name": KUEUE_NAMESPACE}})
            serving = self._serving_pair()
            self._start_jobset(serving)
            self._start_kueue(serving, self._serving_pair("kueue-visibility", f"{VISIBILITY_SERVICE}.{KUEUE_NAMESPACE}.svc"))
            self._register_webhooks()
            self._await_admission()
            self._register_visibility()
        except BaseException:
            self.stop()
            raise
        self.startup_seconds = time.monotonic() - started
        return self

    def stop(self) -> None:
        for name in reversed(list(self.processes)):
            self.processes[name].stop()
        self.processes.clear()

    # --- pieces ------------------------------------------------------------------------------------
    def _install_crds(self) -> None:
        names = []
        for module in ("jobset", "kueue"):
            for path in sorted((_assets(module) / "bases").glob("*.yaml")):
                for crd in _documents(path):
                    self.plane.api("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)
                    names.append(crd["metadata"]["name"])
        deadline = time.monotonic() + START_TIMEOUT
        for name in names:
            while True:
                crd = self.plane.api("GET", f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}")
                conditions = (crd.get("status") or {}).get("conditions") or []
                if any(c["type"] == "Established" and c["status"] == "True" for c in conditions):
                    break
                if time.monotonic() > deadline:
                    raise ControlPlaneError(f"the CustomResourceDefinition {name} was not Established within {START_TIMEOUT:.0f} s")
                time.sleep(0.1)

    def _serving_pair(self, name: str = "queueing-webhook", *names: str) -> Path:
        """A directory with tls.crt/tls.key for 127.0.0.1 (and ``names``), as controller-runtime's
        webhook server, Kueue's metrics server and its visibility server read them."""
        cert, key = pki.issue_later(self.plane.pki, name, common=name, server=True, names=names)
        folder = self.directory / ("certs" if name == "queueing-webhook" else f"certs-{name}")
        folder.mkdir(exist_ok=True)
        (folder / "tls.crt").write_bytes(cert.read_bytes())
        (folder / "tls.key").write_bytes(key.read_bytes())
        (folder / "tls.key").chmod(0o600)
        return folder

    def _kubeconfig(self, name: str) -> Path:
        cert, key = pki.issue_later(self.plane.pki, name, common=f"paddle-nbext-{name}", organizations=("system:masters",))
        return write_client_kubeconfig(
            self.directory / f"{name}.kubeconfig", name=name, server=self.plane.server, ca_cert=self.plane.pki.ca_cert, cert=cert, key=key
        )

    def _run(self, name: str, argv: list[str], env: dict[str, str] | None = None) -> Process:
        process = Process(name, argv, self.plane.logs_dir() / f"{name}.log", env)
        process.start()
        self.processes[name] = process
        return process

    def _start_jobset(self, certs: Path) -> None:
        config = {
            "apiVersion": "config.jobset.x-k8s.io/v1alpha1",
            "kind": "Configuration",
            "leaderElection": {"leaderElect": False},
            "internalCertManagement": {"enable": False},
            "webhook": {"port": self.ports["jobset-webhook"], "host": "127.0.0.1", "certDir": str(certs)},
            "metrics": {"bindAddress": "0"},
            "health": {"healthProbeBindAddress": f"127.0.0.1:{self.ports['jobset-health']}"},
        }
        path = self.directory / "jobset.yaml"
        path.write_text(yaml.safe_dump(config))
        process = self._run(
            "jobset-controller",
            [str(self.binaries["jobset-controller"]), f"--config={path}", f"--kubeconfig={self._kubeconfig('jobset-controller')}"],
        )
        process.wait_ready(lambda: _tls_answers(self.ports["jobset-webhook"], self.plane.pki.ca_cert), START_TIMEOUT, "serving webhooks")

    def _start_kueue(self, certs: Path, visibility_certs: Path) -> None:
        config = {
            "apiVersion": "config.kueue.x-k8s.io/v1beta2",
            "kind": "Configuration",
            "namespace": KUEUE_NAMESPACE,
            "leaderElection": {"leaderElect": False},
            "internalCertManagement": {"enable": False},
            "webhook": {"port": self.ports["kueue-webhook"], "host": "127.0.0.1", "certDir": str(certs)},
            "metrics": {"bindAddress": "0"},
            "health": {"healthProbeBindAddress": f"127.0.0.1:{self.ports['kueue-health']}"},
            "integrations": {"frameworks": list(KUEUE_INTEGRATIONS)},
            "visibilityServer": {"bindAddress": "127.0.0.1", "bindPort": self.ports["kueue-visibility"]},
        }
        path = self.directory / "kueue.yaml"
        path.write_text(yaml.safe_dump(config))
        process = self._run(
            "kueue",
            [
                str(self.binaries["kueue"]),
                f"--config={path}",
                f"--kubeconfig={self._kubeconfig('kueue')}",
                # The visibility server takes its port from this flag unless the configuration's
                # differs from its default (8082): the same port either way.
                f"--visibility-server-port={self.ports['kueue-visibility']}",
            ],
            env={KUEUE_METRICS_CERTS_ENV: str(certs), KUEUE_VISIBILITY_CERTS_ENV: str(visibility_certs)},
        )
        process.wait_ready(lambda: _tls_answers(self.ports["kueue-webhook"], self.plane.pki.ca_cert), START_TIMEOUT, "serving webhooks")

    def _register_webhooks(self) -> None:
        ca_bundle = base64.b64encode(self.plane.pki.ca_cert.read_bytes()).decode()
        for module, port in (("jobset", self.ports["jobset-webhook"]), ("kueue", self.ports["kueue-webhook"])):
            for configuration in webhook_configurations(_assets(module) / "manifests.yaml", port, ca_bundle, module):
                kind = configuration["kind"].lower() + "s"
                self.plane.api("POST", f"/apis/admissionregistration.k8s.io/v1/{kind}", configuration)

    def _await_admission(self) -> None:
        """Ready means: both controllers report ready, and Kueue's webhook admits a
        ResourceFlavor (created and deleted again)."""
        self.processes["jobset-controller"].wait_ready(lambda: _healthy(self.ports["jobset-health"]), START_TIMEOUT, "ready (/readyz)")
        kueue = self.processes["kueue"]
        kueue.wait_ready(lambda: _healthy(self.ports["kueue-health"]), START_TIMEOUT, "ready (/readyz)")
        flavor = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "paddle-nbext-probe"}}

        def admits() -> bool:
            self.plane.api("POST", "/apis/kueue.x-k8s.io/v1beta2/resourceflavors", flavor)
            self.plane.api("DELETE", "/apis/kueue.x-k8s.io/v1beta2/resourceflavors/paddle-nbext-probe")
            return True

        kueue.wait_ready(admits, START_TIMEOUT, "admitting objects through its webhooks")

    def _register_visibility(self) -> None:
        """Kueue's visibility API behind the aggregator: an ExternalName Service naming 127.0.0.1
        and an APIService per served version (verified TLS: the test CA as ``caBundle``); ready
        once the aggregator reports each Available (it has reached Kueue's discovery)."""
        self.processes["kueue"].wait_ready(
            lambda: _tls_answers(self.ports["kueue-visibility"], self.plane.pki.ca_cert), START_TIMEOUT, "serving the visibility API"
        )
        service = {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": VISIBILITY_SERVICE, "namespace": KUEUE_NAMESPACE},
            "spec": {"type": "ExternalName", "externalName": "127.0.0.1"},
        }
        self.plane.api("POST", f"/api/v1/namespaces/{KUEUE_NAMESPACE}/services", service)
        ca_bundle = base64.b64encode(self.plane.pki.ca_cert.read_bytes()).decode()
        names = []
        for version in VISIBILITY_VERSIONS:
            name = f"{version}.{VISIBILITY_GROUP}"
            api_service = {
                "apiVersion": "apiregistration.k8s.io/v1",
                "kind": "APIService",
                "metadata": {"name": name},
                "spec": {
                    "group": VISIBILITY_GROUP,
                    "version": version,
                    "groupPriorityMinimum": 100,
                    "versionPriority": 100 + VISIBILITY_VERSIONS.index(version),
                    "caBundle": ca_bundle,
                    "service": {"name": VISIBILITY_SERVICE, "namespace": KUEUE_NAMESPACE, "port": self.ports["kueue-visibility"]},
                },
            }
            self.plane.api("POST", "/apis/apiregistration.k8s.io/v1/apiservices", api_service)
            names.append(name)

        def available() -> bool:
            for name in names:
                found = self.plane.api("GET", f"/apis/apiregistration.k8s.io/v1/apiservices/{name}")
                conditions = (found.get("status") or {}).get("conditions") or []
                if not any(c["type"] == "Available" and c["status"] == "True" for c in conditions):
                    return False
            return True

        self.processes["kueue"].wait_ready(available, START_TIMEOUT, "reached by the aggregator (APIService Available)")


__all__ = ["KUEUE_NAMESPACE", "VISIBILITY_GROUP", "QueueControllers", "webhook_configurations"]


@contextlib.contextmanager
def queued_control_plane(workdir: Path) -> Iterator[tuple[ControlPlane, QueueControllers]]:
    """A control plane in `workdir` with JobSet and Kueue beside it, for the block (benchmarks
    run on one of their own); both are stopped after it, whatever happens."""
    plane = ControlPlane(workdir / "controlplane").start()
    try:
        queues = QueueControllers(plane).start()
        try:
            yield plane, queues
        finally:
            queues.stop()
    finally:
        plane.stop()
