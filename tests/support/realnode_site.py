"""What the real-node tests know about where real pods run: the node, the image, the homes.

On the suite's own control plane (the default) ``RealNodeSite.start`` joins real nodes (two
unless ``PADDLE_NBEXT_TEST_REAL_NODES`` says 1 or 3; each a ``RealNode`` of its own number, all
labelled and tainted alike) and uses the Paddle image built here, imported into every node; pods
are sent to the nodes by their label and toleration (the scheduler picks which), run as the
notebook's uid 1000 / gid 100 (what Zero to JupyterHub sets), and mount the user's home from a
``local`` PersistentVolume of a directory every node sees (they share this machine's disk), bound
through the ``claim-{username}`` claim the admin guide gives; the CephFS tests mount real CephFS
homes instead.  The notebook side (a real ``jupyter server`` run as that
uid) sees the same directory, as a notebook pod sees its home.

Against another cluster with real nodes (``PADDLE_NBEXT_TEST_KUBECONFIG``) the same tests run
when ``PADDLE_NBEXT_TEST_IMAGE`` names a Paddle 3.0 image the nodes have and
``PADDLE_NBEXT_TEST_NODE_HOMES`` a directory that is the same on this machine and on the node
labelled ``paddle-nbext.test/real-node=true`` (e.g. a shared mount); the node needs the taint only
if other workloads should stay off it.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import kubernetes
from kubernetes.client.exceptions import ApiException

from support.controlplane import ControlPlane, ControlPlaneError
from support.controlplane.images import PADDLE_IMAGE, Image
from support.controlplane.metrics_server import MetricsServer
from support.controlplane.node_identity import MAX_NODES
from support.controlplane.realnode import NODE_LABEL, NODE_NAME, RealNode, pod_placement
from support.volumes import create_bound_claim

IMAGE_ENV = "PADDLE_NBEXT_TEST_IMAGE"
NODES_ENV = "PADDLE_NBEXT_TEST_REAL_NODES"
#: Two real nodes: every job of the real-node tests may have replicas on both (issue 35).
DEFAULT_NODES = 2
HOMES_ENV = "PADDLE_NBEXT_TEST_NODE_HOMES"
NOTEBOOK_UID = 1000
NOTEBOOK_GID = 100


@dataclass
class RealNodeSite:
    node: RealNode | None  # the first node (None on another cluster)
    image: str
    pull_policy: str
    homes: Path
    uid: int = NOTEBOOK_UID
    gid: int = NOTEBOOK_GID
    _volumes: list[str] = field(default_factory=list)
    nodes: list[RealNode] = field(default_factory=list)  # every real node, the first one first
    metrics: MetricsServer | None = None  # metrics-server scraping every node (None on another cluster)

    def __post_init__(self) -> None:
        if not self.nodes and self.node is not None:
            self.nodes = [self.node]

    @classmethod
    def start(cls, plane: ControlPlane | None, workdir: Path) -> RealNodeSite:
        if plane is None:  # another cluster
            image, shared = os.environ.get(IMAGE_ENV), os.environ.get(HOMES_ENV)
            if not image or not shared:
                raise ControlPlaneError(
                    f"the real-node tests on another cluster need {IMAGE_ENV} (a Paddle 3.0 image its nodes have) and "
                    f"{HOMES_ENV} (a directory shared by this machine and the node labelled {NODE_LABEL[0]}={NODE_LABEL[1]})"
                )
            return cls(None, image, "IfNotPresent", Path(shared))
        nodes: list[RealNode] = []
        metrics: MetricsServer | None = None
        try:
            for index in range(1, node_count() + 1):
                nodes.append(RealNode(plane, index=index).start())
            metrics = MetricsServer(plane, {node.name for node in nodes}).start()
        except BaseException:
            for started in reversed(nodes):
                started.stop()
            raise
        # Homes live where uid 1000 can reach them (pytest's own temporary tree is root's alone).
        homes = Path(tempfile.mkdtemp(prefix="pnb-homes-", dir="/tmp"))
        homes.chmod(0o755)
        return cls(nodes[0], PADDLE_IMAGE, "Never", homes, nodes=nodes, metrics=metrics)

    def stop(self) -> None:
        try:
            if self.metrics is not None:
                self.metrics.stop()
            failures = []
            for node in reversed(self.nodes):
                try:
                    node.stop()
                except ControlPlaneError as error:
                    failures.append(str(error))
            if failures:
                raise ControlPlaneError("; ".join(failures))
        finally:
            if self.node is not None:
                shutil.rmtree(self.homes, ignore_errors=True)

    @property
    def node_name(self) -> str | None:
        """The first real node's name (None on another cluster)."""
        return NODE_NAME if self.node is not None else None

    @property
    def node_names(self) -> set[str]:
        """Every real node's name: where the placement may put a pod (empty on another cluster)."""
        return {node.name for node in self.nodes}

    def import_image(self, image: Image) -> None:
        """Give every real node's containerd ``image`` (one built here)."""
        for node in self.nodes:
            node.import_image(image)

    def placement(self) -> dict[str, Any]:
        """The backend settings that send job pods to the real node (what an admin would set)."""
        return pod_placement()

    def security_context(self) -> dict[str, int]:
        return {"runAsUser": self.uid, "runAsGroup": self.gid, "fsGroup": self.gid}

    def new_home(self, user: str) -> Path:
        """An empty home of ``user``'s, owned by the notebook uid."""
        home = Path(tempfile.mkdtemp(prefix=f"{user}-", dir=self.homes))
        home.chmod(0o755)
        os.chown(home, self.uid, self.gid)
        return home

    def home_claim(self, api: kubernetes.client.ApiClient, namespace: str, claim: str, home: Path) -> None:
        """``claim`` in ``namespace``, bound to a ``local`` PersistentVolume of ``home`` on the node."""
        selector = {"matchExpressions": [{"key": NODE_LABEL[0], "operator": "In", "values": [NODE_LABEL[1]]}]}
        source = {"local": {"path": str(home)}, "nodeAffinity": {"required": {"nodeSelectorTerms": [selector]}}}
        core = kubernetes.client.CoreV1Api(api)
        self._volumes.append(create_bound_claim(core, namespace, claim, source, prefix="pnb-local-home-"))

    def release_volumes(self, api: kubernetes.client.ApiClient) -> None:
        core = kubernetes.client.CoreV1Api(api)
        for name in self._volumes:
            with contextlib.suppress(ApiException):
                core.delete_persistent_volume(name)
        self._volumes.clear()

    def describe(self) -> str:
        if not self.nodes:
            return f"another cluster's node labelled {NODE_LABEL[0]}={NODE_LABEL[1]}"
        return "; ".join(node.describe() for node in self.nodes)


def node_count() -> int:
    """How many real nodes the suite's cluster has (``PADDLE_NBEXT_TEST_REAL_NODES``, 1 to 3)."""
    raw = os.environ.get(NODES_ENV, str(DEFAULT_NODES))
    if not raw.isdigit() or not 1 <= int(raw) <= MAX_NODES:
        raise ControlPlaneError(f"{NODES_ENV}={raw!r}: give a number of real nodes from 1 to {MAX_NODES}")
    return int(raw)
