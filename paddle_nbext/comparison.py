"""`paddle_nbext.compare("a", "b", ...)`: runs side by side in a notebook.

The facts come from the server (`GET /compare`: the spec fields and snapshot files that differ,
each job's final and best metrics and its colour), the same the panel's comparison view shows;
this module only draws them: an HTML display with the curves of one metric overlaid (inline SVG,
each job in its colour), the final/best table, the differing spec fields and code files.  The
data comes back as a `pandas.DataFrame` (one row per job) when pandas is installed, else as a
`Comparison` holding the same rows.
"""

from __future__ import annotations

import html
import importlib
import math
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .client import Client
from .metrics import replica_label

__all__ = ["Comparison", "compare", "comparison_rows", "comparison_html"]

#: Points per job the overlaid curve asks for (it is 480 pixels wide).
CURVE_POINTS = 240
_WIDTH, _HEIGHT, _LEFT, _BOTTOM = 480, 180, 52, 20
#: Characters of a content hash shown (enough to tell files apart at a glance).
SHORT_HASH = 12

Curve = list[tuple[float, float]]


@dataclass
class Comparison:
    """The comparison without pandas: `rows` (one dict per job, the DataFrame's columns), `data`
    (the server's answer) and `curves` (per job, the (step, value) points of `metric`)."""

    data: dict[str, Any]
    metric: str | None
    curves: dict[str, Curve] = field(default_factory=dict)

    @property
    def rows(self) -> list[dict[str, Any]]:
        return comparison_rows(self.data)

    @property
    def columns(self) -> list[str]:
        return list(self.rows[0]) if self.rows else []

    def to_pandas(self) -> Any:
        """The rows as a `pandas.DataFrame` indexed by job (needs pandas: `pip install pandas`)."""
        try:
            pandas = importlib.import_module("pandas")
        except ImportError:
            raise ImportError("Comparison.to_pandas() needs pandas; install it with `pip install pandas`") from None
        frame = pandas.DataFrame(self.rows).set_index("job")
        frame.attrs["comparison"] = self.data
        return frame

    def html(self) -> str:
        return comparison_html(self.data, self.metric, self.curves)

    def __repr__(self) -> str:
        differing = len(self.data.get("spec") or [])
        files = len((self.data.get("code") or {}).get("files") or [])
        return f"<Comparison of {', '.join(self.data.get('jobs') or [])}: {differing} spec field(s) and {files} code file(s) differ>"


