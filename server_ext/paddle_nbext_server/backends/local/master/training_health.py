"""The training health a job's master keeps (issue 36): resource-use samples (`usage.json`),
memory warnings, the first step and each new checkpoint in the timeline, and stalls.

The master's loop feeds it (`sample_usage`, the memory check's readings, `check` once a second
while the job runs) and acts on what it finds: a stall is said here, and what follows it (a
warning only, a restart, an end: `Plan.on_stall`) is `lifecycle.Master.check_health`'s.
"""

from __future__ import annotations

import time
from pathlib import Path

from paddle_nbext.model.contract import Phase, ReplicaPhase

from ....jobfiles import timeline
from ....runtime import health_rules, paddle_nbext_job, policy
from .. import usage
from ..records import Plan
from .process_table import ProcessTable
from .replica import Replica
from .stall_watch import StallWatch
from .usage_sampler import UsageSampler

#: Seconds between looks for a stall, a new checkpoint and the first step (a few `stat`s each).
HEALTH_CHECK_EVERY = 1.0


class TrainingHealth:
    """One job's readings and warnings, kept across its attempts."""

    def __init__(self, job_dir: Path, plan: Plan, writer: timeline.TimelineWriter) -> None:
        self.job_dir = job_dir
        self.plan = plan
        self.timeline = writer
        self.usage = UsageSampler(plan.replicas)
        self.memory_watch = health_rules.MemoryWatch(plan.memory_warn_after)
        self.stall_watch = StallWatch(job_dir / "logs", float(plan.stall_timeout or 0))
        self.stall: health_rules.Stall | None = None  # the stall said, while it lasts
        self.stall_words = ""  # its words as said when it was found (the message stays the same)
        self.attempt_started_wall = time.time()
        self._next_usage = 0.0
        self._next_health = 0.0
        self._checkpoint_step: int | None = None
        self._first_step_said = False

    def begin_attempt(self, resume: paddle_nbext_job.Checkpoint | None) -> None:
        """A new whole-job attempt starts (from `resume`, the checkpoint it resumes from): its
        first step is said again, a stall of the attempt before is forgotten."""
        self.attempt_started_wall = time.time()
        self._first_step_said = False
        self.stall = None
        self._checkpoint_step = resume.step if resume is not None else None

    def ended_words(self, replica: Replica) -> str:
        """The timeline's words for a replica that ended on its own: finished, or failed (why,
        and its peak memory)."""
        who = f"{replica.role} {replica.index}"
        if replica.phase == ReplicaPhase.SUCCEEDED:
            return f"{who} finished."
        peak = self.usage.replicas[replica.key].peak_memory
        peak_words = f"; peak memory {health_rules.gib(peak)}" if peak else ""
        return f"{who} failed: {replica.reason or policy.describe_exit(replica.exit_code or 0)}{peak_words}."

    def sample_usage(self, table: ProcessTable, replicas: list[Replica]) -> None:
        """Every `usage_interval` seconds: read each replica's CPU and memory from `table` and
        rewrite usage.json."""
        if self.plan.usage_interval <= 0 or time.monotonic() < self._next_usage:
            return
        self._next_usage = time.monotonic() + self.plan.usage_interval
        leaders = {r.key: (process.pid if r.phase == ReplicaPhase.RUNNING and (process := r.live_process) else None) for r in replicas}
        self.usage.sample(table, leaders)
        self.write_usage(replicas)

    def sample_the_end(self, replicas: list[Replica]) -> None:
        """The last usage.json of a job that ended: nothing runs any more, figures blank, peaks kept."""
        if self.plan.usage_interval > 0:
            self.usage.sample(ProcessTable(), {})
            self.write_usage(replicas)

    def write_usage(self, replicas: list[Replica]) -> None:
        usage.write(self.job_dir, self.usage.document({r.key: r.phase for r in replicas}, self.plan.usage_interval))

    def with_warnings(self, message: str) -> str:
        """The job's message with what is wrong right now: a stall first, then memory warnings."""
        parts = [message]
        if self.stall is not None:
            parts.insert(0, f"Training is stalled: {self.stall_words}.")
        parts.extend(f"Warning: {words}." for words in self.memory_watch.warned.values())
        return " ".join(parts)

    def check(self, phase: str, replicas: list[Replica]) -> health_rules.Stall | None:
        """Once a second while the job runs: checkpoints and the first step into the timeline,
        and the stall watch.  A stall not said before is said (`stall`, `stall_words`, the
        timeline) and returned for the master to act on; else None."""
        if phase != Phase.RUNNING or time.monotonic() < self._next_health:
            return None
        self._next_health = time.monotonic() + HEALTH_CHECK_EVERY
        trainers = [r.index for r in replicas if r.role == "trainer" and r.phase == ReplicaPhase.RUNNING]
        if not self._first_step_said:  # before the checkpoints: a step comes before its checkpoint
            step = self.stall_watch.first_step(trainers, self.attempt_started_wall)
            if step is not None:
                self._first_step_said = True
                self.timeline.add("first_step", f"First progress reported: step {step}.")
        latest = paddle_nbext_job.latest(self.plan.checkpoint_dir)
        if latest is not None and latest.step != self._checkpoint_step:
            self._checkpoint_step = latest.step
            self.timeline.add("checkpoint", f"Checkpoint at step {latest.step} saved.")
        now = time.time()
        stall = self.stall_watch.check(trainers, self.attempt_started_wall, now)
        if stall is None:
            if self.stall is not None:
                quiet = health_rules.span(now - self.stall.quiet_since)
                self.timeline.add("recovered", f"Progress again after {quiet} without any (trainer {self.stall.index}).")
                self.stall = None
            return None
        if self.stall is not None and self.stall.quiet_since == stall.quiet_since:
            return None  # the same stall, said already
        self.stall = stall
        self.stall_words = words = stall.words(now)
        self.timeline.add("warning", f"Stalled: {words}.", role="trainer", index=stall.index)
        return stall
