"""An in-memory Kubernetes API served over real HTTP on 127.0.0.1, for the cluster contract suite.

The official ``kubernetes`` client talks to it unchanged. It keeps the semantics the Kubernetes
backend depends on (resourceVersions, watch resume and 410, label selectors, status subresources,
ownerReference cascade, 409 conflicts, bearer tokens with RBAC) and nothing that needs a node:
there is no scheduler, kubelet or Job controller here. The test fixture plays those
(``jobcontroller`` and ``kubelet``) so the same suite also runs against a real apiserver.
"""

from .server import KubeAPIServer

__all__ = ["KubeAPIServer"]
