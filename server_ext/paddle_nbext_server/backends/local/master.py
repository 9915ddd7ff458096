"""The job master of the local backend: one detached process per job.

`python -m paddle_nbext_server.backends.local.master <job_dir>`.  The backend starts it in its
own session, so restarting Jupyter loses nothing: the master keeps the job going and records
everything in the job dir, which any later server reads.

What it does, in order:
1. admission: waits as Pending (reason in words) until the job's CPU, memory and GPUs fit beside
   the other admitted local jobs of the same jobs dir (checked and recorded under a file lock, so
   two masters never both take the last core); assigns GPUs and re-checks the planned ports;
2. starts every replica through the job's own launcher, `<job_dir>/runtime/launcher.py` (the
   runtime bundle written at submit, so an upgrade of paddle-nbext under a running job changes
   nothing in it), with the plan's interpreter, which may lack paddle-nbext (the launcher needs
   only its sibling `contract.py`); each replica in its own process group, output appended to
   `logs/<role>-<index>.log`.  When the plan's interpreter is the master's own, the launcher is a
   fork of the master rather than a new interpreter (`forked`: the same launcher, ~50 ms sooner
   per replica);
3. watches exit codes (woken by a replica's end through a pidfd, else every `poll_interval`),
   memory (RSS of each replica's processes, through psutil), the timeout and
   cancellation (SIGTERM to the master), and applies `policy.decide()`; a restart starts every
   replica again (`Master.restart_all`: a Paddle trainer cannot rejoin running peers alone);
4. on the end stops every replica it started (SIGTERM, SIGKILL after the grace period), writes
   the terminal `status.json` and exits.

It reads `records.Plan` (plan.json) and `records.JobRecord` (job.json) and rewrites
`records.StatusRecord` (status.json) atomically on every change.

It runs beside the server (never inside a job image), so it may use the server's packages; the
replicas it starts run the launcher, which is standard library only.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import os
import re
import select
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any, BinaryIO

from paddle_nbext.model.contract import (
    TERMINAL_PHASES,
    Phase,
    ReplicaPhase,
    format_bytes,
    format_cores,
    now_iso,
)
from paddle_nbext.model.status import JobStatus, ReplicaStatus

from ... import timeline
from ...runtime import health_rules, paddle_nbext_job, policy, supervise
from . import forked, health, limits, pending_end, usage
from .ports import free_ports, port_free
from .processes import ProcessTable, pid_alive, resident_bytes, signal_replica
from .record_files import read_master_pid, read_record, write_atomic, write_record
from .record_json import NewerRecord
from .records import Admitted, JobRecord, Plan, ReplicaPlan, StatusRecord

#: Inherited variables a job never needs: server credentials and the server's own launcher inputs.
SECRET_ENV = ("JUPYTERHUB_API_TOKEN", "JPY_API_TOKEN", "PADDLE_NBEXT_TOKEN")
MEMORY_CHECK_EVERY = 0.5
#: Seconds between looks for a stall, a new checkpoint and the first step (a few `stat`s each).
HEALTH_CHECK_EVERY = 1.0
#: Longest wait between looks at the replicas being stopped (`wait_for_exit` returns earlier
#: when one ends; without pidfds, the pace of those looks).
STOP_POLL = 0.05
#: How a replica says its port was taken: Python's and gloo's EADDRINUSE, brpc's (Paddle's PS).
PORT_CLASH = re.compile(r"Address already in use|EADDRINUSE|Fail to listen")
#: Starts on new ports after port clashes before a clash counts as the failure it looks like.
MAX_REPLANS = 3
LOG_TAIL_BYTES = 4096
ADMISSION_LOCK = ".admission.lock"
#: Seconds between a master's tries to record a job's end in a dir that refused it.
PENDING_END_RETRY = 1.0


def _set_parent_death_signal() -> None:
    """Runs in the child before exec: if the master dies abruptly (SIGKILL), the kernel sends
    SIGKILL to the replica's launcher until the launcher replaces it by its own catchable signal
    (`supervise.run_supervised`), on which it kills everything below it: no process is left."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


#: A replica's launcher: a started interpreter, or a fork of the master (`forked`).
LauncherProcess = subprocess.Popen[bytes] | forked.ForkedLauncher


def wait_for_exit(processes: list[LauncherProcess], timeout: float) -> None:
    """Sleep up to `timeout` seconds, returning as soon as one of `processes` ends (a pidfd per
    process, Linux 5.3+): the master acts on a trainer's end, or a stopped pserver's, when it
    happens rather than at its next poll.  Where pidfds are missing, a plain sleep."""
    fds: list[int] = []
    try:
        for process in processes:
            try:
                fds.append(os.pidfd_open(process.pid))
            except (AttributeError, OSError):  # no pidfd_open (old kernel, not Linux), or already reaped
                time.sleep(timeout)
                return
        if fds:
            select.select(fds, [], [], timeout)
        else:
            time.sleep(timeout)
    finally:
        for fd in fds:
            os.close(fd)


