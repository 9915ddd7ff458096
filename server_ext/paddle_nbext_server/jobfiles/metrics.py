"""What replicas `report()`ed, for `GET /jobs/{name}/metrics` and the metric events: both
backends' files read the same way, kept parsed in memory, answered downsampled.

Each replica appends JSON lines to its own file (runtime/paddle_nbext_job.py).  A reader keeps
per file what it has parsed and where it stopped, so a request reads only what was appended
since the last one; a file that shrank or was replaced (the job was deleted and submitted again)
is read from the start.  Files are the replicas' and may hold anything: a line that is not a
point is counted (`invalid`) and skipped, a file is read up to `READ_LIMIT` bytes (`truncated`
beyond), a replica may name at most `MAX_METRICS` metrics, and none of it ever fails a request.

A trainer of several ranks (`procs_per_trainer`, or one rank per GPU) has one file per rank:
rank 0 writes the trainer's file and rank r > 0 `<role>-<index>.rank-<r>.metrics.jsonl`, so each
rank is a replica of its own here (`rank` in the answer; `trainer-1.rank-2` in a cursor and in
an event's `latest`), and a trainer of one process stays exactly what it was (`rank` null,
`trainer-1`).

A replica's first point of each process is marked (`"start": true`); a later start is a
restart (a whole-job restart, resumed from a checkpoint or not): its points replace the earlier
ones from its first step on, so every curve goes on from the checkpoint without a step twice or
going back, and the answer lists where each replica restarted (`restarts`).  An answer to a
cursor from before such a restart carries the replica's whole series again (`replaced`).

Downsampling keeps, per replica and metric, the first and last point and the lowest and highest
of every bucket between them, so a spike or the best loss is never averaged away.  A `since`
cursor (the `cursor` of an earlier answer: points seen per replica) limits an answer to what
came after it.  All of it blocks (files, parsing): call it in a thread.
"""

from __future__ import annotations

import json
import os
import threading
from array import array
from bisect import bisect_left
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from paddle_nbext.model.contract import Role, launch_entry

from ..runtime import paddle_nbext_job
from ..runtime.replica_files import metrics_name

#: Bytes of one replica's file that are read (the reporter's own default budget).
READ_LIMIT = paddle_nbext_job.DEFAULT_BUDGET
#: A line longer than this is not a point.
MAX_LINE = 8192
#: Distinct metric names one replica may use; further names are counted as invalid.
MAX_METRICS = 64
#: Jobs whose parsed files are kept in memory.
CACHED_JOBS = 64
#: Bytes read at a time.
CHUNK = 8 * 1024 * 1024


@dataclass(frozen=True)
class MetricsFile:
    """Where one replica's metrics are, as the server sees it."""

    role: str
    index: int
    path: Path
    #: The rank inside a trainer of several processes (0 is the trainer's own file); None for a
    #: replica of one process.
    rank: int | None = None

    @property
    def key(self) -> str:
        """What names this file's points in a cursor and in an event's `latest`."""
        return replica_key(self.role, self.index, self.rank)


def ranks_per_trainer(spec: Mapping[str, Any]) -> int:
    """Processes whose `report()` has a file of its own in each trainer of a job (its spec as a
    dict): one per GPU, else `procs_per_trainer`; 1 for a `paddle.distributed.launch` entry point,
    which starts its ranks itself (they all see the trainer's one file)."""
    entry = spec.get("entry_point")
    if isinstance(entry, str) and launch_entry(entry):
        return 1
    count = spec.get("trainer_gpu") or spec.get("procs_per_trainer") or 1
    return count if isinstance(count, int) and count > 0 else 1


def replica_files(directory: Path, role: str, index: int, ranks: int) -> list[MetricsFile]:
    """The metrics files of one replica that runs `ranks` processes, rank 0 (the replica's own
    file) first."""
    if role != Role.TRAINER.value or ranks <= 1:
        return [MetricsFile(role, index, directory / metrics_name(role, index))]
    return [MetricsFile(role, index, directory / metrics_name(role, index, rank), rank) for rank in range(ranks)]


