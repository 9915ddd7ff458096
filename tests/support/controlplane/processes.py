"""One control-plane process: started with its log file, waited for, stopped for good.

Each process runs in a session of its own, so stopping it ends whatever it started too; a
process that dies while being waited for, or never becomes ready, is reported with its name,
its log file and the log's last lines.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from .errors import ControlPlaneError

STOP_GRACE = 15.0
_TAIL_LINES = 12


def log_tail(path: Path, lines: int = _TAIL_LINES) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.strip().splitlines()[-lines:])


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie child still answers kill(0); it is gone for our purposes.
    with contextlib.suppress(OSError):
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        if state in ("Z", "X"):
            return False
    return True


def stop_group(pid: int, grace: float = STOP_GRACE) -> None:
    """SIGTERM the process group led by ``pid``; SIGKILL it if anything is left after ``grace``."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, sig)
        deadline = time.monotonic() + (grace if sig == signal.SIGTERM else 5.0)
        while time.monotonic() < deadline:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)
            if not pid_alive(pid) and not _group_alive(pid):
                return
            time.sleep(0.05)


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return any(pid_alive(int(p.name)) for p in Path("/proc").iterdir() if p.name.isdigit() and _pgid_of(int(p.name)) == pgid)


def _pgid_of(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except OSError:
        return None


class Process:
    """A named command whose output goes to ``log_path``."""

    def __init__(self, name: str, argv: Sequence[str], log_path: Path, env: Mapping[str, str] | None = None) -> None:
        self.name = name
        self.argv = list(argv)
        self.log_path = log_path
        self.env = {**os.environ, **env} if env else None  # None: inherit ours
        self.popen: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int | None:
        return self.popen.pid if self.popen else None

    def signal(self, sig: int) -> None:
        """Send `sig` to the process's group (the command and anything it runs)."""
        if self.popen is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.popen.pid, sig)

    def start(self) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("ab") as log:
            try:
                self.popen = subprocess.Popen(
                    self.argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True, env=self.env
                )
            except OSError as error:
                raise ControlPlaneError(f"{self.name} could not be started ({self.argv[0]}: {error})") from error

    def running(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def wait_ready(self, ready: Callable[[], bool], timeout: float, what: str) -> None:
        """Return once ``ready()`` is true; raise if the process exits or ``timeout`` passes."""
        deadline = time.monotonic() + timeout
        last_error = ""
        while True:
            if not self.running():
                code = self.popen.returncode if self.popen else None
                raise ControlPlaneError(
                    f"{self.name} exited with code {code} before {what}; log: {self.log_path}\n" + log_tail(self.log_path)
                )
            try:
                if ready():
                    return
            except Exception as error:  # noqa: BLE001 - any failure of the probe means "not yet"
                last_error = f" (last probe: {type(error).__name__}: {error})"
            if time.monotonic() > deadline:
                raise ControlPlaneError(
                    f"{self.name} was not {what} within {timeout:.0f} s{last_error}; log: {self.log_path}\n" + log_tail(self.log_path)
                )
            time.sleep(0.1)

    def stop(self) -> None:
        if self.popen is None:
            return
        stop_group(self.popen.pid)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.popen.wait(timeout=1)
        self.popen = None