class Replica:
    """One replica's process and what is recorded of it."""

    def __init__(self, plan: ReplicaPlan) -> None:
        self.plan = plan
        self.memory_text = plan.memory_text or (format_bytes(plan.memory) if plan.memory else "")
        self.phase: str = ReplicaPhase.PENDING
        self.reason: str | None = None
        self.exit_code: int | None = None
        self.restarts = 0
        self.started: str | None = None
        self.finished: str | None = None
        self.process: LauncherProcess | None = None
        self.stopping = False
        self.kill_reason: str | None = None
        self.kernel_limit: limits.KernelLimit | None = None  # of the current start
        self.log_start = 0  # where this start's output begins in its log (earlier starts' is before)

    @property
    def role(self) -> str:
        return self.plan.role

    @property
    def index(self) -> int:
        return self.plan.index

    @property
    def key(self) -> str:
        return self.plan.key

    @property
    def live_process(self) -> LauncherProcess | None:
        """The replica's process while it has not been reaped."""
        return self.process if self.process is not None and self.process.returncode is None else None

    def record(self) -> ReplicaStatus:
        return ReplicaStatus(
            role=self.role,
            index=self.index,
            phase=self.phase,
            reason=self.reason,
            exit_code=self.exit_code,
            restarts=self.restarts,
            started=self.started,
            finished=self.finished,
        )


