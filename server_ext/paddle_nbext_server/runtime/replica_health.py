"""A Kubernetes replica's own health watch, run by its launcher inside the pod: a warning before
the container runs out of memory, and (trainers) a stall, written where the user's home keeps
them, so it works while no notebook server runs and costs no API call.

Why in the pod: the local master watches its replicas from outside (their process trees, their
files); on Kubernetes nothing outside the pod may read its memory but metrics-server (which
needs a server asking), and the in-cluster master does not mount the home.  The launcher is in
the container already, sees the container's cgroup and tees its trainer's output.

What it watches, every `INTERVAL_VAR` seconds (a few reads of small files):
* memory, every replica: the container's cgroup v2 (`memory.current`, `memory.max`, and
  `inactive_file` of `memory.stat`): the working set, current - inactive_file, is what the
  kubelet compares with the limit (and what metrics-server reports).  `memory.max` = "max" means
  no limit: never warned about.  Under cgroup v1 (a node still on it) the same from the memory
  controller's `memory.usage_in_bytes`, `memory.limit_in_bytes` and `total_inactive_file`.  The
  rules are the local backend's (`health_rules.MemoryWatch`: 90 % for `sustain` seconds, clear
  below 85 %).
* stall, trainers only: no output from the trainer (the launcher's tee sees each byte) and no
  `report()` (its metrics files' times) for `stall_timeout` seconds, armed only once the trainer
  reported in this attempt (a job that never reports is never called stalled).

The file contract (a server-side reader merges these files into the job's timeline and message):

    <logs>/<role>-<index>.health.jsonl       logs: the job's logs dir in the home (launcher.log_dir)

appended, one JSON object per line, never rewritten:

    {"t": "2026-12-06T01:02:03Z", "kind": "warning", "text": "Memory: trainer 1 uses 1.8 GiB of its
     2 GiB limit; ...", "role": "trainer", "index": 1, "attempt": 0}

* `t`: ISO 8601 UTC, seconds (`contract.now_iso`); `role`, `index`: the replica;
* `kind`: "warning" (a memory warning or a stall) or "recovered" (that warning cleared), the
  local timeline's kinds; `text`: the local backend's words, ending with a full stop;
* `attempt`: the whole-job attempt of the pod that wrote it, a whole number: the record's restart
  attempt (`jobs` mode) or JobSet's restart attempt (`jobset` mode), as `PADDLE_NBEXT_ATTEMPT`
  holds them (`attempt_number`).  Entries of a lower attempt than the job's current one are
  history: their warnings ended with their pods.
* Which watch an entry belongs to is its text's first word: "Memory:" for the memory watch,
  anything else ("Stalled:", "Progress again") for the stall watch.
* What is wrong now: for each watch, its last entry of the current attempt; a "warning" there is
  active, a "recovered" (or none) is not.  `active_warnings` reads a file that way.
* A line that is not a JSON object (a write cut short) is skipped.

An out-of-memory kill: the kernel kills the largest process of a container over its limit (the
trainer's code, not the small launcher), and the kubelet then calls the container `OOMKilled`.
The launcher counts the cgroup's OOM kills (v2 `memory.events`, v1 `memory.oom_control`,
`oom_kill`) before and after its entry point; when the count rose it says last, in the line the
job's failure message quotes, at which limit and the most it saw in use ("the kernel killed it at
its 400 MiB memory limit (OOMKilled); the most seen in use before: 372.5 MiB").

Acting on a stall (`on_stall`): "warn" writes the entry only.  "restart" and "fail" also stop the
trainer (`on_stop`: the launcher stops its entry point as a stop from Kubernetes would, SIGKILL
after `STOP_GRACE_SECONDS`), after which the launcher exits with `contract.STALL_EXIT_CODE`, its
container's termination message and last line the stall's words; the lifecycle policy
(`policy.decide`'s `on_stall`) restarts the whole job (counted like other restarts, within
`max_restarts`) or fails it in those words.

Inputs (set by the Kubernetes manifests, all optional): `STALL_TIMEOUT_VAR` (seconds, 0 or unset:
no stall watch), `ON_STALL_VAR`.  For tests and unusual setups: `CGROUP_DIR_VAR` (where the
container's cgroup is mounted, `/sys/fs/cgroup`), `MEMORY_WARN_AFTER_VAR` (the sustain, seconds),
`INTERVAL_VAR`, `TERMINATION_LOG_VAR` (the termination message's file, `/dev/termination-log`).

Standard library only: shipped in the job's runtime bundle beside the launcher.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

if __package__:  # imported from the installed package (the server, tests)
    from paddle_nbext.model import contract

    from . import health_rules, paddle_nbext_fence
else:  # a plain script: the bundle's files beside the launcher
    try:
        import contract  # type: ignore[import-not-found,no-redef]
    except ImportError:
        from paddle_nbext.model import contract
    import health_rules  # type: ignore[import-not-found,no-redef]
    import paddle_nbext_fence  # type: ignore[import-not-found,no-redef]

STALL_TIMEOUT_VAR = "PADDLE_NBEXT_STALL_TIMEOUT"
ON_STALL_VAR = "PADDLE_NBEXT_ON_STALL"
CGROUP_DIR_VAR = "PADDLE_NBEXT_CGROUP_DIR"
MEMORY_WARN_AFTER_VAR = "PADDLE_NBEXT_MEMORY_WARN_AFTER"
INTERVAL_VAR = "PADDLE_NBEXT_HEALTH_INTERVAL"
TERMINATION_LOG_VAR = "PADDLE_NBEXT_TERMINATION_LOG"
DEFAULT_CGROUP_DIR = "/sys/fs/cgroup"
DEFAULT_TERMINATION_LOG = "/dev/termination-log"
DEFAULT_INTERVAL = 2.0
HEALTH_SUFFIX = ".health.jsonl"
#: Seconds a stopped trainer gets after SIGTERM before what is left of it is killed.
STOP_GRACE_SECONDS = 10.0
#: A cgroup v1 limit this large is "no limit" (the kernel's page-rounded LONG_MAX).
_V1_UNLIMITED = 1 << 60
#: The `on_stall` values that stop the trainer.
STOPPING = ("restart", "fail")
#: How the launcher's words about a stall it stopped the trainer for go on after its prefix
#: (`policy._STALLED` reads the line).
STALLED = "the training stalled:"


def health_name(role: str, index: int) -> str:
    """The replica's health file in the job's logs dir."""
    return f"{role}-{index}{HEALTH_SUFFIX}"


def attempt_number(env: Mapping[str, str]) -> int:
    """The whole-job attempt as a whole number: the sum of the numeric parts of the fence's
    attempt name ("2" in `jobs` mode, "0.3" in `jobset` mode, where the other part stays 0)."""
    return sum(int(part) for part in paddle_nbext_fence.attempt_name(env).split(".") if part.isdigit())


# --------------------------------------------------------------------------------------- memory


@dataclass(frozen=True)
class MemoryReading:
    """The container's working set and its limit (0: none), in bytes."""

    working_set: int
    limit: int


