"""The launcher every replica runs before the user's entry point, on both backends.

It turns the few `PADDLE_NBEXT_*` inputs (docs/architecture.md, "Launcher") into the Paddle
environment contract for the replica's role and mode, makes trainers wait until every pserver
port accepts (Paddle 3.0's own wait is a no-op, so a trainer that starts early dies with
"Connection refused"), and then runs the entry point in the package dir: as a plain command, or
through `/bin/sh -c` when it needs a shell (`supervise.entry_argv`).

Where the runner keeps the output itself (the local backend) the launcher stays the entry
point's parent and supervisor (`supervise.run_supervised`): it passes on the entry point's exit
code, and when the runner dies it kills everything the entry point started.  On
Kubernetes a pod's log goes with the pod (deletion, `ttlSecondsAfterFinished`, a lost node), and
with `restartPolicy: Never` a retry is a new pod, so the API has no "previous" log either.  There
the launcher stays as the entry point's parent: it tees the entry point's stdout and stderr to its
own stdout (`kubectl logs` still works) and to one file per attempt in the job's directory on the
home volume, `<home>/.paddle-jobs/<job>/logs/<role>-<index>.attempt-<n>.log`, forwards signals,
and exits with the entry point's exit code (128 + N for signal N, as a shell reports it).  The
file is a copy, never a condition: if it cannot be written the training goes on, and the launcher
says so once on stderr.  There the launcher also watches its replica's health (`run_watched`,
`replica_health.py`: its container's memory, its trainer's stall), since nothing outside the pod
can without asking the API.

Standard library only: this file is copied into job containers and run as a plain script, with
the shared contract (`paddle_nbext.model.contract`: roles and modes) beside it.
"""

from __future__ import annotations

import collections
import contextlib
import functools
import math
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

if __package__:  # imported from the installed package (the server, the local backend)
    from paddle_nbext.model import contract
else:  # a plain script: in a job's bundle, the contract shipped beside it (even where the image
    # has some other paddle-nbext installed); run from a source tree, the installed one
    try:
        import contract  # type: ignore[import-not-found,no-redef]
    except ImportError:
        from paddle_nbext.model import contract

if __package__:
    from . import paddle_nbext_fence, preflight, ranks, store_relay, supervise
else:  # a plain script: the bundle's preflight.py, ranks.py and supervise.py beside this file
    import paddle_nbext_fence  # type: ignore[import-not-found,no-redef]
    import preflight  # type: ignore[import-not-found,no-redef]
    import ranks  # type: ignore[import-not-found,no-redef]
    import store_relay  # type: ignore[import-not-found,no-redef]
    import supervise  # type: ignore[import-not-found,no-redef]
# `environments` (a job with requirements) and `gang` (a trainer of several ranks) are imported
# where they are used, only by the replicas that need them: together they were half of every
# launcher's start-up, which four replicas on two cores pay while their pservers start.
# `replica_health` likewise, by Kubernetes replicas only (`run_watched`).
if TYPE_CHECKING:
    from . import environments

Mode, Role = contract.Mode, contract.Role

#: GLOG_minloglevel when the job sets none: 2 keeps Paddle's C++ errors and drops INFO/WARNING.
QUIET_GLOG_LEVEL = "2"

#: Variables of the Paddle contract (dropped from the inherited environment first).
CONTRACT_VARS = contract.PADDLE_CONTRACT_VARS
DEFAULT_WAIT_TIMEOUT = 300.0
WAIT_EXIT_CODE = 3


class LaunchError(Exception):
    """A missing or malformed input; the message names the variable and what it must hold."""


def _require(env: Mapping[str, str], name: str) -> str:
    value = env.get(name, "").strip()
    if not value:
        raise LaunchError(f"{name} is not set; the job runner must set it for every replica")
    return value


def _endpoints(env: Mapping[str, str], name: str) -> list[tuple[str, int]]:
    raw = env.get(name, "").strip()
    result = []
    for item in filter(None, (part.strip() for part in raw.split(","))):
        host, sep, port = item.rpartition(":")
        if not sep or not host or not port.isdigit():
            raise LaunchError(f"{name} entry {item!r} is not host:port")
        result.append((host, int(port)))
    return result


def _join(endpoints: list[tuple[str, int]]) -> str:
    return ",".join(f"{host}:{port}" for host, port in endpoints)