class Master:
    def __init__(self, job_dir: Path) -> None:
        self.job_dir = job_dir.resolve()
        self.plan = read_record(Plan, self.job_dir)
        self._environment_seen: tuple[int, str | None] = (0, None)
        self.job = read_record(JobRecord, self.job_dir)
        self.logs = self.job_dir / "logs"
        self.logs.mkdir(exist_ok=True)
        self.replicas = [Replica(r) for r in self.plan.replicas]
        self.phase: str = Phase.PENDING
        self.message = "Checking the job's resources."  # until admission says "Waiting for resources: ..." or starts it
        self.started: str | None = None
        self.finished: str | None = None
        self.started_at: float | None = None
        self.admitted: Admitted | None = None
        self.gpu_assignment: dict[str, list[int]] = {}
        self._last_written: StatusRecord | None = None
        self._write_failing = False
        self._write_error = ""  # why the last status write failed, in words
        self.all_pids: list[int] = []  # every replica process ever started, for the record
        self.replans = 0  # starts on new ports after a port clash (`replan_after_port_clash`)
        # Whole-job starts (`begin_attempt`): each resumes from the latest complete checkpoint.
        self.attempt = -1
        self.resume: paddle_nbext_job.Checkpoint | None = None
        self.resume_note = ""  # "restart 1 of 3; resumed from step 20", said while it runs
        self._base_env = {k: v for k, v in os.environ.items() if k not in SECRET_ENV and not k.startswith("PADDLE_NBEXT_")}
        self._bundle_launcher: Callable[[], int] | None = None
        self._bundle_loaded = False
        # Training health (issue 36): the timeline, resource use, memory warnings and stalls.
        self.timeline = timeline.TimelineWriter(self.job_dir)
        self.usage = usage.UsageSampler(self.plan.replicas)
        self.memory_watch = health_rules.MemoryWatch(self.plan.memory_warn_after)
        self.stall_watch = health.StallWatch(self.logs, float(self.plan.stall_timeout or 0))
        self.stall: health_rules.Stall | None = None  # the stall said, while it lasts
        self.stall_words = ""  # its words as said when it was found (the message stays the same)
        self.attempt_started_wall = time.time()
        self._next_usage = 0.0
        self._next_health = 0.0
        self._checkpoint_step: int | None = None
        self._first_step_said = False
        self._waiting_said = ""
        self._environment_state = ""

    # ---- status
    def status(self) -> StatusRecord:
        status = JobStatus(
            name=self.plan.job,
            owner=self.job.owner,
            backend="local",
            phase=self.phase,
            message=self.message,
            spec=self.job.spec,
            created=self.job.created or now_iso(),
            started=self.started,
            finished=self.finished,
            replicas=[r.record() for r in self.replicas],
        )
        return StatusRecord(
            status,
            master_pid=os.getpid(),
            processes={r.key: process.pid for r in self.replicas if (process := r.live_process) is not None},
            admitted=self.admitted if self.phase not in TERMINAL_PHASES else None,
            pids=list(self.all_pids),
        )

    def write_status(self) -> bool:
        """Record the status if it changed; False when it cannot be written (a full disk, a dir
        made read-only): the job goes on, the write is tried again on the next change or poll,
        and the first failure of a run of them is said once in master.log."""
        record = self.status()
        # Compared as records, not as their JSON: the loop asks every poll, and serialising the
        # status each time was most of what the master did while a job ran.
        if record == self._last_written:
            return True
        text = record.to_json()
        try:
            write_atomic(self.job_dir / StatusRecord.KIND, text)
        except OSError as error:
            self._write_error = f"{error.strerror or error}"
            if not self._write_failing:
                say(f"paddle-nbext local master: cannot write {self.job_dir / StatusRecord.KIND}: {error}; retrying")
            self._write_failing = True
            return False
        self._last_written = record
        self._write_failing = False
        return True

    # ---- admission
    def _others_usage(self, others: list[tuple[Path, StatusRecord]]) -> tuple[float, int, set[int], list[str]]:
        cpu, memory, gpus, names = 0.0, 0, set(), []
        for _, other in others:
            held = other.admitted
            assert held is not None
            cpu += held.cpu
            memory += held.memory
            gpus.update(held.gpus)
            # Only this user's own job names: another user's job is counted, never named.
            names.append(other.status.name if other.status.owner == self.job.owner else "")
        return cpu, memory, gpus, names

    def _admitted_others(self) -> list[tuple[Path, StatusRecord]]:
        """The other jobs of this jobs dir that hold resources now (admitted, not ended, their
        master alive), with their status records."""
        found = []
        for sibling in self.job_dir.parent.iterdir():
            if sibling == self.job_dir or not sibling.is_dir() or _master_gone(sibling):
                continue
            try:
                other = read_record(StatusRecord, sibling)
            except (OSError, ValueError, NewerRecord):
                continue
            if other.admitted is None or other.terminal or not pid_alive(other.master_pid):
                continue
            found.append((sibling, other))
        return found

    @staticmethod
    def _others_ports(others: list[tuple[Path, StatusRecord]]) -> set[int]:
        """Every replica port the other admitted jobs planned: they may not listen yet (their
        replicas are still starting), so the kernel would call those ports free."""
        ports: set[int] = set()
        for sibling, _ in others:
            try:
                plan = read_record(Plan, sibling)
            except (OSError, ValueError, NewerRecord):
                continue
            ports.update(plan.ports())
        return ports

    def try_admit(self) -> bool:
        """Take the job's resources if they are free; else set the Pending message and say no."""
        capacity, request = self.plan.capacity, self.plan.request
        with open(self.job_dir.parent / ADMISSION_LOCK, "a+") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                admitted = self._admitted_others()  # one read of the siblings per admission
                used_cpu, used_memory, used_gpus, others = self._others_usage(admitted)
                free_cpu = capacity.cpu - used_cpu
                free_memory = capacity.memory - used_memory
                free_gpus = [g for g in capacity.gpus if g not in used_gpus]
                short = []
                if request.cpu > free_cpu + 1e-9:
                    short.append(
                        f"{format_cores(request.cpu)} CPU (free: {format_cores(max(free_cpu, 0))} of {format_cores(capacity.cpu)})"
                    )
                if request.memory > free_memory:
                    short.append(
                        f"{format_bytes(request.memory)} memory (free: {format_bytes(max(free_memory, 0))} of {format_bytes(capacity.memory)})"
                    )
                if request.gpus > len(free_gpus):
                    short.append(f"{request.gpus} GPU (free: {len(free_gpus)} of {len(capacity.gpus)})")
                if short:
                    held_by = _held_by(others)
                    self.message = f"Waiting for resources: the job needs {' and '.join(short)}{held_by}."
                    if self.message != self._waiting_said:
                        self._waiting_said = self.message
                        self.timeline.add("waiting", self.message)
                    self.write_status()
                    return False
                taken: list[int] = []
                for replica in self.replicas:
                    self.gpu_assignment[replica.key] = free_gpus[len(taken) : len(taken) + replica.plan.gpus]
                    taken.extend(self.gpu_assignment[replica.key])
                self.admitted = Admitted(cpu=request.cpu, memory=request.memory, gpus=taken)
                self._recheck_ports(self._others_ports(admitted))
                self.phase = Phase.RUNNING
                self.message = "Starting replicas."
                self.timeline.add("admitted", f"Admitted: {self.admitted_words()}.")
                self.started = now_iso()
                self.started_at = time.monotonic()
                self.write_status()
                return True
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def replan_after_port_clash(self, replica: Replica) -> None:
        """A replica failed because its port was taken (`PORT_CLASH`: another program bound it
        between the admission's check and the replica's bind): every replica is stopped, the
        ports are planned anew under the admission lock, and the job starts again on them,
        without counting a restart (the code did nothing wrong)."""
        self.replans += 1
        taken = replica.plan.host_port[1]
        self.stop_all()
        self.begin_attempt()
        with open(self.job_dir.parent / ADMISSION_LOCK, "a+") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                self._recheck_ports(self._others_ports(self._admitted_others()), also={taken})
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)
        for each in self.replicas:
            note = f"[paddle-nbext] port {taken} of {replica.key} was taken by another program; starting again on new ports\n"
            with contextlib.suppress(OSError), open(self.log_path(each), "ab") as log:
                log.write(note.encode())
            self.start(each)

    def _recheck_ports(self, others: set[int], also: frozenset[int] | set[int] = frozenset()) -> None:
        """Ports were picked at submit, by asking the kernel, with no lock: two jobs submitted
        together can be given the same one, and a job that waited may find one taken since.
        Under the admission lock, a port another admitted job planned (``others``: it may not
        listen yet), one this job plans twice, or one something listens on, is picked anew."""
        changed = False
        planned = self.plan.ports()
        seen: set[int] = set()
        for replica in self.plan.replicas:
            host, _ = replica.host_port
            block = set(replica.ports)
            if block & (others | set(also) | seen) or not all(port_free(host, port) for port in block):
                port = free_ports(host, len(block), avoid=planned | others | seen | set(also))
                replica.endpoint = f"{host}:{port}"
                block = set(replica.ports)
                planned |= block
                changed = True
            seen |= block
        if changed:
            write_record(self.job_dir, self.plan)

    # ---- processes
    def log_path(self, replica: Replica, previous: bool = False) -> Path:
        return self.logs / f"{replica.key}{'.previous' if previous else ''}.log"

    def begin_attempt(self) -> None:
        """Before every replica is started (first start, whole restart, new ports): the
        checkpoint this attempt resumes from is the latest complete one (no replica of the new
        attempt runs yet, so none can have saved), named to every replica alike."""
        self.attempt += 1
        self.resume = paddle_nbext_job.latest(self.plan.checkpoint_dir)
        self.attempt_started_wall = time.time()
        self._first_step_said = False
        self.stall = None
        self._checkpoint_step = self.resume.step if self.resume is not None else None

    def resume_env(self) -> dict[str, str]:
        """`paddle_nbext_job.resume_from()`'s inputs: empty values mean "from scratch"."""
        resume = self.resume
        return {
            paddle_nbext_job.RESUME_VAR: resume.path if resume is not None else "",
            paddle_nbext_job.RESUME_STEP_VAR: str(resume.step) if resume is not None else "",
            paddle_nbext_job.ATTEMPT_VAR: str(max(self.attempt, 0)),
        }

    def resumed_words(self) -> str:
        """`resumed from step 20`, or what a restart without a checkpoint does."""
        if self.resume is not None:
            origin = paddle_nbext_job.manifest(self.resume.path).get("resumed_from")
            return f"resumed from step {self.resume.step}" + (f" of job {origin}" if isinstance(origin, str) and origin else "")
        return "no checkpoint yet, so it starts from the beginning"

    def resumes_words(self) -> str:
        """The timeline's words for an attempt that starts from a checkpoint: `Every replica
        resumes from step 20` (`of job NAME` for a checkpoint of the job a Resume started from)."""
        return f"Every replica {self.resumed_words().replace('resumed from', 'resumes from', 1)}."

    def start(self, replica: Replica) -> None:
        current = self.log_path(replica)
        if replica.restarts and current.exists():
            os.replace(current, self.log_path(replica, previous=True))
        python = self.plan.python or sys.executable
        env = dict(self._base_env)
        env.update(self.plan.launcher_env(replica.plan, self.gpu_assignment.get(replica.key)))
        env.update(self.resume_env())
        if supervise.TIMINGS_VAR in os.environ:  # the benchmark's breakdown (`supervise.mark`)
            env[supervise.TIMINGS_VAR] = os.environ[supervise.TIMINGS_VAR]
        # `python` in the entry point means the configured interpreter (the one with paddle).
        env["PATH"] = os.pathsep.join(filter(None, (os.path.dirname(python), env.get("PATH", ""))))
        with open(current, "ab") as log:
            if replica.restarts:
                log.write(f"[paddle-nbext] restart {replica.restarts} of {replica.key}\n".encode())
                log.flush()
            kernel_limit = self.kernel_limit_for(replica, log)
            log.flush()
            replica.log_start = log.tell()

            def prepare_child() -> None:
                _set_parent_death_signal()
                limits.enter(kernel_limit)

            supervise.mark("master.spawn", replica.key)
            main = self.bundle_launcher() if forked.can_fork(python, env, kernel_limit) else None
            if main is not None:  # what `python launcher.py` would be, without starting Python again
                replica.process = forked.fork_launcher(
                    main, launcher=self.plan.launcher, env=env, cwd=self.plan.workdir, log=log, prepare=prepare_child
                )
            else:
                replica.process = subprocess.Popen(
                    [python, self.plan.launcher],
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    cwd=self.plan.workdir,
                    env=env,
                    start_new_session=True,
                    preexec_fn=prepare_child,  # noqa: PLW1509 - the master runs no threads
                )
        replica.kernel_limit = kernel_limit
        self.all_pids.append(replica.process.pid)
        self.memory_watch.forget(replica.key)
        self.timeline.add(
            "started",
            f"{replica.role} {replica.index} started on this machine (pid {replica.process.pid}).",
            role=replica.role,
            index=replica.index,
        )
        replica.phase = ReplicaPhase.RUNNING
        replica.reason = None
        replica.exit_code = None
        replica.started = now_iso()
        replica.finished = None
        replica.stopping = False
        replica.kill_reason = None

    def bundle_launcher(self) -> Callable[[], int] | None:
        """The job's launcher's `main`, imported once (`forked.load_launcher`); None: start each
        launcher as a new interpreter."""
        if not self._bundle_loaded:
            self._bundle_launcher = forked.load_launcher(self.plan.launcher)
            self._bundle_loaded = True
        return self._bundle_launcher

    def kernel_limit_for(self, replica: Replica, log: BinaryIO) -> limits.KernelLimit | None:
        """The kernel memory limit of this start of `replica` (`limits`), its cgroup created; a
        cgroup that cannot be made falls back to RLIMIT_AS, and the replica's log says why."""
        planned = limits.planned(replica.plan, self.plan, replica.restarts)
        if planned is None:
            return None
        try:
            limits.prepare(planned)
        except OSError as error:
            fallback = limits.address_space(replica.plan, self.plan)
            instead = f"{limits.RLIMIT} holds it instead" if fallback is not None else "only the sampler watches it"
            log.write(f"[paddle-nbext] cannot create the cgroup {planned.cgroup} ({error.strerror or error}); {instead}\n".encode())
            log.flush()
            return fallback
        return planned

    @staticmethod
    def signal_replica(replica: Replica, sig: int) -> None:
        if replica.process is not None:
            signal_replica(replica.process.pid, sig)

    def running_processes(self) -> list[LauncherProcess]:
        """The processes of the replicas that run (not yet reaped): what the loop waits on."""
        return [process for replica in self.replicas if replica.phase == ReplicaPhase.RUNNING and (process := replica.live_process)]

    def reap(self) -> bool:
        """Record replicas that exited; True if anything changed."""
        changed = False
        for replica in self.replicas:
            process = replica.process
            if process is None or replica.phase != ReplicaPhase.RUNNING:
                continue
            code = process.poll()
            if code is None:
                continue
            self.signal_replica(replica, signal.SIGKILL)  # leftovers of the replica's own children
            replica.exit_code = code
            replica.finished = now_iso()
            limit = replica.kernel_limit
            if limit is not None and not replica.kill_reason and not replica.stopping:
                if limits.stopped_by_kernel(limit, code, self.log_tail(replica)):
                    replica.kill_reason = limits.reason(limit, replica.plan, replica.memory_text)
            limits.release(limit)
            if replica.kill_reason:
                replica.phase, replica.reason = ReplicaPhase.FAILED, replica.kill_reason
            elif replica.stopping:
                replica.phase, replica.reason = ReplicaPhase.STOPPED, None
            elif code == 0:
                replica.phase, replica.reason = ReplicaPhase.SUCCEEDED, None
            else:
                replica.phase, replica.reason = ReplicaPhase.FAILED, policy.describe_exit(code).capitalize()
            self.memory_watch.forget(replica.key)
            if not replica.stopping:  # a replica the master stopped is said by the job's end
                self.timeline.add("replica_ended", self.ended_words(replica), role=replica.role, index=replica.index)
            changed = True
        return changed

    def check_memory(self, table: ProcessTable) -> None:
        """Stop a replica whose processes together use more than its memory (MemoryLimitExceeded),
        from `table`, this check's reading of the process list."""
        watched = [
            (replica, process)
            for replica in self.replicas
            if replica.phase == ReplicaPhase.RUNNING
            and (process := replica.live_process) is not None
            and replica.plan.memory
            and not replica.kill_reason
        ]
        now = time.monotonic()
        for replica, process in watched:
            pids = table.replica_processes(process.pid)
            used = table.resident(pids)
            if used is None:
                used = resident_bytes(pids)
            self.usage.replicas[replica.key].observe_memory(used)
            if used > replica.plan.memory:
                peak = self.usage.replicas[replica.key].peak_memory
                replica.kill_reason = f"MemoryLimitExceeded: used {format_bytes(used)} of {replica.memory_text} (resident memory, sampled; peak {health_rules.gib(peak)})"
                self.signal_replica(replica, signal.SIGKILL)
                continue
            who = f"{replica.role} {replica.index}"
            warning, cleared = self.memory_watch.observe(replica.key, who, used, replica.plan.memory, now)
            if warning:
                self.timeline.add("warning", f"Memory: {warning}; it is stopped if it goes over.", role=replica.role, index=replica.index)
            if cleared:
                self.timeline.add("recovered", f"Memory: {cleared}.", role=replica.role, index=replica.index)

    def log_tail(self, replica: Replica) -> str:
        try:
            with open(self.log_path(replica), "rb") as handle:
                handle.seek(0, os.SEEK_END)
                size = handle.tell()
                handle.seek(max(0, size - LOG_TAIL_BYTES))
                return handle.read().decode("utf-8", errors="replace")
        except OSError:
            return ""

    def output_of_this_start(self, replica: Replica) -> str:
        """The end of what the replica wrote since its current start (not an earlier start's)."""
        try:
            with open(self.log_path(replica), "rb") as handle:
                size = handle.seek(0, os.SEEK_END)
                handle.seek(max(replica.log_start, size - LOG_TAIL_BYTES))
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
                reason=r.kill_reason if r.phase == ReplicaPhase.FAILED else None,
                log_tail=self.log_tail(r) if r.phase == ReplicaPhase.FAILED else "",
                finished=r.finished,
            )
            for r in self.replicas
        ]

    def port_clash(self) -> Replica | None:
        """A replica that just failed because its own port was taken, while re-planning may still
        help (`MAX_REPLANS`)."""
        if self.replans >= MAX_REPLANS:
            return None
        for replica in self.replicas:
            if replica.phase == ReplicaPhase.FAILED and not replica.kill_reason and PORT_CLASH.search(self.output_of_this_start(replica)):
                return replica
        return None

    def stop_all(self) -> None:
        """SIGTERM every live replica, SIGKILL what is left after the grace period."""
        live = [(r, r.process) for r in self.replicas if r.phase == ReplicaPhase.RUNNING and r.process is not None]
        for replica, _ in live:
            replica.stopping = True
            self.signal_replica(replica, signal.SIGTERM)
        deadline = time.monotonic() + self.plan.grace_period
        while (running := [process for _, process in live if process.poll() is None]) and time.monotonic() < deadline:
            wait_for_exit(running, min(STOP_POLL, max(0.0, deadline - time.monotonic())))
        for replica, process in live:
            self.signal_replica(replica, signal.SIGKILL)
            process.wait()
        self.reap()
        for replica in self.replicas:
            if replica.phase == ReplicaPhase.PENDING:
                replica.phase = ReplicaPhase.STOPPED

    def stop_adopted(self, table: ProcessTable) -> None:
        """Kill and reap the master's children that are not replicas it started (`table`: a
        reading of the process list, zombies included).  The master is a child subreaper, so a
        process a replica left running after its launcher was killed is re-parented here instead
        of to init: it belongs to no live replica and must not run on."""
        ours = {process.pid for replica in self.replicas if (process := replica.live_process) is not None}
        for pid in table.children_of(os.getpid()):
            if pid in ours:
                continue
            try:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, os.WNOHANG)
            except (ProcessLookupError, ChildProcessError, PermissionError):
                pass

    def restart_all(self) -> None:
        """Start the job again after a trainer failed with restarts left: every replica is
        stopped and started anew, each counting one restart (its log of the attempt before is
        kept as `.previous.log`).  A trainer restarted alone never rejoins: Paddle's PS trainers
        wait at the pservers' barrier for every trainer when they start (GeoCommunicator's
        InitParams), and collective ranks rendezvous with all the others, so the peers that kept
        running (or already finished) would leave it waiting for ever."""
        self.stop_all()
        self.begin_attempt()
        for replica in self.replicas:
            replica.restarts += 1
            self.start(replica)
        restarts = max(replica.restarts for replica in self.replicas)
        self.resume_note = f"restart {restarts} of {self.plan.max_restarts}; {self.resumed_words()}"
        if self.resume is not None:
            self.timeline.add("resumed", self.resumes_words())

    def kill_everything(self) -> None:
        """Last resort on any exit path: no process of this job survives the master."""
        for replica in self.replicas:
            if replica.process is not None:
                self.signal_replica(replica, signal.SIGKILL)
                try:
                    replica.process.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    pass
                limits.release(replica.kernel_limit)

    # ---- main loop
    @property
    def cancelled(self) -> bool:
        return _CANCEL_REQUESTED

    def finish(self, phase: str, message: str) -> None:
        """Stop every replica and record the end.  An end the job dir cannot take (a full disk,
        a read-only remount) is kept where the server finds it (`pending_end`) and written into
        the dir as soon as it can be; the master waits for that, or for the dir to be removed,
        so that no end is ever lost."""
        supervise.mark("master.decided")
        self.stop_all()
        supervise.mark("master.stopped")
        self.phase = phase
        self.message = message
        self.finished = now_iso()
        self.timeline.add("ended", f"{phase}: {message}")
        if self.plan.usage_interval > 0:
            self.usage.sample(ProcessTable(), {})  # nothing runs any more: figures blank, peaks kept
            self.write_usage()
        if self.write_status():
            supervise.mark("master.recorded")
            return
        kept = False
        while not self.record_gone():
            if not kept:
                try:
                    pending_end.write(
                        self.job_dir, self.status().to_json(), f"cannot write {self.job_dir / StatusRecord.KIND}: {self._write_error}"
                    )
                    kept = True
                except OSError as error:
                    say(f"paddle-nbext local master: cannot keep the end aside either: {error}")
            time.sleep(PENDING_END_RETRY)
            if self.write_status():
                break
        pending_end.clear(self.job_dir)

    def record_gone(self) -> bool:
        """True once the job dir was removed under the master (`rm -rf ~/.paddle-jobs/<job>`):
        nothing can be recorded any more, so the job must end rather than run unseen forever."""
        return not (self.job_dir / JobRecord.KIND).exists()

    def timed_out(self) -> int | None:
        """The timeout once the job has run longer than it, else None."""
        timeout = self.plan.timeout
        if timeout and self.started_at is not None and time.monotonic() - self.started_at > timeout:
            return timeout
        return None

    def run(self) -> int:
        if "submitted" not in self.timeline.kinds_seen:
            origin = self.job.resumed_from
            resumed = f" to resume job {origin.get('job')} from step {origin.get('step')}" if origin else ""
            self.timeline.add("submitted", f"Submitted{resumed}.", t=self.job.created or None)
        self.write_status()
        while not self.cancelled and not self.try_admit():
            if self.record_gone():
                return 0
            deadline = time.monotonic() + max(self.plan.poll_interval, 1.0)
            while not self.cancelled and time.monotonic() < deadline:
                time.sleep(0.1)
        if self.cancelled and self.phase == Phase.PENDING:
            self.finish(Phase.CANCELLED, "Cancelled by the user before it started; nothing ran.")
            return 0
        supervise.mark("master.admitted")
        self.begin_attempt()
        if self.resume is not None:  # a job resumed from an ended one's checkpoint
            self.resume_note = self.resumed_words()
            self.timeline.add("resumed", self.resumes_words())
        for replica in self.replicas:
            self.start(replica)
        self.message = "Training is running."
        self.write_status()
        next_memory_check = 0.0
        while True:
            self.reap()
            # Every turn, before any decision: a removed dir also takes the snapshot the replicas
            # run from, so they soon fail, and acting on that (a restart, or an end that waits
            # to be recorded in a dir that is gone) would keep the job alive.
            if self.record_gone():
                self.stop_all()
                return 0
            if time.monotonic() >= next_memory_check:
                table = ProcessTable.read()  # one pass over the process list for all three
                self.check_memory(table)
                self.stop_adopted(table)
                self.sample_usage(table)
                next_memory_check = time.monotonic() + MEMORY_CHECK_EVERY
            clash = self.port_clash()
            if clash is not None:
                self.replan_after_port_clash(clash)
                continue
            decision = policy.decide(
                self.observed(),
                max_restarts=self.plan.max_restarts,
                cancelled=self.cancelled,
                timed_out_after=self.timed_out(),
                now=time.time(),
            )
            if decision.terminal:
                ended = decision.message
                if self.resume_note and decision.phase == Phase.SUCCEEDED:
                    ended = f"{ended[:-1]} ({self.resume_note})."
                self.finish(decision.phase, ended)
                return 0
            message = decision.message
            if decision.restart:
                self.timeline.add("restart", f"{message[0].upper()}{message[1:]}")
                self.restart_all()
                message = f"{message}; {self.resumed_words()}"
            elif self.resume_note and decision.phase == Phase.RUNNING and message.endswith((" running.", " finished.")):
                message = f"{message[:-1]} ({self.resume_note})."
            if not decision.restart:
                message = self.environment_message() or message
                outcome = self.check_health(decision.phase)
                if outcome == "ended":
                    return 0
                message = self.message if outcome == "restarted" else self.with_warnings(message)
            self.phase, self.message = decision.phase, message
            self.write_status()
            wait_for_exit(self.running_processes(), self.plan.poll_interval)

    def environment_message(self) -> str | None:
        """The job's message ("Preparing environment: ...") while the replicas' launchers build its environment
        (`runtime/environments.py` writes its status beside the logs); read again only when that
        file changed."""
        from ...runtime import environments  # first asked once the replicas run, off their start's way

        if environments.REQUIREMENTS_VAR not in self.plan.env:
            return None
        path = self.job_dir / "logs" / environments.STATUS_FILE
        try:
            stamp = path.stat().st_mtime_ns
        except OSError:
            return None
        if stamp != self._environment_seen[0]:
            status = environments.read_json(str(path))
            self._environment_seen = (stamp, environments.phase_message(status) if status else None)
            self.say_environment(status or {})
        return self._environment_seen[1]

    def say_environment(self, status: dict[str, Any]) -> None:
        """The environment's steps in the timeline: building, then ready (or reused) or failed."""
        state = status.get("state")
        if not isinstance(state, str) or state == self._environment_state:
            return
        self._environment_state = state
        if state == "building":
            from ...runtime import environments

            self.timeline.add("environment", f"{environments.phase_message(status) or 'Preparing environment'}.")
        elif state == "ready":
            packages = status.get("packages")
            what = f" ({packages} package{'s' if packages != 1 else ''})" if isinstance(packages, int) else ""
            self.timeline.add("environment", f"Environment {'reused' if status.get('reused') else 'ready'}{what}.")
        elif state == "failed":
            self.timeline.add("environment", f"The environment could not be built: {status.get('reason') or 'see the environment log'}.")

    # ---- training health (issue 36)
    def admitted_words(self) -> str:
        request = self.plan.request
        gpus = f", {request.gpus} GPU" if request.gpus else ""
        return f"{format_cores(request.cpu)} CPU, {format_bytes(request.memory)} memory{gpus} on this machine"

    def ended_words(self, replica: Replica) -> str:
        who = f"{replica.role} {replica.index}"
        if replica.phase == ReplicaPhase.SUCCEEDED:
            return f"{who} finished."
        peak = self.usage.replicas[replica.key].peak_memory
        peak_words = f"; peak memory {health_rules.gib(peak)}" if peak else ""
        return f"{who} failed: {replica.reason or policy.describe_exit(replica.exit_code or 0)}{peak_words}."

    def sample_usage(self, table: ProcessTable) -> None:
        """Every `usage_interval` seconds: read each replica's CPU and memory from `table` and
        rewrite usage.json."""
        if self.plan.usage_interval <= 0 or time.monotonic() < self._next_usage:
            return
        self._next_usage = time.monotonic() + self.plan.usage_interval
        leaders = {r.key: (process.pid if r.phase == ReplicaPhase.RUNNING and (process := r.live_process) else None) for r in self.replicas}
        self.usage.sample(table, leaders)
        self.write_usage()

    def write_usage(self) -> None:
        usage.write(self.job_dir, self.usage.document({r.key: r.phase for r in self.replicas}, self.plan.usage_interval))

    def with_warnings(self, message: str) -> str:
        """The job's message with what is wrong right now: a stall first, then memory warnings."""
        parts = [message]
        if self.stall is not None:
            parts.insert(0, f"Training is stalled: {self.stall_words}.")
        parts.extend(f"Warning: {words}." for words in self.memory_watch.warned.values())
        return " ".join(parts)

    def running_trainers(self) -> list[int]:
        return [r.index for r in self.replicas if r.role == "trainer" and r.phase == ReplicaPhase.RUNNING]

    def check_health(self, phase: str) -> str | None:
        """Once a second while the job runs: checkpoints and the first step into the timeline,
        and the stall watch with the job's `on_stall`: "ended" or "restarted" when a stall did
        that (the message is then set), else None."""
        if phase != Phase.RUNNING or time.monotonic() < self._next_health:
            return None
        self._next_health = time.monotonic() + HEALTH_CHECK_EVERY
        trainers = self.running_trainers()
        if not self._first_step_said:  # before the checkpoints: a step comes before its checkpoint
            step = self.stall_watch.first_step(trainers, self.attempt_started_wall)
            if step is not None:
                self._first_step_said = True
                self.timeline.add("first_step", f"First progress reported: step {step}.")
        latest = paddle_nbext_job.latest(self.plan.checkpoint_dir)
        if latest is not None and latest.step != self._checkpoint_step:
            self._checkpoint_step = latest.step
            self.timeline.add("checkpoint", f"Checkpoint at step {latest.step} saved.")
        now = time.time()
        stall = self.stall_watch.check(trainers, self.attempt_started_wall, now)
        if stall is None:
            if self.stall is not None:
                quiet = health_rules.span(now - self.stall.quiet_since)
                self.timeline.add("recovered", f"Progress again after {quiet} without any (trainer {self.stall.index}).")
                self.stall = None
            return None
        if self.stall is not None and self.stall.quiet_since == stall.quiet_since:
            return None  # the same stall, said already
        self.stall = stall
        self.stall_words = words = stall.words(now)
        self.timeline.add("warning", f"Stalled: {words}.", role="trainer", index=stall.index)
        if self.plan.on_stall == "fail":
            self.finish(Phase.FAILED, f"The job stalled: {words}; on_stall is 'fail'.")
            return "ended"
        if self.plan.on_stall == "restart":
            used = max((r.restarts for r in self.replicas), default=0)
            if used >= self.plan.max_restarts:
                self.finish(Phase.FAILED, f"The job stalled: {words}; no restarts left (max_restarts {self.plan.max_restarts}).")
                return "ended"
            cause = f"restart {used + 1} of {self.plan.max_restarts}: the job stalled ({words})"
            self.timeline.add("restart", f"{cause[0].upper()}{cause[1:]}.")
            self.restart_all()
            self.stall = None
            self.message = f"Training is running ({cause}; {self.resumed_words()})."
            self.resume_note = f"{cause}; {self.resumed_words()}"
            return "restarted"
        return None