class MetricsCursorError(ValueError):
    """A `since` that is not a cursor this server gave out."""


#: Points per block of a series' block minima and maxima (what makes downsampling cheap).
BLOCK = 64


class Series:
    """One metric of one replica, as columns (compact, and sliced at C speed), plus the lowest
    and highest point of every complete `BLOCK` of points: downsampling a long series then
    compares a few block extremes per bucket instead of every point."""

    __slots__ = ("seq", "step", "time", "value", "block_low", "block_high", "block_min", "block_max")

    def __init__(self) -> None:
        self.seq = array("q")  # the point's number in its file: what a cursor counts
        self.step = array("q")
        self.time = array("d")
        self.value = array("d")
        self.block_low = array("q")  # position of each complete block's lowest value
        self.block_high = array("q")
        self.block_min = array("d")  # that lowest value (so buckets compare at C speed)
        self.block_max = array("d")

    def append(self, seq: int, step: int, when: float, value: float) -> None:
        self.seq.append(seq)
        self.step.append(step)
        self.time.append(when)
        self.value.append(value)
        if len(self.value) % BLOCK == 0:
            first = len(self.value) - BLOCK
            block = self.value[first:]
            lowest, highest = min(block), max(block)
            self.block_low.append(first + block.index(lowest))
            self.block_high.append(first + block.index(highest))
            self.block_min.append(lowest)
            self.block_max.append(highest)