def replica_index(env: Mapping[str, str]) -> int:
    """`PADDLE_NBEXT_INDEX`, else Kubernetes' `JOB_COMPLETION_INDEX` (Indexed Jobs)."""
    raw = env.get("PADDLE_NBEXT_INDEX", "").strip() or env.get("JOB_COMPLETION_INDEX", "").strip()
    if not raw.isdigit():
        raise LaunchError(f"PADDLE_NBEXT_INDEX must be a replica index (0, 1, ...), got {raw!r}")
    return int(raw)


def _whole(env: Mapping[str, str], name: str, default: int, lowest: int) -> int:
    raw = env.get(name, "").strip()
    if not raw:
        return default
    if not raw.isdigit() or int(raw) < lowest:
        raise LaunchError(f"{name} must be a whole number of at least {lowest}, got {raw!r}")
    return int(raw)


def ranks_per_trainer(base: Mapping[str, str]) -> int:
    """`PADDLE_NBEXT_PROCS`: the processes (ranks) every trainer of the job runs [1]."""
    return _whole(base, "PADDLE_NBEXT_PROCS", 1, 1)


def runs_launch(base: Mapping[str, str]) -> bool:
    """True for a trainer whose entry point runs `paddle.distributed.launch` (it starts its ranks itself)."""
    return base.get("PADDLE_NBEXT_ROLE") == Role.TRAINER and contract.launch_entry(base.get("PADDLE_NBEXT_ENTRY", ""))


def process_count(base: Mapping[str, str]) -> int:
    """How many processes this replica's launcher starts: one per rank for a trainer, one for a
    pserver and for a `paddle.distributed.launch` entry point."""
    if base.get("PADDLE_NBEXT_ROLE") != Role.TRAINER or runs_launch(base):
        return 1
    return ranks_per_trainer(base)