def _read(path: str) -> str:
    with open(path, encoding="ascii") as handle:
        return handle.read().strip()


def _stat_value(path: str, key: str) -> int:
    """One counter of a cgroup's `memory.stat` (0 when missing)."""
    with open(path, encoding="ascii") as handle:
        for line in handle:
            name, _, value = line.partition(" ")
            if name == key:
                return int(value)
    return 0


def read_memory(directory: str) -> MemoryReading | None:
    """The container's memory from its cgroup mounted at `directory` (v2, else v1's memory
    controller under `memory/`); None when neither can be read."""
    try:
        current = int(_read(os.path.join(directory, "memory.current")))
        raw_limit = _read(os.path.join(directory, "memory.max"))
        inactive = _stat_value(os.path.join(directory, "memory.stat"), "inactive_file")
        limit = 0 if raw_limit == "max" else int(raw_limit)
    except (OSError, ValueError):
        v1 = os.path.join(directory, "memory")
        try:
            current = int(_read(os.path.join(v1, "memory.usage_in_bytes")))
            limit = int(_read(os.path.join(v1, "memory.limit_in_bytes")))
            inactive = _stat_value(os.path.join(v1, "memory.stat"), "total_inactive_file")
        except (OSError, ValueError):
            return None
        limit = 0 if limit >= _V1_UNLIMITED else limit
    # The kubelet's working set: usage less the page cache the kernel can drop at once.
    return MemoryReading(max(0, current - inactive) if inactive < current else 0, max(0, limit))


def read_oom_kills(directory: str) -> int | None:
    """How many processes the kernel killed in the container's cgroup for running out of memory
    (v2 `memory.events`, else v1 `memory/memory.oom_control`, their `oom_kill`); None when
    neither says."""
    for path in (os.path.join(directory, "memory.events"), os.path.join(directory, "memory", "memory.oom_control")):
        try:
            with open(path, encoding="ascii") as handle:
                for line in handle:
                    name, _, value = line.partition(" ")
                    if name == "oom_kill":
                        return int(value)
        except (OSError, ValueError):
            continue
    return None


