"""How a replica's launcher runs the entry point so that no process of it outlives the replica.

The launcher stays the parent of the entry point instead of replacing itself with a shell:

* the entry point runs as argv when it is one plain command (`python train.py --lr 0.1`), and
  through `/bin/sh -c` only when it needs a shell (pipes, `;`, `&&`, redirections, variables,
  globs, a leading `NAME=value`, a builtin such as `cd`): `entry_argv`.  Either way it stays in
  the replica's process group, which the job runner stops as a whole;
* the launcher is a child subreaper (`PR_SET_CHILD_SUBREAPER`): what the entry point starts and
  then orphans (a daemonised helper, a pool worker whose parent died) is re-parented to the
  launcher rather than to init, so it stays findable as a descendant;
* the parent-death signal is set on the launcher itself (`PARENT_DEATH_SIGNAL`, catchable, unlike
  the SIGKILL the runner sets before exec): when the runner dies, however it was killed, the
  launcher kills every descendant and the replica's process group, then itself.  The signal
  reaches the process that was forked by the runner, which is now the launcher and not a shell;
* SIGTERM and SIGINT sent to the launcher alone are passed on to the entry point, and its exit
  code becomes the launcher's (128 + N for signal N, as a shell reports it).

Linux only for the two `prctl` calls; elsewhere they are skipped and the process group remains
what the runner stops.  Standard library only: this file is shipped into every job.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from types import FrameType

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
#: Delivered to the launcher when the process that started it dies (set by `run_supervised`).
PARENT_DEATH_SIGNAL = signal.SIGUSR2
#: Signals the launcher passes on to the entry point (the runner's own stop goes to the group).
FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
#: Characters only a shell gives meaning to, outside quotes and inside double quotes; an entry
#: point using one runs through `/bin/sh -c`.
#: Opt-in, for `benchmarks/bench_local.py` only (benchmarks/README.md): a file the local master
#: and the launchers append one JSON line per step to (`mark`), so the benchmark can say where a
#: job's time goes.  Unset, as always outside the benchmark, nothing is written.
TIMINGS_VAR = "PADDLE_NBEXT_TIMINGS"
_SHELL_SYNTAX = frozenset("|&;<>()$`*?[]{}~!#\n")
_DOUBLE_QUOTED_SYNTAX = frozenset("$`")


def needs_shell_syntax(entry: str) -> bool:
    """True when `entry` uses what only a shell does (operators, expansions, globs), quoting
    considered: `python -c "print(1); x"` is one plain command, `a; b` and `echo $HOME` are not."""
    quote = ""
    escaped = False
    for char in entry:
        if escaped:
            escaped = False
        elif quote == "'":
            quote = "" if char == "'" else quote
        elif char == "\\":
            escaped = True
        elif quote == '"':
            if char == '"':
                quote = ""
            elif char in _DOUBLE_QUOTED_SYNTAX:
                return True
        elif char in "'\"":
            quote = char
        elif char in _SHELL_SYNTAX:
            return True
    return False


_SHELL_WORDS = frozenset({"cd", "exec", "export", "source", ".", "set", "unset", "eval", "ulimit", "umask", "if", "for", "while"})
SHELL = "/bin/sh"


def with_python_on_path(path: str) -> str:
    """``path`` with a ``python`` on it.  Entry points say ``python train.py``, but many images
    (Debian's and Ubuntu's python3 packages, distroless) have only ``python3``: there the shell
    answered "python: not found" (exit 127) and the job failed before any user code ran.  When
    ``path`` has no ``python``, a private directory whose ``python`` is the interpreter running
    this launcher (the image's, the one with Paddle) is put first; otherwise ``path`` is kept."""
    if shutil.which("python", path=path or None) is not None or not sys.executable:
        return path
    directory = tempfile.mkdtemp(prefix="paddle-nbext-bin-")
    alias = os.path.join(directory, "python")
    # A script, not a symlink: exec'd by its own path, a virtualenv's interpreter still finds its
    # pyvenv.cfg (a symlink elsewhere would start it without the environment's packages).
    with open(alias, "w", encoding="utf-8") as script:
        script.write(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} "$@"\n')
    os.chmod(alias, 0o755)
    return directory + (os.pathsep + path if path else "")


def entry_argv(entry: str, path: str) -> list[str]:
    """The command that runs `entry`: its words when it is one plain command whose program is on
    `path` (no shell between the launcher and the program), else `/bin/sh -c entry`."""
    if needs_shell_syntax(entry):
        return [SHELL, "-c", entry]
    try:
        words = shlex.split(entry)
    except ValueError:  # an unbalanced quote: the shell says what is wrong
        return [SHELL, "-c", entry]
    if not words or "=" in words[0] or words[0] in _SHELL_WORDS:
        return [SHELL, "-c", entry]
    program = shutil.which(words[0], path=path or None)
    if program is None:
        return [SHELL, "-c", entry]  # the shell's "not found" is the message people know
    return [program, *words[1:]]


def mark(event: str, who: str = "") -> None:
    """Append `{"t": epoch seconds, "pid", "who", "event"}` (`who`: e.g. `trainer-0`; both plain
    words) to the `TIMINGS_VAR` file when it is set; never raises: a timing must not change what
    the job does."""
    path = os.environ.get(TIMINGS_VAR)
    if not path:
        return
    line = f'{{"t": {time.time():.6f}, "pid": {os.getpid()}, "who": "{who}", "event": "{event}"}}\n'
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            os.write(fd, line.encode())
        finally:
            os.close(fd)


def prctl(option: int, value: int) -> bool:
    """One `prctl` call; False where there is none (not Linux) or it is refused."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(option, value, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


def proc_stat_fields() -> list[tuple[int, list[bytes]]]:
    """(pid, the fields of /proc/<pid>/stat after the command name: state, parent, group, ...) of
    every process, in one pass; processes that end meanwhile are left out.  Raises OSError when
    /proc cannot be listed."""
    found: list[tuple[int, list[bytes]]] = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as handle:
                stat = handle.read()
        except OSError:
            continue  # ended meanwhile
        # The command name is in parentheses and may hold anything, so parse after the last ")".
        found.append((int(name), stat[stat.rfind(b")") + 2 :].split()))
    return found


def children_by_parent() -> dict[int, list[int]]:
    """{parent pid: child pids} of every process in /proc (one pass)."""
    table: dict[int, list[int]] = {}
    try:
        processes = proc_stat_fields()
    except OSError:
        return table
    for pid, fields in processes:
        if len(fields) > 1:
            table.setdefault(int(fields[1]), []).append(pid)
    return table


def descendants(pid: int) -> list[int]:
    """Every live process below `pid`, children first."""
    table = children_by_parent()
    found: list[int] = []
    pending = list(table.get(pid, []))
    while pending:
        child = pending.pop(0)
        if child not in found:
            found.append(child)
            pending.extend(table.get(child, []))
    return found


def kill_all_below(pid: int) -> None:
    """SIGKILL every descendant of `pid` and `pid`'s process group, `pid` itself last if it is
    in that group (the launcher calls this on itself: it does not return then)."""
    for _ in range(3):  # a process forking while we kill: go again until nothing is left
        below = descendants(pid)
        if not below:
            break
        for child in below:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(child, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(os.getpgid(pid), signal.SIGKILL)


def _exit_code(status: int) -> int:
    code = os.waitstatus_to_exitcode(status)
    return 128 - code if code < 0 else code


#: Seconds the tee keeps reading after the entry point exited (`replica_log.DRAIN_SECONDS`).
DRAIN_SECONDS = 2.0


def pump(fd: int, sink: Callable[[bytes], None]) -> None:
    """Copy the entry point's output (`fd`, a pipe) to stdout and `sink` as it comes (no
    buffering beyond the pipe's, so a reader sees each line when it is written).  Reads until
    the pipe ends whatever fails: a full pipe would stop the training."""
    stdout_ok = True
    while True:
        try:
            data = os.read(fd, 65536)
        except OSError:
            return
        if not data:
            return
        if stdout_ok:
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(1, view) :]
            except OSError:
                stdout_ok = False  # the runner's pipe is gone; the sink still gets everything
        sink(data)


def run_supervised(argv: list[str], env: Mapping[str, str], output: Callable[[bytes], None] | None = None) -> int:
    """Run `argv` as the launcher's child in the launcher's process group and return its exit
    code; no process of it survives the launcher's parent.  Every other child that ends (an
    orphan re-parented to the launcher) is reaped on the way.  `output`: the entry point's
    stdout and stderr go through the launcher (`pump`) and are also given to it as they come
    (progress read from printed lines); else the entry point writes to the runner's file itself."""
    parent = os.getppid()
    prctl(PR_SET_CHILD_SUBREAPER, 1)
    child: list[int] = []

    def parent_died(signum: int, frame: FrameType | None) -> None:
        kill_all_below(os.getpid())
        os._exit(128 + signal.SIGKILL)

    def forward(signum: int, frame: FrameType | None) -> None:
        if child:
            with contextlib.suppress(ProcessLookupError):
                os.kill(child[0], signum)
        elif signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            os._exit(128 + signum)  # a stop before the entry point started: nothing to pass it to

    signal.signal(PARENT_DEATH_SIGNAL, parent_died)
    for forwarded in FORWARDED:
        signal.signal(forwarded, forward)
    prctl(PR_SET_PDEATHSIG, PARENT_DEATH_SIGNAL)
    if os.getppid() != parent:  # the parent died before the signal was set: nobody supervises us
        return 128 + signal.SIGKILL
    sys.stdout.flush()
    sys.stderr.flush()
    if output is None:
        process = subprocess.Popen(argv, env=dict(env), restore_signals=True)
        tee = None
    else:
        process = subprocess.Popen(argv, env=dict(env), restore_signals=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        assert process.stdout is not None
        tee = threading.Thread(target=pump, args=(process.stdout.fileno(), output), name="paddle-nbext-tee", daemon=True)
        tee.start()
    child.append(process.pid)
    while True:
        try:
            reaped, status = os.wait()
        except InterruptedError:
            continue
        except ChildProcessError:
            return 1  # cannot happen while the child runs; a failure rather than a hang
        if reaped == process.pid:
            process.returncode = _exit_code(status)
            child.clear()
            if tee is not None:
                tee.join(DRAIN_SECONDS)
            # What the entry point left running would outlive the replica: the runner stops the
            # group, and the strays that left it are stopped here.
            for stray in descendants(os.getpid()):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(stray, signal.SIGKILL)
            return process.returncode
