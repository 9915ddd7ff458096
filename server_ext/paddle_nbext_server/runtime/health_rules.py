"""Training health's rules, shared by the local master and the Kubernetes replicas' launchers, so
that both backends warn and mark stalls alike, in the same words.

* `MemoryWatch`: a replica whose memory stays at or above `WARN_FRACTION` of its limit for
  `sustain` seconds gets one warning in words ("trainer 1 uses 1.8 GiB of its 2 GiB limit"); the
  warning clears once it falls below `CLEAR_FRACTION` (a hysteresis, so a replica hovering at the
  line does not warn and clear on every reading).  A replica without a limit is never warned
  about: there is nothing to run out of but the machine.
* `Stall`: a trainer quiet since a time, in the words of the job's message and timeline ("no
  progress for 10 min since step 1234; trainer 1 last wrote at 14:02:05").
* `metrics_files`, `mtime`, `last_step`: how a trainer's `report()` files are read for signs of
  progress (a few `stat`s and a 4 KiB tail; nothing in the job).

Pure bookkeeping over readings the caller takes (process trees locally, the container's cgroup
on Kubernetes): what follows a warning or a stall is the caller's decision.

Standard library only: shipped in the job's runtime bundle beside the launcher.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass

WARN_FRACTION = 0.9
CLEAR_FRACTION = 0.85
#: Seconds memory must stay above the line before the warning.
DEFAULT_SUSTAIN = 5.0
_TAIL_BYTES = 4096
METRICS_SUFFIX = ".metrics.jsonl"


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
        """`no progress for 10 min since step 1234; trainer 1 last wrote at 14:02:05`."""
        since_step = f" since step {self.step}" if self.step is not None else ""
        at = time.strftime("%H:%M:%S", time.localtime(self.quiet_since))
        return f"no progress for {span(now - self.quiet_since)}{since_step}; trainer {self.index} last wrote at {at}"


def metrics_files(directory: str, index: int) -> list[str]:
    """Trainer `index`'s metrics files in `directory`: its own and, with ranks, each rank's."""
    try:
        names = os.listdir(directory)
    except OSError:
        return []
    prefix = f"trainer-{index}."
    return [os.path.join(directory, name) for name in names if name.startswith(prefix) and name.endswith(METRICS_SUFFIX)]


def mtime(path: str) -> float:
    """When `path` was last written (epoch seconds), 0 when it cannot be read."""
    try:
        return os.stat(path).st_mtime
    except OSError:
        return 0.0


def first_point_since(path: str, since: float) -> tuple[float, int] | None:
    """(time, step) of the first point written into a metrics file at or after `since` (an
    attempt's start, epoch seconds): the step the attempt's training first reported (4 after a
    resume from step 3), not the one it had reached when someone first looked.  None when the
    attempt wrote none yet or the file cannot be read.  Read once per attempt, so the whole file
    is read, each line's time from its `{"t":...,` prefix without parsing the rest."""
    try:
        with open(path, "rb") as handle:
            for line in handle:
                point = _point_since(line, since)
                if point is not None:
                    return point
    except OSError:
        return None
    return None


def _point_since(line: bytes, since: float) -> tuple[float, int] | None:
    """(time, step) of one metrics line written at or after `since`, else None."""
    if line.startswith(b'{"t":'):  # the reporter's own lines: the time first, no spaces
        comma = line.find(b",", 5)
        try:
            if comma < 0 or float(line[5:comma]) < since:
                return None
        except ValueError:
            return None
    try:
        point = json.loads(line)
    except ValueError:
        return None
    if not isinstance(point, dict):
        return None
    when, step = point.get("t"), point.get("step")
    if isinstance(when, (int, float)) and not isinstance(when, bool) and when >= since and type(step) is int:
        return float(when), step
    return None


def last_step(path: str) -> int | None:
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
