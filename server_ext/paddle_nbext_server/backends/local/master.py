"""The job master of the local backend: one detached process per job.

`python -m paddle_nbext_server.backends.local.master <job_dir>`.  The backend starts it in its own session, so restarting Jupyter loses nothing: the
master keeps the job going and records everything in the job dir, which any later server reads.

What it does, in order:
1. admission: waits as Pending (reason in words) until the job's CPU, memory and GPUs fit beside
   the other admitted local jobs of the same jobs dir (checked and recorded under a file lock, so
   two masters never both take the last core); assigns GPUs and re-checks the planned ports;
2. starts every replica through the launcher, each in its own process group, output appended to
   `logs/<role>-<index>.log`;
3. watches exit codes, memory (RSS of each replica's process group, from /proc), the timeout and
   cancellation (SIGTERM to the master), and applies `policy.decide()`;
4. on the end stops every process group it started (SIGTERM, SIGKILL after the grace period),
   writes the terminal `status.json` and exits.

`status.json` is rewritten atomically (tmp + rename) on every change; it holds the fields of
`JobStatus.to_dict()` plus `master_pid`, `processes` (process-group ids of live replicas) and
`admitted` (the resources this job holds).

It runs beside the server (never inside a job image), so it may use the server's packages; the
replicas it starts run `runtime/launcher.py`, which is standard library only.
"""
from __future__ import annotations

import ctypes
import errno
import fcntl
import json
import os
import signal
import socket
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ...runtime import launcher, policy

TERMINAL = (policy.SUCCEEDED, policy.FAILED, policy.CANCELLED)
LAUNCHER = Path(launcher.__file__)
#: Inherited variables a job never needs: server credentials and the server's own launcher inputs.
SECRET_ENV = ("JUPYTERHUB_API_TOKEN", "JPY_API_TOKEN", "PADDLE_NBEXT_TOKEN")
MEMORY_CHECK_EVERY = 0.5
LOG_TAIL_BYTES = 4096


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def write_json_atomic(path: Path, data: Any) -> None:
    """Readers never see half a file: write a sibling temp file, then rename over."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "w", encoding="utf-8") as handle:
        json.dump(data, handle, indent=1)
    os.replace(tmp, path)


def read_json(path: Path) -> Any:
    with open(path, encoding="utf-8") as handle:
        return json.load(handle)


def pid_alive(pid: int | None) -> bool:
    """True for a running process; a zombie (exited, not yet reaped) counts as dead."""
    if not pid or pid <= 0:
        return False
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as handle:
            stat = handle.read()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[0:1] != ["Z"]


def process_groups() -> dict[int, list[int]]:
    """Process-group id -> pids of live (non-zombie) processes, from /proc."""
    groups: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="utf-8", errors="replace") as handle:
                fields = handle.read().rpartition(")")[2].split()
        except OSError:
            continue
        if len(fields) > 2 and fields[0] != "Z":
            groups.setdefault(int(fields[2]), []).append(int(entry))
    return groups


def group_rss(pids: list[int]) -> int:
    """Resident memory of the given processes in bytes."""
    page = os.sysconf("SC_PAGE_SIZE")
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/statm", encoding="utf-8") as handle:
                total += int(handle.read().split()[1]) * page
        except (OSError, ValueError, IndexError):
            continue
    return total


def format_bytes(value: float) -> str:
    """1288490188 -> '1.2Gi' (binary units, as people write Kubernetes memory)."""
    for unit, size in (("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10)):
        if value >= size:
            text = f"{value / size:.1f}".rstrip("0").rstrip(".")
            return f"{text}{unit}"
    return f"{int(value)}"


def format_cores(value: float) -> str:
    return f"{value:g}"


def port_free(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind((host, port))
        except OSError:
            return False
    return True


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((host, 0))
        return probe.getsockname()[1]


def replica_key(role: str, index: int) -> str:
    return f"{role}-{index}"


def replica_env(plan: dict[str, Any], replica: dict[str, Any], gpus: list[int] | None) -> dict[str, str]:
    """The launcher inputs of one replica (docs/architecture.md "Launcher"), from the plan.
    Shared with the backend's dry run so the preview is exactly what runs."""
    by_role = {
        role: ",".join(r["endpoint"] for r in sorted(plan["replicas"], key=lambda r: r["index"]) if r["role"] == role)
        for role in ("pserver", "trainer")
    }
    env = dict(plan.get("env", {}))
    env.update(
        PADDLE_NBEXT_JOB=plan["job"],
        PADDLE_NBEXT_MODE=plan["mode"],
        PADDLE_NBEXT_ROLE=replica["role"],
        PADDLE_NBEXT_INDEX=str(replica["index"]),
        PADDLE_NBEXT_PSERVER_ENDPOINTS=by_role["pserver"],
        PADDLE_NBEXT_TRAINER_ENDPOINTS=by_role["trainer"],
        PADDLE_NBEXT_ENTRY=plan["entry_point"],
        PADDLE_NBEXT_WORKDIR=plan["workdir"],
        PADDLE_NBEXT_CPU=format_cores(replica["cpu"]),
        PADDLE_NBEXT_WAIT_TIMEOUT=str(plan.get("wait_timeout", 300)),
    )
    if plan.get("capacity", {}).get("gpus"):
        # The pool is managed: replicas without an assignment must not grab any GPU.
        env["CUDA_VISIBLE_DEVICES"] = ",".join(str(g) for g in (gpus or []))
    return env


