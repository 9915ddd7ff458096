"""A job's health on the kernel side: its resource use (`job.usage()`, `paddle-nbext top NAME`)
and its timeline (`job.timeline()`, `paddle-nbext timeline NAME`), as text for terminals and
HTML for notebooks, from the server's `GET /jobs/{name}/usage` and `/timeline` answers.

The objects keep the server's answer as is (`.to_dict()`), so code can read every figure; the
renderings only say it for people.
"""

from __future__ import annotations

import html
from datetime import datetime
from typing import Any

from .metrics import sparkline
from .model.contract import format_cores, format_duration, parse_time

#: Characters of the bar of memory against its limit.
BAR_WIDTH = 10
#: Where a bar is marked, as the server warns (90 % of the limit; the panel's WARN_FRACTION).
WARN_FRACTION = 0.9


def gib(value: float | None) -> str:
    """Bytes for people: `1.8 GiB`, `512 MiB`; `-` for none."""
    if value is None:
        return "-"
    for unit, size in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if value >= size:
            return f"{value / size:.1f}".removesuffix(".0") + f" {unit}"
    return f"{int(value)} B"


def cores(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def bar(used: float | None, limit: float | None, width: int = BAR_WIDTH) -> str:
    """`[#######   ] 72%` of `limit`; empty without a limit (nothing to fill)."""
    if used is None or not limit:
        return ""
    fraction = max(0.0, used / limit)
    filled = min(width, round(fraction * width))
    return f"[{'#' * filled}{' ' * (width - filled)}] {fraction * 100:.0f}%"


def replica_name(replica: dict[str, Any]) -> str:
    return f"{replica.get('role')} {replica.get('index')}"


#: What a view shows for a replica without figures (ended without a peak, not sampled yet): the panel's sign.
NO_USAGE = "\u2014"


def _number(value: Any) -> str:
    """A request as the panel writes it (`1`, `0.5`): JavaScript's `String(number)`."""
    number = float(value)
    return str(int(number)) if number.is_integer() else repr(number)


def memory_fraction(replica: dict[str, Any]) -> float | None:
    """How much of its memory limit the replica uses (0..1+); None without a limit or a reading,
    so a replica without a limit never gets a bar (nothing to fill)."""
    used, limit = replica.get("memory"), replica.get("memory_limit")
    if not isinstance(used, (int, float)) or not isinstance(limit, (int, float)) or not limit:
        return None
    return float(used) / float(limit)


def usage_summary(replica: dict[str, Any]) -> str:
    """`0.98 of 1 cores · 1.8 GiB of 2 GiB`: the panel's words of one replica
    (`labextension/src/logic/usage.ts: usageSummary`), `… (no limit)` without a memory limit, and only
    its peak once it stopped; '' when there is nothing to say."""
    if replica.get("memory") is None:
        peak = replica.get("peak_memory")
        return f"peak {gib(peak)}" if peak else ""
    request = replica.get("cpu_request")
    cpu = (
        f"{cores(replica.get('cpu'))} of {_number(request)} cores"
        if isinstance(request, (int, float))
        else f"{cores(replica.get('cpu'))} cores"
    )
    limit = replica.get("memory_limit")
    memory = f"{gib(replica.get('memory'))} of {gib(limit)}" if limit else f"{gib(replica.get('memory'))} (no limit)"
    return f"{cpu} · {memory}"


def ranks_summary(replica: dict[str, Any]) -> str:
    """`rank 0: 0.98 cores · 300 MiB; rank 1: ...`: each rank's own figures (`ranksSummary`)."""
    return "; ".join(
        f"rank {rank.get('rank')}: {cores(rank.get('cpu'))} cores · {gib(rank.get('memory') if rank.get('memory') is not None else rank.get('peak_memory'))}"
        for rank in replica.get("ranks") or []
        if isinstance(rank, dict)
    )


def unavailable_text(reason: str | None) -> str:
    """The words shown instead of figures, the server's reason in them."""
    return f"Resource use is not available: {reason or 'the server did not say why'}."


class Usage:
    """`job.usage()`: CPU cores and memory per replica beside request and limit, peaks, history."""

    def __init__(self, body: dict[str, Any]) -> None:
        self.body = body

    @property
    def available(self) -> bool:
        return bool(self.body.get("available"))

    @property
    def reason(self) -> str | None:
        reason = self.body.get("reason")
        return reason if isinstance(reason, str) else None

    @property
    def replicas(self) -> list[dict[str, Any]]:
        return [replica for replica in self.body.get("replicas") or [] if isinstance(replica, dict)]

    @property
    def goodput(self) -> dict[str, Any] | None:
        """The share of the job's wall time spent training (`fraction`, and the seconds it is made
        of); None until a trainer has reported two steps."""
        figure = self.body.get("goodput")
        return figure if isinstance(figure, dict) else None

    def to_dict(self) -> dict[str, Any]:
        return self.body

    def text(self) -> str:
        """The `paddle-nbext top` table, then the goodput line."""
        table = self._table()
        words = goodput_words(self.goodput)
        return f"{table}\n{words}" if words else table

    def _table(self) -> str:
        if not self.available:
            return unavailable_text(self.reason)
        rows = [("REPLICA", "PHASE", "CPU", "REQUEST", "MEMORY", "LIMIT", "", "PEAK", "RECENT MEMORY")]
        for replica in self.replicas:
            history = [point.get("memory") for point in replica.get("history") or [] if isinstance(point, dict)]
            rows.append(
                (
                    replica_name(replica),
                    str(replica.get("phase") or ""),
                    cores(replica.get("cpu")),
                    _request(replica.get("cpu_request")),
                    gib(replica.get("memory")),
                    gib(replica.get("memory_limit")) if replica.get("memory_limit") else "none",
                    bar(replica.get("memory"), replica.get("memory_limit")),
                    gib(replica.get("peak_memory")),
                    sparkline([float(value) for value in history if isinstance(value, (int, float))], 20),
                )
            )
            for rank in replica.get("ranks") or []:
                rows.append(
                    (
                        f"  rank {rank.get('rank')}",
                        "",
                        cores(rank.get("cpu")),
                        "",
                        gib(rank.get("memory")),
                        "",
                        "",
                        gib(rank.get("peak_memory")),
                        "",
                    )
                )
        widths = [max(len(row[column]) for row in rows) for column in range(len(rows[0]))]
        lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip() for row in rows]
        sampled = _clock(self.body.get("sampled"))
        interval = self.body.get("interval")
        if sampled:
            every = f", every {interval:g} s" if isinstance(interval, (int, float)) else ""
            lines.append(f"sampled at {sampled}{every}; CPU in cores (1.00 = one core busy)")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return self.text()

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(self.text())

    def _repr_html_(self) -> str:
        words = goodput_words(self.goodput)
        goodput = f"<p class='paddle-goodput'>{html.escape(words)}</p>" if words else ""
        if not self.available:
            return f"<p class='paddle-usage'>{html.escape(unavailable_text(self.reason))}</p>{goodput}"
        head = "".join(f"<th>{cell}</th>" for cell in ("replica", "phase", "CPU (cores)", "memory", "limit", "peak"))
        rows = []
        for replica in self.replicas:
            used, limit = replica.get("memory"), replica.get("memory_limit")
            meter = (
                f" <meter min='0' max='{limit}' high='{WARN_FRACTION * limit}' value='{used}'></meter>"
                if used is not None and limit
                else ""
            )
            cells = (
                html.escape(replica_name(replica)),
                html.escape(str(replica.get("phase") or "")),
                f"{cores(replica.get('cpu'))} / {_request(replica.get('cpu_request'))}",
                f"{gib(used)}{meter}",
                gib(limit) if limit else "none",
                gib(replica.get("peak_memory")),
            )
            rows.append("<tr>" + "".join(f"<td>{cell}</td>" for cell in cells) + "</tr>")
        return f"<table class='paddle-usage'><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>{goodput}"


