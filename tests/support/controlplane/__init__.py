"""A real Kubernetes control plane for the cluster contract suite and the benchmarks.

``build`` compiles kube-apiserver, kube-controller-manager, kube-scheduler, kubectl, etcd and
KWOK from source at pinned versions into a cache outside the repository; ``ControlPlane``
starts them on 127.0.0.1 with fake KWOK nodes and stops them again.  From a shell:
``bash scripts/controlplane.sh build|up|down|status`` (see ``__main__.py``).
"""

from __future__ import annotations

from .build import ETCD_VERSION, KUBERNETES_VERSION, KWOK_VERSION, build, find_binaries
from .cluster import DEFAULT_NODES, ControlPlane, port_open
from .errors import ControlPlaneError
from .kwok import IGNORES_SIGTERM

__all__ = [
    "DEFAULT_NODES",
    "ETCD_VERSION",
    "IGNORES_SIGTERM",
    "KUBERNETES_VERSION",
    "KWOK_VERSION",
    "ControlPlane",
    "ControlPlaneError",
    "build",
    "find_binaries",
    "port_open",
]