def build_env(base: Mapping[str, str], pylib: str | None = None, rank: int = 0) -> dict[str, str]:
    """The full environment of one process of the replica (`rank`, of `process_count`): `base`
    without stale contract variables, plus the Paddle contract for its role, index, mode and
    rank (`ranks.rank_env`; a `paddle.distributed.launch` entry point gets `ranks.launch_env`),
    and where `report()` writes (`metrics_file`), with the bundle's `pylib` (when given) first on
    `PYTHONPATH`.  Pure, so every role, mode and rank is unit-testable."""
    mode = _require(base, "PADDLE_NBEXT_MODE")
    role = _require(base, "PADDLE_NBEXT_ROLE")
    if mode not in tuple(Mode):
        raise LaunchError(f"PADDLE_NBEXT_MODE must be 'ps' or 'collective', got {mode!r}")
    if role not in contract.ROLES:
        raise LaunchError(f"PADDLE_NBEXT_ROLE must be 'pserver' or 'trainer', got {role!r}")
    if mode == Mode.COLLECTIVE and role != Role.TRAINER:
        raise LaunchError("collective mode has only trainers; PADDLE_NBEXT_ROLE must be 'trainer'")
    index = replica_index(base)
    entry = _require(base, "PADDLE_NBEXT_ENTRY")
    workdir = _require(base, "PADDLE_NBEXT_WORKDIR")
    pservers = _endpoints(base, "PADDLE_NBEXT_PSERVER_ENDPOINTS")
    trainers = _endpoints(base, "PADDLE_NBEXT_TRAINER_ENDPOINTS")
    if mode == Mode.PS and not pservers:
        raise LaunchError("PADDLE_NBEXT_PSERVER_ENDPOINTS is empty; ps mode needs every pserver's host:port")
    if not trainers:
        raise LaunchError("PADDLE_NBEXT_TRAINER_ENDPOINTS is empty; give every trainer's host:port")
    own_list = pservers if role == Role.PSERVER else trainers
    if index >= len(own_list):
        raise LaunchError(f"{role} index {index} is out of range: only {len(own_list)} {role} endpoints are given")
    own_host, own_port = own_list[index]
    per_trainer = ranks_per_trainer(base)
    gpus = _whole(base, "PADDLE_NBEXT_GPUS", 0, 0)
    count = process_count(base)
    if not 0 <= rank < count:
        raise LaunchError(f"rank {rank} is out of range: this {role} runs {count} process{'es' if count != 1 else ''}")
    launch = runs_launch(base)

    env = {key: value for key, value in base.items() if key not in CONTRACT_VARS}
    env.update(
        PADDLE_JOB_NAME=base.get("PADDLE_NBEXT_JOB", ""),
        # Every rank of every trainer is a trainer to Paddle (pservers count them all).
        PADDLE_TRAINERS_NUM=str(len(trainers) * per_trainer),
        PADDLE_TRAINER_ENDPOINTS=",".join(ranks.rank_endpoints(trainers, per_trainer)),
        TRAINERS=str(len(trainers)),
        PSERVERS=str(len(pservers)),
        ENTRY=entry,
        TRAINER_PACKAGE=workdir,
        POD_IP=own_host,
        PADDLE_PORT=str(own_port + rank),
    )
    env.setdefault("PYTHONUNBUFFERED", "1")  # logs must appear while the job runs, not at exit
    # Paddle's C++ INFO and WARNING lines are most of every log and read like failures
    # (docs/paddle-facts.md); errors only, unless the job's env asks for more.
    env.setdefault("GLOG_minloglevel", QUIET_GLOG_LEVEL)
    if mode == Mode.PS:
        env["PADDLE_PSERVERS_IP_PORT_LIST"] = _join(pservers)
        env["FLAGS_enable_pir_api"] = "0"  # PS minimize() fails on PIR programs (docs/paddle-facts.md)
    env["TRAINING_ROLE"] = "PSERVER" if role == Role.PSERVER else "TRAINER"
    if role == Role.PSERVER:
        env["PADDLE_PSERVER_ID"] = str(index)
    elif launch:
        # paddle.distributed.launch gives its ranks their contract and needs only the
        # rendezvous.  It must not see PADDLE_TRAINER_ENDPOINTS: launch then takes the node
        # count from the distinct hosts there (one, for local trainers all on 127.0.0.1) and
        # its first entry as the master.
        env.pop("PADDLE_TRAINER_ENDPOINTS", None)
        env.pop("PADDLE_TRAINERS_NUM", None)
        launch_logs = metrics_dir(base) or os.path.join(workdir, "log")
        for key, value in ranks.launch_env(trainers=trainers, index=index, entry=entry, log_dir=launch_logs).items():
            env[key] = value if key != "PADDLE_LOG_DIR" else env.get(key, value)
    else:
        try:
            devices = ranks.device_count(base, gpus, per_trainer)
            contract_env = ranks.rank_env(
                trainers=trainers, index=index, ranks=per_trainer, rank=rank, devices=devices, collective=mode == Mode.COLLECTIVE
            )
        except ranks.RankError as error:
            raise LaunchError(str(error)) from None
        backend = contract_env.pop("PADDLE_DISTRI_BACKEND", None)
        env.update(contract_env)
        if backend is not None:  # no device: gloo, unless the job's env chose another
            env.setdefault("PADDLE_DISTRI_BACKEND", backend)
    env.pop(METRICS_FILE_VAR, None)
    env.pop(RANK_VAR, None)
    metrics = metrics_file(base, role, index, rank if count > 1 else None)
    if metrics is not None:
        env[METRICS_FILE_VAR] = metrics
    if count > 1:
        env[RANK_VAR] = str(rank)
    if pylib is not None:
        inherited = env.get("PYTHONPATH", "")
        env["PYTHONPATH"] = pylib + (os.pathsep + inherited if inherited else "")
    cpu = base.get("PADDLE_NBEXT_CPU", "").strip()
    if cpu:
        try:
            threads = max(1, math.ceil(float(cpu)))
        except ValueError:
            raise LaunchError(f"PADDLE_NBEXT_CPU must be a number of cores, got {cpu!r}") from None
        env["CPU_NUM"] = str(threads)
        env["OMP_NUM_THREADS"] = str(threads)
    return env


def endpoints_to_wait_for(base: Mapping[str, str]) -> list[tuple[str, int]]:
    """Trainers in ps mode wait for every pserver; nobody else waits."""
    if base.get("PADDLE_NBEXT_MODE") == Mode.PS and base.get("PADDLE_NBEXT_ROLE") == Role.TRAINER:
        return _endpoints(base, "PADDLE_NBEXT_PSERVER_ENDPOINTS")
    return []