def comparison_rows(data: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One dict per job: `job`, `phase`, each differing spec field (`trainers`, `env.LR`), each
    metric's `<metric> final` and `<metric> best`, and `code: <path>` (the file's short hash,
    None where the snapshot lacks it) for each file that differs."""
    rows = []
    files = (data.get("code") or {}).get("files") or []
    for run in data.get("runs") or []:
        name = run["name"]
        row: dict[str, Any] = {"job": name, "phase": run.get("phase")}
        for difference in data.get("spec") or []:
            row[difference["field"]] = difference["values"].get(name)
        for metric in data.get("metrics") or []:
            summary = (run.get("metrics") or {}).get(metric) or {}
            row[f"{metric} final"] = summary.get("final")
            row[f"{metric} best"] = summary.get("best")
        for changed in files:
            digest = changed["hashes"].get(name)
            row[f"code: {changed['path']}"] = digest[:SHORT_HASH] if digest else None
        rows.append(row)
    return rows


def _number(value: Any) -> str:
    return "–" if value is None else f"{value:.4g}" if isinstance(value, float) else html.escape(str(value))


def _swatch(colour: str) -> str:
    return f"<span style='display:inline-block;width:10px;height:10px;border-radius:2px;margin-right:4px;background:{html.escape(colour)}'></span>"


def curves_svg(data: Mapping[str, Any], metric: str, curves: Mapping[str, Curve]) -> str:
    """The metric of every job overlaid on shared axes, each in its colour, with a legend."""
    colours = {run["name"]: run["colour"] for run in data.get("runs") or []}
    drawn = {name: points for name, points in curves.items() if points}
    if not drawn:
        return f"<p class='paddle-compare-nocurve'>No job reported {html.escape(metric)} yet.</p>"
    xs = [x for points in drawn.values() for x, _ in points]
    ys = [y for points in drawn.values() for _, y in points]
    x0, x1, y0, y1 = min(xs), max(xs), min(ys), max(ys)
    sx = (_WIDTH - _LEFT - 8) / (x1 - x0) if x1 > x0 else 0.0
    sy = (_HEIGHT - _BOTTOM - 8) / (y1 - y0) if y1 > y0 else 0.0
    parts = [
        f"<text x='{_LEFT - 4}' y='12' text-anchor='end' font-size='10'>{y1:.4g}</text>",
        f"<text x='{_LEFT - 4}' y='{_HEIGHT - _BOTTOM}' text-anchor='end' font-size='10'>{y0:.4g}</text>",
        f"<text x='{_LEFT}' y='{_HEIGHT - 4}' font-size='10'>step {x0:g}</text>",
        f"<text x='{_WIDTH - 8}' y='{_HEIGHT - 4}' text-anchor='end' font-size='10'>{x1:g}</text>",
        f"<line x1='{_LEFT}' x2='{_WIDTH - 8}' y1='{_HEIGHT - _BOTTOM}' y2='{_HEIGHT - _BOTTOM}' stroke='#a0aec0'/>",
    ]
    for name, points in drawn.items():
        path = " ".join(f"{_LEFT + (x - x0) * sx:.1f},{_HEIGHT - _BOTTOM - (y - y0) * sy:.1f}" for x, y in points)
        parts.append(
            f"<polyline fill='none' stroke='{html.escape(colours.get(name, '#2b6cb0'))}' stroke-width='1.5' "
            f"points='{path}' data-job='{html.escape(name)}'><title>{html.escape(name)}</title></polyline>"
        )
    legend = " ".join(
        f"<span class='paddle-compare-legend' style='margin-right:12px'>{_swatch(colours.get(name, '#2b6cb0'))}{html.escape(name)}</span>"
        for name in drawn
    )
    return (
        f"<figure style='margin:4px 0'><svg class='paddle-compare-chart' width='{_WIDTH}' height='{_HEIGHT}' "
        f"viewBox='0 0 {_WIDTH} {_HEIGHT}' role='img' aria-label='{html.escape(metric)} by step' "
        f"style='background:var(--jp-layout-color2, #f7fafc)'>{''.join(parts)}</svg>"
        f"<figcaption>{html.escape(metric)} by step: {legend}</figcaption></figure>"
    )


def _metrics_table(data: Mapping[str, Any]) -> str:
    metrics = data.get("metrics") or []
    head = "".join(f"<th>{html.escape(metric)} final</th><th>{html.escape(metric)} best</th>" for metric in metrics)
    body = []
    for run in data.get("runs") or []:
        cells = []
        for metric in metrics:
            summary = (run.get("metrics") or {}).get(metric)
            if summary is None:
                cells.append("<td>–</td><td>–</td>")
                continue
            best = "–" if summary["best"] is None else f"{_number(summary['best'])} (step {summary['best_step']})"
            cells.append(f"<td>{_number(summary['final'])} (step {summary['final_step']})</td><td>{best}</td>")
        name = f"{_swatch(run['colour'])}{html.escape(run['name'])}"
        body.append(f"<tr><th>{name}</th><td>{html.escape(str(run['phase']))}</td>{''.join(cells)}</tr>")
    return f"<table class='paddle-compare-metrics'><tr><th>job</th><th>phase</th>{head}</tr>{''.join(body)}</table>"


def _spec_table(data: Mapping[str, Any]) -> str:
    names = data.get("jobs") or []
    rows = data.get("spec") or []
    if not rows:
        return "<p>The specs are the same (apart from the names).</p>"
    head = "".join(f"<th>{html.escape(name)}</th>" for name in names)
    body = "".join(
        f"<tr><th>{html.escape(row['label'])}</th>" + "".join(f"<td>{_number(row['values'].get(name))}</td>" for name in names) + "</tr>"
        for row in rows
    )
    return f"<table class='paddle-compare-spec'><tr><th>field</th>{head}</tr>{body}</table>"


def _code_section(data: Mapping[str, Any]) -> str:
    code = data.get("code") or {}
    notes = [
        f"<li>{html.escape(run['name'])} {html.escape(run['code']['reason'])}</li>"
        for run in data.get("runs") or []
        if run["code"]["reason"]
    ]
    compared = code.get("compared") or []
    files = code.get("files") or []
    if len(compared) < 2:
        summary = "<p>Fewer than two of these jobs have a package snapshot: their code is not compared.</p>"
    elif not files:
        summary = f"<p>The code is the same: {code.get('same', 0)} file(s) with the same content in every snapshot.</p>"
    else:
        head = "".join(f"<th>{html.escape(name)}</th>" for name in compared)
        body = "".join(
            f"<tr><th>{html.escape(row['path'])}</th>"
            + "".join(
                f"<td><code>{html.escape((row['hashes'].get(name) or '')[:SHORT_HASH]) or 'missing'}</code></td>" for name in compared
            )
            + "</tr>"
            for row in files
        )
        more = "<p>More files differ than are listed.</p>" if code.get("truncated") else ""
        summary = (
            f"<p>{len(files)} file(s) differ ({code.get('same', 0)} the same), by content hash:</p>"
            f"<table class='paddle-compare-code'><tr><th>file</th>{head}</tr>{body}</table>{more}"
        )
    return summary + (f"<ul>{''.join(notes)}</ul>" if notes else "")


def comparison_html(data: Mapping[str, Any], metric: str | None, curves: Mapping[str, Curve]) -> str:
    """The whole display: curves of `metric`, final/best metrics, spec and code differences."""
    chart = curves_svg(data, metric, curves) if metric else "<p>No job reported metrics yet.</p>"
    return (
        "<div class='paddle-compare'>"
        f"<h4 style='margin:4px 0'>Comparing {html.escape(', '.join(data.get('jobs') or []))}</h4>"
        f"{chart}{_metrics_table(data)}"
        f"<h5 style='margin:8px 0 2px'>Spec differences</h5>{_spec_table(data)}"
        f"<h5 style='margin:8px 0 2px'>Code differences</h5>{_code_section(data)}"
        "</div>"
    )


def _curve(body: Mapping[str, Any], replica: str, metric: str) -> Curve:
    for entry in body.get("replicas") or []:
        if replica_label(entry) == replica:
            columns = (entry.get("series") or {}).get(metric) or {}
            steps, values = columns.get("step") or [], columns.get("value") or []
            return [(float(s), float(v)) for s, v in zip(steps, values, strict=False) if math.isfinite(v)]
    return []


def _show(markup: str) -> None:
    """Display HTML in IPython (a notebook renders it; a terminal shows its text form)."""
    if "IPython" not in sys.modules:
        return
    display = importlib.import_module("IPython.display")
    if sys.modules["IPython"].get_ipython() is not None:
        display.display(display.HTML(markup))


def compare(*jobs: Any, metric: str | None = None, client: Client | None = None, show: bool = True) -> Any:
    """Compare two or more of your jobs (names or `Job`s), ended or running: shows their curves of
    `metric` (default: `loss`, else the first one reported) overlaid, their final and best
    metrics, the spec fields and code files that differ; returns the rows as a pandas DataFrame
    indexed by job when pandas is installed, else a `Comparison` with the same rows."""
    from .api import get_client

    names: Sequence[str] = [str(getattr(job, "name", job)) for job in jobs]
    api = get_client(client)
    data = api.compare(names)
    if metric is not None and metric not in data["metrics"]:
        reported = ", ".join(data["metrics"]) or "nothing yet"
        raise ValueError(f"none of these jobs reported {metric!r}; they report: {reported}")
    chosen = metric or (data["metrics"][0] if data["metrics"] else None)
    curves: dict[str, Curve] = {}
    if chosen is not None:
        for run in data["runs"]:
            summary = run["metrics"].get(chosen)
            if summary is not None:
                curves[run["name"]] = _curve(api.metrics(run["name"], points=CURVE_POINTS), summary["replica"], chosen)
    result = Comparison(data, chosen, curves)
    if show:
        _show(result.html())
    try:
        return result.to_pandas()
    except ImportError:
        return result
