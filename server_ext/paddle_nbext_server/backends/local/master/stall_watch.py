"""The local master's stall watch over its job's logs dir (the rules and words are
`runtime/health_rules.py`, shared with the Kubernetes replicas' own watch):

`StallWatch`: a Running job whose trainer made no progress (no `report()` and no log output)
for the job's `stall_timeout`.  Progress is read from the times the trainer's files were last
written (its log and its metrics files), so it costs a few `stat`s per check and nothing in the
job.  It is armed only once a trainer `report()`ed in the current attempt: a job that never
reports (a plain script, a quiet pserver-only phase) is never called stalled.

It returns words for the job's message and timeline; what follows (a warning, a restart, an end)
is the master's decision (`lifecycle.Master.check_health`).
"""

from __future__ import annotations

from pathlib import Path

from ....runtime import health_rules
from ....runtime.health_rules import Stall


class StallWatch:
    """Reads the trainers' files in `logs` for signs of progress."""

    def __init__(self, logs: Path, timeout: float) -> None:
        self.logs = logs
        self.timeout = timeout

    def metrics_files(self, index: int) -> list[Path]:
        """The trainer's metrics files: its own and, with ranks, each rank's."""
        return [Path(path) for path in health_rules.metrics_files(str(self.logs), index)]

    def check(self, trainers: list[int], attempt_started: float, now: float) -> Stall | None:
        """The trainer (of the running `trainers`) quiet for longest, when it has been quiet for
        the timeout and some trainer reported in this attempt (started at `attempt_started`,
        epoch seconds); else None."""
        if self.timeout <= 0 or not trainers:
            return None
        armed = False
        quietest: tuple[float, int] | None = None
        for index in trainers:
            metrics = [(path, health_rules.mtime(str(path))) for path in self.metrics_files(index)]
            reported = [stamp for _, stamp in metrics if stamp >= attempt_started]
            armed = armed or bool(reported)
            last = max([attempt_started, health_rules.mtime(str(self.logs / f"trainer-{index}.log")), *reported])
            if quietest is None or last < quietest[0]:
                quietest = (last, index)
        if not armed or quietest is None or now - quietest[0] < self.timeout:
            return None
        return Stall(index=quietest[1], quiet_since=quietest[0], step=self.last_step(trainers))

    def first_step(self, trainers: list[int], attempt_started: float) -> int | None:
        """The first step any trainer reported in this attempt, once one has (else None): the
        step of the earliest point of the attempt in any trainer's (or rank's) file, not the last
        one written by the time the master looks."""
        firsts = [
            point
            for index in trainers
            for path in self.metrics_files(index)
            if health_rules.mtime(str(path)) >= attempt_started
            and (point := health_rules.first_point_since(str(path), attempt_started)) is not None
        ]
        return min(firsts)[1] if firsts else None

    def last_step(self, trainers: list[int]) -> int | None:
        steps = [
            step for index in trainers for path in self.metrics_files(index) if (step := health_rules.last_step(str(path))) is not None
        ]
        return max(steps) if steps else None
