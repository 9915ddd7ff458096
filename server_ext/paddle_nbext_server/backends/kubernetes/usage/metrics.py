"""Where a Kubernetes job's replicas write what they `report()`: the launcher in each pod names
`~/.paddle-jobs/<job>/logs/<role>-<index>.metrics.jsonl` on the home volume, beside the attempt
logs (and for a trainer of several ranks one file per rank, `metrics.replica_files`), and the
notebook sees that home at the same path, so the server reads the files directly (no API call,
and they outlive the pods).  Every attempt of a replica appends to its one file."""

from __future__ import annotations

from paddle_nbext.model.contract import Role
from paddle_nbext.model.status import JobStatus

from ....jobfiles.metrics import MetricsFile, ranks_per_trainer, replica_files
from ..logs.replica_logs import log_dir


def metrics_files(home: str, status: JobStatus) -> list[MetricsFile]:
    """Every replica's metrics files (each rank's) of the job (pservers first), from its spec's
    replica counts."""
    directory = log_dir(home, status.name)
    ranks = ranks_per_trainer(status.spec)
    files = []
    roles = (Role.PSERVER, Role.TRAINER) if status.spec.get("mode") == "ps" else (Role.TRAINER,)
    for role in roles:
        for index in range(int(status.spec.get(f"{role.value}s") or 0)):
            files.extend(replica_files(directory, role.value, index, ranks))
    return files
