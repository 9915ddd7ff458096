"""Where a local job's replicas write what they `report()`: `<job dir>/logs/<role>-<index>.metrics.jsonl`,
beside their logs (the launcher is told so by `Plan.launcher_env`), and for a trainer of several
ranks one file per rank (`metrics.replica_files`).  Blocking (reads the job's records): the
backend runs it in a thread."""

from __future__ import annotations

from ...jobfiles.metrics import MetricsFile, ranks_per_trainer, replica_files
from .store import JobStore


def metrics_files(store: JobStore, name: str, owner: str) -> list[MetricsFile]:
    """Every replica's metrics files (each rank's) of the owner's job, in the job's replica order."""
    job_dir, files = store.owned(name, owner)
    status = files.record.status
    ranks = ranks_per_trainer(status.spec)
    directory = job_dir / "logs"
    return [file for replica in status.replicas for file in replica_files(directory, replica.role, replica.index, ranks)]
