"""A local job's `usage.json`: the resource use its master samples (`master.usage_sampler`) and
the server reads (`health_reads`, for `GET /jobs/{name}/usage`).

`usage.json` is rewritten whole each time with a plain rename (no fsync: it is a reading, not a
record, and losing the last one to a power cut loses nothing a later sample does not replace).
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import Any

FILE = "usage.json"
VERSION = 1


def write(job_dir: Path, document: dict[str, Any]) -> None:
    """Replace `usage.json` (never raises: a full disk only costs the reading)."""
    path = job_dir / FILE
    temporary = job_dir / f".{FILE}.tmp"
    with contextlib.suppress(OSError):
        temporary.write_text(json.dumps(document, separators=(",", ":")), encoding="utf-8")
        os.replace(temporary, path)


def read(job_dir: Path) -> dict[str, Any] | None:
    """The job's last `usage.json`, or None when there is none (or it cannot be read)."""
    try:
        data = json.loads((job_dir / FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or not isinstance(data.get("replicas"), list):
        return None
    return data
