"""Runs side by side (`GET /compare`): what differs between jobs' specs and code, each job's final
and best value of every metric, and each job's colour.

Pure functions of what the handler read (specs, code manifests, parsed metrics), so the panel
and `paddle_nbext.compare()` show the same facts from one place:

* **spec differences**: every field whose value is not the same in all the jobs, in the field
  table's order (`job_name` aside: it names the columns); `env` is compared per variable
  (`env.LR`), so one changed variable is one row, not a whole dict;
* **code differences**: the files of the package snapshots whose content hash differs, or that
  some snapshots lack; a job without a snapshot (`snapshot: false`) has no code to compare, and
  the answer says so in words;
* **metrics**: per job and metric, the final value (the last point reported) and the best one
  with its step, from one replica's series: trainer 0 (rank 0), else the first replica that
  reports it.  Which way is better comes from the metric's name (`goal`): losses and errors go
  down, accuracies and scores go up; for a name that says neither (a learning rate) there is no
  best, rather than a guess;
* **colours**: derived from the job's name (a hash into one palette), so a job keeps its colour
  in every comparison and in every view; only when two compared names land on the same colour
  does the later of them (by name) take the next free one.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from paddle_nbext.model.spec import JOB_FIELDS

from .metrics import MetricsFile, ReplicaMetrics

#: At most this many jobs in one comparison (a chart of more lines is unreadable).
MAX_COMPARED = 12
#: At most this many differing files are listed; `code.truncated` says when there were more.
MAX_CODE_ROWS = 500
#: Well separated colours (the panel's eight, then four more), one per compared job.
PALETTE = (
    "#2b6cb0",
    "#dd6b20",
    "#2f855a",
    "#c53030",
    "#6b46c1",
    "#b7791f",
    "#319795",
    "#d53f8c",
    "#4a5568",
    "#0987a0",
    "#9c4221",
    "#276749",
)

#: Words of a metric's name (split at anything not a letter or digit, trailing digits dropped:
#: `val_acc1` is `val`, `acc`) that say which way is better.
LOWER_IS_BETTER = frozenset(
    {"loss", "err", "error", "errors", "perplexity", "ppl", "mse", "mae", "rmse", "wer", "cer", "nll", "cost", "latency", "time"}
)
HIGHER_IS_BETTER = frozenset(
    {
        "acc",
        "accuracy",
        "auc",
        "f",
        "precision",
        "recall",
        "bleu",
        "rouge",
        "map",
        "iou",
        "miou",
        "dice",
        "score",
        "top",
        "ndcg",
        "psnr",
        "ssim",
        "r",
        "throughput",
        "ips",
    }
)


def goal_of(metric: str) -> str | None:
    """ "min" when lower is better (losses, errors), "max" when higher is (accuracies, scores),
    None when the name says neither (a learning rate); a name saying both counts as a loss."""
    words = {word.rstrip("0123456789") for word in re.split(r"[^a-z0-9]+", metric.lower())}
    if words & LOWER_IS_BETTER:
        return "min"
    if words & HIGHER_IS_BETTER:
        return "max"
    return None


def colours_of(names: Sequence[str]) -> dict[str, str]:
    """Each job's colour: its name's hash picks the palette entry; on a clash the later name
    (in sorted order, so the answer does not depend on the order asked) takes the next free
    entry."""
    taken: set[int] = set()
    colours: dict[str, str] = {}
    for name in sorted(names):
        slot = int.from_bytes(hashlib.sha256(name.encode()).digest()[:4], "big") % len(PALETTE)
        for _ in range(len(PALETTE)):
            if slot not in taken:
                break
            slot = (slot + 1) % len(PALETTE)
        taken.add(slot)
        colours[name] = PALETTE[slot]
    return {name: colours[name] for name in names}


def _flat_spec(spec: Mapping[str, Any]) -> dict[str, Any]:
    """The spec with `env` spread into one entry per variable."""
    flat = {key: value for key, value in spec.items() if key not in ("job_name", "env")}
    env = spec.get("env")
    if isinstance(env, Mapping):
        for key in sorted(env):
            flat[f"env.{key}"] = env[key]
    return flat


def _field_order() -> dict[str, int]:
    return {row.name: n for n, row in enumerate(JOB_FIELDS)}


def _label(field: str) -> str:
    if field.startswith("env."):
        return f"env {field[4:]}"
    for row in JOB_FIELDS:
        if row.name == field:
            return row.info.label
    return field


def spec_differences(specs: Mapping[str, Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One row per field that is not the same in every job: `{field, label, values: {job: value}}`
    (a job whose spec lacks the field, or an env variable, has null)."""
    flat = {name: _flat_spec(spec) for name, spec in specs.items()}
    order = _field_order()
    fields = sorted({key for values in flat.values() for key in values}, key=lambda key: (order.get(key.split(".")[0], len(order)), key))
    rows = []
    for field in fields:
        values = {name: values.get(field) for name, values in flat.items()}
        if len({json.dumps(value, sort_keys=True) for value in values.values()}) > 1:
            rows.append({"field": field, "label": _label(field), "values": values})
    return rows


