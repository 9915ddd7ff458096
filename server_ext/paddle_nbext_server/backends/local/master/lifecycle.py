"""The lifecycle of one local job, as its detached master process runs it (`Master`).

The backend starts the master (`__main__`) in its own session, so restarting Jupyter loses
nothing: the master keeps the job going and records everything in the job dir, which any later
server reads.

What it does, in order:
1. admission (`admission`): waits as Pending (reason in words) until the job's CPU, memory and
   GPUs fit beside the other admitted local jobs of the same jobs dir (checked and recorded under
   a file lock, so two masters never both take the last core); assigns GPUs and re-checks the
   planned ports;
2. starts every replica through the job's own launcher, `<job_dir>/runtime/launcher.py` (the
   runtime bundle written at submit, so an upgrade of paddle-nbext under a running job changes
   nothing in it), with the plan's interpreter, which may lack paddle-nbext (the launcher needs
   only its sibling `contract.py`); each replica in its own process group, output appended to
   `logs/<role>-<index>.log` (`replica`).  When the plan's interpreter is the master's own, the
   launcher is a fork of the master rather than a new interpreter (`forked`: the same launcher,
   ~50 ms sooner per replica);
3. watches exit codes (woken by a replica's end through a pidfd, else every `poll_interval`),
   memory (RSS of each replica's processes, `process_table`; kernel limits, `limits`), the
   timeout and cancellation (SIGTERM to the master), and applies `policy.decide()`; a restart
   starts every replica again (`Master.restart_all`: a Paddle trainer cannot rejoin running peers
   alone); meanwhile it keeps the job's training health (`training_health`) and says its
   environment's build (`environment_progress`);
4. on the end stops every replica it started (SIGTERM, SIGKILL after the grace period), writes
   the terminal `status.json` and exits.

It reads `records.Plan` (plan.json) and `records.JobRecord` (job.json) and rewrites
`records.StatusRecord` (status.json) atomically on every change.

It runs beside the server (never inside a job image), so it may use the server's packages; the
replicas it starts run the launcher, which is standard library only.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import FrameType

from paddle_nbext.model.contract import (
    TERMINAL_PHASES,
    Phase,
    ReplicaPhase,
    format_bytes,
    now_iso,
)
from paddle_nbext.model.status import JobStatus

from ....jobfiles import timeline
from ....runtime import health_rules, paddle_nbext_job, policy, supervise
from .. import pending_end
from ..processes import signal_replica
from ..record_files import read_record, write_atomic
from ..records import Admitted, JobRecord, Plan, StatusRecord
from . import admission, limits
from .environment_progress import EnvironmentProgress
from .process_table import ProcessTable, resident_bytes
from .replica import LauncherProcess, Replica, wait_for_exit
from .spawn import ReplicaSpawner
from .training_health import TrainingHealth

#: Inherited variables a job never needs: server credentials and the server's own launcher inputs.
SECRET_ENV = ("JUPYTERHUB_API_TOKEN", "JPY_API_TOKEN", "PADDLE_NBEXT_TOKEN")
MEMORY_CHECK_EVERY = 0.5
#: Longest wait between looks at the replicas being stopped (`wait_for_exit` returns earlier
#: when one ends; without pidfds, the pace of those looks).
STOP_POLL = 0.05
#: How a replica says its port was taken: Python's and gloo's EADDRINUSE, brpc's (Paddle's PS).
PORT_CLASH = re.compile(r"Address already in use|EADDRINUSE|Fail to listen")
#: Starts on new ports after port clashes before a clash counts as the failure it looks like.
MAX_REPLANS = 3
#: Seconds between a master's tries to record a job's end in a dir that refused it.
PENDING_END_RETRY = 1.0


class Master:
    """The master of one job (its job dir): admits it, runs its replicas to the job's end
    (`run`) and records every change in `status.json`."""

    def __init__(self, job_dir: Path) -> None:
        self.job_dir = job_dir.resolve()
        self.plan = read_record(Plan, self.job_dir)
        self.job = read_record(JobRecord, self.job_dir)
        self.logs = self.job_dir / "logs"
        self.logs.mkdir(exist_ok=True)
        self.replicas = [Replica(r, self.logs) for r in self.plan.replicas]
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
        self.spawner = ReplicaSpawner(self.plan)
        # Training health (issue 36): the timeline, resource use, memory warnings and stalls.
        self.timeline = timeline.TimelineWriter(self.job_dir)
        self.health = TrainingHealth(self.job_dir, self.plan, self.timeline)
        self.environment = EnvironmentProgress(self.logs, self.plan.env, self.timeline)
        self._waiting_said = ""

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
    def try_admit(self) -> bool:
        """Take the job's resources if they are free; else set the Pending message and say no."""
        capacity, request = self.plan.capacity, self.plan.request
        with admission.lock(self.job_dir.parent):
            admitted = admission.admitted_others(self.job_dir)  # one read of the siblings per admission
            used_cpu, used_memory, used_gpus, others = admission.others_usage(admitted, self.job.owner)
            free_gpus = [g for g in capacity.gpus if g not in used_gpus]
            short = admission.shortfall(capacity, request, used_cpu, used_memory, free_gpus)
            if short:
                held_by = admission.held_by(others)
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
            admission.recheck_ports(self.job_dir, self.plan, admission.others_ports(admitted))
            self.phase = Phase.RUNNING
            self.message = "Starting replicas."
            self.timeline.add("admitted", f"Admitted: {admission.admitted_words(request)}.")
            self.started = now_iso()
            self.started_at = time.monotonic()
            self.write_status()
            return True

    def replan_after_port_clash(self, replica: Replica) -> None:
        """A replica failed because its port was taken (`PORT_CLASH`: another program bound it
        between the admission's check and the replica's bind): every replica is stopped, the
        ports are planned anew under the admission lock, and the job starts again on them,
        without counting a restart (the code did nothing wrong)."""
        self.replans += 1
        taken = replica.plan.host_port[1]
        self.stop_all()
        self.begin_attempt()
        with admission.lock(self.job_dir.parent):
            others = admission.others_ports(admission.admitted_others(self.job_dir))
            admission.recheck_ports(self.job_dir, self.plan, others, also={taken})
        for each in self.replicas:
            note = f"[paddle-nbext] port {taken} of {replica.key} was taken by another program; starting again on new ports\n"
            with contextlib.suppress(OSError), open(each.log_path(), "ab") as log:
                log.write(note.encode())
            self.start(each)

    # ---- processes
    def begin_attempt(self) -> None:
        """Before every replica is started (first start, whole restart, new ports): the
        checkpoint this attempt resumes from is the latest complete one (no replica of the new
        attempt runs yet, so none can have saved), named to every replica alike."""
        self.attempt += 1
        self.resume = paddle_nbext_job.latest(self.plan.checkpoint_dir)
        self.health.begin_attempt(self.resume)

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
        current = replica.log_path()
        if replica.restarts and current.exists():
            os.replace(current, replica.log_path(previous=True))
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
            replica.process, replica.kernel_limit = self.spawner.spawn(replica, python, env, log)
        self.all_pids.append(replica.process.pid)
        self.health.memory_watch.forget(replica.key)
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
                if limits.stopped_by_kernel(limit, code, replica.log_tail()):
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
            self.health.memory_watch.forget(replica.key)
            if not replica.stopping:  # a replica the master stopped is said by the job's end
                self.timeline.add("replica_ended", self.health.ended_words(replica), role=replica.role, index=replica.index)
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
            self.health.usage.replicas[replica.key].observe_memory(used)
            if used > replica.plan.memory:
                peak = self.health.usage.replicas[replica.key].peak_memory
                replica.kill_reason = f"MemoryLimitExceeded: used {format_bytes(used)} of {replica.memory_text} (resident memory, sampled; peak {health_rules.gib(peak)})"
                self.signal_replica(replica, signal.SIGKILL)
                continue
            who = f"{replica.role} {replica.index}"
            warning, cleared = self.health.memory_watch.observe(replica.key, who, used, replica.plan.memory, now)
            if warning:
                self.timeline.add("warning", f"Memory: {warning}; it is stopped if it goes over.", role=replica.role, index=replica.index)
            if cleared:
                self.timeline.add("recovered", f"Memory: {cleared}.", role=replica.role, index=replica.index)

    def observed(self) -> list[policy.Observed]:
        return [
            policy.Observed(
                role=r.role,
                index=r.index,
                phase=r.phase,
                exit_code=r.exit_code,
                restarts=r.restarts,
                reason=r.kill_reason if r.phase == ReplicaPhase.FAILED else None,
                log_tail=r.log_tail() if r.phase == ReplicaPhase.FAILED else "",
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
            if replica.phase == ReplicaPhase.FAILED and not replica.kill_reason and PORT_CLASH.search(replica.output_of_this_start()):
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
        self.health.sample_the_end(self.replicas)
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
                self.health.sample_usage(table, self.replicas)
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
                message = self.environment.message() or message
                outcome = self.check_health(decision.phase)
                if outcome == "ended":
                    return 0
                message = self.message if outcome == "restarted" else self.health.with_warnings(message)
            self.phase, self.message = decision.phase, message
            self.write_status()
            wait_for_exit(self.running_processes(), self.plan.poll_interval)

    # ---- training health (issue 36)
    def check_health(self, phase: str) -> str | None:
        """Once a second while the job runs (`TrainingHealth.check`), and the job's `on_stall` on
        a new stall: "ended" or "restarted" when a stall did that (the message is then set), else
        None."""
        stall = self.health.check(phase, self.replicas)
        if stall is None:
            return None
        words = self.health.stall_words
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
            self.health.stall = None
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


def request_cancel(signum: int, frame: FrameType | None) -> None:
    """The master's handler of SIGTERM, SIGINT and SIGHUP (`__main__`): the loop ends the job
    as Cancelled at its next turn."""
    global _CANCEL_REQUESTED
    _CANCEL_REQUESTED = True
