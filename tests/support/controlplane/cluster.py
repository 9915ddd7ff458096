"""A real Kubernetes control plane on 127.0.0.1: etcd, kube-apiserver, kube-controller-manager,
kube-scheduler and KWOK, with fake nodes that the scheduler binds pods to.

It is configured the way a kubeadm cluster is where the backend can tell: TLS everywhere with
client certificates, ServiceAccount tokens signed by a key of ours and served through the
TokenRequest API, the aggregation layer (front proxy CA and client certificate), the Node and RBAC authorizers, the default admission plugins (ResourceQuota,
LimitRange, ServiceAccount and PodSecurity among them, NodeRestriction added), and the
controller-manager's default controllers each under its own ServiceAccount
(``--use-service-account-credentials``): Job, garbage collector, TTL-after-finished, namespace,
ServiceAccount and token, endpoint slices, node lifecycle and the rest.  What no kubelet can do
here KWOK does (``kwok.py``).

Faults are the real thing too: ``apiserver_down()`` stops the kube-apiserver process and starts
it again on the same port; ``compact_etcd()`` compacts etcd's history, so a watch resumed from
an older resourceVersion after an API server restart gets 410 Gone.
"""

from __future__ import annotations

import base64
import contextlib
import json
import shutil
import socket
import ssl
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml

from . import kwok, pki
from .build import BINARIES, find_binaries
from .errors import ControlPlaneError
from .kubeconfigs import write_client_kubeconfig
from .processes import Process, log_tail, pid_alive, stop_group

# The real node's own components (realnode.py): their watches are not what the audit log is for.
NODE_USERS = ("system:kube-proxy", "paddle-nbext-test:coredns")

START_TIMEOUT = 90.0
ISSUER = "https://kubernetes.default.svc.cluster.local"
SERVICE_RANGE = "10.96.0.0/16"

# Two CPU nodes and one GPU node: enough for anti-affinity and for GPU requests to be scheduled
# (or refused) on capacity the scheduler really accounts.
DEFAULT_NODES = (
    kwok.node("kwok-cpu-0", cpu="16", memory="64Gi"),
    kwok.node("kwok-cpu-1", cpu="16", memory="64Gi"),
    kwok.node("kwok-gpu-0", cpu="32", memory="128Gi", gpus=8),
)


