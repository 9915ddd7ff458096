"""A replica's output kept beyond its pod (Kubernetes): the launcher tees the entry point's stdout
and stderr to its own stdout (`kubectl logs` still works) and to one file per attempt in the job's
directory on the home volume, forwarding signals and passing on the exit code (`run_teed`).

Why: a pod's log goes with the pod (deletion, `ttlSecondsAfterFinished`, a lost node), and with
`restartPolicy: Never` a retry is a new pod, so the API has no "previous" log either.  The file is
a copy, never a condition: a slow or hung home volume delays the copy, never the replica
(`ReplicaLog` writes from a thread of its own), and a file that cannot be written is said once.

Standard library only: this file is shipped into every job beside the launcher.
"""

from __future__ import annotations

import collections
import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping

if __package__:  # imported from the installed package (the server, the local backend)
    from paddle_nbext.model import contract
else:  # a plain script: in a job's bundle, the contract shipped beside it (even where the image
    # has some other paddle-nbext installed); run from a source tree, the installed one
    try:
        import contract  # type: ignore[import-not-found,no-redef]
    except ImportError:
        from paddle_nbext.model import contract

if __package__:
    from . import launch_env, replica_files, supervise
else:  # a plain script: the bundle's files beside this one
    import launch_env  # type: ignore[import-not-found,no-redef]
    import replica_files  # type: ignore[import-not-found,no-redef]
    import supervise  # type: ignore[import-not-found,no-redef]

#: Seconds the tee keeps reading after the entry point exited: what it wrote last is in the pipe,
#: but a process it left running in the background may hold the pipe open for ever.
DRAIN_SECONDS = supervise.DRAIN_SECONDS
FORWARDED_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2)

#: Bytes of output the attempt file may lag behind the pod's log.  The home volume may be slow or
#: hang (a network file system, CephFS under load); the copy must never hold the training back,
#: so past this the file skips output (the pod's log keeps it) and says how much it skipped.
MAX_PENDING_BYTES = 8 << 20


class ReplicaLog:
    """One attempt's file.  Output reaches it through a writer thread of its own, unbuffered
    beyond `MAX_PENDING_BYTES` of lag (a reader sees each line as soon as the volume takes it),
    so a slow or hung home volume delays the copy, never the replica.  Writing never raises: the
    first failure (disk full, a stale network mount) is reported once on stderr, and from then on
    the output only goes to stdout."""

    def __init__(self, path: str, attempt: int, fd: int) -> None:
        self.path = path
        self.attempt = attempt
        self._fd: int | None = fd
        self._pending: collections.deque[bytes] = collections.deque()
        self._pending_bytes = 0
        self._unnoted = 0  # bytes skipped since the last note the writer took for the file
        self._skipped = 0  # bytes skipped in all, noted or not
        self._closing = False
        #: When the entry point last wrote output (epoch seconds; 0: not yet): the stall watch's
        #: sign of life (`output`), which the launcher's own words do not give.
        self.last_output = 0.0
        self._ready = threading.Condition()
        self._writer = threading.Thread(target=self._drain, name="paddle-nbext-attempt-file", daemon=True)
        self._writer.start()

    @property
    def skipped(self) -> int:
        """Bytes of output this file will never hold, in all (the pod's log has them)."""
        with self._ready:
            return self._skipped

    def output(self, data: bytes) -> None:
        """Queue the entry point's own output for the file (`write`), noting when it came."""
        if data:
            self.last_output = time.time()
        self.write(data)

    def write(self, data: bytes) -> None:
        """Queue `data` for the file; returns at once whatever the volume does."""
        with self._ready:
            if self._fd is None or self._closing or not data:
                return
            if self._pending_bytes + len(data) > MAX_PENDING_BYTES:
                self._unnoted += len(data)
                self._skipped += len(data)
                return
            self._pending.append(data)
            self._pending_bytes += len(data)
            self._ready.notify()

    def _drain(self) -> None:
        while True:
            with self._ready:
                while not self._pending and not self._closing:
                    self._ready.wait()
                if not self._pending:
                    return
                data = self._pending.popleft()
                self._pending_bytes -= len(data)
                dropped, self._unnoted = self._unnoted, 0
                fd = self._fd
            if fd is None:
                continue
            if dropped:
                note = f"[paddle-nbext] {dropped} bytes of output are missing here: this file could not keep up (the pod's log has them)\n"
                data = note.encode() + data
            try:
                _write_all(fd, data)
            except OSError as error:
                reason = error.strerror or error
                self._give_up(f"cannot write {self.path} ({reason}); the output goes on in the pod's log only")

    def _give_up(self, message: str) -> None:
        with self._ready:
            fd, self._fd = self._fd, None
            self._pending.clear()
            self._pending_bytes = 0
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)
        say(f"paddle-nbext launcher: {message}", None)

    def close(self, wait: float = DRAIN_SECONDS) -> None:
        """Write what is queued (for at most `wait` seconds: a hung volume must not keep the
        replica from ending), then close the file."""
        with self._ready:
            self._closing = True
            self._ready.notify()
        self._writer.join(wait)
        with self._ready:
            fd, self._fd = self._fd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _adopt_owner(path: str, owner: tuple[int, int] | None) -> None:
    """A replica running as root would leave root's files in the user's home, which the notebook
    (the user) could then not delete with the job: give them the owner of the directory above."""
    if owner is not None and hasattr(os, "geteuid") and os.geteuid() == 0:
        with contextlib.suppress(OSError):  # best effort: the training matters, not the file
            os.chown(path, owner[0], owner[1])