# --------------------------------------------------------------------------------------- stall


class StallCheck:
    """One trainer's stall watch: quiet (no output, no report) for `timeout` seconds since the
    last sign of progress, armed by a report written after `started` (this attempt's start)."""

    def __init__(self, metrics_dir: str, index: int, timeout: float, started: float, last_output: Callable[[], float]) -> None:
        self.metrics_dir = metrics_dir
        self.index = index
        self.timeout = timeout
        self.started = started
        self.last_output = last_output

    def check(self, now: float) -> health_rules.Stall | None:
        if self.timeout <= 0:
            return None
        files = health_rules.metrics_files(self.metrics_dir, self.index)
        reported = [stamp for stamp in (health_rules.mtime(path) for path in files) if stamp >= self.started]
        if not reported:
            return None
        last = max([self.started, self.last_output(), *reported])
        if now - last < self.timeout:
            return None
        steps = [step for path in files if (step := health_rules.last_step(path)) is not None]
        return health_rules.Stall(index=self.index, quiet_since=last, step=max(steps) if steps else None)


# --------------------------------------------------------------------------------------- the file


def append_entry(path: str, entry: dict[str, Any]) -> bool:
    """Append one line (one `write` of O_APPEND, so a reader never sees half of two); False when
    the home refuses it (the training goes on)."""
    data = (json.dumps(entry, separators=(", ", ": ")) + "\n").encode()
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | getattr(os, "O_CLOEXEC", 0), 0o644)
    except OSError:
        return False
    try:
        os.write(fd, data)
    except OSError:
        return False
    finally:
        os.close(fd)
    return True


def read_entries(path: str) -> list[dict[str, Any]]:
    """Every whole entry of a health file, oldest first ([] when there is none)."""
    try:
        with open(path, "rb") as handle:
            lines = handle.read().splitlines()
    except OSError:
        return []
    entries = []
    for line in lines:
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict):
            entries.append(entry)
    return entries


def watch_of(entry: Mapping[str, Any]) -> str:
    """Which watch an entry belongs to: "memory" or "stall" (its text's first word)."""
    return "memory" if str(entry.get("text", "")).startswith("Memory:") else "stall"


def active_warnings(entries: list[dict[str, Any]], attempt: int) -> list[dict[str, Any]]:
    """The warnings that hold now: for each watch, its last entry of `attempt`, when a warning."""
    last: dict[str, dict[str, Any]] = {}
    for entry in entries:
        if entry.get("attempt") == attempt:
            last[watch_of(entry)] = entry
    return [entry for entry in last.values() if entry.get("kind") == "warning"]


def write_termination_message(words: str, env: Mapping[str, str]) -> None:
    """The stall's words as the container's termination message (the pod's status keeps them,
    so the policy reads them without the pod's log); nothing when the file is not there."""
    path = env.get(TERMINATION_LOG_VAR, "").strip() or DEFAULT_TERMINATION_LOG
    if not os.path.exists(path):
        return
    with contextlib.suppress(OSError), open(path, "w", encoding="utf-8") as handle:
        handle.write(words)


# --------------------------------------------------------------------------------------- the watch


def _seconds(env: Mapping[str, str], name: str, default: float) -> float:
    raw = env.get(name, "").strip()
    try:
        value = float(raw) if raw else default
    except ValueError:
        return default
    return value if value >= 0 else default


