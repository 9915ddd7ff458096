"""The local backend: each job's replicas run as processes on this machine (127.0.0.1).

Everything about a job lives in its own dir, `<jobs_dir>/<job_name>/`:

    job.json      spec, owner, created (`records.JobRecord`, written by the backend at submit)
    plan.json     replicas, ports, resources, interpreter: what the master runs (`records.Plan`)
    runtime/      the job runtime bundle as of submit (`runtime_files`: launcher.py, policy.py,
                  cluster_master.py, contract.py); every replica runs `runtime/launcher.py`
                  with `c.LocalBackend.python`, so a job keeps the launcher it was submitted
                  with across upgrades, and that interpreter needs only Python 3 and Paddle
    package/      the snapshot of the trainer package (entry script written there)
    logs/         <role>-<index>.log and, after a restart, <role>-<index>.previous.log
    status.json   JobStatus fields plus the master's bookkeeping (`records.StatusRecord`),
                  written atomically by the job's master on every change
    master.pid    the master's pid; master.log its own output

The job master (the `master` package beside this module) is a detached process per job: it owns the
lifecycle, so a Jupyter restart loses nothing.  Admission (a job that does not fit waits as
Pending with the reason) is done by the master too, under a file lock in `jobs_dir`, so it works
while no server runs and two jobs never take the same cores.  This class only creates job dirs,
starts masters, reads what they write and turns changes into `JobEvent`s, through the modules
beside it: `store` (the job dirs on disk), `plan` (what a job will run), `watcher` (the
in-memory listing), `logs`.  All file and process work runs in threads so the server's event
loop never blocks.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import shutil
import sys
import time
from collections.abc import AsyncGenerator
from dataclasses import asdict
from pathlib import Path
from typing import Any

from traitlets import Float, Int, List, Unicode, default

from paddle_nbext.model.contract import Phase, format_bytes, is_terminal, now_iso
from paddle_nbext.model.spec import SpecError
from paddle_nbext.model.status import JobStatus

from ...credentials import job_environment
from ...events import DELETED, UPDATED, JobEvent
from ...jobfiles import job_requirements, runtime_files
from ...jobfiles.checkpoints import link_checkpoint
from ...jobfiles.metrics import MetricsFile
from ...jobfiles.package import resolve_package, snapshot_package
from ...runtime import paddle_nbext_job
from ..base import Backend, BackendUnavailable, InvalidRequest, SubmitRequest
from . import bytecode, health_reads
from . import metrics as local_metrics
from .logs import Follow, log_path, read_log
from .paddle_env import PaddleEnvironment
from .plan import PlanSettings, build_plan, check_fits_at_all, initial_status
from .record_files import write_record
from .records import JOB_DIR_VAR, Capacity, JobRecord, Plan, ResourceRequest, StatusRecord
from .store import STARTING_MESSAGE, JobFiles, JobStore, name_taken
from .watcher import JobWatcher

#: How long cancel waits for the master to stop everything before doing it itself.
CANCEL_WAIT = 60.0
CANCELLED_MESSAGE = "Cancelled by the user; logs are kept until the job is deleted."
#: The fastest a log follower polls its file, whatever `poll_interval` says.
MIN_FOLLOW_POLL = 0.1


def _refuse_cell_without_snapshot(request: SubmitRequest) -> None:
    """The cell body is written into the snapshot: without one it has nowhere to go (checked by
    the dry run too, so a dry run that passes means the submit does)."""
    if request.entry_script is not None and not request.spec.snapshot:
        raise InvalidRequest(
            "a cell body is written into the job's package snapshot; set snapshot to true (or run an existing script with entry_point)",
            "snapshot",
        )


class LocalBackend(Backend):
    """Runs jobs as local processes, one detached master per job (configure `c.LocalBackend.*`)."""

    name = "local"

    jobs_dir = Unicode(
        "~/.paddle-jobs",
        help="Directory holding one dir per job (spec, package snapshot, logs, status); '~' is the server user's home.",
    ).tag(config=True)
    python = Unicode(help="Python interpreter the replicas run (needs paddle). Default: the server's own.").tag(config=True)
    gpu_pool = List(Int(), help="GPU ids jobs may use (CUDA_VISIBLE_DEVICES); empty: no GPUs are handed out.").tag(config=True)
    max_cpu = Float(help="CPU cores this machine offers to local jobs. Default: os.cpu_count().").tag(config=True)
    cpu_overcommit = Float(
        4.0,
        help=(
            "Requested cores one offered core may back. Local replicas share cores and only get slower when "
            "oversubscribed, so admission allows max_cpu × cpu_overcommit requested cores (1 = strict)."
        ),
    ).tag(config=True)
    max_memory = Int(help="Bytes of memory local jobs may request in total. Default: physical memory.").tag(config=True)
    poll_interval = Float(0.1, help="Seconds between checks of running jobs' status files.").tag(config=True)
    wait_timeout = Float(300.0, help="Seconds a trainer waits for every pserver port before failing.").tag(config=True)
    grace_period = Float(5.0, help="Seconds replicas get between SIGTERM and SIGKILL when a job ends.").tag(config=True)
    memory_headroom = Int(
        4 << 30,
        help=(
            "Bytes of address space a replica may map beyond its memory field before the kernel refuses more "
            "(RLIMIT_AS; an idle Paddle trainer maps ~2 GiB). Not applied to GPU replicas; 0: no RLIMIT_AS."
        ),
    ).tag(config=True)
    cgroup_root = Unicode(
        "",
        help=(
            "A cgroup v2 dir this server may create children in, with the memory controller in its "
            "cgroup.subtree_control (e.g. a systemd Delegate=yes slice): each replica then runs in its own child "
            "cgroup with memory.max = its memory field. Empty: RLIMIT_AS with memory_headroom."
        ),
    ).tag(config=True)

    usage_interval = Float(
        2.0,
        help=(
            "Seconds between samples of each running replica's CPU and memory (its whole process tree), which "
            "GET /jobs/{name}/usage, the panel and `paddle-nbext top` show; 0 turns resource use off."
        ),
    ).tag(config=True)
    memory_warn_after = Float(
        5.0,
        help="Seconds a replica's memory must stay above 90 % of its limit before the job warns about it.",
    ).tag(config=True)

    @default("python")
    def _default_python(self) -> str:
        return sys.executable

    @default("max_cpu")
    def _default_max_cpu(self) -> float:
        return float(os.cpu_count() or 1)

    @default("max_memory")
    def _default_max_memory(self) -> int:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._jobs = JobStore(Path(os.path.expanduser(self.jobs_dir)))
        self._memory = JobWatcher(self._jobs)
        self._health = health_reads.HealthReader()
        self._watcher: asyncio.Task[None] | None = None
        self._paddle = PaddleEnvironment(self.python)
        self._paddle_refresher: asyncio.Task[None] | None = None
        # Masters this server started, by pidfd: the watcher scans as soon as one ends (its job's
        # last status is written by then) instead of at its next poll (`_watch_master`).
        self._master_ended: asyncio.Event | None = None  # made in `start`, on the server's loop
        self._master_fds: set[int] = set()

    @property
    def root(self) -> Path:
        return self._jobs.root

    def _capacity(self) -> Capacity:
        return Capacity(cpu=self.max_cpu * self.cpu_overcommit, memory=int(self.max_memory), gpus=list(self.gpu_pool))

    def _settings(self) -> PlanSettings:
        return PlanSettings(
            python=self.python,
            capacity=self._capacity(),
            wait_timeout=self.wait_timeout,
            grace_period=self.grace_period,
            poll_interval=self.poll_interval,
            memory_headroom=self.memory_headroom,
            cgroup_root=self.cgroup_root,
            usage_interval=max(self.usage_interval, 0.0),
            memory_warn_after=max(self.memory_warn_after, 0.0),
        )

    def describe(self) -> dict[str, Any]:
        facts = self._paddle.cached()
        return {
            "name": self.name,
            # The replicas' Paddle (probed at start, then in the background; see paddle_env.py).
            "paddle": facts.to_dict() if facts is not None else None,
            "jobs_dir": str(self.root),
            "capacity": {
                "cpu": self.max_cpu * self.cpu_overcommit,
                "cores": self.max_cpu,
                "memory": format_bytes(self.max_memory),
                "gpus": list(self.gpu_pool),
            },
        }

    # ------------------------------------------------------------------ watching
    async def start(self) -> None:
        await asyncio.to_thread(self._paddle.facts)
        await asyncio.to_thread(bytecode.prepare)
        if self._paddle_refresher is None:
            self._paddle_refresher = asyncio.create_task(self._keep_paddle_known(), name="paddle-nbext-local-paddle")
        if self._watcher is None:
            await asyncio.to_thread(self._memory.scan, False)
            self._master_ended = asyncio.Event()
            self._watcher = asyncio.create_task(self._watch(), name="paddle-nbext-local-watch")

    async def stop(self) -> None:
        loop = asyncio.get_running_loop()
        for fd in list(self._master_fds):
            self._master_fds.discard(fd)
            loop.remove_reader(fd)
            os.close(fd)
        for task in (self._watcher, self._paddle_refresher):
            if task is not None:
                task.cancel()
                try:
                    await task
                except asyncio.CancelledError:
                    pass
        self._watcher = self._paddle_refresher = None

    async def _keep_paddle_known(self) -> None:
        """Probe the replicas' Paddle again before the last answer ages out (`PaddleEnvironment`),
        so a submit to a running server never waits for the probe."""
        while True:
            await asyncio.sleep(self._paddle.ttl / 2)
            try:
                await asyncio.to_thread(self._paddle.refresh)
            except asyncio.CancelledError:
                raise
            except Exception:  # the next submit probes by itself; this must not stop
                self.log.exception("paddle-nbext: probing the local replicas' Paddle failed; retrying")

    async def _watch(self) -> None:
        ended = self._master_ended or asyncio.Event()
        while True:
            try:
                events = await asyncio.to_thread(self._memory.scan, True)
                for event in events:
                    self.events.publish(event)
            except asyncio.CancelledError:
                raise
            except Exception:  # a bad job dir must never stop the watcher for all other jobs
                self.log.exception("paddle-nbext: watching local jobs failed; retrying")
            # asyncio.wait, not wait_for: on Python 3.11 wait_for returns normally when a cancel
            # arrives just as the event is set (a master ending while the server stops), so this
            # loop would go on and `stop` would wait for it forever.
            woken = asyncio.ensure_future(ended.wait())
            try:
                await asyncio.wait({woken}, timeout=self.poll_interval)
            finally:
                woken.cancel()
            ended.clear()

    def _watch_master(self, pid: int, name: str) -> None:
        """Wake the watcher when the master `pid` (this server's child, of job dir `name`) ends:
        a job's end is published when it is recorded, not up to `poll_interval` later, and the
        master is reaped then (an ended job is not polled again).  Where there are no pidfds
        (Linux before 5.3, other systems) the poll alone finds it.  On the event loop."""
        try:
            fd = os.pidfd_open(pid)
        except (AttributeError, OSError):
            return
        loop = asyncio.get_running_loop()

        def ended() -> None:
            if fd in self._master_fds:
                self._master_fds.discard(fd)
                loop.remove_reader(fd)
                os.close(fd)
            self._jobs.reap_master(name)
            if self._master_ended is not None:
                self._master_ended.set()

        self._master_fds.add(fd)
        loop.add_reader(fd, ended)

    def _watching(self) -> bool:
        return self._watcher is not None and not self._watcher.done()

    # ------------------------------------------------------------------ submit
    def _refuse_what_cannot_run_here(self, request: SubmitRequest) -> None:
        """A mode this server's Paddle cannot run is refused now, naming `mode`, not at run time."""
        refused = self._paddle.problem(request.spec.mode)
        if refused is not None:
            raise InvalidRequest(refused[1], refused[0])

    def _dry_run(self, request: SubmitRequest) -> dict[str, Any]:
        spec = request.spec
        self._refuse_what_cannot_run_here(request)
        package = resolve_package(spec, request.home, self.root)
        _refuse_cell_without_snapshot(request)
        if self._jobs.has_job(spec.job_name, request.owner):
            raise name_taken(spec.job_name)
        job_dir = self._jobs.job_dir(spec.job_name, request.owner)  # where it would go (another user's name: elsewhere)
        resources = check_fits_at_all(spec, self._capacity())
        workdir = job_dir / "package" if spec.snapshot else package
        requirements = job_requirements.find_requirements(spec, package)
        plan = build_plan(spec, job_dir, workdir, job_dir / "runtime" / "launcher.py", resources, self._settings())
        if requirements is not None:
            index_file = str(job_dir / job_requirements.INDEX_FILE) if not self._site().is_default() else None
            plan.env.update(requirements.launcher_env(str(self._envs_dir()), index_file))
        processes = [
            {
                "role": replica.role,
                "index": replica.index,
                "endpoint": replica.endpoint,
                "command": [plan.python, plan.launcher],
                "cwd": plan.workdir,
                "env": plan.launcher_env(replica, None),
                "log": str(job_dir / "logs" / f"{replica.key}.log"),
            }
            for replica in plan.replicas
        ]
        status = initial_status(request, now_iso(), "Dry run: nothing was created.").status
        return {
            "dry_run": True,
            "job": status.to_dict(),
            "plan": {
                "job_dir": str(job_dir),
                "package": str(package),
                "snapshot": spec.snapshot,
                "processes": processes,
                "request": asdict(resources),
                "capacity": asdict(plan.capacity),
                "environment": job_requirements.preview(requirements, self._envs_dir(), self._site()),
            },
        }

    def _site(self) -> job_requirements.Site:
        """The site's settings for jobs' requirements (`c.PaddleNbext.pip_*`)."""
        return job_requirements.Site.from_config(self.parent)

    def _envs_dir(self) -> Path:
        """Where jobs' environments live: `<jobs_dir>/envs`, beside the job dirs."""
        return self.root / job_requirements.ENVS_DIR

    def environments_dir(self, home: Path) -> Path:
        """Locally jobs' environments live beside the job dirs, wherever `jobs_dir` is."""
        return self._envs_dir()

    def _create(self, request: SubmitRequest) -> tuple[JobStatus, int, str]:
        """Create the job dir and start its master; all or nothing.  Returns the status, the
        master's pid and the job dir's name."""
        spec = request.spec
        self._refuse_what_cannot_run_here(request)
        package = resolve_package(spec, request.home, self.root)
        _refuse_cell_without_snapshot(request)
        resources = check_fits_at_all(spec, self._capacity())
        requirements = job_requirements.find_requirements(spec, package)
        if requirements is not None:  # the file found, in the record (the panel offers its log)
            request = dataclasses.replace(request, spec=dataclasses.replace(spec, requirements=requirements.file))
        try:
            job_dir = self._jobs.claim(spec.job_name, request.owner)
        except OSError as error:
            raise self._unwritable(error) from None
        try:
            files = self._write_job(request, job_dir, package, resources, requirements)
            env = job_environment(os.environ, self._secret_env())
            # The master carries the job's marks like its replicas (`processes`): the launchers
            # it forks (`master.forked`) keep the environment it started with.
            env.update({JOB_DIR_VAR: str(job_dir), "PADDLE_NBEXT_JOB": spec.job_name})
            master = self._jobs.launch_master(job_dir, env)
            self._memory.remember_submitted(job_dir.name, files)  # submit publishes the event
            return files.record.status, master.pid, job_dir.name
        except OSError as error:
            self._jobs.forget_master(job_dir.name)
            shutil.rmtree(job_dir, ignore_errors=True)
            raise self._unwritable(error) from None
        except BaseException:
            self._jobs.forget_master(job_dir.name)
            shutil.rmtree(job_dir, ignore_errors=True)
            raise

    def _unwritable(self, error: OSError) -> BackendUnavailable:
        """The jobs dir cannot take a job (permissions, a full disk): the server's problem, not
        the request's, said with the path and the cause."""
        where = error.filename or self.root
        return BackendUnavailable(
            f"the local jobs dir cannot be written ({where}: {error.strerror or error}); "
            "ask the administrator to fix c.LocalBackend.jobs_dir"
        )

    def _secret_env(self) -> list[str]:
        """The site's extra credential names (`c.PaddleNbext.secret_env`)."""
        return list(getattr(self.parent, "secret_env", None) or [])

    def _write_job(
        self,
        request: SubmitRequest,
        job_dir: Path,
        package: Path,
        resources: ResourceRequest,
        requirements: job_requirements.Requirements | None,
    ) -> JobFiles:
        """Everything the master reads, job.json last: a dir without it is not a job yet."""
        spec = request.spec
        workdir = package
        if spec.snapshot:
            workdir = snapshot_package(package, job_dir / "package", request.entry_script, home=request.home, jobs_dir=self.root).target
        (job_dir / "logs").mkdir()
        if request.resume is not None:  # before the master starts: its first start resumes from it
            source_job, path, step = request.resume
            source = paddle_nbext_job.Checkpoint(step, str(path), 0.0)
            link_checkpoint(source, job_dir / paddle_nbext_job.CHECKPOINTS_SUBDIR, source_job)
        launcher = runtime_files.write_bundle(job_dir / "runtime")
        bytecode.write_bytecode(job_dir / "runtime")  # compiled once per server, not once per job
        created = now_iso()
        plan: Plan = build_plan(spec, job_dir, workdir, launcher, resources, self._settings())
        if requirements is not None:  # the replicas' launchers build or reuse its environment first
            index_file = job_requirements.write_index_file(job_dir, self._site())
            plan.env.update(requirements.launcher_env(str(self._envs_dir()), index_file))
        write_record(job_dir, plan)
        record: StatusRecord = initial_status(request, created, STARTING_MESSAGE)
        write_record(job_dir, record)
        job = JobRecord(
            owner=request.owner,
            spec=spec.to_dict(),
            created=created,
            created_epoch=time.time(),
            package=str(package),
            resumed_from=request.resumed_from,
        )
        write_record(job_dir, job)
        return JobFiles(job, record)

    async def submit(self, request: SubmitRequest, *, dry_run: bool = False) -> dict[str, Any]:
        try:
            if dry_run:
                return await asyncio.to_thread(self._dry_run, request)
            status, master, dir_name = await asyncio.to_thread(self._create, request)
        except SpecError as error:
            raise InvalidRequest(error.message, error.field) from None
        if self._watching():
            self._watch_master(master, dir_name)
        body = status.to_dict()
        self.events.publish(JobEvent(UPDATED, request.owner, request.spec.job_name, body))
        return body

    # ------------------------------------------------------------------ reading jobs
    def _list(self, owner: str) -> list[JobStatus]:
        """Without a running watcher (a backend used directly, not started): bring the memory up
        to date first; that reads only the jobs whose files changed."""
        self._memory.scan(False, check_alive=False)
        return self._memory.from_memory(owner)

    async def list_jobs(self, owner: str) -> list[JobStatus]:
        if self._watching():
            return self._memory.from_memory(owner)  # the watcher keeps it at most one poll behind the disk
        return await asyncio.to_thread(self._list, owner)

    async def get_job(self, name: str, owner: str) -> JobStatus:
        return await asyncio.to_thread(self._memory.get, name, owner)

    # ------------------------------------------------------------------ logs
    def _read_log(self, name: str, owner: str, role: str, index: int, tail: int | None, previous: bool) -> str:
        _, path = log_path(self._jobs, name, owner, role, index, previous)
        return read_log(path, tail)

    async def read_logs(self, name: str, owner: str, role: str, index: int, *, tail: int | None = None, previous: bool = False) -> str:
        return await asyncio.to_thread(self._read_log, name, owner, role, index, tail, previous)

    async def follow_logs(self, name: str, owner: str, role: str, index: int, *, tail: int | None = None) -> AsyncGenerator[str, None]:
        job_dir, path = await asyncio.to_thread(log_path, self._jobs, name, owner, role, index, False)
        follow = Follow(job_dir, path, role, index)
        if tail is not None:
            text = await asyncio.to_thread(follow.start_at_tail, tail)
            if text:
                yield text
        while True:
            text, ended = await asyncio.to_thread(follow.step)
            if text:
                yield text
            if ended:
                return
            await asyncio.sleep(max(self.poll_interval, MIN_FOLLOW_POLL))

    async def metrics_files(self, name: str, owner: str) -> list[MetricsFile]:
        return await asyncio.to_thread(local_metrics.metrics_files, self._jobs, name, owner)

    # ------------------------------------------------------------------ training health
    def _read_usage(self, name: str, owner: str) -> dict[str, Any]:
        status = self._memory.get(name, owner)  # the owner's job, else JobNotFound; from memory
        return self._health.usage(self._jobs.job_dir(name, owner), status)

    def _read_timeline(self, name: str, owner: str, since: int) -> dict[str, Any]:
        self._memory.get(name, owner)
        return self._health.timeline(self._jobs.job_dir(name, owner), name, since)

    async def usage(self, name: str, owner: str) -> dict[str, Any]:
        return await asyncio.to_thread(self._read_usage, name, owner)

    async def timeline(self, name: str, owner: str, since: int = 0) -> dict[str, Any]:
        return await asyncio.to_thread(self._read_timeline, name, owner, since)

    # ------------------------------------------------------------------ cancel and delete
    def _cancel_step(self, name: str, owner: str, deadline: float) -> bool:
        """True once the job has ended: by its master, or recorded here when the master is gone
        or did not stop before `deadline`."""
        job_dir, files = self._jobs.owned(name, owner)
        if files.record.terminal:
            return True
        if not self._jobs.master_alive(job_dir, files.job) or time.monotonic() > deadline:
            self._jobs.kill_master(job_dir)
            self._jobs.mark_lost(job_dir, Phase.CANCELLED, CANCELLED_MESSAGE)
            return True
        return False

    async def cancel(self, name: str, owner: str) -> JobStatus:
        job_dir, files = await asyncio.to_thread(self._jobs.owned, name, owner)
        files.require_manageable()
        if not is_terminal(files.record.status.phase):
            await asyncio.to_thread(self._jobs.signal_master, job_dir, files.job)
            deadline = time.monotonic() + CANCEL_WAIT + self.grace_period
            while not await asyncio.to_thread(self._cancel_step, name, owner, deadline):
                await asyncio.sleep(0.1)
        # The final status as written, now also what `list_jobs` answers.
        return await asyncio.to_thread(self._memory.read_through, name, owner)

    def _remove(self, name: str, owner: str) -> None:
        job_dir = self._jobs.remove(name, owner)
        self._memory.forget(job_dir.name)
        self._health.forget(job_dir)
        self.metrics.forget(name)

    async def delete(self, name: str, owner: str) -> None:
        await self.cancel(name, owner)
        await asyncio.to_thread(self._remove, name, owner)
        self.events.publish(JobEvent(DELETED, owner, name))
