"""The status view's resource use: one line per replica with its CPU and memory beside request and
limit and a small bar against the memory limit, in the words and with the "—" of the panel's job
view (`labextension/src/views/usageview.ts`), so a job reads the same in the notebook and the sidebar.

An ended job uses nothing: its lines say only each replica's peak, whatever the last sample
said.  A replica without a memory limit gets "(no limit)" and no bar: a bar would claim a
fraction of something that does not exist."""

from __future__ import annotations

import html
from typing import Any

from ..health import NO_USAGE, WARN_FRACTION, gib, memory_fraction, ranks_summary, replica_name, unavailable_text, usage_summary


def usage_bar(fraction: float) -> str:
    """A bar of `fraction` of the limit, marked from the warning line (90 %) on."""
    percent = round(fraction * 100)
    high = " paddle-usage-high" if fraction >= WARN_FRACTION else ""
    return (
        f"<span class='paddle-usage-bar{high}' role='img' aria-label='{percent}% of its memory limit' "
        f"title='{percent}% of its memory limit'>"
        f"<span class='paddle-usage-fill' style='width:{min(100, percent)}%'></span></span>"
    )


def _line(replica: dict[str, Any], ended: bool) -> str:
    shown = {**replica, "memory": None, "cpu": None} if ended else replica
    summary = usage_summary(shown)
    fraction = memory_fraction(shown)
    ranks = ranks_summary(shown) if not ended else ""
    peak = replica.get("peak_memory")
    key = f"{replica.get('role')}-{replica.get('index')}"
    return (
        f"<li data-replica='{html.escape(key)}'>"
        f"<span class='paddle-usage-name'>{html.escape(replica_name(replica))}</span>"
        f"<span class='paddle-usage-text'>{html.escape(summary or NO_USAGE)}</span>"
        + (usage_bar(fraction) if fraction is not None else "")
        + (f"<span class='paddle-usage-peak'>peak {html.escape(gib(peak))}</span>" if peak and not ended else "")
        + (f"<span class='paddle-usage-ranks'>{html.escape(ranks)}</span>" if ranks else "")
        + "</li>"
    )


def usage_html(body: dict[str, Any], ended: bool) -> str:
    """`GET /jobs/{name}/usage`'s answer as the view's section; `ended`: the job has ended."""
    if not body.get("available"):
        reason = body.get("reason")
        text = unavailable_text(reason if isinstance(reason, str) else None)
        return f"<p class='paddle-usage-unavailable'>{html.escape(text)}</p>"
    replicas = [replica for replica in body.get("replicas") or [] if isinstance(replica, dict)]
    if not replicas:
        return ""
    lines = "".join(_line(replica, ended) for replica in replicas)
    return f"<ul class='paddle-usage-list' aria-label='Resource use'>{lines}</ul>"
