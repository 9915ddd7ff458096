"""Attempts of a job fenced in its home: a replica of an attempt the job has moved past writes
nothing that the newer attempt reads, and stops itself.

Why: after a node stops responding, Kubernetes gives up on its pods and the job restarts whole on
the other nodes, but a node cut off by a partition still runs its old pods.  They cannot be told
to stop (nothing reaches them) and their node may still reach the home (CephFS is served by other
machines than the API server).  Left alone they would publish checkpoints the new attempt loads,
replace its checkpoints of the same step, and append points to the curves it draws.

How: every attempt, when its replicas start, leaves a marker `<checkpoints>/.attempts/<attempt>` (in
the job's checkpoint directory, which every replica of every attempt shares) that
holds when its restart began (`PADDLE_NBEXT_ATTEMPT_BEGAN`, set by the runner that started it;
the marker's own creation time otherwise).  A marker is created once (O_EXCL) and never changed,
so concurrent replicas of one attempt agree and nothing needs a lock.  Then:
- a writer of an older attempt that sees a newer marker publishes nothing (`newer_attempt`): the
  checkpoint publish and the metrics reporter check before every write; the launcher checks every
  few seconds and stops its ranks (`watch`);
- a checkpoint an older attempt published at or after a newer attempt's beginning is stale
  (`stale`): no reader lists it, resumes from it, or keeps it (what slipped through between a
  writer's check and the marker, or what a partitioned node wrote before the new attempt began).
The home's own consistency makes the marker visible: on CephFS the MDS revokes the old client's
cached view of the directory before the marker's create completes (or evicts the client).

Attempt names are the replicas' `PADDLE_NBEXT_ATTEMPT` ("2" for the backend's whole restarts,
"0.3" for JobSet's), compared number by number.  Standard library only: the launcher and the
training code's `paddle_nbext_job` both import it (shipped beside each in the job's bundle).
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Callable, Mapping

__all__ = ["attempt_name", "fence_dir", "fences", "newer_attempt", "raise_fence", "stale", "start_without_signals", "watch"]

#: Which whole-job start a replica belongs to (set by both backends).
ATTEMPT_VAR = "PADDLE_NBEXT_ATTEMPT"
#: When the restart that made this attempt began (epoch seconds, the runner's clock).
BEGAN_VAR = "PADDLE_NBEXT_ATTEMPT_BEGAN"
#: The job's checkpoint directory; the markers live in it (no checkpoint reader lists a dot name).
CHECKPOINT_DIR_VAR = "PADDLE_NBEXT_CHECKPOINT_DIR"
FENCE_SUBDIR = ".attempts"
#: How often the launcher looks for a newer attempt (seconds).
WATCH_SECONDS = 5.0


def attempt_name(env: Mapping[str, str] | None = None) -> str:
    """This process's attempt as written in files: `PADDLE_NBEXT_ATTEMPT` reduced to digits, dots
    and letters ("0" when unset)."""
    raw = (os.environ if env is None else env).get(ATTEMPT_VAR, "").strip()
    return "".join(c for c in raw if c.isascii() and (c.isalnum() or c in "._")).strip(".")[:32] or "0"


def _key(name: str) -> tuple[int, ...]:
    parts = []
    for part in name.split("."):
        parts.append(int(part) if part.isdigit() else 0)
    return tuple(parts) + (0,) * max(0, 2 - len(parts))


def fence_dir(env: Mapping[str, str] | None = None) -> str | None:
    """`<checkpoint dir>/.attempts`, None outside a job."""
    checkpoints = (os.environ if env is None else env).get(CHECKPOINT_DIR_VAR, "").strip()
    return os.path.join(checkpoints, FENCE_SUBDIR) if checkpoints else None


def raise_fence(env: Mapping[str, str] | None = None) -> bool:
    """Leave this attempt's marker (once: later calls and other replicas find it there).  False
    when there is no job directory or it cannot be written (the job then runs unfenced)."""
    source = os.environ if env is None else env
    directory = fence_dir(source)
    if directory is None or not source.get(ATTEMPT_VAR, "").strip():
        return False
    began = source.get(BEGAN_VAR, "").strip()
    try:
        when = float(began) if began else time.time()
    except ValueError:
        when = time.time()
    try:
        os.makedirs(directory, exist_ok=True)
        fd = os.open(os.path.join(directory, attempt_name(source)), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        return True
    except OSError:
        return False
    try:
        os.write(fd, f"{when!r}\n".encode())  # full precision: a save a moment before is before
    finally:
        os.close(fd)
    return True


def fences(directory: str | None) -> dict[str, float]:
    """attempt -> when it began, for every marker in `directory` ({} when none can be read).  A
    marker still being written (empty) counts as beginning now."""
    if directory is None:
        return {}
    try:
        names = os.listdir(directory)
    except OSError:
        return {}
    found: dict[str, float] = {}
    for name in names:
        if name.startswith("."):
            continue
        try:
            with open(os.path.join(directory, name), encoding="ascii") as handle:
                text = handle.read().strip()
            found[name] = float(text) if text else time.time()
        except (OSError, ValueError):
            found[name] = time.time()
    return found


def newer_attempt(env: Mapping[str, str] | None = None, known: Mapping[str, float] | None = None) -> str | None:
    """The newest attempt that began after this process's, None while this one is the newest (or
    outside a job)."""
    source = os.environ if env is None else env
    if not source.get(ATTEMPT_VAR, "").strip():
        return None
    mine = _key(attempt_name(source))
    if known is not None:
        markers: list[str] = list(known)
    else:  # only the names matter here: one listing, no marker read (the reporter asks every flush)
        directory = fence_dir(source)
        try:
            markers = [name for name in os.listdir(directory) if not name.startswith(".")] if directory else []
        except OSError:
            markers = []
    later = [name for name in markers if _key(name) > mine]
    return max(later, key=_key) if later else None


def stale(attempt: object, saved: object, known: Mapping[str, float]) -> bool:
    """Whether something `attempt` wrote at `saved` (epoch seconds) came after a later attempt
    began: then no later attempt may read it."""
    if not isinstance(attempt, str) or not known:
        return False
    mine = _key(attempt)
    began = [when for name, when in known.items() if _key(name) > mine]
    if not began:
        return False
    if not isinstance(saved, (int, float)) or isinstance(saved, bool):
        return True  # a newer attempt exists and this one cannot say when it wrote: not trusted
    return saved >= min(began)


def watch(
    on_newer: Callable[[str], None], env: Mapping[str, str] | None = None, interval: float = WATCH_SECONDS
) -> threading.Thread | None:
    """Call `on_newer(attempt)` once, from a daemon thread, when a newer attempt's marker appears;
    None (no thread) outside a job."""
    source = dict(os.environ if env is None else env)
    if fence_dir(source) is None or not source.get(ATTEMPT_VAR, "").strip():
        return None

    def run() -> None:
        while True:
            newer = None
            with contextlib.suppress(Exception):
                newer = newer_attempt(source)
            if newer is not None:
                on_newer(newer)
                return
            time.sleep(interval)

    return start_without_signals(threading.Thread(target=run, name="paddle-nbext-fence", daemon=True))


def start_without_signals(thread: threading.Thread) -> threading.Thread:
    """Start a launcher's watch `thread` with every signal blocked in it (a thread inherits the
    mask it starts with): a stop from Kubernetes must reach the main thread, whose handler
    forwards it to the entry point; delivered to a watch thread, it would wait until the main
    thread's blocking wait returned.  Shared by the launcher's watches (this fence's, and
    `replica_health`'s); it lives here, not in `supervise`, because this module is the one that
    is shipped both beside the launcher and in `pylib/`, where `supervise` is not."""
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, signal.valid_signals())
    try:
        thread.start()
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)
    return thread