def code_differences(manifests: Mapping[str, Mapping[str, str] | None]) -> dict[str, Any]:
    """The files whose content differs between the snapshots that exist: `{files: [{path, hashes:
    {job: sha256 or null}}], same, compared, truncated}` (`same`: files equal in all of them;
    `compared`: the jobs that have a snapshot)."""
    present = {name: files for name, files in manifests.items() if files is not None}
    paths = sorted({path for files in present.values() for path in files})
    rows, same = [], 0
    for path in paths:
        hashes = {name: files.get(path) for name, files in present.items()}
        if len(set(hashes.values())) > 1:
            rows.append({"path": path, "hashes": hashes})
        else:
            same += 1
    return {"files": rows[:MAX_CODE_ROWS], "same": same, "compared": list(present), "truncated": len(rows) > MAX_CODE_ROWS}


def _leading(replicas: Sequence[tuple[MetricsFile, ReplicaMetrics]], metric: str) -> tuple[MetricsFile, ReplicaMetrics] | None:
    """The replica whose series stands for the job: trainer 0 (rank 0), else the first reporting it."""
    reporting = [(file, state) for file, state in replicas if metric in state.series and len(state.series[metric].value)]
    for file, state in reporting:
        if file.role == "trainer" and file.index == 0 and not file.rank:
            return file, state
    return reporting[0] if reporting else None


def metric_summaries(replicas: Sequence[tuple[MetricsFile, ReplicaMetrics]]) -> dict[str, dict[str, Any]]:
    """Per metric: `{replica, goal, final, final_step, best, best_step, points}` from the leading
    replica.  The arrays are copied first (one C-level copy each), so a refresh in another
    thread cannot change them midway."""
    names: list[str] = []
    for _, state in replicas:
        names.extend(name for name in state.series if name not in names)
    summaries: dict[str, dict[str, Any]] = {}
    for name in names:
        leading = _leading(replicas, name)
        if leading is None:
            continue
        file, state = leading
        values = state.series[name].value[:]
        steps = state.series[name].step[: len(values)]
        goal = goal_of(name)
        best = None
        if goal is not None:
            chosen = min(values) if goal == "min" else max(values)
            best = values.index(chosen)
        summaries[name] = {
            "replica": file.key,
            "goal": goal,
            "final": values[-1],
            "final_step": steps[-1],
            "best": values[best] if best is not None else None,
            "best_step": steps[best] if best is not None else None,
            "points": len(values),
        }
    return summaries


def metric_names(summaries: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """Every metric any job reports, `loss` first, then in the order first seen."""
    names: list[str] = []
    for metrics in summaries.values():
        names.extend(name for name in metrics if name not in names)
    return sorted(names, key=lambda name: name != "loss")
