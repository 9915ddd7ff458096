"""The words every surface uses for jobs: replica names, the replica summary and phase colours.

The panel (labextension/src/logic/format.ts), the ipywidgets, `%paddle_jobs`, the reprs and the CLI
all say "trainer 1" and "pservers 2/2 finished · trainers 2/2 succeeded"; this module is the
Python side of that vocabulary and `tests/vectors/replica_words.json` (written by
`python -m paddle_nbext.words`) holds cases both sides are tested against, so a change of
wording shows up as a failing test on whichever side was not changed.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from .model.contract import TERMINAL_PHASES, Phase, ReplicaPhase
from .model.status import JobStatus, RoleCounts

__all__ = [
    "PHASE_COLOURS",
    "PREPARING_PHASE",
    "RoleSummary",
    "is_preparing",
    "replica_name",
    "replica_summary",
    "replica_to_open",
    "role_summaries",
    "shown_phase",
]

#: Badge colours; white text on each passes WCAG AA (>= 4.5:1), the same as the panel's CSS.
PHASE_COLOURS: dict[str, str] = {
    Phase.PENDING: "#5c5c5c",
    Phase.RUNNING: "#1565c0",
    Phase.SUCCEEDED: "#2e7d32",
    Phase.FAILED: "#c62828",
    Phase.CANCELLED: "#a64400",
    Phase.UNKNOWN: "#6a1b9a",
    ReplicaPhase.STOPPED: "#4e5b6a",
}

_ROLE_ORDER = ("pserver", "trainer")
Tone = Literal["active", "ok", "bad", "neutral"]


@dataclass(frozen=True)
class RoleSummary:
    """One role's line: `text` ("trainers 1/2 running"), `tone` (its colour), `title` (every count)."""

    role: str
    text: str
    tone: Tone
    title: str


def replica_name(role: str, index: int) -> str:
    """`trainer 1`: how a replica is named to people (file names keep `trainer-1`)."""
    return f"{role} {index}"


def _label(role: str, count: int) -> str:
    return role if count == 1 else f"{role}s"


def _ordered(roles: Mapping[str, RoleCounts]) -> list[tuple[str, RoleCounts]]:
    def rank(role: str) -> int:
        return _ROLE_ORDER.index(role) if role in _ROLE_ORDER else len(_ROLE_ORDER)

    return sorted(roles.items(), key=lambda item: rank(item[0]))


#: How the job's message begins while its replicas build its requirements environment
#: (`runtime/env_status.py: phase_message`); the API reports such a job Running.
PREPARING_MESSAGE = "Preparing environment"
#: The phase shown for such a job: its processes run, but training has not started.
PREPARING_PHASE = "Preparing"


def is_preparing(status: JobStatus) -> bool:
    """Whether the job's replicas are still building its environment (as the panel's `isPreparing`)."""
    return status.phase not in TERMINAL_PHASES and str(status.message or "").lstrip().startswith(PREPARING_MESSAGE)


def shown_phase(status: JobStatus) -> str:
    """`Preparing` while the environment is built, else the job's phase (badges, rows)."""
    return PREPARING_PHASE if is_preparing(status) else str(status.phase)


def role_summaries(phase: str, roles: Mapping[str, RoleCounts], *, preparing: bool = False) -> list[RoleSummary]:
    """One summary per role that reads naturally for the job's phase.

    While the job is active the fraction is what runs; once it has ended, what happened to the
    replicas.  Parameter servers never exit on their own (the runner stops them once the
    trainers are done), so in a succeeded job they read "finished", not "stopped".  A job in
    phase Unknown (its record cannot be read) claims no count: `trainers ?/2`.  While the replicas
    build the job's environment (`preparing`) they run but do not train: `trainers 2/2 preparing`."""
    ended = phase in TERMINAL_PHASES
    out: list[RoleSummary] = []
    for role, c in _ordered(roles):
        label = _label(role, c.desired)
        title = ", ".join(
            [
                f"{c.desired} {label} wanted",
                f"{c.pending} pending",
                f"{c.running} running",
                f"{c.succeeded} succeeded",
                f"{c.failed} failed",
                f"{c.stopped} stopped",
            ]
        )
        if phase == Phase.UNKNOWN:
            out.append(RoleSummary(role, f"{label} ?/{c.desired}", "neutral", f"{c.desired} {label} wanted, state unknown"))
            continue
        if ended:
            parts = [
                (c.succeeded, "succeeded"),
                (c.failed, "failed"),
                (c.stopped, "finished" if phase == Phase.SUCCEEDED else "stopped"),
                (c.running, "still running"),
                (c.pending, "never started"),
            ]
        else:
            parts = [(c.succeeded, "succeeded"), (c.failed, "failed"), (c.stopped, "stopped")]
        present = [(n, word) for n, word in parts if n > 0]
        if not ended:
            active = "preparing" if preparing else "running"
            text = ", ".join([f"{label} {c.running}/{c.desired} {active}", *(f"{n} {word}" for n, word in present)])
        elif present:
            (n, word), *rest = present
            text = ", ".join([f"{label} {n}/{c.desired} {word}", *(f"{m} {w}" for m, w in rest)])
        else:
            text = f"{label} 0/{c.desired}"
        tone: Tone
        if c.failed > 0:
            tone = "bad"
        elif not ended:
            tone = "active"
        else:
            tone = "ok" if phase == Phase.SUCCEEDED else "neutral"
        out.append(RoleSummary(role, text, tone, title))
    return out