def wait_timeout(base: Mapping[str, str]) -> float:
    raw = base.get("PADDLE_NBEXT_WAIT_TIMEOUT", "").strip()
    if not raw:
        return DEFAULT_WAIT_TIMEOUT
    try:
        value = float(raw)
    except ValueError:
        raise LaunchError(f"PADDLE_NBEXT_WAIT_TIMEOUT must be seconds, got {raw!r}") from None
    if value <= 0:
        raise LaunchError(f"PADDLE_NBEXT_WAIT_TIMEOUT must be positive, got {raw!r}")
    return value


MAX_WAIT_DELAY = 0.2  # seconds between connection attempts to a pserver that is not up yet
#: The same for a pserver named by its IP address (the local backend's 127.0.0.1): no name is
#: looked up and a refused connect costs microseconds, so the trainer may look as often as a
#: script that starts the processes itself; named hosts keep `MAX_WAIT_DELAY` for cluster DNS.
MAX_WAIT_DELAY_ADDRESS = 0.05
CONNECT_TIMEOUT = 0.5  # seconds one connection attempt to a pserver may take


def _until(ready: Callable[[float], bool], timeout: float, max_delay: float = MAX_WAIT_DELAY) -> bool:
    """Call `ready(seconds left)` until it is true, with a short back-off; False once `timeout`
    seconds have passed.  A refused connect on loopback or a not-yet-resolvable pod name costs
    next to nothing, while every tenth of a second of lateness here delays the whole job: the
    back-off stays short (`max_delay`)."""
    deadline = time.monotonic() + timeout
    delay = min(0.05, max_delay)
    while True:
        if ready(max(0.0, deadline - time.monotonic())):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(min(delay, max(0.0, deadline - time.monotonic())))
        delay = min(delay * 1.5, max_delay)


def is_address(host: str) -> bool:
    """Whether `host` is an IPv4 or IPv6 address rather than a name to look up."""
    for family in (socket.AF_INET, socket.AF_INET6):
        try:
            socket.inet_pton(family, host)
        except (OSError, ValueError):
            continue
        return True
    return False


def _accepts(host: str, port: int, why: list[str], left: float) -> bool:
    """Whether the endpoint accepts a connection now; if not, `why[0]` says why in words."""
    try:
        socket.getaddrinfo(host, port)
    except OSError:
        why[:] = ["its name does not resolve yet: its pod is not running (still Pending, pulling its image, or not scheduled)"]
        return False
    try:
        # A short connect: after a whole restart the name may still resolve to the old pod's
        # address for a DNS TTL, and a connect to an address nobody holds hangs until its
        # timeout; resolving again soon finds the new pod (a pod-network connect takes ms).
        with socket.create_connection((host, port), timeout=min(CONNECT_TIMEOUT, max(0.1, left))):
            return True
    except ConnectionRefusedError:
        why[:] = ["it refuses connections: its pod runs, but its code has not started serving (fleet.run_server())"]
    except OSError as error:
        why[:] = [f"connecting fails: {error}"]
    return False


def wait_for(endpoints: list[tuple[str, int]], timeout: float) -> tuple[str, int, str] | None:
    """Block until every endpoint accepts a TCP connection; return the first one that still
    does not when `timeout` seconds have passed, with why, else None."""
    deadline = time.monotonic() + timeout
    for host, port in endpoints:
        why = ["it never answered"]
        pace = MAX_WAIT_DELAY_ADDRESS if is_address(host) else MAX_WAIT_DELAY
        if not _until(functools.partial(_accepts, host, port, why), max(0.0, deadline - time.monotonic()), pace):
            return host, port, why[0]
    return None


def wait_resolvable(host: str, timeout: float) -> bool:
    """Block until `host` (the replica's own endpoint name) resolves; False after `timeout`
    seconds.  On Kubernetes a pod's name is published in cluster DNS only once the pod has an
    address, a moment after its container may already run: Paddle binding its own endpoint
    before that fails ("Name or service not known") and the job with it."""

    def resolves(_left: float) -> bool:
        try:
            socket.getaddrinfo(host, None)
        except OSError:
            return False
        return True

    return _until(resolves, timeout)


# ---------------------------------------------------------------------------- replica log files

