"""Who each real node is: its name, network namespace, links, addresses, pod CIDR and cgroup root.

Real nodes are numbered from 1 (``MAX_NODES`` at most on one machine); node 1 keeps the names the
single real node always had (``pnb-real-node``, namespace ``pnb-node``, 10.200.0.2, pods on
10.244.0.0/24), node N is ``pnb-real-node-N`` at 10.200.0.(N+1) with pods on 10.244.(N-1).0/24.
Everything of a node derives from its number, so two nodes never share a namespace, a link, an
address, a pod range or a cgroup root, and a crashed run's leftovers can be found by number.
"""

from __future__ import annotations

from dataclasses import dataclass

MAX_NODES = 3
#: The host's end of every node's link: the bridge that joins the nodes (and where the test Ceph listens).
HOST_IP = "10.200.0.1"
PREFIX = 24
#: Every node's pods: each node routes the others' pod ranges to them through the bridge.
CLUSTER_POD_CIDR = "10.244.0.0/16"
BRIDGE = "pnb-br0"


@dataclass(frozen=True)
class NodeIdentity:
    index: int

    def __post_init__(self) -> None:
        if not 1 <= self.index <= MAX_NODES:
            raise ValueError(f"real nodes are numbered 1 to {MAX_NODES}, not {self.index}")

    @property
    def name(self) -> str:
        return "pnb-real-node" if self.index == 1 else f"pnb-real-node-{self.index}"

    @property
    def netns(self) -> str:
        return "pnb-node" if self.index == 1 else f"pnb-node-{self.index}"

    @property
    def host_veth(self) -> str:
        return f"pnb-host{self.index - 1}"

    @property
    def node_veth(self) -> str:
        return f"pnb-node{self.index - 1}"

    @property
    def ip(self) -> str:
        return f"10.200.0.{self.index + 1}"

    @property
    def pod_cidr(self) -> str:
        return f"10.244.{self.index - 1}.0/24"

    @property
    def cgroup_root(self) -> str:
        return "paddle-nbext-node" if self.index == 1 else f"paddle-nbext-node-{self.index}"

    def others(self) -> list[NodeIdentity]:
        return [NodeIdentity(i) for i in range(1, MAX_NODES + 1) if i != self.index]


NODE_1 = NodeIdentity(1)
ALL_NODES = tuple(NodeIdentity(i) for i in range(1, MAX_NODES + 1))
