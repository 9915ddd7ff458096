"""Progress read from a trainer's printed lines, for code that never calls `report()`: the
launcher feeds the entry point's output through `LineProgress` as it tees it, and matched lines
become points in the replica's metrics file, the same JSON lines `report()` writes (the same
`Reporter` writes them), so the panel, `job.metrics()`, the ETA and the stall watch need nothing
new.

What is read: the job's own `progress_pattern` (`PATTERN_VAR`, a regular expression with named
groups, `paddle_nbext/model/progress_pattern.py`), else the built-in styles:
* Paddle's high-level API (`paddle.Model.fit`'s progress bar, verbose 1 or 2):
  `Epoch 1/10`, then `step  20/100 - loss: 0.3123 - acc: 0.9 - 12ms/step`; between
  `Eval begin...` and `Eval samples: N` the lines are an evaluation, whose last values become
  `eval_<name>` at the current training step;
* PaddleNLP/PaddleClas-style keyed lines: `global step 20, epoch: 1, batch: 20, loss: 0.31` and
  `[Train][Epoch 1/10][Iter: 20/100]lr: 0.1, top1: 0.5, loss: 2.3`.
A step counted within an epoch (`step 20/100` of `Epoch 2/10`, `Iter: 20/100` of `Epoch 2/10`)
becomes the global step (120 of 1000), so a curve runs on across epochs and the ETA is the job's.

Who writes the file (one writer per file): the code's own reports win.  The replica's process
writes through `paddle_nbext_report` (an explicit `report()`, or the `Model.fit` hook), and its
first write leaves a claim beside the file (`paddle_nbext_report.CLAIM_SUFFIX`); from then on
this reader writes nothing more, and says so once.  A claim an earlier attempt of the job left
holds for the next: the same code reports itself again.

Standard library only: shipped into every job beside the launcher.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Mapping

if __package__:  # imported from the installed package (the server, the local backend)
    from paddle_nbext.model import progress_pattern

    from . import paddle_nbext_report, replica_files
else:  # a plain script: in a job's bundle, the modules shipped beside it
    try:
        import progress_pattern  # type: ignore[import-not-found,no-redef]
    except ImportError:
        from paddle_nbext.model import progress_pattern
    import paddle_nbext_report  # type: ignore[import-not-found,no-redef]
    import replica_files  # type: ignore[import-not-found,no-redef]

#: The job's own pattern (the spec's `progress_pattern`), set by the backends; unset: built-ins.
PATTERN_VAR = "PADDLE_NBEXT_PROGRESS_PATTERN"
#: A line longer than this is not read (no progress line is; a dumped tensor may be).
MAX_LINE = 4096
#: Named groups of a pattern that are not metrics.
_PLACES = frozenset({"step", "total", "epoch", "epochs"})
_NUMBER = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"
_NUMBER_RE = re.compile(_NUMBER)

# ---- Paddle's high-level API (hapi ProgBarLogger)
_HAPI_EPOCH = re.compile(r"^Epoch (\d+)/(\d+)\s*$")
_HAPI_STEP = re.compile(r"^step\s+(\d+)(?:/(\d+))?(?:\s*\[[=>.]*\])?((?:\s+-\s+.*)?)$")
_HAPI_EVAL_BEGIN = "Eval begin..."
_HAPI_EVAL_END = re.compile(r"^Eval samples: \d+")
_HAPI_VALUE = re.compile(rf"^([A-Za-z_][\w.]*): \[?({_NUMBER})")

# ---- keyed lines (PaddleNLP, PaddleClas, PaddleDetection, most hand-written loops)
_KEYED_STEP = re.compile(r"(?i)(?<![A-Za-z_])(?:global[ _]step|step|iter)\]?[:= ]\s*(\d+)(?:\s*/\s*(\d+))?")
_KEYED_EPOCH = re.compile(r"(?i)(?<![A-Za-z_])epoch[:= ]\s*\[?(\d+)(?:\s*/\s*(\d+))?")
_KEYED_VALUE = re.compile(rf"(?<![\w.])([A-Za-z_][\w.]*(?:\([^)]*\))?)\s*[:=]\s*({_NUMBER})(?![\w.:/])")
_KEYED_SKIP = frozenset({"step", "global_step", "iter", "epoch", "batch", "eta"})

Point = tuple[int, "int | None", "dict[str, float]"]


def _float(text: str | None) -> float | None:
    if text is None:
        return None
    try:
        value = float(text)
    except ValueError:
        return None
    return value if value - value == 0.0 else None


def _global(step: int, total: int | None, epoch: int | None, epochs: int | None) -> tuple[int, int | None]:
    """A step counted within an epoch as the job's step (`Iter: 20/100` of `Epoch 2/10`: 120 of 1000)."""
    if epoch is not None and epochs is not None and total is not None and epoch >= 1:
        return (epoch - 1) * total + step, epochs * total
    return step, total


class CustomPattern:
    """The job's own `progress_pattern`: one regular expression with named groups."""

    def __init__(self, text: str) -> None:
        self.pattern = progress_pattern.compile_pattern(text)
        self.metrics = [name for name in self.pattern.groupindex if name not in _PLACES]

    def read(self, line: str) -> Point | None:
        match = self.pattern.search(line)
        if match is None:
            return None
        groups = match.groupdict()
        step = _whole(groups.get("step"))
        if step is None:
            return None
        total, epoch, epochs = _whole(groups.get("total")), _whole(groups.get("epoch")), _whole(groups.get("epochs"))
        values = {name: value for name in self.metrics if (value := _float(groups.get(name))) is not None}
        if epoch is not None:
            values["epoch"] = float(epoch)
        step, total = _global(step, total, epoch, epochs)
        return step, total, values