def replica_summary(status: JobStatus) -> str:
    """`pserver 1/1 running · trainers 1/2 running, 1 succeeded` (list rows, cards, the CLI)."""
    summaries = role_summaries(status.phase, status.role_counts(), preparing=is_preparing(status))
    return " · ".join(summary.text for summary in summaries)


def replica_to_open(status: JobStatus) -> tuple[str, int]:
    """The replica whose log a job's view opens on (as the panel's `replicaToOpen`): a failed
    job's failed replica (the one its message names), else the first trainer."""
    replicas = sorted(status.replicas, key=lambda r: (r.role != "trainer", r.role, r.index))
    if status.phase == Phase.FAILED:
        failed = [r for r in replicas if r.phase == ReplicaPhase.FAILED]
        named = [r for r in failed if re.search(rf"\b{re.escape(replica_name(r.role, r.index))}\b", status.message or "")]
        quoted = [r for r in failed if r.reason and r.reason in (status.message or "")]
        for pick in (named, quoted, failed):
            if pick:
                return str(pick[0].role), pick[0].index
    if replicas:
        return str(replicas[0].role), replicas[0].index
    return "trainer", 0


# ---- the shared cases: `python -m paddle_nbext.words` rewrites tests/vectors/replica_words.json

_CASES: list[tuple[str, dict[str, dict[str, int]]]] = [
    (Phase.RUNNING, {"pserver": {"desired": 1, "running": 1}, "trainer": {"desired": 2, "running": 1, "succeeded": 1}}),
    (Phase.PENDING, {"trainer": {"desired": 2, "pending": 2}}),
    (Phase.SUCCEEDED, {"pserver": {"desired": 2, "stopped": 2}, "trainer": {"desired": 2, "succeeded": 2}}),
    (Phase.SUCCEEDED, {"pserver": {"desired": 1, "stopped": 1}, "trainer": {"desired": 1, "succeeded": 1}}),
    (Phase.FAILED, {"pserver": {"desired": 1, "stopped": 1}, "trainer": {"desired": 2, "failed": 1, "stopped": 1}}),
    (Phase.CANCELLED, {"trainer": {"desired": 3, "stopped": 2, "pending": 1}}),
    (Phase.FAILED, {"trainer": {"desired": 2}}),
    (Phase.RUNNING, {"trainer": {"desired": 4, "running": 2, "failed": 1, "pending": 1}}),
    (Phase.UNKNOWN, {"pserver": {"desired": 1}, "trainer": {"desired": 2}}),
]


def vector_cases() -> list[dict[str, object]]:
    """The cases with the words this module gives them."""
    cases: list[dict[str, object]] = []
    for phase, roles in _CASES:
        counts = {role: RoleCounts(**values) for role, values in roles.items()}
        summaries = role_summaries(phase, counts)
        cases.append(
            {
                "phase": phase,
                "roles": {role: vars(c) for role, c in counts.items()},
                "summaries": [vars(s) for s in summaries],
                "text": " · ".join(s.text for s in summaries),
            }
        )
    return cases


def write_vectors(path: Path) -> None:
    body = {
        "about": "Replica words both sides must produce; written by `python -m paddle_nbext.words`.",
        "replica_name": {"role": "trainer", "index": 1, "text": replica_name("trainer", 1)},
        "phase_colours": dict(PHASE_COLOURS),
        "cases": vector_cases(),
    }
    path.write_text(json.dumps(body, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":  # pragma: no cover - a developer's command
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parents[1] / "tests" / "vectors" / "replica_words.json"
    write_vectors(target)
    print(f"wrote {target}")