#: Where the replica's output is also written.  Set: that directory ("" = nowhere).  Unset: on
#: Kubernetes, which the index coming from JOB_COMPLETION_INDEX (Indexed Jobs) tells,
#: `$HOME/.paddle-jobs/$PADDLE_NBEXT_JOB/logs` (the pod's HOME is the user's home, where the
#: snapshot is too); elsewhere nowhere, since the local runner captures the output itself.
LOG_DIR_VAR = "PADDLE_NBEXT_LOG_DIR"
JOBS_DIR = ".paddle-jobs"
LOGS_DIR = "logs"
_ATTEMPT = re.compile(rf"^(?P<role>{'|'.join(contract.ROLES)})-(?P<index>[0-9]+)\.attempt-(?P<attempt>[0-9]+)\.log$")
#: Seconds the tee keeps reading after the entry point exited: what it wrote last is in the pipe,
#: but a process it left running in the background may hold the pipe open for ever.
DRAIN_SECONDS = 2.0
FORWARDED_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2)


def attempt_name(role: str, index: int, attempt: int) -> str:
    """The file name of one attempt's output; the local backend's `<role>-<index>.log` plus the
    attempt, since on Kubernetes every retry is a pod of its own."""
    return f"{role}-{index}.attempt-{attempt}.log"


def attempt_number(name: str) -> int | None:
    """The attempt of an attempt file's name, None for any other name."""
    match = _ATTEMPT.match(name)
    return int(match["attempt"]) if match else None


def attempts(directory: str, role: str, index: int) -> list[tuple[int, str]]:
    """(attempt, file name) of every attempt file of one replica in `directory`, oldest first;
    none when the directory cannot be listed.  Shared with the server, which reads them."""
    try:
        names = os.listdir(directory)
    except OSError:
        return []
    found = []
    for name in names:
        match = _ATTEMPT.match(name)
        if match and match["role"] == role and int(match["index"]) == index:
            found.append((int(match["attempt"]), name))
    return sorted(found)


def log_dir(env: Mapping[str, str]) -> str | None:
    """The directory this replica's output is also written to, or None (see `LOG_DIR_VAR`)."""
    if LOG_DIR_VAR in env:
        return env[LOG_DIR_VAR].strip() or None
    if env.get("PADDLE_NBEXT_INDEX", "").strip() or not env.get("JOB_COMPLETION_INDEX", "").strip():
        return None
    home, job = env.get("HOME", "").strip(), env.get("PADDLE_NBEXT_JOB", "").strip()
    if not home or not job or "/" in job:
        return None
    return os.path.join(home, JOBS_DIR, job, LOGS_DIR)


# ---------------------------------------------------------------------------- metrics files

#: The replica's metrics file for `paddle_nbext_job.report()` (that module's FILE_VAR).
METRICS_FILE_VAR = "PADDLE_NBEXT_METRICS_FILE"
#: Where metrics files go when set (the local backend: the job's logs/ dir); unset: `log_dir`.
METRICS_DIR_VAR = "PADDLE_NBEXT_METRICS_DIR"
METRICS_SUFFIX = ".metrics.jsonl"
#: The bundle's directory of modules for training code.
PYLIB = "pylib"


#: The rank of a process of a trainer that runs several (`paddle_nbext_job` writes it into each
#: point); unset for a replica of one process.
RANK_VAR = "PADDLE_NBEXT_RANK"


def metrics_name(role: str, index: int, rank: int | None = None) -> str:
    """The metrics file of one replica, beside its logs (shared with the server, which reads it).
    A trainer of several ranks: rank 0 writes the replica's file (its curve is the trainer's),
    rank r > 0 `<role>-<index>.rank-<r>.metrics.jsonl`."""
    if rank:
        return f"{role}-{index}.rank-{rank}{METRICS_SUFFIX}"
    return f"{role}-{index}{METRICS_SUFFIX}"


def metrics_dir(env: Mapping[str, str]) -> str | None:
    """The directory of the job's metrics files (`METRICS_DIR_VAR`, else the log dir), or None."""
    return env.get(METRICS_DIR_VAR, "").strip() or log_dir(env)


def metrics_file(env: Mapping[str, str], role: str, index: int, rank: int | None = None) -> str | None:
    """Where this process's `report()` calls go: `METRICS_DIR_VAR`, else the log dir
    (Kubernetes: the job's dir on the home volume); None: nowhere (`report()` is a no-op)."""
    directory = metrics_dir(env)
    return os.path.join(directory, metrics_name(role, index, rank)) if directory else None


