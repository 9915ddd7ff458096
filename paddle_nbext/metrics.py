"""The kernel side of what replicas `report()`: the series as a table (`Job.metrics()`), and the
renderings the widget, the `%%paddle_submit` output and the CLI share — a progress bar, an SVG
sparkline of the loss with every trainer overlaid, and a text sparkline for terminals.

Pure functions of the `GET /jobs/{name}/metrics` body (docs/user-guide.md, "Metrics and
progress"), so every view says the same and each is testable without a server.
"""

from __future__ import annotations

import html
import importlib
import math
from collections.abc import Iterable, Sequence
from typing import Any

from .model.contract import Phase, is_terminal

__all__ = ["MetricsTable", "table_from", "sparkline", "main_metric", "progress_html", "sparkline_svg", "metrics_html", "metrics_text"]

#: Eighths of a block, lowest to highest: one character per point of a text sparkline.
BLOCKS = "▁▂▃▄▅▆▇█"
#: One colour per trainer (cycled), the same order the panel uses.
COLOURS = ("#2b6cb0", "#dd6b20", "#2f855a", "#c53030", "#6b46c1", "#b7791f", "#319795", "#d53f8c")


class MetricsTable(list[dict[str, Any]]):
    """One dict per reported point: `replica` ("trainer-0"; a rank r > 0 of a trainer of several
    processes "trainer-0.rank-r"), `role`, `index`, `step`, `time` (epoch seconds), one key per
    metric reported at that step, and `rank` for the ranks of a trainer of several processes."""

    def to_pandas(self) -> Any:
        """The table as a `pandas.DataFrame` (pandas is not a dependency: install it to use this)."""
        try:
            pandas = importlib.import_module("pandas")
        except ImportError:
            raise ImportError("Job.metrics().to_pandas() needs pandas; install it with `pip install pandas`") from None
        return pandas.DataFrame(list(self))


#: Points per replica the sparkline asks for (it is 220 pixels wide).
SPARKLINE_POINTS = 110


def replica_label(replica: dict[str, Any]) -> str:
    """`trainer-1`, or `trainer-1.rank-2` for rank 2 of a trainer of several processes (the
    server's own key for it; rank 0 is the trainer's)."""
    rank = replica.get("rank")
    base = f"{replica.get('role')}-{replica.get('index')}"
    return f"{base}.rank-{rank}" if isinstance(rank, int) and rank > 0 else base


def table_from(body: dict[str, Any]) -> MetricsTable:
    """The metrics answer as rows, in each replica's order; metrics of one step share a row."""
    table = MetricsTable()
    for replica in body.get("replicas") or []:
        role, index = str(replica.get("role")), int(replica.get("index") or 0)
        label, rank = replica_label(replica), replica.get("rank")
        rows: dict[tuple[int, float], dict[str, Any]] = {}
        for name, columns in (replica.get("series") or {}).items():
            for step, when, value in zip(columns.get("step") or [], columns.get("time") or [], columns.get("value") or [], strict=False):
                row = rows.get((step, when))
                if row is None:
                    row = rows[(step, when)] = {"replica": label, "role": role, "index": index, "step": step, "time": when}
                    if rank is not None:
                        row["rank"] = rank
                row[name] = value
        table.extend(sorted(rows.values(), key=lambda row: (row["time"], row["step"])))
    return table


def main_metric(body: dict[str, Any]) -> str | None:
    """The metric worth a sparkline: `loss` when reported, else the first one reported."""
    names: list[str] = []
    for replica in body.get("replicas") or []:
        names.extend(name for name in replica.get("series") or {} if name not in names)
    return "loss" if "loss" in names else (names[0] if names else None)


def _finite(values: Iterable[Any]) -> list[float]:
    return [float(v) for v in values if isinstance(v, (int, float)) and math.isfinite(v)]


def sparkline(values: Sequence[float], width: int = 40) -> str:
    """`values` as block characters, at most `width` of them (evenly picked, last one kept)."""
    points = _finite(values)
    if not points:
        return ""
    if len(points) > width:
        points = [points[round(i * (len(points) - 1) / (width - 1))] for i in range(width)] if width > 1 else points[-1:]
    low, high = min(points), max(points)
    span = high - low
    return "".join(BLOCKS[0 if span == 0 else min(len(BLOCKS) - 1, int((p - low) / span * len(BLOCKS)))] for p in points)


def progress_fraction(progress: dict[str, Any] | None, phase: str | None) -> float | None:
    """How far the job is (0 to 1; 1 once it succeeded), None before anything was reported."""
    if phase == Phase.SUCCEEDED:
        return 1.0
    if not progress:
        return None
    return float(progress.get("fraction") or 0.0)


def eta_text(seconds: Any) -> str:
    """`ETA 3m 20s` style words for seconds left (empty when unknown)."""
    if not isinstance(seconds, (int, float)) or not math.isfinite(seconds):
        return ""
    whole = int(round(seconds))
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"ETA {hours}h {minutes}m"
    return f"ETA {minutes}m {secs}s" if minutes else f"ETA {secs}s"


