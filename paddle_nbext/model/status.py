"""Job status as every client sees it (REST, events, panel, widgets, the kernel's client), the
same on all backends: the server builds it, the REST body is its `to_dict()`, and the kernel side
reads that body back with `from_dict()`, so both ends hold the same typed object.

Phases are `paddle_nbext.model.contract.Phase` (job) and `ReplicaPhase` (a replica; its `Stopped` is a
replica the job runner ended on purpose, a normal end never reported as a failure).

Reading is tolerant on purpose: a kernel may talk to a newer server, so keys this version does
not know are ignored and optional keys it misses take their defaults; only what identifies a job
(`name`, `phase`) or a replica (`role`, `index`) is required.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from .contract import ROLES, TERMINAL_PHASES, ReplicaPhase
from .quota import QuotaCheck

__all__ = ["JobStatus", "ReplicaStatus", "RoleCounts", "SubmitPlan", "resumed_link"]


@dataclass
class ReplicaStatus:
    role: str  # a `Role`
    index: int
    phase: str = ReplicaPhase.PENDING
    reason: str | None = None  # in words: "OOMKilled", "Exit code 3", "Unschedulable: 0/3 nodes ..."
    exit_code: int | None = None
    restarts: int = 0
    started: str | None = None
    finished: str | None = None

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ReplicaStatus:
        """A replica of a REST body or a stored record; unknown keys are ignored."""
        return cls(**{key: value for key, value in data.items() if key in _REPLICA_FIELDS})


_REPLICA_FIELDS = frozenset(f.name for f in fields(ReplicaStatus))


@dataclass
class RoleCounts:
    desired: int = 0
    pending: int = 0
    running: int = 0
    succeeded: int = 0
    failed: int = 0
    stopped: int = 0


#: The `RoleCounts` field each replica phase is counted in (`Pending` -> `pending`, ...).
_COUNTED = {phase.value: phase.value.lower() for phase in ReplicaPhase}


@dataclass
class JobStatus:
    name: str
    owner: str
    backend: str
    phase: str  # a `Phase`
    message: str
    spec: dict[str, Any]
    created: str
    started: str | None = None
    finished: str | None = None
    replicas: list[ReplicaStatus] = field(default_factory=list)
    #: The job this one was started from by Resume (`POST /jobs/{name}/resume`): `{"job": name,
    #: "step": the checkpoint's step}`; None for a job submitted as new.
    resumed_from: dict[str, Any] | None = None

    @property
    def terminal(self) -> bool:
        return self.phase in TERMINAL_PHASES

    def role_counts(self) -> dict[str, RoleCounts]:
        counts: dict[str, RoleCounts] = {}
        for role in ROLES:
            key = f"{role}s"  # the spec's replica count field: pservers, trainers
            desired = int(self.spec.get(key, 0) or 0)
            if desired:
                counts[role] = RoleCounts(desired=desired)
        for replica in self.replicas:
            bucket = counts.setdefault(replica.role, RoleCounts())
            attr = _COUNTED.get(replica.phase)
            if attr is not None:  # a phase of a newer server is shown in the replica list only
                setattr(bucket, attr, getattr(bucket, attr) + 1)
        return counts

    def to_dict(self) -> dict[str, Any]:
        """The JSON body of `GET /jobs/{name}` (and of each item of `GET /jobs`); `resumed_from`
        only for a job that Resume started."""
        body: dict[str, Any] = {
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
        if self.resumed_from is not None:
            body["resumed_from"] = dict(self.resumed_from)
        return body

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> JobStatus:
        """A REST body (or a stored status record) read back; `roles` is derived, so it is not read."""
        return cls(
            name=data["name"],
            owner=data.get("owner", ""),
            backend=data.get("backend", ""),
            phase=data["phase"],
            message=data.get("message", ""),
            spec=data.get("spec", {}),
            created=data.get("created", ""),
            started=data.get("started"),
            finished=data.get("finished"),
            replicas=[ReplicaStatus.from_dict(r) for r in data.get("replicas") or []],
            resumed_from=resumed_link(data.get("resumed_from")),
        )


def resumed_link(value: Any) -> dict[str, Any] | None:
    """A `resumed_from` value as stored or sent (`{"job", "step"}`), None when it names no job."""
    if not isinstance(value, Mapping) or not isinstance(value.get("job"), str) or not value["job"]:
        return None
    step = value.get("step")
    return {"job": value["job"], "step": step if isinstance(step, int) and not isinstance(step, bool) else None}


@dataclass
class SubmitPlan:
    """What a dry run answers (`POST /jobs?dry_run=true`): the job as it would start (`job`, its
    `spec` with the server's defaults applied) and the backend's plan, which is backend specific:
    the processes to start (local) or the namespace and manifests (kubernetes). Nothing exists.
    `quota`: what the cluster's quota says about the job (kubernetes; None where not checked)."""

    job: JobStatus
    plan: dict[str, Any]
    quota: QuotaCheck | None = None

    @property
    def spec(self) -> dict[str, Any]:
        return self.job.spec

    @property
    def environment_words(self) -> str | None:
        """What the job's requirements would do ("requirements.txt: will be built before the
        replicas start (3 requirements)"), None for a job without a requirements file."""
        found = self.plan.get("environment")
        if not isinstance(found, Mapping) or not found.get("summary"):
            return None
        return f"{found.get('file')}: {found['summary']}"

    def to_dict(self) -> dict[str, Any]:
        """The dry run's JSON body."""
        body = {"dry_run": True, "job": self.job.to_dict(), "plan": self.plan}
        if self.quota is not None:
            body["quota"] = self.quota.to_dict()
        return body

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SubmitPlan:
        quota = data.get("quota")
        return cls(
            job=JobStatus.from_dict(data["job"]),
            plan=dict(data.get("plan") or {}),
            quota=QuotaCheck.from_dict(quota) if isinstance(quota, Mapping) else None,
        )
