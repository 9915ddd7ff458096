"""`jobset` workload mode: the job's Jobs as one `jobset.x-k8s.io/v1alpha2` JobSet.

A queue (Kueue) admits a JobSet as one Workload: all of its pods get quota at once or none do,
so pservers never hold quota while the trainers wait (three native Jobs are three Workloads,
admitted in parts).  The replicated Jobs are the ones `jobs` mode creates (manifests.py), so the
pods, the launcher, the master and status are the same; what changes:

- names: JobSet `<obj>` (the job's object name, manifests.object_name) names each child Job
  `<obj>-<role>-0` and its pods' hostnames `<obj>-<role>-0-<index>` (the endpoints in the
  launcher's environment say so);
- DNS: JobSet's network settings make the headless Service `<obj>` (not ready addresses
  published, as peers must resolve before they are ready), so the plan has no Service of ours;
- success: `successPolicy` ends the JobSet when every trainer succeeded (JobSet then stops the
  pservers and the master, as the master's policy would);
- failure: JobSet's own failure policy restarts the whole job, as the master does in `jobs`
  mode (a Paddle replica restarted alone never rejoins its gang): a child Job fails at its first
  failed pod (`backoffLimit: 0`), and JobSet then makes every child Job again, up to
  `max_restarts` times; a Job failed by its DisruptionTarget rule (an eviction, drain or
  preemption) restarts the JobSet without using up `max_restarts`;
- `ttlSecondsAfterFinished` moves from the Jobs to the JobSet (JobSet deletes its children).
"""

from __future__ import annotations

import copy
from typing import Any

from paddle_nbext.model.contract import JOB_LABEL, ROLE_LABEL, Role
from paddle_nbext.model.spec import JobSpec

from ..settings import ManifestSettings

GROUP = "jobset.x-k8s.io"
VERSION = "v1alpha2"
API_VERSION = f"{GROUP}/{VERSION}"
PLURAL = "jobsets"
#: The role label of the JobSet object itself (a part of every job in this mode, not a replica `Role`).
WORKLOAD = "workload"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"


def _replicated(job: dict[str, Any]) -> dict[str, Any]:
    """A `replicatedJobs[]` entry from one of the plan's Job manifests (its role label names it)."""
    meta = job["metadata"]
    spec = copy.deepcopy(job["spec"])
    spec.pop("ttlSecondsAfterFinished", None)
    return {
        "name": meta["labels"][ROLE_LABEL],
        "replicas": 1,
        "template": {"metadata": {"labels": dict(meta["labels"]), "annotations": dict(meta["annotations"])}, "spec": spec},
    }


def jobset_of(spec: JobSpec, settings: ManifestSettings, jobs: list[dict[str, Any]]) -> dict[str, Any]:
    """The JobSet `<obj>` running `jobs` (the master's and the replicas' Job manifests, which
    carry the metadata every object of the job has)."""
    meta = copy.deepcopy(jobs[0]["metadata"])
    name = meta["labels"][JOB_LABEL]  # the job's object name (manifests.object_name)
    meta["name"] = name
    meta["labels"][ROLE_LABEL] = WORKLOAD
    queue = settings.queue_of(spec.queue)
    if queue:
        meta["labels"][QUEUE_LABEL] = queue
    body: dict[str, Any] = {
        "network": {"enableDNSHostnames": True, "subdomain": name, "publishNotReadyAddresses": True},
        "successPolicy": {"operator": "All", "targetReplicatedJobs": [Role.TRAINER.value]},
        "failurePolicy": {
            "maxRestarts": spec.max_restarts,
            "rules": [{"action": "RestartJobSetAndIgnoreMaxRestarts", "onJobFailureReasons": ["PodFailurePolicy"]}],
        },
        "replicatedJobs": [_replicated(job) for job in jobs],
    }
    if settings.ttl_seconds_after_finished is not None:
        body["ttlSecondsAfterFinished"] = settings.ttl_seconds_after_finished
    return {"apiVersion": API_VERSION, "kind": "JobSet", "metadata": meta, "spec": body}
