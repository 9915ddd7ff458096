"""Job status as every client sees it (REST, events, panel, widgets), the same on all backends.

Phases: Pending, Running, Succeeded, Failed, Cancelled.  Replica phases add `Stopped`: a replica
the job runner ended on purpose (pservers after the trainers succeeded, everything on cancel or
after another replica failed) — that end is normal and is never reported as a failure.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

PENDING, RUNNING, SUCCEEDED, FAILED, CANCELLED, STOPPED = (
    "Pending", "Running", "Succeeded", "Failed", "Cancelled", "Stopped",
)  # fmt: skip
JOB_PHASES = (PENDING, RUNNING, SUCCEEDED, FAILED, CANCELLED)
TERMINAL_PHASES = frozenset({SUCCEEDED, FAILED, CANCELLED})
REPLICA_PHASES = (PENDING, RUNNING, SUCCEEDED, FAILED, STOPPED)


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


@dataclass
class ReplicaStatus:
    role: str  # "pserver" | "trainer"
    index: int
    phase: str = PENDING
    reason: str | None = None  # in words: "OOMKilled", "Exit code 3", "Unschedulable: 0/3 nodes ..."
    exit_code: int | None = None
    restarts: int = 0
    started: str | None = None
    finished: str | None = None


@dataclass
class RoleCounts:
    desired: int = 0
    pending: int = 0
    running: int = 0
    succeeded: int = 0
    failed: int = 0
    stopped: int = 0


@dataclass
class JobStatus:
    name: str
    owner: str
    backend: str
    phase: str
    message: str
    spec: dict[str, Any]
    created: str
    started: str | None = None
    finished: str | None = None
    replicas: list[ReplicaStatus] = field(default_factory=list)

    @property
    def terminal(self) -> bool:
        return self.phase in TERMINAL_PHASES

    def role_counts(self) -> dict[str, RoleCounts]:
        counts: dict[str, RoleCounts] = {}
        for role, key in (("pserver", "pservers"), ("trainer", "trainers")):
            desired = int(self.spec.get(key, 0) or 0)
            if desired:
                counts[role] = RoleCounts(desired=desired)
        for replica in self.replicas:
            bucket = counts.setdefault(replica.role, RoleCounts())
            attr = replica.phase.lower()
            setattr(bucket, attr, getattr(bucket, attr) + 1)
        return counts

    def to_dict(self) -> dict[str, Any]:
        """The JSON body of `GET /jobs/{name}` (and of each item of `GET /jobs`)."""
        return {
            "name": self.name,
            "owner": self.owner,
            "backend": self.backend,
            "phase": self.phase,
            "message": self.message,
            "spec": self.spec,
            "created": self.created,
            "started": self.started,
            "finished": self.finished,
            # Shallow copies (every field is a scalar): `asdict` deep-copies and made listing
            # 1,000 jobs cost ~100 ms of event-loop time.
            "roles": {role: dict(vars(c)) for role, c in self.role_counts().items()},
            "replicas": [dict(vars(r)) for r in sorted(self.replicas, key=lambda r: (r.role, r.index))],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "JobStatus":
        return cls(
            name=data["name"],
            owner=data["owner"],
            backend=data["backend"],
            phase=data["phase"],
            message=data.get("message", ""),
            spec=data.get("spec", {}),
            created=data["created"],
            started=data.get("started"),
            finished=data.get("finished"),
            replicas=[ReplicaStatus(**r) for r in data.get("replicas", [])],
        )