@dataclass
class ReplicaMetrics:
    """The parsed state of one replica's file."""

    path: Path
    identity: tuple[int, int] | None = None  # (device, inode) of the file read so far
    offset: int = 0
    partial: bytes = b""
    count: int = 0  # points accepted
    invalid: int = 0
    truncated: bool = False
    step: int | None = None
    total: int | None = None
    first: tuple[float, int] | None = None  # (time, step) of the first point
    last: tuple[float, int] | None = None
    series: dict[str, Series] = field(default_factory=dict)
    #: Where a later process (a whole-job restart) started reporting: `{"step", "time", "stopped"}`
    #: (`stopped`: the time of the last point before it).
    restarts: list[dict[str, float]] = field(default_factory=list)
    #: Per restart: (points accepted before it, the first point it dropped), for cursors.
    rewinds: list[tuple[int, int]] = field(default_factory=list)

    def refresh(self) -> None:
        """Parse what was appended since the last refresh."""
        try:
            stat = os.stat(self.path)
        except OSError:
            if self.identity is not None:
                self._start_over()
            return
        identity = (stat.st_dev, stat.st_ino)
        if identity != self.identity or stat.st_size < self.offset:
            self._start_over()
            self.identity = identity
        end = min(stat.st_size, READ_LIMIT)
        self.truncated = stat.st_size > READ_LIMIT
        if end <= self.offset:
            return
        try:
            with open(self.path, "rb") as handle:
                handle.seek(self.offset)
                while self.offset < end:
                    data = handle.read(min(CHUNK, end - self.offset))
                    if not data:
                        break
                    self.offset += len(data)
                    self._take(data)
        except OSError:
            return

    def _start_over(self) -> None:
        """Forget everything parsed: the file is a new one (or gone)."""
        self.__dict__.update(ReplicaMetrics(self.path).__dict__)

    def _take(self, data: bytes) -> None:
        data = self.partial + data
        cut = data.rfind(b"\n") + 1
        self.partial = data[cut:]
        if len(self.partial) > MAX_LINE:  # no newline for this long: garbage, not a point
            self.invalid += 1
            self.partial = b""
        lines = [line for line in data[:cut].split(b"\n") if line.strip()]
        if not lines:
            return
        try:  # one parse for the whole chunk; a bad line makes it go line by line
            records = json.loads(b"[" + b",".join(lines) + b"]")
            if len(records) != len(lines):
                raise ValueError("a line held more than one value")
        except (ValueError, UnicodeDecodeError):
            records = [_parse(line) for line in lines]
        for record in records:
            self._add(record)

    def _add(self, record: Any) -> None:
        if not isinstance(record, dict):
            self.invalid += 1
            return
        when, step, total, values = record.get("t"), record.get("step"), record.get("total"), record.get("m")
        if (
            type(step) is not int
            or not isinstance(when, (int, float))
            or isinstance(when, bool)
            or not isinstance(values, dict)
            or (total is not None and (type(total) is not int or total <= 0))
            or not -(2**62) < step < 2**62
        ):
            self.invalid += 1
            return
        seq = self.count
        when = float(when)
        if record.get("start") is True and seq:
            self._rewind(step, when, seq)
        self.count += 1
        self.step, self.last = step, (when, step)
        if total is not None:
            self.total = total
        if self.first is None:
            self.first = (when, step)
        for name, value in values.items():
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value - value != 0:
                self.invalid += 1
                continue
            series = self.series.get(name)
            if series is None:
                if len(self.series) >= MAX_METRICS or not isinstance(name, str) or not name:
                    self.invalid += 1
                    continue
                series = self.series[name] = Series()
            series.append(seq, step, when, float(value))

    def _rewind(self, step: int, when: float, seq: int) -> None:
        """A later process starts reporting at `step` (a restart, resumed from a checkpoint or
        from the beginning): its points replace the earlier ones from that step on, so a curve
        goes on from the checkpoint with no step twice and none going back."""
        # `stopped`: the previous process's last point, where the recovery began (goodput.py)
        self.restarts.append({"step": step, "time": when, "stopped": self.last[0] if self.last else when})
        dropped: int | None = None
        for name, series in list(self.series.items()):
            keep = [i for i, at in enumerate(series.step) if at < step]
            if len(keep) == len(series.step):
                continue
            first = min(series.seq[i] for i in range(len(series.step)) if series.step[i] >= step)
            dropped = first if dropped is None else min(dropped, first)
            rebuilt = Series()
            for i in keep:
                rebuilt.append(series.seq[i], series.step[i], series.time[i], series.value[i])
            self.series[name] = rebuilt
        if dropped is not None:
            self.rewinds.append((seq, dropped))

    def replaced_since(self, after: int) -> bool:
        """Whether an answer to a cursor of `after` points must replace what its asker holds:
        a restart since then dropped points it had."""
        return any(at >= after and dropped < after for at, dropped in self.rewinds)

    def eta_seconds(self) -> float | None:
        """Seconds until `total` at the pace from the first point to the last, None if unknown."""
        if self.total is None or self.first is None or self.last is None:
            return None
        (t0, s0), (t1, s1) = self.first, self.last
        if s1 >= self.total:
            return 0.0
        if t1 <= t0 or s1 <= s0:
            return None
        return (self.total - s1) * (t1 - t0) / (s1 - s0)


def _parse(line: bytes) -> Any:
    if len(line) > MAX_LINE:
        return None
    try:
        return json.loads(line)
    except (ValueError, UnicodeDecodeError):
        return None


def _extremes(values: array[float], low: int, high: int) -> tuple[int, int]:
    """Positions of the lowest and highest value in values[low:high] (not empty)."""
    chunk = values[low:high]
    return low + chunk.index(min(chunk)), low + chunk.index(max(chunk))


def _pick(values: array[float], candidates: list[int]) -> tuple[int, int]:
    """The lowest and highest of the candidate positions (first on ties)."""
    lowest = min(candidates, key=lambda i: (values[i], i))
    highest = max(candidates, key=lambda i: (values[i], -i))
    return lowest, highest