def pylib_dir() -> str | None:
    """The bundle's `pylib/` beside this file (None when run from the installed package, where
    it is not: its other modules must not become top-level imports of the user's code)."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), PYLIB)
    return path if os.path.isdir(path) else None


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
        _say(f"paddle-nbext launcher: {message}", None)

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
    found = attempts(directory, role, index)
    attempt = found[-1][0] + 1 if found else 0
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND | getattr(os, "O_CLOEXEC", 0)
    for _ in range(limit):
        path = os.path.join(directory, attempt_name(role, index, attempt))
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
    directory = log_dir(env)
    role = env.get("PADDLE_NBEXT_ROLE", "").strip()
    if directory is None or role not in contract.ROLES:
        return None
    try:
        index = replica_index(env)
    except LaunchError:
        return None  # build_env reports it
    try:
        return open_attempt_log(directory, role, index)
    except OSError as error:
        _say(
            f"paddle-nbext launcher: cannot create a log file in {directory} ({error.strerror or error}); "
            "the output is only in the pod's log, which goes with the pod",
            None,
        )
        return None


def _say(message: str, log: ReplicaLog | None) -> None:
    """The launcher's own words: to stderr, and into the attempt file (a failure's reason must
    outlive the pod as much as the entry point's output)."""
    print(message, file=sys.stderr, flush=True)
    if log is not None:
        log.write((message + "\n").encode("utf-8", errors="replace"))


def _pump(fd: int, log: ReplicaLog) -> None:
    """Copy the entry point's output to stdout and the file as it comes (no buffering beyond the
    pipe's, so a reader of either sees each line when it is written).  Reads until the pipe ends
    whatever fails: a full pipe would stop the training."""
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
                _write_all(1, data)
            except OSError:
                stdout_ok = False  # the runtime's pipe is gone; the file still gets everything
        log.output(data)


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


def run_teed(argv: list[str], env: Mapping[str, str], log: ReplicaLog) -> int:
    """Run `argv` with its stdout and stderr teed to our stdout and `log`; signals sent to us
    (Kubernetes sends SIGTERM to PID 1) go on to it.  Returns its exit code."""
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
    tee = threading.Thread(target=_pump, args=(process.stdout.fileno(), log), name="paddle-nbext-tee", daemon=True)
    tee.start()
    code = _wait_reaping(process.pid)
    child.clear()
    process.returncode = code
    tee.join(DRAIN_SECONDS)
    return code


def peer_hosts(base: Mapping[str, str], own_host: str) -> list[str]:
    """The other trainers' host names a collective replica must be able to resolve before Paddle
    starts (on Kubernetes, where `own_host` is set): Paddle's rendezvous resolves them once and
    fails the job at once ("Temporary failure in name resolution") when a peer's pod has no
    address yet, e.g. while the kubelet still retries mounting its home.  None elsewhere."""
    if not own_host or base.get("PADDLE_NBEXT_MODE") != Mode.COLLECTIVE:
        return []
    hosts = dict.fromkeys(host for host, _ in _endpoints(base, "PADDLE_NBEXT_TRAINER_ENDPOINTS"))
    return [host for host in hosts if host != own_host]


#: `environments.REQUIREMENTS_VAR`, read here without importing `environments` (a job without
#: requirements never does).
REQUIREMENTS_VAR = "PADDLE_NBEXT_REQUIREMENTS"


def prepare_environment(base: Mapping[str, str], workdir: str, log: ReplicaLog | None) -> environments.Prepared | int | None:
    """The job's environment from its requirements file (`environments.ensure`): None when the
    job has none, the exit code to end with when it cannot be built (the installer's words said)."""
    requirements = base.get(REQUIREMENTS_VAR, "").strip()
    if not requirements:
        return None
    if __package__:
        from . import environments
    else:  # a plain script: the bundle's environments.py beside this file
        import environments  # type: ignore[import-not-found,no-redef]
    home = base.get("HOME", "").strip()
    envs_dir = base.get(environments.ENVS_DIR_VAR, "").strip() or (os.path.join(home, JOBS_DIR, "envs") if home else "")
    if not envs_dir:
        _say(f"paddle-nbext launcher: {environments.ENVS_DIR_VAR} and HOME are both unset; the job's environment has nowhere to live", log)
        return contract.ENVIRONMENT_EXIT_CODE
    job = environments.Job(base.get("PADDLE_NBEXT_JOB", ""), metrics_dir(base), base.get("PADDLE_NBEXT_IMAGE", ""))
    try:
        os.makedirs(envs_dir, exist_ok=True)
        return environments.ensure(os.path.join(workdir, requirements), workdir, envs_dir, job, base, lambda words: _say(words, log))
    except (environments.RequirementsError, environments.BuildFailed) as failure:
        _say(f"paddle-nbext launcher: {ENVIRONMENT_FAILED} {failure}", log)
    except OSError as error:
        _say(f"paddle-nbext launcher: {ENVIRONMENT_FAILED} {envs_dir}: {error.strerror or error}", log)
    return contract.ENVIRONMENT_EXIT_CODE