def progress_html(progress: dict[str, Any] | None, phase: str | None = None) -> str:
    """A progress bar with `step/total`, percent and ETA; empty when nothing reports a total."""
    fraction = progress_fraction(progress, phase)
    if fraction is None:
        return ""
    step, total = (progress or {}).get("step"), (progress or {}).get("total")
    words = [f"{fraction * 100:.0f}%"]
    if step is not None and total:
        words.insert(0, f"step {step}/{total}")
    if not is_terminal(phase):
        eta = eta_text((progress or {}).get("eta_seconds"))
        if eta:
            words.append(eta)
    return (
        "<div class='paddle-progress' style='margin:4px 0'>"
        "<div style='display:inline-block;width:220px;height:10px;background:var(--jp-layout-color2, #e2e8f0);border-radius:5px;vertical-align:middle'>"
        f"<div class='paddle-progress-bar' style='width:{fraction * 100:.1f}%;height:10px;background:var(--jp-brand-color1, #2b6cb0);border-radius:5px'></div>"
        f"</div> <span class='paddle-progress-text'>{html.escape(' · '.join(words))}</span></div>"
    )


def sparkline_svg(body: dict[str, Any], metric: str, width: int = 220, height: int = 40) -> str:
    """A small SVG of `metric` with one line per replica that reports it, on shared axes."""
    lines: list[tuple[str, list[tuple[float, float]]]] = []
    for replica in body.get("replicas") or []:
        columns = (replica.get("series") or {}).get(metric)
        if columns:
            pairs = [
                (float(s), float(v))
                for s, v in zip(columns.get("step") or [], columns.get("value") or [], strict=False)
                if math.isfinite(v)
            ]
            if pairs:
                lines.append((replica_label(replica), pairs))
    if not lines:
        return ""
    xs = [x for _, pairs in lines for x, _ in pairs]
    ys = [y for _, pairs in lines for _, y in pairs]
    x0, x1, y0, y1 = min(xs), max(xs), min(ys), max(ys)
    sx = (width - 2) / (x1 - x0) if x1 > x0 else 0.0
    sy = (height - 4) / (y1 - y0) if y1 > y0 else 0.0
    paths = []
    for position, (name, pairs) in enumerate(lines):
        points = " ".join(f"{1 + (x - x0) * sx:.1f},{height - 2 - (y - y0) * sy:.1f}" for x, y in pairs)
        colour = COLOURS[position % len(COLOURS)]
        paths.append(
            f"<polyline fill='none' stroke='{colour}' stroke-width='1.5' points='{points}'><title>{html.escape(name)}</title></polyline>"
        )
    last = ys[-1] if ys else 0.0
    return (
        f"<span class='paddle-sparkline'><svg width='{width}' height='{height}' viewBox='0 0 {width} {height}' "
        f"style='vertical-align:middle;background:var(--jp-layout-color2, #f7fafc)'>{''.join(paths)}</svg> "
        f"<span class='paddle-sparkline-text'>{html.escape(metric)} {last:.4g} "
        f"(min {y0:.4g}, {len(lines)} replica{'s' if len(lines) != 1 else ''})</span></span>"
    )


def metrics_html(body: dict[str, Any] | None, phase: str | None = None) -> str:
    """Progress bar plus the main metric's sparkline (empty when nothing was reported)."""
    if not body:
        return ""
    metric = main_metric(body)
    chart = sparkline_svg(body, metric) if metric else ""
    bar = progress_html(body.get("progress"), phase)
    return f"<div class='paddle-metrics'>{bar}{chart}</div>" if bar or chart else ""


def metrics_text(body: dict[str, Any], phase: str | None = None, width: int = 30) -> str:
    """For terminals: the progress line, then per replica its step and each metric's latest
    value with a text sparkline of its series."""
    lines = []
    progress = body.get("progress")
    fraction = progress_fraction(progress, phase)
    if fraction is not None:
        step, total = (progress or {}).get("step"), (progress or {}).get("total")
        eta = "" if is_terminal(phase) else eta_text((progress or {}).get("eta_seconds"))
        lines.append("  ".join(part for part in (f"progress {fraction * 100:.0f}%", f"step {step}/{total}" if total else "", eta) if part))
    for replica in body.get("replicas") or []:
        series = replica.get("series") or {}
        if not series:
            continue
        total = replica.get("total")
        header = f"{replica_label(replica)}  step {replica.get('step')}" + (f"/{total}" if total else "")
        lines.append(header)
        for name, columns in series.items():
            values = columns.get("value") or []
            if values:
                lines.append(f"  {name:<12} {values[-1]:<12.6g} {sparkline(values, width)}")
    return "\n".join(lines) if lines else "No metrics reported (call report() from paddle_nbext_job in the training script)."
