"""The reads behind "quota before submit" (quota.py): the namespace's ResourceQuotas, and for a
job that goes to a Kueue LocalQueue, that LocalQueue and the ClusterQueue it names.

Only a dry run and a submit read them (never a job list).  Every read goes through the
backend's `call` (a client call in a thread, the API's errors as `ApiException`, an unreachable
API as `BackendUnavailable`); a read that fails for any reason becomes one "not checked" note,
so quota that cannot be read never turns a submit into an error.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from paddle_nbext.model.quota import QuotaCheck

from ...base import BackendUnavailable
from ..client.cache import describe_failure
from . import quota

#: `KubernetesClient.call` (client/api_calls.py): (what it is doing, client function, *args, **kwargs) -> the answer.
Call = Callable[..., Awaitable[Any]]
KUEUE = ("kueue.x-k8s.io", "v1beta2")
QUEUE_READER = "deploy/rbac/queue-reader-clusterrole.yaml"


def _why(error: BaseException, what: str, grant: str) -> str:
    if isinstance(error, ApiException) and error.status == 403:
        return f"{what}: forbidden ({grant})"
    if isinstance(error, ApiException) and error.status == 404:
        return f"{what}: not found"
    if isinstance(error, BackendUnavailable):
        return f"{what}: {error.message}"
    return f"{what}: {describe_failure(error)}"


async def _json(call: Call, doing: str, fn: Callable[..., Any], *args: Any) -> dict[str, Any]:
    response = await call(doing, fn, *args, _preload_content=False)
    body: dict[str, Any] = json.loads(response.data)
    return body


async def check_quota(
    call: Call,
    api: client.ApiClient,
    namespace: str,
    plan: list[dict[str, Any]],
    *,
    queue: str,
    gpu_resource: str,
    priority_class: str = "",
) -> QuotaCheck:
    """The job of `plan` against the quota of `namespace` and of `queue` (a LocalQueue; "" for none)."""
    groups = quota.pod_groups(plan)
    resources = list(quota.job_need(groups))
    bounds: list[quota.Bound] = []
    unknown: list[str] = []
    core = client.CoreV1Api(api)
    try:
        listed = await _json(call, f"list the ResourceQuotas of {namespace}", core.list_namespaced_resource_quota, namespace)
    except (ApiException, BackendUnavailable) as error:
        unknown.append(_why(error, f"the ResourceQuotas of {namespace}", "the Role needs 'list resourcequotas'"))
    else:
        found, notes = quota.resource_quota_bounds(listed.get("items") or [], resources, priority_class)
        bounds += found
        unknown += notes
    if queue:
        found_queue, notes = await _cluster_queue(call, api, namespace, queue)
        unknown += notes
        if found_queue is not None:
            bounds += quota.cluster_queue_bounds(found_queue, resources)
    return quota.judge(groups, bounds, unknown, gpu_resource)


async def _cluster_queue(call: Call, api: client.ApiClient, namespace: str, queue: str) -> tuple[Mapping[str, Any] | None, list[str]]:
    custom = client.CustomObjectsApi(api)

    def local_queue(name: str, **kwargs: Any) -> Any:
        return custom.get_namespaced_custom_object(*KUEUE, namespace, "localqueues", name, _preload_content=False, **kwargs)

    def cluster_queue(name: str, **kwargs: Any) -> Any:
        return custom.get_cluster_custom_object(*KUEUE, "clusterqueues", name, _preload_content=False, **kwargs)

    try:
        local = json.loads((await call(f"read the LocalQueue {queue}", local_queue, queue)).data)
    except (ApiException, BackendUnavailable) as error:
        return None, [_why(error, f"LocalQueue {queue} in {namespace}", "the Role needs 'get localqueues'")]
    name = str((local.get("spec") or {}).get("clusterQueue") or "")
    if not name:
        return None, [f"LocalQueue {queue} names no ClusterQueue"]
    try:
        found: dict[str, Any] = json.loads((await call(f"read the ClusterQueue {name}", cluster_queue, name)).data)
    except (ApiException, BackendUnavailable) as error:
        grant = f"bind the ClusterRole paddle-nbext-queue-reader, {QUEUE_READER}"
        return None, [_why(error, f"ClusterQueue {name} (of LocalQueue {queue})", grant)]
    return found, []
