"""Volcano as the gang scheduler (`c.KubernetesBackend.gang_scheduler = 'volcano'`): the plan of
`manifests.build_plan` with one `scheduling.volcano.sh/v1beta1` PodGroup for the job.

Volcano's scheduler binds a PodGroup's pods only when `minMember` of them can all be placed, so
pservers never hold nodes while trainers wait.  What this adds to the plan, and why:

- the PodGroup `<obj>` (the record's name; another kind, so no clash), right after the record
  and owned by it like every other object, so deleting the record removes it;
- `minMember` = pservers + trainers: every replica, because a Paddle job with one replica
  missing cannot start (the trainers block in their first barrier);
- `minResources` = the sum of those replicas' requests, read from the pod templates the plan
  creates, so Volcano's queue reserves what the pods really ask for;
- `queue` = the job's queue, else the default (`ManifestSettings.queue_of`): with Volcano the
  queue field names a Volcano Queue (a cluster object), not a Kueue LocalQueue, so the Kueue
  label is taken off the workload objects;
- `priorityClassName` = the pods' priority class (Volcano orders and preempts gangs by it);
- the pserver and trainer pod templates get `schedulerName: volcano` and the annotation
  `scheduling.k8s.io/group-name: <obj>` that ties them to the PodGroup.

The master is left out of the gang and keeps the default scheduler: it is a 10m CPU pod that
must run while the gang waits (it records a cancel or a timeout and stops the job's parts even
without the server), and as a member it would make the gang wait for it or hold nodes for it.
"""

from __future__ import annotations

import copy
from typing import Any

from paddle_nbext.model.contract import ROLE_LABEL, ROLES
from paddle_nbext.model.quantity import Quantity
from paddle_nbext.model.spec import JobSpec

from ..settings import JOBS_MODE, ManifestSettings
from .jobset import QUEUE_LABEL

GROUP = "scheduling.volcano.sh"
VERSION = "v1beta1"
API_VERSION = f"{GROUP}/{VERSION}"
PLURAL = "podgroups"
KIND = "PodGroup"
SCHEDULER_NAME = "volcano"
GROUP_NAME_ANNOTATION = "scheduling.k8s.io/group-name"
#: The role label of the PodGroup itself (a part of every job under Volcano, not a replica `Role`).
POD_GROUP_ROLE = "podgroup"


def _replica_pod_templates(plan: list[dict[str, Any]]) -> list[tuple[dict[str, Any], int]]:
    """(pod template, replica count) of every pserver and trainer Job in the plan."""
    found = []
    for obj in plan:
        if obj.get("kind") == "Job" and obj["metadata"]["labels"].get(ROLE_LABEL) in ROLES:
            found.append((obj["spec"]["template"], int(obj["spec"]["parallelism"])))
    return found


def gang_requests(templates: list[tuple[dict[str, Any], int]]) -> dict[str, str]:
    """The gang's total requests: per resource, the sum over replicas of their containers'
    requests (canonical quantities, as Kubernetes writes them back)."""
    totals: dict[str, Quantity] = {}
    for template, count in templates:
        for container in template["spec"]["containers"]:
            for resource, amount in ((container.get("resources") or {}).get("requests") or {}).items():
                totals[resource] = totals.get(resource, Quantity.parse(0)) + Quantity.parse(amount) * count
    return {resource: total.canonical() for resource, total in sorted(totals.items())}


def _owned_metadata(plan: list[dict[str, Any]]) -> dict[str, Any]:
    """The metadata every owned object of the job has (labels, annotations, ownerReferences)."""
    owned = next(obj for obj in plan if obj["metadata"].get("ownerReferences"))
    return copy.deepcopy(owned["metadata"])


def pod_group(name: str, spec: JobSpec, settings: ManifestSettings, plan: list[dict[str, Any]]) -> dict[str, Any]:
    templates = _replica_pod_templates(plan)
    meta = _owned_metadata(plan)
    meta["name"] = name
    meta["labels"][ROLE_LABEL] = POD_GROUP_ROLE
    meta["labels"].pop(QUEUE_LABEL, None)
    body: dict[str, Any] = {
        "minMember": sum(count for _, count in templates),
        "minResources": gang_requests(templates),
    }
    queue = settings.queue_of(spec.queue)
    if queue:
        body["queue"] = queue
    if settings.priority_class_name:
        body["priorityClassName"] = settings.priority_class_name
    return {"apiVersion": API_VERSION, "kind": KIND, "metadata": meta, "spec": body}


def with_pod_group(plan: list[dict[str, Any]], spec: JobSpec, settings: ManifestSettings) -> list[dict[str, Any]]:
    """A copy of `plan` (record first) with the job's PodGroup after the record and the replica
    pods scheduled by Volcano as members of it."""
    objects = copy.deepcopy(plan)
    name = objects[0]["metadata"]["name"]
    for obj in objects:
        obj["metadata"].get("labels", {}).pop(QUEUE_LABEL, None)  # the queue is Volcano's, in the PodGroup
    for template, _ in _replica_pod_templates(objects):
        template["spec"]["schedulerName"] = SCHEDULER_NAME
        template["metadata"].setdefault("annotations", {})[GROUP_NAME_ANNOTATION] = name
    return [objects[0], pod_group(name, spec, settings, objects), *objects[1:]]


def missing_api_problem() -> str:
    """What is wrong, and the fix, when Volcano is chosen but its PodGroup API is not served."""
    return (
        f"c.KubernetesBackend.gang_scheduler is 'volcano' but the cluster serves no PodGroup API ({API_VERSION}): "
        "install Volcano (admin guide: 'Volcano') or set c.KubernetesBackend.gang_scheduler = ''"
    )


def combination_problem(workload_mode: str) -> str | None:
    """Volcano with `jobset` mode is refused: that mode exists so that Kueue admits the job
    whole, Volcano gangs the pods itself, and the one `queue` field cannot name both a Kueue
    LocalQueue and a Volcano Queue; two gang mechanisms on one job would each wait on the other."""
    if workload_mode == JOBS_MODE:
        return None
    return (
        f"c.KubernetesBackend.gang_scheduler 'volcano' works with workload_mode 'jobs' only (it is '{workload_mode}'): "
        "Volcano gang-schedules the job's Jobs itself; use workload_mode = 'jobs' with Volcano, or "
        "gang_scheduler = '' with JobSet and Kueue (admin guide: 'Volcano')"
    )
