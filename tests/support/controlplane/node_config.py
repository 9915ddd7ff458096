"""The real node's configuration files: containerd, the CNI network, kubelet, kube-proxy, CoreDNS.

Each function returns a document for a component of the node in ``NodePaths``; ``realnode.py``
writes them and starts the processes.  What each setting is for is said beside it: most follow
from this machine (cgroup v1 under a hybrid hierarchy, no CAP_SYS_RESOURCE, no systemd, no
registry) or from keeping the node's state out of the host's (its own cgroup root, socket, data
and log directories).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from .node_identity import CLUSTER_POD_CIDR, NODE_1, NodeIdentity
from .node_network import API_PORT

NODE_NAME = NODE_1.name
#: The label and taint that keep every pod off the real node unless it asks for it.
NODE_LABEL = ("paddle-nbext.test/real-node", "true")
NODE_TAINT = {"key": NODE_LABEL[0], "value": NODE_LABEL[1], "effect": "NoSchedule"}
#: Every pod cgroup of node 1 lives under this root in each cgroup v1 hierarchy (node N: its
#: ``NodeIdentity.cgroup_root``).
CGROUP_ROOT = NODE_1.cgroup_root
CLUSTER_DOMAIN = "cluster.local"
DNS_PORT = 53
DNS_READY_PORT = 8181
KUBELET_PORT = 10250
PROXY_HEALTH_PORT = 10256
CNI_BIN = Path("/usr/lib/cni")  # Debian's containernetworking-plugins
RUNC = Path("/usr/sbin/runc")  # Debian's runc


@dataclass(frozen=True)
class NodePaths:
    """Where the node keeps everything, all under ``root``."""

    root: Path

    @property
    def containerd(self) -> Path:
        return self.root / "containerd"

    @property
    def containerd_socket(self) -> Path:
        return self.containerd / "containerd.sock"

    @property
    def containerd_config(self) -> Path:
        return self.root / "containerd.toml"

    @property
    def cni_conf_dir(self) -> Path:
        return self.root / "cni" / "net.d"

    @property
    def cni_ipam_dir(self) -> Path:
        return self.root / "cni" / "ipam"

    @property
    def kubelet_dir(self) -> Path:
        return self.root / "kubelet"

    @property
    def kubelet_config(self) -> Path:
        return self.root / "kubelet.yaml"

    @property
    def pod_logs(self) -> Path:
        return self.root / "pod-logs"

    @property
    def resolv_conf(self) -> Path:
        return self.root / "resolv.conf"

    @property
    def proxy_config(self) -> Path:
        return self.root / "kube-proxy.yaml"

    @property
    def corefile(self) -> Path:
        return self.root / "Corefile"

    @property
    def api_socket(self) -> Path:
        return self.root / "apiserver.sock"

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    @property
    def pki(self) -> Path:
        return self.root / "pki"


def containerd_toml(paths: NodePaths, sandbox_image: str) -> str:
    """containerd 1.6 (config version 2) with the CRI plugin, private socket, root and state."""
    cri = 'plugins."io.containerd.grpc.v1.cri"'
    lines = [
        "version = 2",
        f'root = "{paths.containerd / "root"}"',
        f'state = "{paths.containerd / "state"}"',
        # Snapshotters this machine has no use for, kept from probing and logging at start.
        'disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", '
        '"io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs", "io.containerd.tracing.processor.v1.otlp"]',
        "[grpc]",
        f'  address = "{paths.containerd_socket}"',
        "[ttrpc]",
        f'  address = "{paths.containerd / "ttrpc.sock"}"',
        "[debug]",
        '  address = ""',
        '  level = "warn"',
        "[metrics]",
        '  address = ""',
        '[plugins."io.containerd.internal.v1.opt"]',
        f'  path = "{paths.containerd / "opt"}"',
        f"[{cri}]",
        # No image can be pulled: the sandbox image is ours, imported before the kubelet starts.
        f'  sandbox_image = "{sandbox_image}"',
        # Without CAP_SYS_RESOURCE runc cannot lower a container's oom_score_adj below its own;
        # asked to, it fails every sandbox ("can't get final child's PID from pipe: EOF").
        "  restrict_oom_score_adj = true",
        "  disable_apparmor = true",
        "  enable_selinux = false",
        f"[{cri}.containerd]",
        '  snapshotter = "overlayfs"',
        '  default_runtime_name = "runc"',
        f"[{cri}.containerd.runtimes.runc]",
        '  runtime_type = "io.containerd.runc.v2"',
        f"[{cri}.containerd.runtimes.runc.options]",
        f'  BinaryName = "{RUNC}"',
        "  SystemdCgroup = false",
        f"[{cri}.cni]",
        f'  bin_dir = "{CNI_BIN}"',
        f'  conf_dir = "{paths.cni_conf_dir}"',
        "  max_conf_num = 1",
    ]
    return "\n".join(lines) + "\n"


def cni_conflist(paths: NodePaths, node: NodeIdentity = NODE_1) -> str:
    """Pods on one bridge (``cni0``, the gateway is the node) with host-local addresses kept in
    the node's own directory, and port mappings; no masquerade: nothing leaves the node."""
    doc = {
        "cniVersion": "0.4.0",
        "name": "pnb-pods",
        "plugins": [
            {
                "type": "bridge",
                "bridge": "cni0",
                "isGateway": True,
                "ipMasq": False,
                "hairpinMode": True,
                "ipam": {
                    "type": "host-local",
                    "ranges": [[{"subnet": node.pod_cidr}]],
                    "routes": [{"dst": "0.0.0.0/0"}],
                    "dataDir": str(paths.cni_ipam_dir),
                },
            },
            {"type": "portmap", "capabilities": {"portMappings": True}},
        ],
    }
    return json.dumps(doc, indent=2)


