"""A real Kubernetes node beside the test control plane: real pods, real containers, real Paddle.

``RealNode(plane).start()`` joins one node, ``pnb-real-node``, to a running ``ControlPlane``:

- containerd and runc (Debian bookworm's 1.6.20 and 1.1.5: pinned by the release, installed by
  ``scripts/setup.sh``, and the pair this machine's hybrid cgroups are known to run; 1.37's kubelet
  talks to containerd 1.6 through its cgroup-driver fallback) with the CNI plugins of Debian's
  ``containernetworking-plugins`` (bridge, host-local, portmap, loopback);
- kubelet and kube-proxy built from the control plane's own pinned Kubernetes, CoreDNS from its
  pinned module (``build.NODE_COMPONENTS``), the images built here (``images.py``) and imported
  into containerd; nothing is pulled;
- the CephFS CSI node plugin (``csi_plugin.py``: our stand-in for ceph-csi's, which cannot be built
  here), registered with the kubelet through its plugin-registration directory;
- all of it in the network namespace of ``node_network.py``, with relays to the API server
  (``netbridge.py``), the ``kubernetes`` Service's endpoint at the node, cluster DNS at the node's
  address for every pod.

The node is labelled and tainted ``paddle-nbext.test/real-node=true``: the KWOK nodes keep every
other test's pods, and a test (or an admin's backend config) sends pods here with that node
selector and toleration.  ``stop()`` deletes the node's pods, stops every process and removes every
mount, cgroup and namespace (``node_cleanup.py``); ``start()`` first sweeps what a crashed run left.
One real node per machine (fixed namespace, addresses and cgroup root): ``default_root()``.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import csi_plugin, images, node_cleanup, node_config, node_network, pki
from .build import cache_dir, find_node_binaries
from .errors import ControlPlaneError
from .kubeconfigs import write_client_kubeconfig
from .node_config import NODE_LABEL, NODE_NAME, NODE_TAINT, NodePaths
from .node_identity import NodeIdentity
from .node_network import API_PORT
from .processes import Process, log_tail

if TYPE_CHECKING:
    from .cluster import ControlPlane

START_TIMEOUT = 120.0
DRAIN_TIMEOUT = 60.0
BRIDGE = Path(__file__).resolve().parent / "netbridge.py"
COREDNS_USER = "paddle-nbext-test:coredns"
PROXY_USER = "system:kube-proxy"  # bound to system:node-proxier by the API server's bootstrap policy
#: (command, Debian package) the node needs on the machine.
NODE_TOOLS = (
    ("containerd", "containerd"),
    ("containerd-shim-runc-v2", "containerd"),
    ("ctr", "containerd"),
    (str(node_config.RUNC), "runc"),
    (str(node_config.CNI_BIN / "bridge"), "containernetworking-plugins"),
    ("iptables", "iptables"),
    ("nsenter", "util-linux"),
    ("ip", "iproute2"),
    ("mmdebstrap", "mmdebstrap"),
)
NODE_PACKAGES = tuple(sorted({package for _, package in NODE_TOOLS}))
__all__ = ["NODE_LABEL", "NODE_NAME", "NODE_PACKAGES", "NODE_TAINT", "RealNode", "default_root", "missing_tools"]


def default_root(index: int = 1) -> Path:
    return cache_dir() / ("realnode" if index == 1 else f"realnode-{index}")


def missing_tools() -> list[str]:
    """``command (package)`` for each tool of the node this machine lacks."""
    return [f"{tool} (Debian package {package})" for tool, package in NODE_TOOLS if shutil.which(tool) is None]


def pod_placement() -> dict[str, Any]:
    """What a pod (or the backend's config) sets to run on the real node."""
    return {"node_selector": {NODE_LABEL[0]: NODE_LABEL[1]}, "tolerations": [dict(NODE_TAINT, operator="Equal")]}


class RealNode:
    """One real node of ``plane``; everything it keeps is under ``root``."""

    def __init__(self, plane: ControlPlane, root: Path | None = None, index: int = 1) -> None:
        self.plane = plane
        self.identity = NodeIdentity(index)
        self.paths = NodePaths((root or default_root(index)).resolve())
        self.processes: dict[str, Process] = {}
        self.startup_seconds: float | None = None
        self.images: list[images.Image] = []
        self.extra_images: list[images.Image] = []  # imported after the start: imported again at a power-on
        self.ceph_config: list[dict[str, Any]] = []  # ceph-csi's ConfigMaps, written again at a power-on

    @property
    def root(self) -> Path:
        return self.paths.root

    @property
    def logs_dir(self) -> Path:
        return self.paths.logs

    # --- lifecycle --------------------------------------------------------------------------------
    def start(self) -> RealNode:
        missing = missing_tools()
        if missing:
            raise ControlPlaneError(
                f"the real node needs {', '.join(missing)}; `bash scripts/setup.sh` installs them "
                f"(apt-get install {' '.join(NODE_PACKAGES)})"
            )
        binaries = find_node_binaries()
        if binaries is None:
            raise ControlPlaneError(
                "no real node: kubelet, kube-proxy, CoreDNS or pause is not built for the pinned versions; "
                "run `bash scripts/controlplane.sh build`"
            )
        self.binaries = binaries
        self.images = images.build_images(binaries["pause"])
        started = time.monotonic()
        node_cleanup.sweep(self.root, self.identity)
        for directory in (self.paths.logs, self.paths.pki, self.paths.cni_conf_dir, self.paths.pod_logs, self.paths.kubelet_dir):
            directory.mkdir(parents=True, exist_ok=True)
        try:
            kubeconfigs = self._credentials()
            node_network.create(self.identity)
            self._start_bridges()
            self._start_containerd()
            self._import_images()
            self._make_cgroup_roots()
            self._publish_api_endpoint()
            self._start_kubelet(kubeconfigs["kubelet"])
            self._start_proxy(kubeconfigs["proxy"])
            self._start_coredns(kubeconfigs["coredns"])
            self._start_csi_plugin()
            for image in self.extra_images:
                self.import_image(image, keep=False)
            if self.ceph_config:
                csi_plugin.write_config(self.csi_paths, self.ceph_config)
        except BaseException:
            self.stop()
            raise
        self.startup_seconds = time.monotonic() - started
        return self

    def stop(self) -> None:
        """Delete the node's pods (the kubelet stops their containers), stop every process, then
        remove whatever is left; raises if anything of the node remains."""
        if "kubelet" in self.processes and self.processes["kubelet"].running():
            with contextlib.suppress(Exception):
                self._drain()
        for name in reversed(list(self.processes)):
            self.processes[name].stop()
        self.processes.clear()
        self._withdraw_api_endpoint()
        node_cleanup.sweep(self.root, self.identity)
        left = node_cleanup.leftovers(self.root, self.identity)
        if left:
            raise ControlPlaneError("the real node left behind: " + "; ".join(left))

    def power_off(self) -> None:
        """Lose power: every process of the node dies at once (kubelet, containerd and its shims,
        every container of every pod, kube-proxy, CoreDNS, the CSI plugin), nothing is deleted or
        told to the API; the Node and its pods stay as they were until the control plane notices.
        Only the harness's own API relay is taken out of the ``kubernetes`` Service (on a real
        cluster the API's endpoints are control-plane machines, which do not die with a worker)."""
        node_cleanup.kill_node_processes(self.root, self.identity)
        for process in self.processes.values():
            process.stop()  # already dead: reaps it
        self.processes.clear()
        self._withdraw_api_endpoint()

    def partition(self, cut: bool) -> None:
        """Cut the node off the network with every process left running (or mend it): its only
        link goes down, and the harness's API relay of the node (a unix socket from the node's
        namespace to the API server, which no link carries) is frozen with SIGSTOP, so the
        kubelet and the node's pods reach the API no more than the other nodes or the home, and
        their open connections hang as over a cut wire."""
        relays = [self.processes[name] for name in ("apiserver-bridge-node", "apiserver-bridge-host") if name in self.processes]
        if cut:
            # The relay is also one of the `kubernetes` Service's endpoints: out with it, as the
            # API's own endpoints (control-plane machines) stay reachable from the other nodes.
            self._withdraw_api_endpoint()
            node_network.set_link(self.identity, up=False)
        for relay in relays:
            relay.signal(signal.SIGSTOP if cut else signal.SIGCONT)
        if not cut:
            node_network.set_link(self.identity, up=True)
            self._publish_api_endpoint()

    def power_on(self) -> None:
        """Boot the node again after `power_off` (or a partition): what the dead node left (mounts,
        cgroups, containers' state) is swept as a reboot clears it, then every component starts
        afresh under the same name; its kubelet finds the pods still bound to it and finishes them."""
        self.stop()
        self.start()

    def __enter__(self) -> RealNode:  # noqa: PYI034 - Python 3.10 has no typing.Self
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _run(self, name: str, argv: list[str]) -> Process:
        process = Process(name, node_network.inside(argv, self.identity), self.paths.logs / f"{name}.log")
        process.start()
        self.processes[name] = process
        return process

    def state(self) -> dict[str, Any]:
        return {"root": str(self.root), "index": self.identity.index, "pids": {n: p.pid for n, p in self.processes.items()}}

    @staticmethod
    def stop_from_state(state: dict[str, Any]) -> None:
        """Stop a node that `controlplane up --real-node` left running (no API needed)."""
        node_cleanup.sweep(Path(state["root"]), NodeIdentity(int(state.get("index", 1))))

    @property
    def name(self) -> str:
        return self.identity.name

    @property
    def ip(self) -> str:
        return self.identity.ip

    # --- credentials --------------------------------------------------------------------------------
    def _kubeconfig(self, name: str, cert: Path, key: Path) -> Path:
        """The node's components reach the API server through the node's relay, by the node IP."""
        return write_client_kubeconfig(
            self.paths.root / f"{name}.kubeconfig",
            name=name,
            server=f"https://{self.identity.ip}:{API_PORT}",
            ca_cert=self.plane.pki.ca_cert,
            cert=cert,
            key=key,
        )

    def _credentials(self) -> dict[str, Path]:
        own = pki.Pki(self.plane.pki.directory)
        me = self.identity
        self.serving = pki.issue_later(own, f"{me.name}-serving", common=me.name, server=True, names=(me.name,), ips=(me.ip,))
        identities = {
            "kubelet": (f"system:node:{me.name}", ("system:nodes",)),
            "proxy": (PROXY_USER, ()),
            "coredns": (COREDNS_USER, ()),
        }
        kubeconfigs = {}
        for name, (common, organizations) in identities.items():
            cert, key = pki.issue_later(own, f"{me.name}-{name}", common=common, organizations=organizations)
            kubeconfigs[name] = self._kubeconfig(name, cert, key)
        for path, body in node_config.coredns_rbac(COREDNS_USER):
            self._create(path, body)
        return kubeconfigs

    def _create(self, path: str, body: dict[str, Any]) -> None:
        try:
            self.plane.api("POST", path, body)
        except urllib.error.HTTPError as error:
            if error.code != 409:
                detail = error.read().decode(errors="replace")
                raise ControlPlaneError(f"the real node could not create {path}: {error.code} {detail}") from None

    # --- components ---------------------------------------------------------------------------------
    def _start_bridges(self) -> None:
        socket_path = self.paths.api_socket
        host = Process(
            "apiserver-bridge-host",
            [sys.executable, str(BRIDGE), "--listen", f"unix:{socket_path}", "--to", f"tcp:127.0.0.1:{self.plane.ports.apiserver}"],
            self.paths.logs / "apiserver-bridge-host.log",
        )
        host.start()
        self.processes[host.name] = host
        host.wait_ready(socket_path.exists, START_TIMEOUT, "listening")
        node = self._run(
            "apiserver-bridge-node",
            [sys.executable, str(BRIDGE), "--listen", f"tcp:{self.identity.ip}:{API_PORT}", "--to", f"unix:{socket_path}"],
        )
        node.wait_ready(lambda: "netbridge:" in log_tail(node.log_path), START_TIMEOUT, "listening")

    def _ctr(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["ctr", "--address", str(self.paths.containerd_socket), "--namespace", "k8s.io", *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    def _start_containerd(self) -> None:
        self.paths.containerd_config.write_text(node_config.containerd_toml(self.paths, images.PAUSE_IMAGE))
        (self.paths.cni_conf_dir / "10-pnb-pods.conflist").write_text(node_config.cni_conflist(self.paths, self.identity))
        containerd = self._run("containerd", ["containerd", "--config", str(self.paths.containerd_config)])
        containerd.wait_ready(lambda: self._ctr("version", timeout=5).returncode == 0, START_TIMEOUT, "answering (ctr version)")

    def _import_images(self) -> None:
        for image in self.images:
            self.import_image(image, keep=False)

    def import_image(self, image: images.Image, keep: bool = True) -> None:
        """Give the node's containerd ``image`` (one built here; also one built after the node
        started, such as the JupyterHub tests' notebook image, kept for a power-on)."""
        if keep and image not in self.images and image not in self.extra_images:
            self.extra_images.append(image)
        done = self._ctr("images", "import", str(image.archive))
        if done.returncode != 0:
            raise ControlPlaneError(
                f"containerd could not import {image.reference} from {image.archive}: {done.stderr.strip() or done.stdout.strip()}"
            )
        listed = self._ctr("images", "ls", "-q")
        if image.reference not in listed.stdout.split():
            raise ControlPlaneError(f"containerd imported {image.archive} but lists no {image.reference}: {listed.stdout.strip()}")

    def _make_cgroup_roots(self) -> None:
        """The kubelet's cgroupRoot must exist in every v1 hierarchy before it starts."""
        for hierarchy in node_cleanup.CGROUP_BASE.iterdir():
            if (hierarchy / "cgroup.procs").exists() and hierarchy.name != "unified":
                (hierarchy / self.identity.cgroup_root).mkdir(exist_ok=True)

    def _publish_api_endpoint(self) -> None:
        """``kubernetes.default.svc`` for pods: the Service's endpoints are the nodes' relays; a
        node adds its own when it starts (and takes it out when it stops)."""
        self._set_api_endpoint(present=True)

    def _withdraw_api_endpoint(self) -> None:
        with contextlib.suppress(Exception):
            self._set_api_endpoint(present=False)

    def _set_api_endpoint(self, present: bool) -> None:
        path = "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices"
        current = self._get(f"{path}/kubernetes")
        if current is None:
            if present:
                self._create(path, node_config.kubernetes_endpoint_slice([self.identity]))
            return
        addresses = [a for e in current.get("endpoints") or [] for a in e.get("addresses", [])]
        if (self.identity.ip in addresses) == present:
            return
        wanted = [a for a in addresses if a != self.identity.ip] + ([self.identity.ip] if present else [])
        body = node_config.kubernetes_endpoint_slice([])
        body["endpoints"] = [{"addresses": [a], "conditions": {"ready": True}} for a in wanted]
        body["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
        self.plane.api("PUT", f"{path}/kubernetes", body)

    def _get(self, path: str) -> dict[str, Any] | None:
        """An object of the API, or None when it does not exist (yet)."""
        try:
            return dict(self.plane.api("GET", path))
        except urllib.error.HTTPError as error:
            if error.code == 404:
                return None
            raise

    def _node(self) -> dict[str, Any] | None:
        return self._get(f"/api/v1/nodes/{self.identity.name}")

    def ready(self) -> bool:
        node = self._node()
        conditions = ((node or {}).get("status") or {}).get("conditions") or []
        return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)

    def _start_kubelet(self, kubeconfig: Path) -> None:
        self.paths.resolv_conf.write_text(f"# pods resolve through cluster DNS at {self.identity.ip}\n")
        self.paths.kubelet_config.write_text(node_config.kubelet_yaml(self.paths, self.plane.pki.ca_cert, self.serving, self.identity))
        kubelet = self._run(
            "kubelet",
            [
                str(self.binaries["kubelet"]),
                f"--config={self.paths.kubelet_config}",
                f"--kubeconfig={kubeconfig}",
                f"--root-dir={self.paths.kubelet_dir}",
                f"--cert-dir={self.paths.pki}",
                f"--hostname-override={self.identity.name}",
                f"--node-ip={self.identity.ip}",
                f"--node-labels={NODE_LABEL[0]}={NODE_LABEL[1]}",
                "--v=1",
            ],
        )
        kubelet.wait_ready(self.ready, START_TIMEOUT, f"registered as node {self.identity.name} and Ready")

    def _start_proxy(self, kubeconfig: Path) -> None:
        self.paths.proxy_config.write_text(node_config.kube_proxy_yaml(kubeconfig, self.identity))
        proxy = self._run("kube-proxy", [str(self.binaries["kube-proxy"]), f"--config={self.paths.proxy_config}", "--v=1"])

        def healthy() -> bool:
            url = f"http://{self.identity.ip}:{node_config.PROXY_HEALTH_PORT}/healthz"
            with urllib.request.urlopen(url, timeout=2) as response:
                return bool(response.status == 200)

        proxy.wait_ready(healthy, START_TIMEOUT, "healthy (its iptables rules synced)")

    def _start_coredns(self, kubeconfig: Path) -> None:
        self.paths.corefile.write_text(node_config.corefile(kubeconfig, self.identity))
        coredns = self._run("coredns", [str(self.binaries["coredns"]), "-conf", str(self.paths.corefile)])

        def ready() -> bool:
            with urllib.request.urlopen(f"http://{self.identity.ip}:{node_config.DNS_READY_PORT}/ready", timeout=2) as response:
                return bool(response.status == 200)

        coredns.wait_ready(ready, START_TIMEOUT, "ready (its kubernetes plugin synced)")

    @property
    def csi_paths(self) -> csi_plugin.CsiPaths:
        return csi_plugin.CsiPaths(self.paths.kubelet_dir, self.paths.root / "ceph-csi")

    def _csinode(self) -> dict[str, Any] | None:
        return self._get(f"/apis/storage.k8s.io/v1/csinodes/{self.identity.name}")

    def _start_csi_plugin(self) -> None:
        """The CephFS CSI node plugin (``csi_plugin.py``), registered with the kubelet."""
        plugin = self._run("cephcsi", csi_plugin.argv(self.binaries["cephcsi"], self.csi_paths, self.identity.name))
        plugin.wait_ready(
            lambda: csi_plugin.registered(self._csinode),
            START_TIMEOUT,
            f"registered with the kubelet (CSINode {self.identity.name} lists it)",
        )

    def configure_ceph_csi(self, config_maps: list[dict[str, Any]]) -> None:
        """Give the node plugin ceph-csi's ConfigMaps, as the kubelet mounts them into its pod."""
        self.ceph_config = config_maps
        csi_plugin.write_config(self.csi_paths, config_maps)

    # --- tear-down ------------------------------------------------------------------------------------
    def _drain(self) -> None:
        """Delete every pod bound to the node at once and wait until containerd runs none."""
        selector = f"spec.nodeName={self.identity.name}"
        pods = self.plane.api("GET", f"/api/v1/pods?fieldSelector={selector}")["items"]
        for pod in pods:
            meta = pod["metadata"]
            with contextlib.suppress(urllib.error.HTTPError):
                self.plane.api("DELETE", f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}", {"gracePeriodSeconds": 0})
        deadline = time.monotonic() + DRAIN_TIMEOUT
        while time.monotonic() < deadline:
            listed = self._ctr("containers", "ls", "-q", timeout=10)
            if listed.returncode != 0 or not listed.stdout.strip():
                return
            time.sleep(0.2)

    def describe(self) -> str:
        """For failure messages: where the node's logs are."""
        return f"real node {self.identity.name}: logs in {self.paths.logs}; " + json.dumps(self.state())