#: How the launcher's line about a failed environment starts (the policy words the job's end from it).
ENVIRONMENT_FAILED = "the job's environment could not be built:"


def _stopped_before_the_code_ran(signum: int, _frame: object) -> None:
    """SIGTERM (a cancel, a restart, an eviction) while the launcher itself still works, e.g.
    waits for the pservers: end now, as the entry point would have.  In a container the
    launcher is PID 1, which the kernel sends no default-fatal signal to: without a handler the
    pod would sit out its whole grace period and be killed."""
    os.write(2, f"paddle-nbext launcher: stopped by signal {signum} before the entry point ran\n".encode())
    os._exit(128 + signum)


def _mark(event: str) -> None:
    """A step of this replica for the benchmark's breakdown (`supervise.mark`; off unless asked)."""
    supervise.mark(event, f"{os.environ.get('PADDLE_NBEXT_ROLE', '')}-{os.environ.get('PADDLE_NBEXT_INDEX', '')}")


def main() -> int:
    for stopping in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):  # first: a stop may come at once
        signal.signal(stopping, _stopped_before_the_code_ran)
    _mark("launcher.main")
    base = dict(os.environ)
    log = open_replica_log(base)
    try:
        return _launch(base, log)
    finally:
        if log is not None:
            log.close()  # what the file still lags behind, for at most DRAIN_SECONDS


def run_watched(base: Mapping[str, str], log: ReplicaLog | None, run: Callable[[], int]) -> int:
    """Run the entry point (`run`, its exit code) under the replica's own health watch
    (`replica_health`: memory, and a trainer's stall) where it has a log dir in the home
    (Kubernetes: `log` is its attempt file; elsewhere the runner watches).  A trainer the watch
    stopped for a stall (`on_stall` restart or fail) ends with `contract.STALL_EXIT_CODE`, its
    words the container's termination message and the launcher's last line (`policy.stall_words`
    reads either)."""
    if log is None:
        return run()
    if __package__:
        from . import replica_health
    else:  # a plain script: the bundle's replica_health.py beside this file
        import replica_health  # type: ignore[import-not-found,no-redef]
    watch = replica_health.ReplicaWatch(
        {**base, METRICS_DIR_VAR: metrics_dir(base) or ""},
        os.path.dirname(log.path),
        base.get("PADDLE_NBEXT_ROLE", "").strip(),
        replica_index(base),  # build_env read it already
        last_output=lambda: log.last_output,
        on_stop=lambda: stop_entry_point(replica_health.STOP_GRACE_SECONDS),
        say=lambda words: _say(words, log),
    )
    watch.start()
    try:
        code = run()
    finally:
        watch.stop()
    oom = watch.oom_words()
    if oom is not None:
        _say(oom, log)  # the last line: the job's failure message quotes it
    if watch.stopped_for is None:
        return code
    replica_health.write_termination_message(watch.stopped_for, base)
    _say(f"paddle-nbext launcher: {replica_health.STALLED} {watch.stopped_for}", log)
    return contract.STALL_EXIT_CODE


def stop_entry_point(grace: float) -> None:
    """Stop what the launcher runs as a stop from Kubernetes would (SIGTERM to the launcher, whose
    handlers pass it on to the entry point or every rank), and SIGKILL whatever is left below the
    launcher after `grace` seconds (a trainer stuck in native code may never end by SIGTERM)."""
    launcher = os.getpid()

    def kill_the_rest() -> None:
        for pid in supervise.descendants(launcher):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)

    timer = threading.Timer(grace, kill_the_rest)
    timer.daemon = True
    timer.start()
    os.kill(launcher, signal.SIGTERM)


