"""Jobs' Python environments as text for people: the `paddle-nbext envs` table and what a prune
or a removal freed (the bodies of `GET /environments`, `POST /environments/prune`,
`DELETE /environments/{key}`)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from .display import age
from .model.contract import format_bytes

__all__ = ["environments_text", "prune_text", "remove_text"]


def _plural(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


def _bytes(value: Any) -> str:
    return format_bytes(value) + ("B" if isinstance(value, (int, float)) and value >= 1024 else " bytes")


def environments_text(body: Mapping[str, Any], now: datetime | None = None) -> str:
    """A table: key, packages, size, last used, the running jobs using it; then the totals."""
    envs = list(body.get("environments") or [])
    footer = (
        f"{_plural(int(body.get('count') or 0), 'environment')}, {_bytes(body.get('bytes') or 0)}; "
        f"download cache {_bytes(body.get('cache_bytes') or 0)} (in {body.get('path')})."
    )
    if not envs:
        return f"No environments yet: a job gets one when its package has a requirements file.\n{footer}"
    rows = [("KEY", "PACKAGES", "SIZE", "LAST USED", "IN USE BY")]
    for env in envs:
        last = env.get("last_used")
        rows.append(
            (
                str(env.get("key")),
                str(len(env.get("packages") or [])),
                _bytes(env.get("size") or 0),
                f"{age(last, now)} ago" if last else "never",
                ", ".join(env.get("in_use_by") or []) or "-",
            )
        )
    widths = [max(len(row[column]) for row in rows) for column in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip() for row in rows]
    return "\n".join([*lines, footer])


def prune_text(body: Mapping[str, Any]) -> str:
    """What a prune removed (or, dry run, would remove), what it kept and why, and the bytes freed."""
    dry = bool(body.get("dry_run"))
    verb = "Would remove" if dry else "Removed"
    days = body.get("unused_days")
    lines = []
    removed = list(body.get("removed") or [])
    for env in removed:
        lines.append(f"{verb} {env.get('key')} ({_bytes(env.get('size') or 0)}, {_plural(int(env.get('packages') or 0), 'package')})")
    for env in body.get("kept") or []:
        lines.append(f"Kept {env.get('key')}: {env.get('reason')}")
    leftovers = list(body.get("leftovers") or [])
    if leftovers:
        size = sum(int(item.get("size") or 0) for item in leftovers)
        lines.append(f"{verb} {_plural(len(leftovers), 'unfinished build or removal')} ({_bytes(size)})")
    failures = list(body.get("failures") or [])
    if failures:
        lines.append(f"{verb} {_plural(len(failures), 'remembered build failure')}")
    cache = body.get("cache")
    if isinstance(cache, Mapping):
        if cache.get("emptied"):
            lines.append(f"{'Would empty' if dry else 'Emptied'} the download cache ({_bytes(cache.get('size') or 0)})")
        elif cache.get("reason"):
            lines.append(f"Kept the download cache: {cache.get('reason')}")
    if not removed:
        lines.insert(0, f"No environment to remove: none has gone {_plural(int(days or 0), 'day')} without a job and none is unused.")
    freed = _bytes(body.get("freed") or 0)
    lines.append(f"Would free {freed}." if dry else f"Freed {freed}.")
    return "\n".join(lines)


def remove_text(body: Mapping[str, Any]) -> str:
    return f"Removed environment {body.get('key')}, freeing {_bytes(body.get('size') or 0)}."