def open_attempt_log(directory: str, role: str, index: int, *, limit: int = 1000) -> ReplicaLog:
    """Create the next attempt's file of one replica in `directory` (made if missing): one more
    than the highest attempt there, created with O_EXCL, so two pods of one index that start at
    the same time still get a file each.  Raises OSError when it cannot."""
    existing = directory
    while not os.path.isdir(existing) and os.path.dirname(existing) != existing:
        existing = os.path.dirname(existing)
    try:
        info = os.stat(existing)
        owner: tuple[int, int] | None = (info.st_uid, info.st_gid)
    except OSError:
        owner = None
    missing = []
    parent = directory
    while parent != existing and not os.path.isdir(parent):
        missing.append(parent)
        parent = os.path.dirname(parent)
    os.makedirs(directory, exist_ok=True)
    for made in reversed(missing):
        _adopt_owner(made, owner)
    found = replica_files.attempts(directory, role, index)
    attempt = found[-1][0] + 1 if found else 0
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND | getattr(os, "O_CLOEXEC", 0)
    for _ in range(limit):
        path = os.path.join(directory, replica_files.attempt_name(role, index, attempt))
        try:
            fd = os.open(path, flags, 0o644)
        except FileExistsError:
            attempt += 1
            continue
        _adopt_owner(path, owner)
        return ReplicaLog(path, attempt, fd)
    raise FileExistsError(f"{limit} attempt files of {role} {index} already exist in {directory}")


def open_replica_log(env: Mapping[str, str]) -> ReplicaLog | None:
    """This replica's attempt file, or None when there is none to write (not on Kubernetes,
    turned off, no role or index yet) or it cannot be created; never raises."""
    directory = replica_files.log_dir(env)
    role = env.get("PADDLE_NBEXT_ROLE", "").strip()
    if directory is None or role not in contract.ROLES:
        return None
    try:
        index = launch_env.replica_index(env)
    except launch_env.LaunchError:
        return None  # build_env reports it
    try:
        return open_attempt_log(directory, role, index)
    except OSError as error:
        say(
            f"paddle-nbext launcher: cannot create a log file in {directory} ({error.strerror or error}); "
            "the output is only in the pod's log, which goes with the pod",
            None,
        )
        return None


def say(message: str, log: ReplicaLog | None) -> None:
    """The launcher's own words: to stderr, and into the attempt file (a failure's reason must
    outlive the pod as much as the entry point's output)."""
    print(message, file=sys.stderr, flush=True)
    if log is not None:
        log.write((message + "\n").encode("utf-8", errors="replace"))


def _pump(fd: int, log: ReplicaLog, progress: Callable[[bytes], None] | None = None) -> None:
    """Copy the entry point's output to stdout and the file as it comes (`supervise.pump`), and
    to `progress` (the reader of printed progress lines) when there is one."""
    if progress is None:
        supervise.pump(fd, log.output)
        return

    def both(data: bytes) -> None:
        log.output(data)
        progress(data)

    supervise.pump(fd, both)


def _wait_reaping(pid: int) -> int:
    """The exit code of `pid`, reaping every other child on the way: in a container the launcher
    is PID 1, and processes the entry point orphans become its children."""
    while True:
        try:
            reaped, status = os.wait()
        except ChildProcessError:
            return 1  # cannot happen while `pid` runs; treat as a failure rather than hang
        if reaped == pid:
            code = os.waitstatus_to_exitcode(status)
            return 128 - code if code < 0 else code


def run_teed(argv: list[str], env: Mapping[str, str], log: ReplicaLog, progress: Callable[[bytes], None] | None = None) -> int:
    """Run `argv` with its stdout and stderr teed to our stdout, `log` and `progress`; signals
    sent to us (Kubernetes sends SIGTERM to PID 1) go on to it.  Returns its exit code."""
    child: list[subprocess.Popen[bytes]] = []
    pending: list[int] = []

    def forward(signum: int, _frame: object) -> None:
        if child:
            with contextlib.suppress(ProcessLookupError):
                child[0].send_signal(signum)
        else:
            pending.append(signum)

    for forwarded in FORWARDED_SIGNALS:
        signal.signal(forwarded, forward)
    sys.stdout.flush()
    sys.stderr.flush()
    process = subprocess.Popen(argv, env=dict(env), stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    child.append(process)
    for early in pending:  # arrived before the child existed
        process.send_signal(early)
    assert process.stdout is not None
    tee = threading.Thread(target=_pump, args=(process.stdout.fileno(), log, progress), name="paddle-nbext-tee", daemon=True)
    tee.start()
    code = _wait_reaping(process.pid)
    child.clear()
    process.returncode = code
    tee.join(DRAIN_SECONDS)
    return code