def kubelet_yaml(paths: NodePaths, ca_cert: Path, serving: tuple[Path, Path], node: NodeIdentity = NODE_1) -> str:
    config: dict[str, Any] = {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "address": node.ip,
        "port": KUBELET_PORT,
        "readOnlyPort": 0,
        "healthzBindAddress": "127.0.0.1",
        "healthzPort": 10248,
        # The API server authenticates to the kubelet with its client certificate and the kubelet
        # asks the API server who may do what (logs, exec), as on any kubeadm node.
        "authentication": {"anonymous": {"enabled": False}, "webhook": {"enabled": True}, "x509": {"clientCAFile": str(ca_cert)}},
        "authorization": {"mode": "Webhook"},
        "tlsCertFile": str(serving[0]),
        "tlsPrivateKeyFile": str(serving[1]),
        "containerRuntimeEndpoint": f"unix://{paths.containerd_socket}",
        "imageServiceEndpoint": f"unix://{paths.containerd_socket}",
        "cgroupDriver": "cgroupfs",
        "cgroupRoot": f"/{node.cgroup_root}",
        # 1.37 refuses cgroup v1 unless told; this machine's controllers are all v1.
        "failCgroupV1": False,
        "failSwapOn": False,
        # Each node's own CoreDNS: a node that dies takes no other node's names with it.
        "clusterDNS": [node.ip],
        "clusterDomain": CLUSTER_DOMAIN,
        "resolvConf": str(paths.resolv_conf),
        "podLogsDir": str(paths.pod_logs),
        "volumePluginDir": str(paths.root / "volume-plugins"),
        "registerNode": True,
        "registerWithTaints": [NODE_TAINT],
        "maxPods": 40,
        "serializeImagePulls": False,
        # The images cannot be pulled again: never collect them, and do not evict for a disk
        # that is merely fuller than a production node's thresholds would like.
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
        "evictionHard": {"memory.available": "100Mi", "nodefs.available": "1%", "imagefs.available": "1%", "nodefs.inodesFree": "1%"},
        "shutdownGracePeriod": "0s",
        "logging": {"verbosity": 1},
    }
    return yaml.safe_dump(config)


def kube_proxy_yaml(kubeconfig: Path, node: NodeIdentity = NODE_1) -> str:
    config = {
        "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
        "kind": "KubeProxyConfiguration",
        "clientConnection": {"kubeconfig": str(kubeconfig)},
        "mode": "iptables",
        "clusterCIDR": CLUSTER_POD_CIDR,
        "hostnameOverride": node.name,
        "bindAddress": node.ip,
        "healthzBindAddress": f"{node.ip}:{PROXY_HEALTH_PORT}",
        "metricsBindAddress": f"{node.ip}:10249",
        # Leave the kernel's conntrack settings alone (they are the host's, and setting them
        # needs CAP_SYS_RESOURCE this machine does not give).
        "conntrack": {"maxPerCore": 0, "min": 0, "tcpEstablishedTimeout": "0s", "tcpCloseWaitTimeout": "0s"},
    }
    return yaml.safe_dump(config)


def corefile(kubeconfig: Path, node: NodeIdentity = NODE_1) -> str:
    """Cluster names only, straight from the API (no cache: a new pod's name resolves at once)."""
    return "\n".join(
        [
            f".:{DNS_PORT} {{",
            f"    bind {node.ip}",
            "    errors",
            f"    health {node.ip}:8080",
            f"    ready {node.ip}:{DNS_READY_PORT}",
            f"    kubernetes {CLUSTER_DOMAIN} in-addr.arpa ip6.arpa {{",
            f"        kubeconfig {kubeconfig}",
            "        pods insecure",
            "        fallthrough in-addr.arpa ip6.arpa",
            "    }",
            "}",
            "",
        ]
    )


def kubernetes_endpoint_slice(nodes: list[NodeIdentity]) -> dict[str, Any]:
    """The ``kubernetes`` Service's endpoints: each node's relay to the API server (the API
    server listens on the host's loopback only, so its own endpoint reconciler is off)."""
    return {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": "kubernetes",
            "namespace": "default",
            "labels": {"kubernetes.io/service-name": "kubernetes", "endpointslice.kubernetes.io/managed-by": "paddle-nbext-test"},
        },
        "addressType": "IPv4",
        "endpoints": [{"addresses": [node.ip], "conditions": {"ready": True}} for node in nodes],
        "ports": [{"name": "https", "port": API_PORT, "protocol": "TCP"}],
    }


def coredns_rbac(user: str) -> list[tuple[str, dict[str, Any]]]:
    """What CoreDNS's kubernetes plugin reads, for ``user`` (its client certificate's name)."""
    role: dict[str, Any] = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": "paddle-nbext-test:coredns"},
        "rules": [
            {"apiGroups": [""], "resources": ["services", "pods", "namespaces"], "verbs": ["list", "watch"]},
            {"apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"], "verbs": ["list", "watch"]},
        ],
    }
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": "paddle-nbext-test:coredns"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}],
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role["metadata"]["name"]},
    }
    return [
        ("/apis/rbac.authorization.k8s.io/v1/clusterroles", role),
        ("/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", binding),
    ]
