"""A job's goodput: the share of its wall time spent training, the figure users compare
recoveries by (issue 46).

Training time is a replica's first reported step to its last, less every recovery: from the last
point before a restart (the failure, as near as the points tell it) to the first point of the
process that resumed (`ReplicaMetrics.restarts`: where each later process started reporting).
Wall time is from the job's start (its first replica running) to its end, or to now while it
runs.  The job's figure is its worst trainer's (the gang trains only as fast as its slowest
member, as `metrics.progress` takes the slowest); replicas that never reported give no figure,
and a job without any gives none (`None`: "unknown", never 0 %).  Pure: the caller reads the
files (`MetricsCache.refreshed`) in a thread.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from paddle_nbext.model.contract import Role

from .metrics import MetricsFile, ReplicaMetrics


@dataclass(frozen=True)
class ReplicaGoodput:
    """One replica's training and lost seconds (`lost`: between failures and resumed steps)."""

    training: float
    lost: float
    recoveries: int


def replica_goodput(state: ReplicaMetrics) -> ReplicaGoodput | None:
    """What `state`'s points say, None before its second point."""
    if state.first is None or state.last is None or state.count < 2:
        return None
    lost = sum(max(0.0, float(r["time"]) - float(r.get("stopped", r["time"]))) for r in state.restarts)
    span = state.last[0] - state.first[0]
    return ReplicaGoodput(max(0.0, span - lost), lost, len(state.restarts))


def job_goodput(
    replicas: Iterable[tuple[MetricsFile, ReplicaMetrics]], started: float | None, ended: float | None, now: float
) -> dict[str, Any] | None:
    """`{"fraction", "training_seconds", "lost_seconds", "wall_seconds", "recoveries"}` of the
    job's worst trainer (the only role that reports training steps), None when unknown."""
    if started is None:
        return None
    wall = max(0.0, (ended if ended is not None else now) - started)
    worst: ReplicaGoodput | None = None
    for file, state in replicas:
        if file.role != Role.TRAINER.value:
            continue
        figure = replica_goodput(state)
        if figure is not None and (worst is None or figure.training < worst.training):
            worst = figure
    if worst is None or wall <= 0:
        return None
    return {
        "fraction": min(1.0, worst.training / wall),
        "training_seconds": round(worst.training, 3),
        "lost_seconds": round(worst.lost, 3),
        "wall_seconds": round(wall, 3),
        "recoveries": worst.recoveries,
    }