def _set_parent_death_signal() -> None:
    """Runs in the child before exec: if the master dies abruptly (SIGKILL), the kernel sends
    SIGKILL to the replica, so even then no process is left behind."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


class Replica:
    """One replica's process and record."""

    def __init__(self, spec: dict[str, Any]):
        self.plan = spec
        self.role: str = spec["role"]
        self.index: int = spec["index"]
        self.memory_limit: int | None = spec.get("memory")
        self.memory_text: str = spec.get("memory_text") or (format_bytes(spec["memory"]) if spec.get("memory") else "")
        self.phase = policy.PENDING
        self.reason: str | None = None
        self.exit_code: int | None = None
        self.restarts = 0
        self.started: str | None = None
        self.finished: str | None = None
        self.process: subprocess.Popen[bytes] | None = None
        self.stopping = False
        self.kill_reason: str | None = None

    @property
    def key(self) -> str:
        return replica_key(self.role, self.index)

    def record(self) -> dict[str, Any]:
        return {
            "role": self.role,
            "index": self.index,
            "phase": self.phase,
            "reason": self.reason,
            "exit_code": self.exit_code,
            "restarts": self.restarts,
            "started": self.started,
            "finished": self.finished,
        }


class Master:
    def __init__(self, job_dir: Path):
        self.job_dir = job_dir.resolve()
        self.plan: dict[str, Any] = read_json(self.job_dir / "plan.json")
        self.job: dict[str, Any] = read_json(self.job_dir / "job.json")
        self.logs = self.job_dir / "logs"
        self.logs.mkdir(exist_ok=True)
        self.replicas = [Replica(r) for r in self.plan["replicas"]]
        self.phase = policy.PENDING
        self.message = "Waiting for resources."
        self.started: str | None = None
        self.finished: str | None = None
        self.started_at: float | None = None
        self.admitted: dict[str, Any] | None = None
        self.gpu_assignment: dict[str, list[int]] = {}
        self.poll_interval = float(self.plan.get("poll_interval", 0.1))
        self.grace_period = float(self.plan.get("grace_period", 5))
        self._last_written: str | None = None
        self.all_pids: list[int] = []  # every replica process ever started, for the record
        self._base_env = {
            k: v for k, v in os.environ.items() if k not in SECRET_ENV and not k.startswith("PADDLE_NBEXT_")
        }

    # ---- status
    def status(self) -> dict[str, Any]:
        return {
            "name": self.plan["job"],
            "owner": self.job.get("owner", ""),
            "backend": "local",
            "phase": self.phase,
            "message": self.message,
            "spec": self.job.get("spec", {}),
            "created": self.job.get("created") or now_iso(),
            "started": self.started,
            "finished": self.finished,
            "replicas": [r.record() for r in self.replicas],
            "master_pid": os.getpid(),
            "processes": {r.key: r.process.pid for r in self.replicas if r.process is not None and r.process.returncode is None},
            "admitted": self.admitted if self.phase not in TERMINAL else None,
            "pids": list(self.all_pids),
        }

    def write_status(self) -> None:
        data = self.status()
        text = json.dumps(data, sort_keys=True)
        if text != self._last_written:
            write_json_atomic(self.job_dir / "status.json", data)
            self._last_written = text

    # ---- admission
    def _others_usage(self) -> tuple[float, int, set[int], list[str]]:
        cpu, memory, gpus, names = 0.0, 0, set(), []
        for sibling in self.job_dir.parent.iterdir():
            if sibling == self.job_dir or not sibling.is_dir():
                continue
            try:
                other = read_json(sibling / "status.json")
            except (OSError, ValueError):
                continue
            held = other.get("admitted")
            if not held or other.get("phase") in TERMINAL or not pid_alive(other.get("master_pid")):
                continue
            cpu += float(held.get("cpu", 0))
            memory += int(held.get("memory", 0))
            gpus.update(int(g) for g in held.get("gpus", []))
            names.append(sibling.name)
        return cpu, memory, gpus, names

    def try_admit(self) -> bool:
        """Take the job's resources if they are free; else set the Pending message and say no."""
        capacity = self.plan["capacity"]
        request = self.plan["request"]
        lock_path = self.job_dir.parent / ".admission.lock"
        with open(lock_path, "a+") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                used_cpu, used_memory, used_gpus, others = self._others_usage()
                free_cpu = float(capacity["cpu"]) - used_cpu
                free_memory = int(capacity["memory"]) - used_memory
                free_gpus = [g for g in capacity.get("gpus", []) if g not in used_gpus]
                short = []
                if request["cpu"] > free_cpu + 1e-9:
                    short.append(f"{format_cores(request['cpu'])} CPU (free: {format_cores(max(free_cpu, 0))} of {format_cores(capacity['cpu'])})")
                if request["memory"] > free_memory:
                    short.append(f"{format_bytes(request['memory'])} memory (free: {format_bytes(max(free_memory, 0))} of {format_bytes(capacity['memory'])})")
                if request["gpus"] > len(free_gpus):
                    short.append(f"{request['gpus']} GPU (free: {len(free_gpus)} of {len(capacity.get('gpus', []))})")
                if short:
                    held_by = f"; held by running local job{'s' if len(others) != 1 else ''} {', '.join(sorted(others))}" if others else ""
                    self.message = f"Waiting for resources: the job needs {' and '.join(short)}{held_by}."
                    self.write_status()
                    return False
                taken: list[int] = []
                for replica in self.replicas:
                    count = int(replica.plan.get("gpus", 0))
                    self.gpu_assignment[replica.key] = free_gpus[len(taken) : len(taken) + count]
                    taken.extend(self.gpu_assignment[replica.key])
                self.admitted = {"cpu": request["cpu"], "memory": request["memory"], "gpus": taken}
                self._recheck_ports()
                self.phase = policy.RUNNING
                self.message = "Starting replicas."
                self.started = now_iso()
                self.started_at = time.monotonic()
                self.write_status()
                return True
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def _recheck_ports(self) -> None:
        """Ports were picked at submit; a job that waited may find one taken since: pick anew."""
        changed = False
        for replica in self.plan["replicas"]:
            host, _, port = replica["endpoint"].rpartition(":")
            if not port_free(host, int(port)):
                replica["endpoint"] = f"{host}:{free_port(host)}"
                changed = True
        if changed:
            write_json_atomic(self.job_dir / "plan.json", self.plan)

    # ---- processes
    def log_path(self, replica: Replica, previous: bool = False) -> Path:
        return self.logs / f"{replica.key}{'.previous' if previous else ''}.log"

    def start(self, replica: Replica) -> None:
        current = self.log_path(replica)
        if replica.restarts and current.exists():
            os.replace(current, self.log_path(replica, previous=True))
        python = self.plan.get("python") or sys.executable
        env = dict(self._base_env)
        env.update(replica_env(self.plan, replica.plan, self.gpu_assignment.get(replica.key)))
        # `python` in the entry point means the configured interpreter (the one with paddle).
        env["PATH"] = os.pathsep.join(filter(None, (os.path.dirname(python), env.get("PATH", ""))))
        with open(current, "ab") as log:
            if replica.restarts:
                log.write(f"[paddle-nbext] restart {replica.restarts} of {replica.key}\n".encode())
                log.flush()
            replica.process = subprocess.Popen(
                [python, str(self.plan.get("launcher") or LAUNCHER)],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=self.plan["workdir"],
                env=env,
                start_new_session=True,
                preexec_fn=_set_parent_death_signal,
            )
        self.all_pids.append(replica.process.pid)
        replica.phase = policy.RUNNING
        replica.reason = None
        replica.exit_code = None
        replica.started = now_iso()
        replica.finished = None
        replica.stopping = False
        replica.kill_reason = None

    def signal_group(self, replica: Replica, sig: int) -> None:
        if replica.process is None:
            return
        try:
            os.killpg(replica.process.pid, sig)
        except OSError as error:
            if error.errno != errno.ESRCH:
                raise

    def reap(self) -> bool:
        """Record replicas that exited; True if anything changed."""
        changed = False
        for replica in self.replicas:
            process = replica.process
            if process is None or replica.phase != policy.RUNNING:
                continue
            code = process.poll()
            if code is None:
                continue
            self.signal_group(replica, signal.SIGKILL)  # leftovers of the replica's own children
            replica.exit_code = code
            replica.finished = now_iso()
            if replica.kill_reason:
                replica.phase, replica.reason = policy.FAILED, replica.kill_reason
            elif replica.stopping:
                replica.phase, replica.reason = policy.STOPPED, None
            elif code == 0:
                replica.phase, replica.reason = policy.SUCCEEDED, None
            else:
                replica.phase, replica.reason = policy.FAILED, policy.describe_exit(code).capitalize()
            changed = True
        return changed

    def check_memory(self) -> None:
        watched = [r for r in self.replicas if r.phase == policy.RUNNING and r.process and r.memory_limit and not r.kill_reason]
        if not watched:
            return
        groups = process_groups()
        for replica in watched:
            used = group_rss(groups.get(replica.process.pid, []))  # type: ignore[union-attr]
            if used > replica.memory_limit:  # type: ignore[operator]
                replica.kill_reason = f"MemoryLimitExceeded: used {format_bytes(used)} of {replica.memory_text}"
                self.signal_group(replica, signal.SIGKILL)

    def log_tail(self, replica: Replica) -> str:
        try:
            with open(self.log_path(replica), "rb") as handle:
                handle.seek(0, os.SEEK_END)
                size = handle.tell()
                handle.seek(max(0, size - LOG_TAIL_BYTES))
                return handle.read().decode("utf-8", errors="replace")
        except OSError:
            return ""

    def observed(self) -> list[policy.Observed]:
        return [
            policy.Observed(
                role=r.role,
                index=r.index,
                phase=r.phase,
                exit_code=r.exit_code,
                restarts=r.restarts,
                reason=r.kill_reason if r.phase == policy.FAILED else None,
                log_tail=self.log_tail(r) if r.phase == policy.FAILED else "",
            )
            for r in self.replicas
        ]

    def stop_all(self) -> None:
        """SIGTERM every live group, SIGKILL what is left after the grace period."""
        live = [r for r in self.replicas if r.phase == policy.RUNNING and r.process is not None]
        for replica in live:
            replica.stopping = True
            self.signal_group(replica, signal.SIGTERM)
        deadline = time.monotonic() + self.grace_period
        while time.monotonic() < deadline and any(r.process.poll() is None for r in live):  # type: ignore[union-attr]
            time.sleep(0.05)
        for replica in live:
            self.signal_group(replica, signal.SIGKILL)
            replica.process.wait()  # type: ignore[union-attr]
        self.reap()
        for replica in self.replicas:
            if replica.phase == policy.PENDING:
                replica.phase = policy.STOPPED

    def kill_everything(self) -> None:
        """Last resort on any exit path: no process group of this job survives the master."""
        for replica in self.replicas:
            if replica.process is not None:
                self.signal_group(replica, signal.SIGKILL)
                try:
                    replica.process.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    pass

    # ---- main loop
    @property
    def cancelled(self) -> bool:
        return _CANCEL_REQUESTED

    def finish(self, phase: str, message: str) -> None:
        self.stop_all()
        self.phase = phase
        self.message = message
        self.finished = now_iso()
        self.write_status()

    def record_gone(self) -> bool:
        """True once the job dir was removed under the master (`rm -rf ~/.paddle-jobs/<job>`):
        nothing can be recorded any more, so the job must end rather than run unseen forever."""
        return not (self.job_dir / "job.json").exists()

    def run(self) -> int:
        self.write_status()
        while not self.cancelled and not self.try_admit():
            if self.record_gone():
                return 0
            deadline = time.monotonic() + max(self.poll_interval, 1.0)
            while not self.cancelled and time.monotonic() < deadline:
                time.sleep(0.1)
        if self.cancelled and self.phase == policy.PENDING:
            self.finish(policy.CANCELLED, "Cancelled by the user before it started; nothing ran.")
            return 0
        for replica in self.replicas:
            self.start(replica)
        self.message = "Training is running."
        self.write_status()
        timeout = self.plan.get("timeout")
        next_memory_check = 0.0
        while True:
            self.reap()
            if time.monotonic() >= next_memory_check:
                if self.record_gone():
                    self.stop_all()
                    return 0
                self.check_memory()
                next_memory_check = time.monotonic() + MEMORY_CHECK_EVERY
            timed_out = timeout if timeout and time.monotonic() - self.started_at > timeout else None  # type: ignore[operator]
            decision = policy.decide(
                self.observed(),
                max_restarts=int(self.plan.get("max_restarts", 0)),
                cancelled=self.cancelled,
                timed_out_after=timed_out,
            )
            if decision.terminal:
                self.finish(decision.phase, decision.message)
                return 0
            for role, index in decision.restart:
                replica = next(r for r in self.replicas if r.role == role and r.index == index)
                replica.restarts += 1
                self.start(replica)
            self.phase, self.message = decision.phase, decision.message
            self.write_status()
            time.sleep(self.poll_interval)


_CANCEL_REQUESTED = False


def _request_cancel(signum: int, frame: Any) -> None:
    global _CANCEL_REQUESTED
    _CANCEL_REQUESTED = True


def main(argv: list[str]) -> int:
    # First thing: a cancel that arrives while the job is being read must not kill the master
    # before it can record Cancelled.
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, _request_cancel)
    if len(argv) != 1:
        print("usage: python -m paddle_nbext_server.backends.local.master <job_dir>", file=sys.stderr)
        return 2
    job_dir = Path(argv[0])
    try:
        master = Master(job_dir)
    except (OSError, ValueError, KeyError) as error:
        print(f"paddle-nbext local master: cannot read the job in {job_dir}: {error}", file=sys.stderr)
        return 2
    try:
        return master.run()
    except BaseException as error:
        master.kill_everything()
        master.reap()
        if master.phase not in TERMINAL:
            master.phase = policy.FAILED
            master.message = f"The job master failed: {type(error).__name__}: {error}"
            master.finished = now_iso()
            master.write_status()
        raise
    finally:
        master.kill_everything()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
