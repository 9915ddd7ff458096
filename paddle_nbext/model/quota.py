"""What the cluster's quota says about a job before it is submitted (the dry run's `quota`).

The server's Kubernetes backend works it out (`paddle_nbext_server.backends.kubernetes.quota.quota`)
from the namespace's ResourceQuotas and the ClusterQueue behind the job's Kueue LocalQueue; the
kernel side (CLI, Python API, ipywidgets form) reads it back from the dry run's JSON, so both
ends share this one model.  The sentence in `words` is written by the server, so every entry
point and the panel say the same thing.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any

__all__ = ["QuotaBound", "QuotaCheck", "Verdict"]


class Verdict(str, Enum):
    """How the job stands against the quota.

    `fits`: there is room for it now.  `waits`: it is within every limit but more than is free
    now, so it queues (Kueue) or its pods wait (ResourceQuota) until others finish.  `never`:
    more than a hard limit (or the quota a ClusterQueue can ever reach): it can never run, and
    a submit is refused.  `unknown`: no quota could be read (the reason is in `unknown`)."""

    FITS = "fits"
    WAITS = "waits"
    NEVER = "never"
    UNKNOWN = "unknown"

    def __str__(self) -> str:
        return str(self.value)


@dataclass(frozen=True)
class QuotaBound:
    """What one quota object allows for one resource: `limit` (None: this object sets no upper
    bound, e.g. a ClusterQueue that may borrow without a limit) and `free` now, as Kubernetes
    quantities (`16`, `64Gi`)."""

    resource: str
    source: str
    limit: str | None
    free: str

    def to_dict(self) -> dict[str, Any]:
        return {"resource": self.resource, "source": self.source, "limit": self.limit, "free": self.free}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> QuotaBound:
        limit = data.get("limit")
        return cls(
            resource=str(data["resource"]),
            source=str(data.get("source") or ""),
            limit=None if limit is None else str(limit),
            free=str(data.get("free") or "0"),
        )


@dataclass(frozen=True)
class QuotaCheck:
    """The job's `need` per resource (quantities), every `bounds` entry that applies, the
    `verdict`, the sentence for people (`words`), the job field to change when the verdict is
    `never` (`field`: `trainer_gpu`, or `trainers` when the count is what exceeds), and what could
    not be read (`unknown`: one reason each)."""

    verdict: Verdict
    words: str
    need: dict[str, str] = dataclasses.field(default_factory=dict)
    bounds: list[QuotaBound] = dataclasses.field(default_factory=list)
    field: str | None = None
    unknown: list[str] = dataclasses.field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict.value,
            "words": self.words,
            "need": dict(self.need),
            "bounds": [bound.to_dict() for bound in self.bounds],
            "field": self.field,
            "unknown": list(self.unknown),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> QuotaCheck:
        return cls(
            verdict=Verdict(str(data.get("verdict") or Verdict.UNKNOWN.value)),
            words=str(data.get("words") or ""),
            need={str(k): str(v) for k, v in (data.get("need") or {}).items()},
            bounds=[QuotaBound.from_dict(b) for b in data.get("bounds") or []],
            field=None if data.get("field") is None else str(data["field"]),
            unknown=[str(u) for u in data.get("unknown") or []],
        )