def fence_attempt(base: Mapping[str, str], log: ReplicaLog | None) -> None:
    """Mark this attempt as begun in the job's directory, and stop this replica (as a stop from
    Kubernetes would) once a newer attempt of the job has begun: a replica left running on a node
    the cluster gave up on must not train on beside the job's new attempt."""
    paddle_nbext_fence.raise_fence(base)

    def superseded(newer: str) -> None:
        _say(
            f"paddle-nbext launcher: the job restarted whole as attempt {newer} without this replica "
            f"(attempt {paddle_nbext_fence.attempt_name(base)}, whose node was lost or cut off); stopping it",
            log,
        )
        os.kill(os.getpid(), signal.SIGTERM)

    paddle_nbext_fence.watch(superseded, base)


def _launch(base: dict[str, str], log: ReplicaLog | None) -> int:
    """Wait for what the replica needs, then run the entry point; its exit code."""
    try:
        envs = [build_env(base, pylib_dir(), rank) for rank in range(process_count(base))]
        env = envs[0]
        waits = endpoints_to_wait_for(base)
        timeout = wait_timeout(base)
    except LaunchError as error:
        _say(f"paddle-nbext launcher: {error}", log)
        return 2
    fence_attempt(base, log)
    problem = None if base.get("PADDLE_NBEXT_PREFLIGHT", "1") == "0" else preflight.problem(base["PADDLE_NBEXT_MODE"])
    if problem is not None:
        _say(f"paddle-nbext launcher: {problem}", log)
        return 2  # like any input the launcher cannot start with; the sentence says why
    _mark("launcher.preflight")
    workdir = env["TRAINER_PACKAGE"]
    if not os.path.isdir(workdir):
        _say(f"paddle-nbext launcher: the package dir {workdir} does not exist", log)
        return 2
    prepared = prepare_environment(base, workdir, log)
    if isinstance(prepared, int):
        return prepared
    own_host = env.get("POD_IP", "")
    if own_host and not wait_resolvable(own_host, timeout):
        _say(
            f"paddle-nbext launcher: this replica's own address {own_host} did not resolve within {timeout:g}s "
            "(PADDLE_NBEXT_WAIT_TIMEOUT); is the job's headless Service there, and cluster DNS running?",
            log,
        )
        return WAIT_EXIT_CODE
    for peer in peer_hosts(base, own_host):
        if not wait_resolvable(peer, timeout):
            _say(
                f"paddle-nbext launcher: the trainer at {peer} did not resolve within {timeout:g}s (PADDLE_NBEXT_WAIT_TIMEOUT): "
                "its pod never got an address (its reason says why, e.g. a volume that cannot be mounted)",
                log,
            )
            return WAIT_EXIT_CODE
    _mark("launcher.ready")
    if waits:
        missing = wait_for(waits, timeout)
        if missing is not None:
            host, port, why = missing
            position = waits.index((host, port))
            _say(
                f"paddle-nbext launcher: pserver {position} at {host}:{port} did not accept connections within "
                f"{timeout:g}s (PADDLE_NBEXT_WAIT_TIMEOUT): {why}",
                log,
            )
            return WAIT_EXIT_CODE
        _mark("launcher.waited")
    os.chdir(workdir)
    path = supervise.with_python_on_path(env.get("PATH", ""))
    for each in envs:
        each["PATH"] = path
        if prepared is not None:
            prepared.apply(each)
    if base.get("PADDLE_NBEXT_MODE") == Mode.COLLECTIVE:
        store_relay.attach(envs, timeout)  # no 3 s lost when rank 0's store is not up yet
    argv = supervise.entry_argv(env["ENTRY"], env["PATH"])
    if len(envs) > 1:
        if __package__:
            from . import gang
        else:  # a plain script: the bundle's gang.py beside this file
            import gang  # type: ignore[import-not-found,no-redef]
        label = f"trainer {replica_index(base)}"
        copy = log.output if log is not None else None
        return run_watched(
            base,
            log,
            lambda: gang.run_ranks(argv, envs, label=label, say=lambda message: _say(message, log), copy=copy, supervised=log is None),
        )
    _mark("launcher.entry")
    if log is not None:
        code = run_watched(base, log, lambda: run_teed(argv, env, log))
    else:
        code = supervise.run_supervised(argv, env)
    _mark("launcher.exited")
    return code


if __name__ == "__main__":
    sys.exit(main())
