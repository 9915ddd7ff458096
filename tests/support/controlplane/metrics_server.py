"""metrics-server beside the real nodes: the resource metrics API (``metrics.k8s.io``) that
``kubectl top`` and the kubernetes backend's ``GET /jobs/{name}/usage`` read.

Built from the Go module proxy at the pinned release (``build.METRICS_SERVER_VERSION``) and run
as a local process, the way the queueing controllers run (``queueing.py``): it listens on
127.0.0.1 only with a serving certificate of the test CA for ``metrics-server.kube-system.svc``
(the name the aggregator checks against the APIService's ``caBundle``), and the API server's
aggregation layer reaches it through an ExternalName Service naming 127.0.0.1, authenticating as
the front proxy (``cluster.py``'s requestheader flags).  It scrapes every real node's kubelet at
its InternalIP on the bridge (``/metrics/resource``, the kubelet's cAdvisor figures for each
pod and container), verifying the kubelet's serving certificate against the test CA; the
kubelet authorises its client identity through the API server (webhook mode), as on any cluster.

The resolution is metrics-server's shortest useful one (10 s): the usage a test reads is never
older than that, and two kubelets scraped every 10 s cost nothing measurable.
"""

from __future__ import annotations

import base64
import time
from typing import Any

from . import pki
from .build import find_node_binaries
from .cluster import START_TIMEOUT, ControlPlane, free_port
from .errors import ControlPlaneError
from .kubeconfigs import write_client_kubeconfig
from .processes import Process

NAMESPACE = "kube-system"
SERVICE = "metrics-server"  # upstream's Service name (its manifests' components.yaml)
GROUP = "metrics.k8s.io"
VERSION = "v1beta1"
RESOLUTION = "10s"


class MetricsServer:
    """metrics-server for ``plane``; ``start()`` returns once the aggregator reports its
    APIService Available and it answers with a figure for every node in ``nodes``."""

    def __init__(self, plane: ControlPlane, nodes: set[str]) -> None:
        found = find_node_binaries()
        if found is None or "metrics-server" not in found:
            raise ControlPlaneError(
                "metrics-server is not built for the pinned version; run `bash scripts/controlplane.sh build` (builds once into the cache)"
            )
        self.plane = plane
        self.binary = found["metrics-server"]
        self.nodes = nodes
        self.directory = plane.state_dir / "metrics-server"
        self.port = free_port()
        self.process: Process | None = None
        self.startup_seconds: float | None = None

    def start(self) -> MetricsServer:
        started = time.monotonic()
        self.directory.mkdir(parents=True, exist_ok=True)
        try:
            self._run()
            self._register()
            self._await_node_figures()
        except BaseException:
            self.stop()
            raise
        self.startup_seconds = time.monotonic() - started
        return self

    def stop(self) -> None:
        if self.process is not None:
            self.process.stop()
            self.process = None

    def _run(self) -> None:
        cert, key = pki.issue_later(
            self.plane.pki, "metrics-server-serving", common=SERVICE, server=True, names=(f"{SERVICE}.{NAMESPACE}.svc",)
        )
        # One identity for everything it asks: the API server (nodes, pods, the front proxy's CA
        # in kube-system's extension-apiserver-authentication), the delegated authentication and
        # authorisation of the requests the aggregator forwards, and the kubelets.
        client_cert, client_key = pki.issue_later(
            self.plane.pki, "metrics-server", common="paddle-nbext-metrics-server", organizations=("system:masters",)
        )
        kubeconfig = write_client_kubeconfig(
            self.directory / "metrics-server.kubeconfig",
            name="metrics-server",
            server=self.plane.server,
            ca_cert=self.plane.pki.ca_cert,
            cert=client_cert,
            key=client_key,
        )
        argv = [
            str(self.binary),
            "--bind-address=127.0.0.1",
            f"--secure-port={self.port}",
            f"--tls-cert-file={cert}",
            f"--tls-private-key-file={key}",
            f"--kubeconfig={kubeconfig}",
            f"--authentication-kubeconfig={kubeconfig}",
            f"--authorization-kubeconfig={kubeconfig}",
            f"--kubelet-certificate-authority={self.plane.pki.ca_cert}",
            f"--kubelet-client-certificate={client_cert}",
            f"--kubelet-client-key={client_key}",
            "--kubelet-preferred-address-types=InternalIP",
            f"--metric-resolution={RESOLUTION}",
            # it must be shorter than the resolution; a kubelet on this bridge answers in milliseconds
            "--kubelet-request-timeout=5s",
        ]
        self.process = Process("metrics-server", argv, self.plane.logs_dir() / "metrics-server.log")
        self.process.start()

    def _register(self) -> None:
        service = {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": SERVICE, "namespace": NAMESPACE},
            "spec": {"type": "ExternalName", "externalName": "127.0.0.1"},
        }
        self.plane.api("POST", f"/api/v1/namespaces/{NAMESPACE}/services", service)
        api_service = {
            "apiVersion": "apiregistration.k8s.io/v1",
            "kind": "APIService",
            "metadata": {"name": f"{VERSION}.{GROUP}"},
            "spec": {
                "group": GROUP,
                "version": VERSION,
                "groupPriorityMinimum": 100,
                "versionPriority": 100,
                "caBundle": base64.b64encode(self.plane.pki.ca_cert.read_bytes()).decode(),
                "service": {"name": SERVICE, "namespace": NAMESPACE, "port": self.port},
            },
        }
        self.plane.api("POST", "/apis/apiregistration.k8s.io/v1/apiservices", api_service)

    def _available(self) -> bool:
        found = self.plane.api("GET", f"/apis/apiregistration.k8s.io/v1/apiservices/{VERSION}.{GROUP}")
        conditions = (found.get("status") or {}).get("conditions") or []
        return any(c["type"] == "Available" and c["status"] == "True" for c in conditions)

    def node_figures(self) -> dict[str, dict[str, Any]]:
        """`kubectl top nodes`: each node's figures metrics-server holds now, by node name."""
        found = self.plane.api("GET", f"/apis/{GROUP}/{VERSION}/nodes")
        return {item["metadata"]["name"]: item.get("usage") or {} for item in found.get("items") or []}

    def _await_node_figures(self) -> None:
        assert self.process is not None
        self.process.wait_ready(self._available, START_TIMEOUT, "reached by the aggregator (APIService Available)")
        self.process.wait_ready(
            lambda: self.nodes <= set(self.node_figures()), START_TIMEOUT + 30, f"holding figures for the nodes {sorted(self.nodes)}"
        )


__all__ = ["GROUP", "VERSION", "MetricsServer"]
