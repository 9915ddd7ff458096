"""The local master's two health watches, as pure bookkeeping over readings it already takes:

* `MemoryWatch`: a replica whose resident memory stays at or above `WARN_FRACTION` of its limit
  for `sustain` seconds gets one warning in words ("trainer 1 uses 1.8 GiB of its 2 GiB limit");
  the warning clears once it falls below `CLEAR_FRACTION` (a hysteresis, so a replica hovering at
  the line does not warn and clear on every reading).  A replica without a limit is never warned
  about: there is nothing to run out of but the machine.
* `StallWatch`: a Running job whose trainer made no progress (no `report()` and no log output)
  for the job's `stall_timeout`.  Progress is read from the times the trainer's files were last
  written (its log and its metrics files), so it costs a few `stat`s per check and nothing in the
  job.  It is armed only once a trainer `report()`ed in the current attempt: a job that never
  reports (a plain script, a quiet pserver-only phase) is never called stalled.

Both return words for the job's message and timeline; what follows (a warning, a restart, an end)
is the master's decision (`master.Master.check_health`).
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path

WARN_FRACTION = 0.9
CLEAR_FRACTION = 0.85
#: Seconds memory must stay above the line before the warning (`Plan.memory_warn_after`).
DEFAULT_SUSTAIN = 5.0
_TAIL_BYTES = 4096


def gib(value: float) -> str:
    """Bytes in the words of a warning: `1.8 GiB`, `512 MiB`, `900 KiB`."""
    for unit, size in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if value >= size:
            text = f"{value / size:.1f}".removesuffix(".0")
            return f"{text} {unit}"
    return f"{int(value)} B"


def span(seconds: float) -> str:
    """A stall's length in words: `45 s`, `10 min`, `1 h 5 min`."""
    total = max(0, int(seconds))
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours} h {minutes} min" if minutes else f"{hours} h"
    if minutes:
        return f"{minutes} min {secs} s" if secs and minutes < 10 else f"{minutes} min"
    return f"{secs} s"


def replica_words(role: str, index: int) -> str:
    return f"{role} {index}"


class MemoryWatch:
    """Per replica key: since when it has been above the line, and whether it was warned about."""

    def __init__(self, sustain: float = DEFAULT_SUSTAIN) -> None:
        self.sustain = sustain
        self._above_since: dict[str, float] = {}
        self.warned: dict[str, str] = {}  # key -> the warning's words, while it holds

    def observe(self, key: str, who: str, used: int, limit: int, now: float) -> tuple[str | None, str | None]:
        """One reading of `used` bytes against `limit` (0: none); (a new warning's words, the
        words of a warning that cleared), each None when nothing changed."""
        if limit <= 0:
            return None, None
        if used >= WARN_FRACTION * limit:
            since = self._above_since.setdefault(key, now)
            if key not in self.warned and now - since >= self.sustain:
                words = f"{who} uses {gib(used)} of its {gib(limit)} limit"
                self.warned[key] = words
                return words, None
            return None, None
        if used < CLEAR_FRACTION * limit:
            self._above_since.pop(key, None)
            if key in self.warned:
                del self.warned[key]
                return None, f"{who} is back to {gib(used)} of its {gib(limit)} limit"
        return None, None

    def forget(self, key: str) -> None:
        """The replica stopped (or starts again): its reading starts over."""
        self._above_since.pop(key, None)
        self.warned.pop(key, None)


@dataclass(frozen=True)
class Stall:
    """A stalled trainer: which, since when it was quiet (epoch seconds), the job's last step."""

    index: int
    quiet_since: float
    step: int | None

    def words(self, now: float) -> str:
        """`no progress for 10 min since step 1234; trainer 1 last wrote at 14:02`."""
        since_step = f" since step {self.step}" if self.step is not None else ""
        at = time.strftime("%H:%M:%S", time.localtime(self.quiet_since))
        return f"no progress for {span(now - self.quiet_since)}{since_step}; trainer {self.index} last wrote at {at}"


class StallWatch:
    """Reads the trainers' files in `logs` for signs of progress."""

    def __init__(self, logs: Path, timeout: float) -> None:
        self.logs = logs
        self.timeout = timeout

    def metrics_files(self, index: int) -> list[Path]:
        """The trainer's metrics files: its own and, with ranks, each rank's."""
        try:
            names = os.listdir(self.logs)
        except OSError:
            return []
        prefix = f"trainer-{index}."
        return [self.logs / name for name in names if name.startswith(prefix) and name.endswith(".metrics.jsonl")]

    def check(self, trainers: list[int], attempt_started: float, now: float) -> Stall | None:
        """The trainer (of the running `trainers`) quiet for longest, when it has been quiet for
        the timeout and some trainer reported in this attempt (started at `attempt_started`,
        epoch seconds); else None."""
        if self.timeout <= 0 or not trainers:
            return None
        armed = False
        quietest: tuple[float, int] | None = None
        for index in trainers:
            metrics = [(path, _mtime(path)) for path in self.metrics_files(index)]
            reported = [stamp for _, stamp in metrics if stamp >= attempt_started]
            armed = armed or bool(reported)
            last = max([attempt_started, _mtime(self.logs / f"trainer-{index}.log"), *reported])
            if quietest is None or last < quietest[0]:
                quietest = (last, index)
        if not armed or quietest is None or now - quietest[0] < self.timeout:
            return None
        return Stall(index=quietest[1], quiet_since=quietest[0], step=self.last_step(trainers))

    def first_step(self, trainers: list[int], attempt_started: float) -> int | None:
        """The first step any trainer reported in this attempt, once one has (else None)."""
        for index in trainers:
            for path in self.metrics_files(index):
                if _mtime(path) >= attempt_started:
                    step = _last_step(path)
                    if step is not None:
                        return step
        return None

    def last_step(self, trainers: list[int]) -> int | None:
        steps = [step for index in trainers for path in self.metrics_files(index) if (step := _last_step(path)) is not None]
        return max(steps) if steps else None


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def _last_step(path: Path) -> int | None:
    """The step of the last complete point in a metrics file (`report()`'s JSON lines)."""
    try:
        with open(path, "rb") as handle:
            size = handle.seek(0, os.SEEK_END)
            handle.seek(max(0, size - _TAIL_BYTES))
            lines = handle.read().splitlines()
    except OSError:
        return None
    for line in reversed(lines):
        try:
            point = json.loads(line)
        except ValueError:
            continue
        step = point.get("step") if isinstance(point, dict) else None
        if isinstance(step, int) and not isinstance(step, bool):
            return step
    return None