def keep_indices(series: Series | array[float], start: int, end: int, budget: int) -> list[int]:
    """Positions in [start, end) of a series to keep within `budget` points: all when they fit,
    else the first, the last, and each bucket's lowest and highest in between, in order.

    Buckets are whole runs of blocks where the series has block extremes (each bucket then costs
    two C-speed scans of a few block extremes), with the partial blocks at either end folded into
    the first and last bucket; a plain array is scanned point by point."""
    count = end - start
    if count <= budget:
        return list(range(start, end))
    if budget <= 2:
        return [start, end - 1][:budget] if budget > 0 else []
    buckets = (budget - 2) // 2
    values = series.value if isinstance(series, Series) else series
    inner_start, inner_end = start + 1, end - 1
    first_block = -(-inner_start // BLOCK)
    last_block = inner_end // BLOCK  # blocks [first_block, last_block) lie wholly inside
    if isinstance(series, Series):
        last_block = min(last_block, len(series.block_low))
    kept = [start]
    if not isinstance(series, Series) or last_block - first_block < 2 * buckets:
        inner = inner_end - inner_start
        for bucket in range(buckets):
            low = inner_start + bucket * inner // buckets
            high = inner_start + (bucket + 1) * inner // buckets
            if high > low:
                kept.extend(sorted(set(_extremes(values, low, high))))
        kept.append(end - 1)
        return kept
    blocks = last_block - first_block
    head_end, tail_start = first_block * BLOCK, last_block * BLOCK
    lows, highs, minima, maxima = series.block_low, series.block_high, series.block_min, series.block_max
    for bucket in range(buckets):
        a = first_block + bucket * blocks // buckets
        b = first_block + (bucket + 1) * blocks // buckets
        block_min, block_max = minima[a:b], maxima[a:b]
        lowest = lows[a + block_min.index(min(block_min))]
        highest = highs[a + block_max.index(max(block_max))]
        if (bucket == 0 and head_end > inner_start) or (bucket == buckets - 1 and inner_end > tail_start):
            candidates = [lowest, highest]
            if bucket == 0 and head_end > inner_start:
                candidates.extend(_extremes(values, inner_start, head_end))
            if bucket == buckets - 1 and inner_end > tail_start:
                candidates.extend(_extremes(values, tail_start, inner_end))
            lowest, highest = _pick(values, candidates)
        if lowest == highest:
            kept.append(lowest)
        else:
            kept.extend((lowest, highest) if lowest < highest else (highest, lowest))
    kept.append(end - 1)
    return kept


def parse_cursor(text: str | None) -> dict[str, int]:
    """`role-index:count,...` -> {"role-index": count}; raises MetricsCursorError."""
    seen: dict[str, int] = {}
    if not text:
        return seen
    for part in text.split(","):
        key, sep, count = part.rpartition(":")
        if not sep or not key or not count.isdigit() or not count.isascii():
            raise MetricsCursorError(f"since must be the cursor of an earlier answer (role-index:count,...), got {text!r}")
        seen[key] = int(count)
    return seen


def replica_key(role: str, index: int, rank: int | None = None) -> str:
    """`trainer-1` (a replica, or rank 0 of a trainer of several ranks: cursors given out before
    ranks existed stay valid), `trainer-1.rank-2`."""
    return f"{role}-{index}.rank-{rank}" if rank else f"{role}-{index}"


def progress(replicas: list[tuple[MetricsFile, ReplicaMetrics]]) -> dict[str, Any] | None:
    """The job's progress: its slowest replica that reports a total (step, total, fraction, ETA)."""
    slowest: tuple[float, ReplicaMetrics] | None = None
    for _, state in replicas:
        if state.total is None or state.step is None:
            continue
        fraction = min(1.0, max(0.0, state.step / state.total))
        if slowest is None or fraction < slowest[0]:
            slowest = (fraction, state)
    if slowest is None:
        return None
    fraction, state = slowest
    return {"step": state.step, "total": state.total, "fraction": fraction, "eta_seconds": state.eta_seconds()}


class MetricsCache:
    """Parsed metrics files of the most recently asked jobs, one lock per job."""

    def __init__(self, jobs: int = CACHED_JOBS) -> None:
        self._jobs: OrderedDict[str, tuple[threading.Lock, dict[Path, ReplicaMetrics]]] = OrderedDict()
        self._limit = jobs
        self._lock = threading.Lock()

    def _entry(self, job: str) -> tuple[threading.Lock, dict[Path, ReplicaMetrics]]:
        with self._lock:
            entry = self._jobs.get(job)
            if entry is None:
                entry = self._jobs[job] = (threading.Lock(), {})
                while len(self._jobs) > self._limit:
                    self._jobs.popitem(last=False)
            self._jobs.move_to_end(job)
            return entry

    def forget(self, job: str) -> None:
        with self._lock:
            self._jobs.pop(job, None)

    def refreshed(self, job: str, files: list[MetricsFile]) -> list[tuple[MetricsFile, ReplicaMetrics]]:
        lock, states = self._entry(job)
        with lock:
            result = []
            for file in files:
                state = states.get(file.path)
                if state is None:
                    state = states[file.path] = ReplicaMetrics(file.path)
                state.refresh()
                result.append((file, state))
            return result

    def summary(self, job: str, files: list[MetricsFile]) -> dict[str, Any]:
        """What a metric event carries: the cursor, the progress and every replica's latest values."""
        replicas = self.refreshed(job, files)
        latest: dict[str, dict[str, Any]] = {}
        for file, state in replicas:
            if state.count:
                values = {name: series.value[-1] for name, series in state.series.items() if len(series.value)}
                latest[file.key] = {"step": state.step, "total": state.total, "values": values}
                if file.rank is not None:
                    latest[file.key]["rank"] = file.rank
        return {"name": job, "cursor": _cursor(replicas), "progress": progress(replicas), "latest": latest}

    def read(self, job: str, files: list[MetricsFile], since: str | None = None, points: int | None = None) -> dict[str, Any]:
        """The body of `GET /jobs/{name}/metrics`."""
        seen = parse_cursor(since)
        replicas = self.refreshed(job, files)
        answer = []
        for file, state in replicas:
            after = seen.get(file.key, 0)
            if after > state.count:  # the file started over since that cursor
                after = 0
            replaced = bool(after) and state.replaced_since(after)
            if replaced:  # a restart dropped points the asker has: the whole series again
                after = 0
            series: dict[str, dict[str, list[Any]]] = {}
            for name, columns in state.series.items():
                start = bisect_left(columns.seq, after) if after else 0
                end = len(columns.seq)
                if start >= end:
                    continue
                if points is None:
                    series[name] = {
                        "step": columns.step[start:end].tolist(),
                        "time": columns.time[start:end].tolist(),
                        "value": columns.value[start:end].tolist(),
                    }
                    continue
                kept = keep_indices(columns, start, end, points)
                step, when, value = columns.step, columns.time, columns.value
                series[name] = {
                    "step": [step[i] for i in kept],
                    "time": [when[i] for i in kept],
                    "value": [value[i] for i in kept],
                }
            answer.append(
                {
                    "role": file.role,
                    "index": file.index,
                    "rank": file.rank,
                    "count": state.count,
                    "step": state.step,
                    "total": state.total,
                    "updated": state.last[0] if state.last else None,
                    "eta_seconds": state.eta_seconds(),
                    "invalid": state.invalid,
                    "truncated": state.truncated,
                    "restarts": list(state.restarts),
                    "replaced": replaced,
                    "series": series,
                }
            )
        return {"name": job, "cursor": _cursor(replicas), "points": points, "progress": progress(replicas), "replicas": answer}


def _cursor(replicas: list[tuple[MetricsFile, ReplicaMetrics]]) -> str:
    return ",".join(f"{file.key}:{state.count}" for file, state in replicas)
