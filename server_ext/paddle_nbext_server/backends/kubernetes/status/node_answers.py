"""Whether a running pod's node still answers, asked the one way a namespaced user can: one line
of the pod's log, which the API server fetches from the pod's kubelet.

Why: when a node dies under a collective job, its peers' ranks abort at once (gloo loses the
connection), which reads as a failure with nothing to name, while the dead node's pod still reads
Running until Kubernetes declares the node lost (its node-monitor grace period, then the pods'
`node_lost_seconds`).  A failure whose cause may sit on such a node is held back
(`replicas.decide_job`, told which pods did not answer), so the job restarts whole when Kubernetes gives up on the
node, instead of ending Failed first.  Nodes are cluster objects the notebook's Role cannot read.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from kubernetes.client.exceptions import ApiException

from ....runtime import replicas
from ...base import BackendUnavailable

#: Seconds a kubelet has to serve one line of a log before its node counts as not answering.
ANSWER_SECONDS = 10.0
#: Seconds between asking again a node that did not answer (it may come back before it is lost).
RECHECK_SECONDS = 15.0

OpenLog = Callable[..., Awaitable[Any]]


async def answers(open_log: OpenLog, pod: str) -> bool | None:
    """True: the pod's kubelet served its log; False: the API server could not reach it (or
    timed out doing so); None: something else went wrong (no conclusion)."""
    try:
        response = await open_log(f"ask the node of {pod}", pod, 1, _request_timeout=ANSWER_SECONDS)
        response.data  # noqa: B018 - read the body: the request is only over once it is read
        return True
    except ApiException as error:
        return False if replicas.kubelet_unreachable(int(error.status or 0), str(error.body or error.reason or "")) else None
    except BackendUnavailable as error:
        return False if "timed out" in str(error).lower() or "timeout" in str(error).lower() else None


async def unanswered(open_log: OpenLog, pods: list[str]) -> frozenset[str]:
    """The pods of `pods` whose node does not answer."""
    return frozenset([pod for pod in pods if await answers(open_log, pod) is False])