def _whole(text: str | None) -> int | None:
    if text is None:
        return None
    text = text.strip()
    return int(text) if text.isdigit() and len(text) < 19 else None


class BuiltInStyles:
    """Paddle's common progress lines (see the module's words), with the context they need: the
    epoch a `step n/N` line belongs to, and whether an evaluation is under way."""

    def __init__(self) -> None:
        self.epoch: int | None = None
        self.epochs: int | None = None
        self.evaluating = False
        self.eval_values: dict[str, float] = {}
        self.step = 0  # the last training step read
        self.total: int | None = None

    def read(self, line: str) -> Point | None:
        stripped = line.strip()
        if not stripped:
            return None
        if stripped.startswith(("step", "Epoch", "Eval")):
            return self._hapi(stripped)
        if "tep" in line or "ter" in line:  # step, Step, global_step, Iter, iter
            return self._keyed(line)
        return None

    def _hapi(self, line: str) -> Point | None:
        epoch = _HAPI_EPOCH.match(line)
        if epoch:
            self.epoch, self.epochs = int(epoch[1]), int(epoch[2])
            return None
        if line.startswith(_HAPI_EVAL_BEGIN):
            self.evaluating, self.eval_values = True, {}
            return None
        if _HAPI_EVAL_END.match(line):
            self.evaluating = False
            if not self.eval_values:
                return None
            return self.step, self.total, {f"eval_{name}": value for name, value in self.eval_values.items()}
        match = _HAPI_STEP.match(line)
        if match is None:
            return self._keyed(line)
        values: dict[str, float] = {}
        for part in match[3].split(" - ")[1:]:
            value = _HAPI_VALUE.match(part.strip())
            if value and value[1] != "ETA" and (number := _float(value[2])) is not None:
                values[value[1]] = number
        if self.evaluating:
            self.eval_values = values
            return None
        step, total = _global(int(match[1]), _whole(match[2]), self.epoch, self.epochs)
        if self.epoch is not None:
            values["epoch"] = float(self.epoch)
        self.step, self.total = step, total
        return step, total, values

    def _keyed(self, line: str) -> Point | None:
        found = _KEYED_STEP.search(line)
        if found is None:
            return None
        epoch_match = _KEYED_EPOCH.search(line)
        epoch = int(epoch_match[1]) if epoch_match else None
        epochs = _whole(epoch_match[2]) if epoch_match else None
        values: dict[str, float] = {}
        for name, raw in _KEYED_VALUE.findall(line):
            key = name.split("(")[0]
            if key.lower() not in _KEYED_SKIP and (number := _float(raw)) is not None:
                values[key] = number
        if epoch is not None:
            values["epoch"] = float(epoch)
        step, total = _global(int(found[1]), _whole(found[2]), epoch, epochs)
        self.step, self.total = step, total
        return step, total, values


class LineProgress:
    """Reads the entry point's output (`feed`, bytes as they come) line by line into points of
    the replica's metrics file, until the code's own reports claim the file."""

    def __init__(self, path: str, pattern: str = "", *, reporter: paddle_nbext_report.Reporter | None = None) -> None:
        self.path = path
        # An earlier attempt's claim stays: the same job runs the same code, which reports itself
        # again.  Read meanwhile, its "resumed from step 20" line became a point of step 20
        # without the loss, replacing the checkpoint step's point of the curve (issue 47).
        self.claim = path + paddle_nbext_report.CLAIM_SUFFIX
        self.reader: CustomPattern | BuiltInStyles = CustomPattern(pattern) if pattern else BuiltInStyles()
        # A job that names its own pattern asks for its lines to be read: nothing to wait for.
        hold = 0.0 if pattern else paddle_nbext_report.YIELD_GRACE
        self.reporter = reporter or paddle_nbext_report.Reporter(path, yield_to=self.claim, hold=hold)
        self._partial = b""

    def feed(self, data: bytes) -> None:
        """Read every complete line of `data` (a progress bar's `\\r` ends a line too); never raises."""
        if self.reporter.yielded:
            return
        try:
            chunk = self._partial + data
            *lines, self._partial = chunk.replace(b"\r", b"\n").split(b"\n")
            if len(self._partial) > MAX_LINE:
                self._partial = b""
            for raw in lines:
                if 4 < len(raw) <= MAX_LINE:
                    self._line(raw.replace(b"\x08", b"").decode("utf-8", "replace"))
        except Exception as error:  # a reader must never stop the tee
            self.reporter.say_once("reader", f"could not read a progress line ({error}); later lines are still read")

    def _line(self, line: str) -> None:
        point = self.reader.read(line)
        if point is not None:
            step, total, values = point
            self.reporter.add(step, total, values)

    def close(self) -> None:
        """Read the last line if it did not end, and write what is buffered."""
        if self._partial:
            self.feed(b"\n")
        self.reporter.close()


def from_env(env: Mapping[str, str], processes: int, say: Callable[[str], None] | None = None) -> LineProgress | None:
    """The reader of a single-process trainer's output (`env`: the entry point's, which names its
    metrics file; a trainer of several ranks interleaves their output, and its ranks report on
    their own); None for pservers, outside a job, or when the job's pattern cannot be used (said)."""
    if env.get("PADDLE_NBEXT_ROLE", "").strip() != "trainer" or processes != 1:
        return None
    path = env.get(replica_files.METRICS_FILE_VAR, "").strip()
    if not path:
        return None
    pattern = env.get(PATTERN_VAR, "")
    try:
        return LineProgress(path, pattern)
    except ValueError as error:  # the server checked it; a hand-made environment may not be
        (say or _stderr)(f"paddle-nbext launcher: {PATTERN_VAR} {error}; printed progress is not read")
        return None


def _stderr(words: str) -> None:
    print(words, file=sys.stderr, flush=True)