#: Starts of the whole plane on fresh ports when a component finds its port taken.
PORT_RACE_ATTEMPTS = 3


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def port_open(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(("127.0.0.1", port)) == 0


@dataclass
class Ports:
    etcd: int = field(default_factory=free_port)
    etcd_peer: int = field(default_factory=free_port)
    apiserver: int = field(default_factory=free_port)
    controller_manager: int = field(default_factory=free_port)
    scheduler: int = field(default_factory=free_port)
    kwok: int = field(default_factory=free_port)


class ControlPlane:
    """Start with ``start()`` (or ``with``), stop with ``stop()``; everything lives in ``state_dir``."""

    def __init__(
        self, state_dir: Path, *, binaries: dict[str, Path] | None = None, nodes: tuple[dict[str, Any], ...] = DEFAULT_NODES
    ) -> None:
        self.state_dir = state_dir.resolve()
        found = binaries if binaries is not None else find_binaries()
        if found is None:
            raise ControlPlaneError(
                "no control plane: its binaries are not built for the pinned versions; run "
                "`bash scripts/controlplane.sh build` (builds once into the cache, see docs/development.md)"
            )
        missing = [name for name in BINARIES if name != "kubectl" and name not in found]
        if missing:
            raise ControlPlaneError(f"no control plane: missing binaries {missing}")
        self.binaries = found
        self.nodes = nodes
        self.ports = Ports()
        self.pki = pki.Pki(self.state_dir / "pki")
        self.processes: dict[str, Process] = {}
        self.startup_seconds: float | None = None
        self.node_state: dict[str, Any] | None = None  # a real node joined by `controlplane up --real-node`

    # --- addresses and credentials ----------------------------------------------------------------
    @property
    def server(self) -> str:
        return f"https://127.0.0.1:{self.ports.apiserver}"

    @property
    def admin_kubeconfig(self) -> Path:
        return self.state_dir / "admin.kubeconfig"

    @property
    def etcd_url(self) -> str:
        return f"http://127.0.0.1:{self.ports.etcd}"

    @property
    def audit_log(self) -> Path:
        """Every request by a user other than the control plane's own components, one JSON line
        each (Kubernetes' audit log at Metadata level): who asked for which verb on what."""
        return self.logs_dir() / "audit.log"

    def audit_events(self, user: str | None = None) -> list[dict[str, Any]]:
        """The audit log's events so far (``user``: only that user's, e.g. a ServiceAccount's
        ``system:serviceaccount:<ns>:<name>``)."""
        events = []
        with contextlib.suppress(FileNotFoundError), self.audit_log.open() as log:
            for line in log:
                with contextlib.suppress(ValueError):
                    event = json.loads(line)
                    if user is None or (event.get("user") or {}).get("username") == user:
                        events.append(event)
        return events

    def logs_dir(self) -> Path:
        return self.state_dir / "logs"

    def kwok_logs_dir(self) -> Path:
        """Where the suite writes container logs that KWOK serves through ``pods/log``."""
        return self.state_dir / "container-logs"

    def _kubeconfig(self, client: str) -> Path:
        cert, key = self.pki.client(client)
        return write_client_kubeconfig(
            self.state_dir / f"{client}.kubeconfig", name=client, server=self.server, ca_cert=self.pki.ca_cert, cert=cert, key=key
        )

    def _admin_ssl(self) -> ssl.SSLContext:
        context = ssl.create_default_context(cafile=str(self.pki.ca_cert))
        cert, key = self.pki.client("admin")
        context.load_cert_chain(str(cert), str(key))
        return context

    def api(self, method: str, path: str, body: Any = None, *, timeout: float = 10.0) -> Any:
        """One admin request to the API server (JSON in, JSON out); for bootstrapping and probes."""
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            self.server + path, data=data, method=method, headers={"Content-Type": "application/json", "Accept": "application/json"}
        )
        with urllib.request.urlopen(request, context=self._admin_ssl(), timeout=timeout) as response:
            text = response.read().decode()
        return json.loads(text) if text.startswith(("{", "[")) else text

    # --- lifecycle ------------------------------------------------------------------------------
    def start(self) -> ControlPlane:
        """Start every component.  Ports are picked free (`free_port`) and bound a moment later by
        the component: another program on a busy machine can take one in between ("address
        already in use"), and then the whole plane starts again on new ports."""
        started = time.monotonic()
        for attempt in range(1, PORT_RACE_ATTEMPTS + 1):
            self.state_dir.mkdir(parents=True, exist_ok=True)
            pki.create(self.pki.directory)
            try:
                self._start_etcd()
                self._start_apiserver()
                self._bootstrap()
                self._start_controllers()
                self._start_kwok()
                self._await_cluster()
                break
            except ControlPlaneError as error:
                self.stop()
                if "address already in use" not in str(error) or attempt == PORT_RACE_ATTEMPTS:
                    raise
                shutil.rmtree(self.state_dir / "etcd", ignore_errors=True)
                self.ports = Ports()
            except BaseException:
                self.stop()
                raise
        self.startup_seconds = time.monotonic() - started
        self._save_state()
        return self

    def __enter__(self) -> ControlPlane:  # noqa: PYI034 - Python 3.10 has no typing.Self
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        """Stop every process (newest first) and check that each port is free again."""
        for name in reversed(list(self.processes)):
            self.processes[name].stop()
        self.processes.clear()
        with contextlib.suppress(FileNotFoundError):
            (self.state_dir / "state.json").unlink()

    def _run(self, name: str, argv: list[str]) -> Process:
        process = Process(name, argv, self.logs_dir() / f"{name}.log")
        process.start()
        self.processes[name] = process
        return process

    # --- components -----------------------------------------------------------------------------
    def _start_etcd(self) -> None:
        peer = f"http://127.0.0.1:{self.ports.etcd_peer}"
        etcd = self._run(
            "etcd",
            [
                str(self.binaries["etcd"]),
                "--name=controlplane",
                f"--data-dir={self.state_dir / 'etcd'}",
                f"--listen-client-urls={self.etcd_url}",
                f"--advertise-client-urls={self.etcd_url}",
                f"--listen-peer-urls={peer}",
                f"--initial-advertise-peer-urls={peer}",
                f"--initial-cluster=controlplane={peer}",
                "--unsafe-no-fsync",
                "--log-level=warn",
            ],
        )

        def healthy() -> bool:
            with urllib.request.urlopen(self.etcd_url + "/health", timeout=2) as response:
                return bool(json.loads(response.read()).get("health") == "true")

        etcd.wait_ready(healthy, START_TIMEOUT, "healthy")

    def _audit_policy(self) -> Path:
        path = self.state_dir / "audit-policy.yaml"
        policy = {
            "apiVersion": "audit.k8s.io/v1",
            "kind": "Policy",
            "omitStages": ["RequestReceived"],
            "rules": [
                {"level": "None", "users": [*(pki.CLIENTS[c][0] for c in ("controller-manager", "scheduler", "kwok")), *NODE_USERS]},
                {"level": "None", "userGroups": ["system:serviceaccounts:kube-system", "system:nodes"]},
                {"level": "None", "nonResourceURLs": ["/healthz*", "/readyz*", "/livez*", "/version", "/metrics"]},
                {"level": "Metadata"},
            ],
        }
        path.write_text(yaml.safe_dump(policy))
        return path

    def _apiserver_argv(self) -> list[str]:
        kubelet_cert, kubelet_key = self.pki.client("kubelet-client")
        return [
            str(self.binaries["kube-apiserver"]),
            f"--etcd-servers={self.etcd_url}",
            "--bind-address=127.0.0.1",
            "--advertise-address=127.0.0.1",
            f"--secure-port={self.ports.apiserver}",
            f"--cert-dir={self.state_dir / 'apiserver'}",
            f"--tls-cert-file={self.pki.apiserver_cert}",
            f"--tls-private-key-file={self.pki.apiserver_key}",
            f"--client-ca-file={self.pki.ca_cert}",
            f"--service-account-issuer={ISSUER}",
            f"--service-account-key-file={self.pki.service_account_pub}",
            f"--service-account-signing-key-file={self.pki.service_account_key}",
            "--authorization-mode=Node,RBAC",
            # Added to the defaults, which already hold ResourceQuota, LimitRanger, ServiceAccount
            # and PodSecurity; listed so that a reader sees them.
            ("--enable-admission-plugins=NamespaceLifecycle,LimitRanger,ServiceAccount,ResourceQuota,PodSecurity,NodeRestriction"),
            f"--service-cluster-ip-range={SERVICE_RANGE}",
            f"--kubelet-client-certificate={kubelet_cert}",
            f"--kubelet-client-key={kubelet_key}",
            f"--kubelet-certificate-authority={self.pki.ca_cert}",
            "--kubelet-preferred-address-types=InternalIP",
            # The aggregation layer as kubeadm sets it up: the aggregator proxies to aggregated
            # API servers (Kueue's visibility API) with the front proxy's client certificate and
            # names the user in these headers, which only that CA's `front-proxy-client` may set.
            f"--requestheader-client-ca-file={self.pki.front_proxy_ca_cert}",
            f"--requestheader-allowed-names={pki.FRONT_PROXY_CLIENT}",
            "--requestheader-username-headers=X-Remote-User",
            "--requestheader-group-headers=X-Remote-Group",
            "--requestheader-extra-headers-prefix=X-Remote-Extra-",
            f"--proxy-client-cert-file={self.pki.front_proxy_client[0]}",
            f"--proxy-client-key-file={self.pki.front_proxy_client[1]}",
            # No endpoint for the `kubernetes` Service: the reconciler refuses a loopback address,
            # and nothing here runs in a pod that would use it.
            "--endpoint-reconciler-type=none",
            f"--audit-policy-file={self._audit_policy()}",
            f"--audit-log-path={self.audit_log}",
            "--audit-log-format=json",
            "--audit-log-maxsize=200",
            "--profiling=false",
            "--v=1",
        ]

    def _start_apiserver(self) -> None:
        apiserver = self._run("kube-apiserver", self._apiserver_argv())
        apiserver.wait_ready(lambda: self.api("GET", "/readyz", timeout=3) == "ok", START_TIMEOUT, "ready (/readyz)")

    def _bootstrap(self) -> None:
        """What must exist before the controllers start: KWOK's Logs resource and the nodes."""
        self.api("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", kwok.logs_crd())
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            crd = self.api("GET", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/logs.kwok.x-k8s.io")
            if any(c["type"] == "Established" and c["status"] == "True" for c in (crd.get("status") or {}).get("conditions") or []):
                break
            if time.monotonic() > deadline:
                raise ControlPlaneError(
                    f"the Logs CustomResourceDefinition was not Established; log: {self.processes['kube-apiserver'].log_path}"
                )
            time.sleep(0.1)
        for node in self.nodes:
            self.api("POST", "/api/v1/nodes", node)

    def _start_controllers(self) -> None:
        manager = self._run(
            "kube-controller-manager",
            [
                str(self.binaries["kube-controller-manager"]),
                f"--kubeconfig={self._kubeconfig('controller-manager')}",
                "--bind-address=127.0.0.1",
                f"--secure-port={self.ports.controller_manager}",
                f"--cert-dir={self.state_dir / 'controller-manager'}",
                "--leader-elect=false",
                "--use-service-account-credentials=true",
                f"--service-account-private-key-file={self.pki.service_account_key}",
                f"--root-ca-file={self.pki.ca_cert}",
                "--controllers=*",
                "--v=1",
            ],
        )
        scheduler = self._run(
            "kube-scheduler",
            [
                str(self.binaries["kube-scheduler"]),
                f"--kubeconfig={self._kubeconfig('scheduler')}",
                "--bind-address=127.0.0.1",
                f"--secure-port={self.ports.scheduler}",
                f"--cert-dir={self.state_dir / 'scheduler'}",
                "--leader-elect=false",
                "--v=1",
            ],
        )
        for process, port in ((manager, self.ports.controller_manager), (scheduler, self.ports.scheduler)):
            process.wait_ready(lambda port=port: _healthz(port), START_TIMEOUT, "healthy (/healthz)")  # type: ignore[misc]

    def _start_kwok(self) -> None:
        config = self.state_dir / "kwok.yaml"
        config.write_text(yaml.safe_dump_all(kwok.stages()))
        self.kwok_logs_dir().mkdir(parents=True, exist_ok=True)
        self._run(
            "kwok",
            [
                str(self.binaries["kwok"]),
                f"--kubeconfig={self._kubeconfig('kwok')}",
                f"--config={config}",
                f"--manage-nodes-with-label-selector={kwok.NODE_LABEL[0]}={kwok.NODE_LABEL[1]}",
                "--node-ip=127.0.0.1",
                f"--node-port={self.ports.kwok}",
                f"--server-address=127.0.0.1:{self.ports.kwok}",
                f"--tls-cert-file={self.pki.kwok_cert}",
                f"--tls-private-key-file={self.pki.kwok_key}",
                "--node-lease-duration-seconds=40",
                "--enable-crds=Logs",
            ],
        )

    def _await_cluster(self) -> None:
        """Ready means: every node Ready (KWOK), and the controllers at work (the ServiceAccount
        controller has made `default` in `default`)."""
        kwok_process = self.processes["kwok"]

        def nodes_ready() -> bool:
            items = self.api("GET", "/api/v1/nodes")["items"]
            ready = {
                n["metadata"]["name"]
                for n in items
                if any(c["type"] == "Ready" and c["status"] == "True" for c in n["status"].get("conditions") or [])
            }
            return ready >= {n["metadata"]["name"] for n in self.nodes}

        kwok_process.wait_ready(nodes_ready, START_TIMEOUT, "managing the nodes (all Ready)")

        def default_account() -> bool:
            return bool(self.api("GET", "/api/v1/namespaces/default/serviceaccounts/default"))

        self.processes["kube-controller-manager"].wait_ready(
            default_account, START_TIMEOUT, "running its controllers (no default ServiceAccount)"
        )
        self._kubeconfig("admin").replace(self.admin_kubeconfig)

    # --- faults ----------------------------------------------------------------------------------
    @contextlib.contextmanager
    def apiserver_down(self) -> Iterator[None]:
        """The kube-apiserver process is stopped inside the block and started again after it,
        on the same port, with the same etcd: clients see refused connections, then a fresh
        server whose watch cache starts at etcd's current revision."""
        self.processes.pop("kube-apiserver").stop()
        if port_open(self.ports.apiserver):
            raise ControlPlaneError(f"port {self.ports.apiserver} still answers after kube-apiserver stopped")
        try:
            yield
        finally:
            self._start_apiserver()
            self._save_state()

    def compact_etcd(self) -> int:
        """Compact etcd's history up to its current revision; returns that revision."""

        def call(path: str, body: dict[str, Any]) -> dict[str, Any]:
            request = urllib.request.Request(self.etcd_url + path, data=json.dumps(body).encode(), method="POST")
            with urllib.request.urlopen(request, timeout=10) as response:
                return dict(json.loads(response.read()))

        revision = int(call("/v3/kv/range", {"key": base64.b64encode(b"/registry").decode()})["header"]["revision"])
        call("/v3/kv/compaction", {"revision": str(revision), "physical": True})
        return revision

    # --- state for the command line ---------------------------------------------------------------
    def save_node_state(self, node: dict[str, Any]) -> None:
        """Remember a real node joined by `controlplane up --real-node`, for `down`."""
        self.node_state = node
        self._save_state()

    def _save_state(self) -> None:
        state = {
            "real_node": self.node_state,
            "ports": asdict(self.ports),
            "pids": {n: p.pid for n, p in self.processes.items()},
            "admin_kubeconfig": str(self.admin_kubeconfig),
            "server": self.server,
        }
        (self.state_dir / "state.json").write_text(json.dumps(state, indent=2))

    @staticmethod
    def stop_from_state(state_dir: Path) -> list[str]:
        """Stop what a `controlplane up` left running in ``state_dir``; returns what was stopped."""
        path = state_dir / "state.json"
        if not path.is_file():
            return []
        state = json.loads(path.read_text())
        stopped = []
        if state.get("real_node"):
            from .realnode import RealNode

            RealNode.stop_from_state(state["real_node"])
            stopped.append("the real node")
        for name, pid in reversed(list(state["pids"].items())):
            if pid and pid_alive(pid):
                stop_group(pid)
                stopped.append(name)
        ports = state["ports"].values()
        busy = [p for p in ports if port_open(p)]
        path.unlink()
        if busy:
            raise ControlPlaneError(f"ports {busy} still answer after stopping {stopped}")
        return stopped


def _healthz(port: int) -> bool:
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE  # the component's self-signed serving certificate
    with urllib.request.urlopen(f"https://127.0.0.1:{port}/healthz", context=context, timeout=2) as response:
        return bool(response.read().decode() == "ok")


__all__ = ["DEFAULT_NODES", "ControlPlane", "ControlPlaneError", "log_tail", "port_open"]