def goodput_words(figure: dict[str, Any] | None) -> str:
    """ "Goodput 87 %: trained 7m 12s of 8m 17s; 1 recovery lost 31s." ("" when unknown)."""
    if not figure:
        return ""
    numbers = [value for key in ("fraction", "training_seconds", "wall_seconds") if isinstance(value := figure.get(key), (int, float))]
    if len(numbers) != 3:
        return ""
    fraction, training, wall = (float(value) for value in numbers)
    words = f"Goodput {100 * fraction:.0f} %: trained {format_duration(training)} of {format_duration(wall)}"
    recoveries, lost = figure.get("recoveries"), figure.get("lost_seconds")
    if isinstance(recoveries, int) and recoveries and isinstance(lost, (int, float)):
        words += f"; {recoveries} {'recovery' if recoveries == 1 else 'recoveries'} lost {format_duration(float(lost))}"
    return words + "."


def _request(value: Any) -> str:
    return format_cores(float(value)) if isinstance(value, (int, float)) else "-"


def _clock(text: Any) -> str:
    """An API time as local wall-clock time (`14:02:11`)."""
    moment = parse_time(text) if isinstance(text, str) else None
    return moment.astimezone().strftime("%H:%M:%S") if moment else ""


def _day_and_clock(text: Any, today: datetime | None = None) -> str:
    moment = parse_time(text) if isinstance(text, str) else None
    if moment is None:
        return ""
    local = moment.astimezone()
    same_day = local.date() == (today or datetime.now().astimezone()).date()
    return local.strftime("%H:%M:%S" if same_day else "%Y-%m-%d %H:%M:%S")


class Timeline:
    """`job.timeline()`: what happened to the job, oldest first (each entry a dict: `seq`, `t`,
    `kind`, `text`, and `role`/`index` when it is about one replica)."""

    def __init__(self, body: dict[str, Any]) -> None:
        self.body = body

    @property
    def entries(self) -> list[dict[str, Any]]:
        return [entry for entry in self.body.get("entries") or [] if isinstance(entry, dict)]

    def to_dict(self) -> dict[str, Any]:
        return self.body

    def __len__(self) -> int:
        return len(self.entries)

    def text(self) -> str:
        if not self.body.get("available", True):
            return f"No timeline: {self.body.get('reason') or 'the server did not say why'}."
        if not self.entries:
            return "Nothing has happened to the job yet."
        return "\n".join(f"{_day_and_clock(entry.get('t'))}  {entry.get('text')}" for entry in self.entries)

    def __repr__(self) -> str:
        return self.text()

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(self.text())

    def _repr_html_(self) -> str:
        items = "".join(
            f"<li class='paddle-timeline-{html.escape(str(entry.get('kind')))}'><time>{html.escape(_day_and_clock(entry.get('t')))}</time> "
            f"{html.escape(str(entry.get('text')))}</li>"
            for entry in self.entries
        )
        return f"<ol class='paddle-timeline'>{items}</ol>" if items else f"<p>{html.escape(self.text())}</p>"
