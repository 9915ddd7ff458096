"""A replica's launcher started by forking the job master instead of a new interpreter.

Each replica runs the job's own `runtime/launcher.py` with the plan's interpreter.  When that
interpreter is the master's own (`c.LocalBackend.python` left at its default, the server's) and
the replica's environment changes nothing Python reads at start-up, a fresh interpreter would be
a copy of the master anyway: same binary, same `sys.path`, same flags.  The master then imports
the job's launcher once (from the job's bundle, as the plain script it is) and forks a child per
replica that becomes that launcher: it takes the replica's session, parent-death signal, kernel
memory limit, stdin, log, working dir and environment exactly as a started interpreter would get
them, then runs the launcher's `main()` and exits with its code.  On a 2-core machine the four
interpreters of a 2+2 job took ~0.2 s of start-up (`python` and the launcher's imports, four at
once), on the way to the pservers serving; a fork takes a few milliseconds.

Safe because the master runs no threads (checked at each fork: one task in `/proc/self/task`,
else a new interpreter), so the child holds no lock another thread had; Paddle is never imported
by the master or the launcher, only by the entry point, which the launcher starts with `exec`
as before.  Everything else falls back to starting `python launcher.py`: another interpreter, a
`PYTHON*`, `LC_*`, `LANG` or `HOME` variable the replica's environment sets differently (the job's
`env`), an address-space limit (`RLIMIT_AS`) too close to the master's own size, or a bundle that
cannot be imported.  The forked process's command line is the master's (`ps` shows
`...local.master <job dir>` for each launcher); its children, the entry point's processes, are
what they always were.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import signal
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable, Mapping
from types import ModuleType
from typing import BinaryIO, NoReturn

from . import limits

#: Variables Python reads while it starts (paths, flags, encodings, the user's site dir): a
#: replica whose environment sets one differently gets a started interpreter, not a fork.
STARTUP_VARIABLES = ("HOME", "LANG", "LANGUAGE")
STARTUP_PREFIXES = ("PYTHON", "LC_")
#: A forked launcher starts at the master's size; under RLIMIT_AS it needs this much room beyond.
ADDRESS_SPACE_MARGIN = 1 << 30
_POLL = 0.01
#: The bundle modules the launcher imports by their plain names (runtime_files).
BUNDLE_SIBLINGS = (
    "contract",
    "launch_env",
    "endpoint_wait",
    "replica_files",
    "replica_log",
    "paddle_noise",
    "paddle_nbext_fence",
    "preflight",
    "ranks",
    "supervise",
    "store_relay",
    "environments",
    "env_requirements",
    "env_index",
    "env_build",
    "env_status",
    "gang",
    "policy",
    "replica_health",
    "health_rules",
    "log_progress",
    "progress_pattern",
    "paddle_nbext_report",
)


class ForkedLauncher:
    """The master's handle on a forked launcher: what the master uses of `subprocess.Popen`
    (`pid`, `returncode`, `poll`, `wait`), for a child it forked itself."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            try:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:  # reaped elsewhere: it ended, how is unknown
                self.returncode = 255
                return self.returncode
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while (code := self.poll()) is None:
            if deadline is not None and time.monotonic() >= deadline:
                raise subprocess.TimeoutExpired(f"launcher {self.pid}", timeout or 0.0)
            time.sleep(_POLL)
        return code


def _startup_view(env: Mapping[str, str]) -> dict[str, str]:
    return {key: value for key, value in env.items() if key in STARTUP_VARIABLES or key.startswith(STARTUP_PREFIXES)}


def _address_space() -> int:
    """The master's own virtual size in bytes (0 when unknown)."""
    try:
        with open("/proc/self/statm") as handle:
            return int(handle.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def _single_threaded() -> bool:
    try:
        return threading.active_count() == 1 and len(os.listdir("/proc/self/task")) == 1
    except OSError:
        return False


def can_fork(python: str, env: Mapping[str, str], kernel_limit: limits.KernelLimit | None) -> bool:
    """Whether a fork of this process is what `python launcher.py` with `env` would start."""
    if not sys.platform.startswith("linux") or not hasattr(os, "fork"):
        return False
    if os.path.abspath(python) != os.path.abspath(sys.executable):  # not resolved: a venv is its path
        return False
    if _startup_view(env) != _startup_view(os.environ):
        return False
    if kernel_limit is not None and kernel_limit.mechanism != limits.CGROUP:
        if kernel_limit.limit < _address_space() + ADDRESS_SPACE_MARGIN:
            return False
    return _single_threaded()


def load_launcher(path: str) -> Callable[[], int] | None:
    """The `main` of the job's bundle launcher at `path`, imported as the plain script it is
    (its siblings from its own directory); None when it cannot be, or another module of that name
    is already loaded (then every replica gets a started interpreter)."""
    directory = os.path.dirname(os.path.abspath(path))
    loaded = sys.modules.get("launcher")
    if loaded is None:
        sys.path.insert(0, directory)
        try:
            loaded = importlib.import_module("launcher")
        except Exception:
            return None
        finally:
            with contextlib.suppress(ValueError):
                sys.path.remove(directory)
    if not _is_file(loaded, path):
        return None
    # Its siblings must be the bundle's too (a module of the same name loaded before would win).
    for sibling in BUNDLE_SIBLINGS:
        module = sys.modules.get(sibling)
        if module is not None and not _is_file(module, os.path.join(directory, f"{sibling}.py")):
            return None
    main = getattr(loaded, "main", None)
    return main if callable(main) else None


def _is_file(module: ModuleType, path: str) -> bool:
    origin = getattr(module, "__file__", None)
    return isinstance(origin, str) and os.path.realpath(origin) == os.path.realpath(path)


def fork_launcher(
    main: Callable[[], int],
    *,
    launcher: str,
    env: Mapping[str, str],
    cwd: str,
    log: BinaryIO,
    prepare: Callable[[], None],
) -> ForkedLauncher:
    """Fork a child that becomes the replica's launcher (see the module docstring); `prepare`
    runs in it first, as `preexec_fn` would (parent-death signal, kernel limit)."""
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        _become_launcher(main, launcher, env, cwd, log.fileno(), prepare)
    return ForkedLauncher(pid)


def _close_inherited() -> None:
    """Close every descriptor but stdio, as `Popen(close_fds=True)` leaves a started launcher:
    the ones `/proc/self/fd` lists (a range up to the descriptor limit can be a billion closes)."""
    try:
        names = os.listdir("/proc/self/fd")
    except OSError:
        os.closerange(3, 65536)
        return
    for name in names:
        if name.isdigit() and int(name) > 2:
            with contextlib.suppress(OSError):
                os.close(int(name))


def _become_launcher(
    main: Callable[[], int], launcher: str, env: Mapping[str, str], cwd: str, log_fd: int, prepare: Callable[[], None]
) -> NoReturn:
    code = 1
    try:
        os.setsid()
        prepare()
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(log_fd, 1)
        os.dup2(log_fd, 2)
        _close_inherited()
        # A started interpreter's dispositions (the master catches these to cancel).
        for signum in (signal.SIGTERM, signal.SIGHUP, signal.SIGCHLD):
            signal.signal(signum, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        os.chdir(cwd)
        os.environ.clear()
        os.environ.update(env)
        sys.path[0] = os.path.dirname(os.path.abspath(launcher))  # as for `python launcher.py`
        sys.argv = [launcher]
        code = main()
    except SystemExit as stop:
        code = stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
    except BaseException:
        with contextlib.suppress(Exception):
            traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        os._exit(code if 0 <= code <= 255 else 1)
