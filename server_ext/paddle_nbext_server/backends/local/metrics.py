"""Where a local job's replicas write what they `report()`: `<job dir>/logs/<role>-<index>.metrics.jsonl`,
beside their logs (the launcher is told so by `Plan.launcher_env`).  Blocking (reads the job's
records): the backend runs it in a thread."""

from __future__ import annotations

from ...metrics import MetricsFile
from ...runtime import launcher
from .store import JobStore


def metrics_files(store: JobStore, name: str, owner: str) -> list[MetricsFile]:
    """Every replica's metrics file of the owner's job, in the job's replica order."""
    job_dir, files = store.owned(name, owner)
    return [
        MetricsFile(replica.role, replica.index, job_dir / "logs" / launcher.metrics_name(replica.role, replica.index))
        for replica in files.record.status.replicas
    ]