def say(message: str) -> None:
    """A line in master.log (the master's stderr), which lives in the job dir: a full disk or a
    read-only dir must not turn the master's own words into its crash."""
    with contextlib.suppress(OSError):
        print(message, file=sys.stderr, flush=True)


_CANCEL_REQUESTED = False


def _request_cancel(signum: int, frame: FrameType | None) -> None:
    global _CANCEL_REQUESTED
    _CANCEL_REQUESTED = True


def main(argv: list[str]) -> int:
    # First thing: a cancel that arrives while the job is being read must not kill the master
    # before it can record Cancelled.
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, _request_cancel)
    supervise.mark("master.main")
    if len(argv) != 1:
        print("usage: python -m paddle_nbext_server.backends.local.master <job_dir>", file=sys.stderr)
        return 2
    job_dir = Path(argv[0])
    # Orphans of the replicas come to the master (`Master.stop_adopted`), not to init.
    supervise.prctl(supervise.PR_SET_CHILD_SUBREAPER, 1)
    try:
        master = Master(job_dir)
    except (OSError, ValueError, NewerRecord) as error:
        print(f"paddle-nbext local master: cannot read the job in {job_dir}: {error}", file=sys.stderr)
        return 2
    try:
        return master.run()
    except BaseException as error:
        master.kill_everything()
        master.reap()
        if master.phase not in TERMINAL_PHASES:
            master.phase = Phase.FAILED
            master.message = f"The job master failed: {type(error).__name__}: {error}"
            master.finished = now_iso()
            master.write_status()
        raise
    finally:
        master.kill_everything()


def _master_gone(job_dir: Path) -> bool:
    """The job's `master.pid` names a process that no longer exists: a job that ended (or whose
    master died), which holds nothing, so its status need not be read.  Parsing every ended
    job's status.json made admission, and so every job's start, ~0.35 ms slower per job in the
    jobs dir (0.1 s with 300).  Unreadable pid file, or a process by that pid: not known gone."""
    pid = read_master_pid(job_dir)
    if pid is None:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:  # another user's process by that pid: it exists
        return False
    return False


def _held_by(others: list[str]) -> str:
    """`; held by your running local jobs a, b and 2 jobs of other users` (names: "" for a job of
    another user, whose name this user may not learn)."""
    own = sorted(name for name in others if name)
    foreign = len(others) - len(own)
    parts = []
    if own:
        parts.append(f"your running local job{'s' if len(own) != 1 else ''} {', '.join(own)}")
    if foreign:
        parts.append(f"{foreign} running job{'s' if foreign != 1 else ''} of other users")
    return f"; held by {' and '.join(parts)}" if parts else ""


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
