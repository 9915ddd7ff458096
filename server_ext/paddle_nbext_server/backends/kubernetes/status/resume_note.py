"""The words a Kubernetes job says after a whole-job restart, as the local backend's do:
"Training is running (restart 1 of 3 (trainer 1 failed); resumed from step 1200)."

The in-cluster master cannot read the user's home, so it cannot say which checkpoint the replicas
of a new attempt resumed from; the server can (the home is mounted where it runs, at the same
path as in the pods).  This module is the pure part: which attempt a job's status is about and
how its words read (`question`, `with_note`); reading the checkpoint directory is
`checkpoints.resumed_checkpoint`, which `Reconciler` runs in a thread and caches per attempt.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from paddle_nbext.model.contract import ATTEMPT_LABEL, Phase, parse_time
from paddle_nbext.model.status import JobStatus

from ....runtime import replicas
from .job_status import record_spec


@dataclass(frozen=True)
class Question:
    """What to look up for one job: the checkpoint the replicas of `attempt` resumed from."""

    #: `PADDLE_NBEXT_ATTEMPT` of the current attempt's replicas: `<ours>.<JobSet's>` from their
    #: pod's labels, as the downward API gives it them (manifests.role_env).
    attempt: str
    #: When the attempt's first replica started (epoch seconds), None when none has.
    started: float | None
    #: "restart 2 of 3 (trainer 1 failed)", "restart 1 (trainer 0 was evicted)", or "" for the
    #: first attempt of a job that Resume started.
    restart: str


def attempt_label(pod: dict[str, Any]) -> str:
    labels = (pod.get("metadata") or {}).get("labels") or {}
    return f"{labels.get(ATTEMPT_LABEL) or ''}.{labels.get(replicas.JOBSET_RESTART_LABEL) or ''}"


def _number(text: str) -> int:
    return int(text) if text.isdigit() else 0


def restart_words(record: dict[str, Any], jobset_restarts: int) -> str:
    """ "restart N of M (cause)" for a restart after failures (they use up `max_restarts`),
    "restart N (cause)" once an eviction or preemption was one (those do not), "" before any."""
    restarts = replicas.Restarts.of(record)
    count = restarts.failures + restarts.disruptions
    if count == 0:
        return f"restart {jobset_restarts}" if jobset_restarts else ""  # jobset mode: JobSet counts them
    bound = "" if restarts.disruptions else f" of {int(record_spec(record).get('max_restarts') or 0)}"
    cause = restarts.message.split(": ", 1)[1] if ": " in restarts.message else ""
    cause = cause.split("; all replicas restarting", 1)[0].split(" with ", 1)[0].split(" (", 1)[0].strip()
    return f"restart {count}{bound}" + (f" ({cause})" if cause else "")


def question(record: dict[str, Any], pods: list[dict[str, Any]], status: JobStatus) -> Question | None:
    """The lookup this status needs, None when it needs none: a job that has not restarted and
    was not started by Resume, a running one whose current attempt has no pod to tell its
    attempt, and any end but success (a failed or cancelled job's message says why it ended; the
    local backend's says so too).  A success whose pods are gone tells its attempt by the record
    (the master's restarts): a server that starts after the job ended says how it got there."""
    if status.phase not in (Phase.RUNNING, Phase.SUCCEEDED):
        return None
    current = replicas.current_pods(record, pods)
    if current:
        labels = [attempt_label(pod) for pod in current]
        label = max(labels, key=lambda text: tuple(_number(part) for part in text.split(".", 1)))
    elif status.phase == Phase.SUCCEEDED:
        label = f"{replicas.Restarts.of(record).attempt}."  # `jobs` mode's restarts; JobSet's left no trace
    else:
        return None
    restart = restart_words(record, _number(label.split(".", 1)[1]))
    if not restart and status.resumed_from is None:
        return None
    started = parse_time(status.started) if status.started else None
    return Question(label, started.timestamp() if started is not None else None, restart)


def note_of(asked: Question, resumed: str) -> str:
    """The words in parentheses: "restart 1 of 3 (trainer 1 failed); resumed from step 40"."""
    return f"{asked.restart}; {resumed}" if asked.restart else resumed


def with_note(status: JobStatus, note: str) -> JobStatus:
    """The status with `note` in its message where the local master puts it: a running job's
    "Training is running." / "1/2 trainers finished." and a success's "All 2 trainers finished
    successfully." end in "(<note>)."; any other message stays as it is."""
    message = status.message
    if not note or not message.endswith((" running.", " finished.", " successfully.")) or f"({note})" in message:
        return status
    return dataclasses.replace(status, message=f"{message[:-1]} ({note}).")