class ReplicaWatch:
    """The launcher's watch over its own replica (see the module docstring)."""

    def __init__(
        self,
        env: Mapping[str, str],
        logs: str,
        role: str,
        index: int,
        *,
        last_output: Callable[[], float],
        on_stop: Callable[[], None],
        say: Callable[[str], None],
    ) -> None:
        self.role, self.index = role, index
        self.path = os.path.join(logs, health_name(role, index))
        self.attempt = attempt_number(env)
        self.cgroup = env.get(CGROUP_DIR_VAR, "").strip() or DEFAULT_CGROUP_DIR
        self.interval = _seconds(env, INTERVAL_VAR, DEFAULT_INTERVAL) or DEFAULT_INTERVAL
        self.memory = health_rules.MemoryWatch(_seconds(env, MEMORY_WARN_AFTER_VAR, health_rules.DEFAULT_SUSTAIN))
        self.memory_on = True
        self.memory_read = False
        self.peak = 0  # the largest working set seen (bytes), for the words of an OOM kill
        self.limit = 0
        self.oom_kills = read_oom_kills(self.cgroup)
        on_stall = env.get(ON_STALL_VAR, "").strip()
        self.on_stall = on_stall if on_stall in (*STOPPING, "warn") else "warn"
        timeout = _seconds(env, STALL_TIMEOUT_VAR, 0.0) if role == contract.Role.TRAINER else 0.0
        metrics = env.get("PADDLE_NBEXT_METRICS_DIR", "").strip() or logs
        self.stall_check = StallCheck(metrics, index, timeout, time.time(), last_output)
        self.stall: health_rules.Stall | None = None
        #: The stall's words once the trainer was stopped for it (the launcher's exit says them).
        self.stopped_for: str | None = None
        self.on_stop = on_stop
        self.say = say
        self.unwritable = False
        self._done = threading.Event()

    @property
    def who(self) -> str:
        return f"{self.role} {self.index}"

    def add(self, kind: str, text: str) -> None:
        entry = {"t": contract.now_iso(), "kind": kind, "text": text, "role": self.role, "index": self.index, "attempt": self.attempt}
        if not append_entry(self.path, entry) and not self.unwritable:
            self.unwritable = True
            self.say(f"paddle-nbext launcher: cannot write {self.path}; health warnings are in this log only")
        if self.unwritable:
            self.say(f"paddle-nbext launcher: {kind}: {text}")

    def check_memory(self, now: float) -> None:
        if not self.memory_on:
            return
        reading = read_memory(self.cgroup)
        if reading is None:
            # No cgroup to read here at all (not a container, another layout): never warned about.
            # One that was read before and fails now (a file being rewritten) is read next time.
            self.memory_on = self.memory_read
            return
        self.memory_read = True
        self.peak, self.limit = max(self.peak, reading.working_set), reading.limit
        warning, cleared = self.memory.observe(self.who, self.who, reading.working_set, reading.limit, now)
        if warning:
            self.add("warning", f"Memory: {warning}; the kernel stops it (OOMKilled) if it goes over.")
        if cleared:
            self.add("recovered", f"Memory: {cleared}.")

    def check_stall(self, now: float) -> None:
        if self.stopped_for is not None:
            return
        stall = self.stall_check.check(now)
        if stall is None:
            if self.stall is not None:
                quiet = health_rules.span(now - self.stall.quiet_since)
                self.add("recovered", f"Progress again after {quiet} without any (trainer {self.index}).")
                self.stall = None
            return
        if self.stall is not None and self.stall.quiet_since == stall.quiet_since:
            return  # the same stall, said already
        self.stall = stall
        words = stall.words(now)
        self.add("warning", f"Stalled: {words}.")
        if self.on_stall in STOPPING:
            self.stopped_for = words
            self.say(f"paddle-nbext launcher: {STALLED} {words}; on_stall is '{self.on_stall}': stopping the trainer")
            self.on_stop()

    def oom_words(self) -> str | None:
        """After the entry point ended: what to say when the kernel killed in this container for
        running out of memory meanwhile (its OOM kill count rose), else None."""
        before, after = self.oom_kills, read_oom_kills(self.cgroup)
        if before is None or after is None or after <= before:
            return None
        reading = read_memory(self.cgroup)
        limit = self.limit or (reading.limit if reading is not None else 0)
        at = f" at its {health_rules.gib(limit)} memory limit" if limit else ""
        seen = f"; the most seen in use before: {health_rules.gib(self.peak)}" if self.peak else ""
        return f"the kernel killed it{at} (OOMKilled){seen}"

    def check(self, now: float | None = None) -> None:
        """One look at memory and progress."""
        moment = time.time() if now is None else now
        self.check_memory(time.monotonic() if now is None else moment)
        self.check_stall(moment)

    def run(self) -> None:
        while not self._done.wait(self.interval):
            with contextlib.suppress(Exception):  # a watch must never end the training
                self.check()

    def start(self) -> threading.Thread:
        """The watch in a daemon thread that blocks every signal (a stop from Kubernetes must
        reach the launcher's main thread, whose handlers forward it)."""
        return paddle_nbext_fence.start_without_signals(threading.Thread(target=self.run, name="paddle-nbext-health", daemon=True))

    def stop(self) -> None:
        self._done.set()
