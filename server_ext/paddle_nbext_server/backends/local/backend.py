"""The local backend: each job's replicas run as processes on this machine (127.0.0.1).

Everything about a job lives in its own dir, `<jobs_dir>/<job_name>/`:

    job.json      spec, owner, created (written by the backend at submit)
    plan.json     replicas, ports, resources, interpreter: what the master runs
    package/      the snapshot of the trainer package (entry script written there)
    logs/         <role>-<index>.log and, after a restart, <role>-<index>.previous.log
    status.json   JobStatus fields written atomically by the job's master on every change
    master.pid    the master's pid; master.log its own output

The job master (`master.py` beside this module) is a detached process per job: it owns the lifecycle,
so a Jupyter restart loses nothing.  Admission (a job that does not fit waits as Pending with the
reason) is done by the master too, under a file lock in `jobs_dir`, so it works while no server
runs and two jobs never take the same cores.  This class only creates job dirs, starts masters,
reads what they write and turns changes into `JobEvent`s; all file and process work runs in
threads so the server's event loop never blocks.

Listing answers from memory: the watcher keeps, per job dir, the last status it read together with
the file signatures (mtime, size, inode) it read it at, so `list_jobs` costs no file reads in steady
state and a change a master writes is listed by the next poll.  `get_job` compares two `stat`s
against that entry and reads through only when the files changed, so it is never stale.
"""
from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from traitlets import Float, Int, List, Unicode, default

from paddle_nbext.quantity import Quantity, format_bytes, format_cpu
from paddle_nbext.spec import JobSpec, SpecError

from ...events import DELETED, UPDATED, JobEvent
from ...package import make_snapshot, resolve_package
from . import master as local_master
from ...status import CANCELLED, FAILED, PENDING, RUNNING, STOPPED, SUCCEEDED, JobStatus, ReplicaStatus, now_iso
from ..base import Backend, InvalidRequest, InvalidState, JobExists, JobNotFound, SubmitRequest

#: A job dir with job.json but no master.pid this long after creation lost its server mid-submit.
STARTING_GRACE = 60.0
#: Seconds between checks that an ended job's job.json is still the same one (a job dir
#: replaced under the same name by another server).  Ended jobs are most of a long-lived jobs
#: dir, and stat-ing each of them on every poll kept a core busy for nothing.
ENDED_JOB_RECHECK = 2.0
#: How long cancel waits for the master to stop everything before doing it itself.
CANCEL_WAIT = 60.0


Signature = tuple[int, int, int]


@dataclass
class _Seen:
    """What was last read of one job dir, and the signatures of the files it was read from.

    `status` is shared with callers of `list_jobs`/`get_job` and never changed in place: a change
    on disk makes a new entry, so "same object" means "same status" (the list handler relies on
    that to reuse each job's JSON).  `reported` is the status.json signature the watcher last
    published an event for, kept apart so a read-through by `get_job` never swallows an event."""

    owner: str
    job: dict[str, Any]  # job.json
    signature: Signature | None  # of status.json (None: not written yet, the Pending fallback)
    job_signature: Signature | None  # of job.json (a new one means the dir was re-created)
    status: JobStatus
    reported: Signature | None = None
    checked_alive: float = 0.0

    @property
    def terminal(self) -> bool:
        return self.status.terminal


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
        self._seen: dict[str, _Seen] = {}
        # `_seen` is updated from worker threads (watcher, submit, cancel) and read on the loop.
        self._seen_lock = threading.Lock()
        self._next_ended_check = 0.0  # monotonic time of the next check of ended jobs' job.json
        self._listed_signature: Signature | None = None  # the jobs dir as last listed
        self._listed_names: frozenset[str] = frozenset()
        self._children: dict[str, subprocess.Popen[bytes]] = {}
        self._watcher: asyncio.Task[None] | None = None

    # ------------------------------------------------------------------ paths and reading
    @property
    def root(self) -> Path:
        return Path(os.path.expanduser(self.jobs_dir))

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "jobs_dir": str(self.root),
            "capacity": {
                "cpu": self.max_cpu * self.cpu_overcommit,
                "cores": self.max_cpu,
                "memory": format_bytes(self.max_memory),
                "gpus": list(self.gpu_pool),
            },
        }

    @staticmethod
    def _read_json(path: Path) -> Any:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)

    def _job_dir(self, name: str) -> Path:
        if not name or "/" in name or name.startswith("."):
            raise JobNotFound(f"There is no job named '{name}'.")
        return self.root / name

    def _load(self, job_dir: Path) -> tuple[dict[str, Any], dict[str, Any]]:
        """(job.json, raw status) of a job dir; status falls back to Pending while none exists."""
        job = self._read_json(job_dir / "job.json")
        try:
            raw = self._read_json(job_dir / "status.json")
        except (OSError, ValueError):
            raw = {
                "name": job_dir.name,
                "owner": job.get("owner", ""),
                "backend": self.name,
                "phase": PENDING,
                "message": "Starting the job master.",
                "spec": job.get("spec", {}),
                "created": job.get("created"),
            }
        return job, raw

    def _owned(self, name: str, owner: str) -> tuple[Path, dict[str, Any], dict[str, Any]]:
        job_dir = self._job_dir(name)
        try:
            job, raw = self._load(job_dir)
        except (OSError, ValueError):
            raise JobNotFound(f"There is no job named '{name}'.") from None
        if job.get("owner") != owner:
            raise JobNotFound(f"There is no job named '{name}'.")
        return job_dir, job, raw

    @staticmethod
    def _status(raw: dict[str, Any]) -> JobStatus:
        return JobStatus.from_dict(raw)

    # ------------------------------------------------------------------ master liveness
    def _master_pid(self, job_dir: Path) -> int | None:
        try:
            return int((job_dir / "master.pid").read_text().strip())
        except (OSError, ValueError):
            return None

    def _master_alive(self, job_dir: Path, job: dict[str, Any]) -> bool:
        """The job's master runs (a pid reused by another program does not count)."""
        child = self._children.get(job_dir.name)
        if child is not None and child.poll() is not None:
            self._children.pop(job_dir.name, None)
        pid = self._master_pid(job_dir)
        if pid is None:
            created = job.get("created_epoch", 0)
            return time.time() - created < STARTING_GRACE
        if not local_master.pid_alive(pid):
            return False
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as handle:
                return str(job_dir).encode() in handle.read()
        except OSError:
            return False

    def _mark_lost(self, job_dir: Path, phase: str, message: str) -> dict[str, Any]:
        """The master is gone without a terminal status: stop what it left and record the end."""
        job, raw = self._load(job_dir)
        if raw.get("phase") in (SUCCEEDED, FAILED, CANCELLED):
            return raw
        for pid in (raw.get("processes") or {}).values():
            try:
                os.killpg(int(pid), signal.SIGKILL)
            except OSError:
                pass
        stamp = now_iso()
        for replica in raw.get("replicas", []):
            if replica.get("phase") in (PENDING, RUNNING):
                replica["phase"] = STOPPED
                replica["finished"] = stamp
        raw.update(phase=phase, message=message, finished=stamp, processes={}, admitted=None)
        local_master.write_json_atomic(job_dir / "status.json", raw)
        return raw

    # ------------------------------------------------------------------ watching
    async def start(self) -> None:
        if self._watcher is None:
            await asyncio.to_thread(self._scan, False)
            self._watcher = asyncio.create_task(self._watch(), name="paddle-nbext-local-watch")

    async def stop(self) -> None:
        if self._watcher is not None:
            self._watcher.cancel()
            try:
                await self._watcher
            except asyncio.CancelledError:
                pass
            self._watcher = None

    async def _watch(self) -> None:
        while True:
            try:
                events = await asyncio.to_thread(self._scan, True)
                for event in events:
                    self.events.publish(event)
            except asyncio.CancelledError:
                raise
            except Exception:  # a bad job dir must never stop the watcher for all other jobs
                self.log.exception("paddle-nbext: watching local jobs failed; retrying")
            await asyncio.sleep(self.poll_interval)

    @staticmethod
    def _signature(path: Path | str) -> Signature | None:
        try:
            stat = os.stat(path)
        except OSError:
            return None
        return (stat.st_mtime_ns, stat.st_size, stat.st_ino)

    def _entry(self, job: dict[str, Any], raw: dict[str, Any], signature: Signature | None,
               job_signature: Signature | None, previous: _Seen | None) -> _Seen:
        """A new cache entry; the watcher's bookkeeping carries over from the one it replaces."""
        return _Seen(
            job.get("owner", ""), job, signature, job_signature, self._status(raw),
            reported=previous.reported if previous is not None else None,
            checked_alive=previous.checked_alive if previous is not None else 0.0,
        )  # fmt: skip

    def _store(self, name: str, entry: _Seen) -> None:
        with self._seen_lock:
            self._seen[name] = entry

    def _forget(self, name: str) -> _Seen | None:
        with self._seen_lock:
            return self._seen.pop(name, None)

    def _job_names(self, force: bool) -> set[str]:
        """The job dirs, listed again only when the jobs dir itself changed (a job dir was added
        or removed), which its own signature tells at the cost of one `stat`, or when `force`d
        (file systems with coarse timestamps can hide a change made within the same tick)."""
        signature = self._signature(self.root)
        if not force and signature is not None and signature == self._listed_signature:
            return set(self._listed_names)
        try:
            names = {entry.name for entry in os.scandir(self.root) if entry.is_dir() and not entry.name.startswith(".")}
        except OSError:
            names = set()
        self._listed_signature, self._listed_names = signature, frozenset(names)
        return names

    def _scan(self, report: bool, check_alive: bool = True) -> list[JobEvent]:
        """One pass over the jobs dir: brings `_seen` up to date and returns changed, new and
        deleted jobs as events; with `check_alive`, masters that died without a terminal status
        are recorded as Failed.  Unchanged running jobs cost two `stat`s and no reads; ended ones
        cost nothing but one `stat` every `ENDED_JOB_RECHECK` seconds."""
        events: list[JobEvent] = []
        now = time.monotonic()
        check_ended = now >= self._next_ended_check
        if check_ended:
            self._next_ended_check = now + ENDED_JOB_RECHECK
        names = self._job_names(force=check_ended)
        with self._seen_lock:
            known = dict(self._seen)
        for name, seen in known.items():
            if name not in names:
                self._forget(name)
                events.append(JobEvent(DELETED, seen.owner, name))
        root = str(self.root)
        for name in names:
            seen = known.get(name)
            if not check_ended and seen is not None and seen.terminal and seen.reported == seen.signature:
                continue  # an ended job no longer changes; its removal shows in the listing above
            job_signature = self._signature(f"{root}/{name}/job.json")  # str paths: this runs per job per poll
            if seen is not None and seen.job_signature != job_signature:
                # job.json vanished (deleted by another server) or the dir holds a new job now
                self._forget(name)
                events.append(JobEvent(DELETED, seen.owner, name))
                seen = None
            if job_signature is None or (seen is not None and seen.terminal and seen.reported == seen.signature):
                continue
            signature = self._signature(f"{root}/{name}/status.json")
            job_dir = self.root / name
            entry = seen
            if entry is None or signature != entry.signature:
                try:
                    job, raw = self._load(job_dir)
                except (OSError, ValueError):
                    continue  # not a job dir (yet)
                entry = self._entry(job, raw, signature, job_signature, seen)
                self._store(name, entry)
            if check_alive and not entry.terminal and now - entry.checked_alive >= 1.0:
                entry.checked_alive = now
                if not self._master_alive(job_dir, entry.job):
                    raw = self._mark_lost(
                        job_dir, FAILED, "The job master stopped without recording an end (was it killed?); its replicas were stopped."
                    )
                    entry = self._entry(entry.job, raw, self._signature(job_dir / "status.json"), job_signature, entry)
                    self._store(name, entry)
            if entry.reported != entry.signature or entry.reported is None and seen is None:
                entry.reported = entry.signature
                if report:
                    events.append(JobEvent(UPDATED, entry.owner, name, entry.status.to_dict()))
        return events

    # ------------------------------------------------------------------ submit
    def _capacity(self) -> dict[str, Any]:
        return {"cpu": self.max_cpu * self.cpu_overcommit, "memory": int(self.max_memory), "gpus": list(self.gpu_pool)}

    def _check_fits_at_all(self, spec: JobSpec) -> dict[str, Any]:
        """A job bigger than the whole machine would wait forever: refuse it, naming the field."""
        totals = spec.totals()
        request = {"cpu": float(totals["cpu"]), "memory": int(totals["memory"]), "gpus": int(totals["gpu"])}
        capacity = self._capacity()
        if request["gpus"] and not capacity["gpus"]:
            raise InvalidRequest(
                "this server's local backend hands out no GPUs (c.LocalBackend.gpu_pool is empty); set trainer_gpu to 0",
                "trainer_gpu",
            )
        if request["gpus"] > len(capacity["gpus"]):
            raise InvalidRequest(
                f"{spec.trainers} trainers × {spec.trainer_gpu} GPU = {request['gpus']} GPUs, but the local GPU pool has "
                f"{len(capacity['gpus'])}; lower trainer_gpu or trainers",
                "trainer_gpu",
            )
        if request["cpu"] > capacity["cpu"] + 1e-9:
            raise InvalidRequest(
                f"the job requests {format_cpu(totals['cpu'])} CPU in total but local jobs may use at most "
                f"{capacity['cpu']:g} (c.LocalBackend.max_cpu × cpu_overcommit); lower trainer_cpu/pserver_cpu or the replica counts",
                "trainer_cpu",
            )
        if request["memory"] > capacity["memory"]:
            raise InvalidRequest(
                f"the job requests {format_bytes(totals['memory'])} of memory in total but local jobs may use at most "
                f"{format_bytes(capacity['memory'])}; lower trainer_mem/pserver_mem or the replica counts",
                "trainer_mem",
            )
        return request

    def _plan(self, request: SubmitRequest, job_dir: Path, workdir: Path, resources: dict[str, Any]) -> dict[str, Any]:
        spec = request.spec
        used: set[int] = set()
        replicas = []
        for role in spec.roles():
            cpu = spec.pserver_cpu if role == "pserver" else spec.trainer_cpu
            mem = spec.pserver_mem if role == "pserver" else spec.trainer_mem
            for index in range(spec.replicas(role)):
                port = local_master.free_port()
                while port in used:
                    port = local_master.free_port()
                used.add(port)
                replicas.append(
                    {
                        "role": role,
                        "index": index,
                        "endpoint": f"127.0.0.1:{port}",
                        "cpu": float(Quantity.parse(cpu).value),
                        "memory": int(Quantity.parse(mem).value),
                        "memory_text": mem,
                        "gpus": spec.trainer_gpu if role == "trainer" else 0,
                    }
                )
        return {
            "job": spec.job_name,
            "mode": spec.mode,
            "entry_point": spec.entry_point,
            "workdir": str(workdir),
            "job_dir": str(job_dir),
            "env": dict(spec.env),
            "python": self.python,
            "launcher": str(local_master.LAUNCHER),
            "max_restarts": spec.max_restarts,
            "timeout": spec.timeout,
            "wait_timeout": self.wait_timeout,
            "grace_period": self.grace_period,
            "poll_interval": max(self.poll_interval, 0.05),
            "capacity": self._capacity(),
            "request": resources,
            "replicas": replicas,
        }

    def _initial_status(self, request: SubmitRequest, created: str, message: str) -> dict[str, Any]:
        spec = request.spec
        replicas = [
            ReplicaStatus(role=role, index=index).__dict__
            for role in spec.roles()
            for index in range(spec.replicas(role))
        ]
        return {
            "name": spec.job_name,
            "owner": request.owner,
            "backend": self.name,
            "phase": PENDING,
            "message": message,
            "spec": spec.to_dict(),
            "created": created,
            "started": None,
            "finished": None,
            "replicas": replicas,
        }

    def _dry_run(self, request: SubmitRequest) -> dict[str, Any]:
        spec = request.spec
        package = resolve_package(spec, request.home)
        job_dir = self.root / spec.job_name
        if job_dir.exists():
            raise JobExists(f"A job named '{spec.job_name}' already exists; pick another job_name or delete it.", "job_name")
        resources = self._check_fits_at_all(spec)
        workdir = job_dir / "package" if spec.snapshot else package
        plan = self._plan(request, job_dir, workdir, resources)
        processes = [
            {
                "role": r["role"],
                "index": r["index"],
                "endpoint": r["endpoint"],
                "command": [plan["python"], plan["launcher"]],
                "cwd": plan["workdir"],
                "env": local_master.replica_env(plan, r, None),
                "log": str(job_dir / "logs" / f"{r['role']}-{r['index']}.log"),
            }
            for r in plan["replicas"]
        ]
        status = self._initial_status(request, now_iso(), "Dry run: nothing was created.")
        return {
            "dry_run": True,
            "job": self._status(status).to_dict(),
            "plan": {
                "job_dir": str(job_dir),
                "package": str(package),
                "snapshot": spec.snapshot,
                "processes": processes,
                "request": resources,
                "capacity": plan["capacity"],
            },
        }

    def _create(self, request: SubmitRequest) -> dict[str, Any]:
        """Create the job dir and start its master; all or nothing."""
        spec = request.spec
        package = resolve_package(spec, request.home)
        if request.entry_script is not None and not spec.snapshot:
            raise InvalidRequest(
                "a cell body is written into the job's package snapshot; set snapshot to true (or run an existing script with entry_point)",
                "snapshot",
            )
        resources = self._check_fits_at_all(spec)
        self.root.mkdir(parents=True, exist_ok=True)
        job_dir = self.root / spec.job_name
        try:
            job_dir.mkdir()
        except FileExistsError:
            raise JobExists(f"A job named '{spec.job_name}' already exists; pick another job_name or delete it.", "job_name") from None
        master: subprocess.Popen[bytes] | None = None
        try:
            workdir = make_snapshot(package, job_dir / "package", request.entry_script) if spec.snapshot else package
            (job_dir / "logs").mkdir()
            created = now_iso()
            plan = self._plan(request, job_dir, workdir, resources)
            local_master.write_json_atomic(job_dir / "plan.json", plan)
            status = self._initial_status(request, created, "Starting the job master.")
            local_master.write_json_atomic(job_dir / "status.json", status)
            job = {
                "spec": spec.to_dict(),
                "owner": request.owner,
                "created": created,
                "created_epoch": time.time(),
                "package": str(package),
            }
            local_master.write_json_atomic(job_dir / "job.json", job)
            with open(job_dir / "master.log", "ab") as log:
                master = subprocess.Popen(
                    [sys.executable, "-m", "paddle_nbext_server.backends.local.master", str(job_dir)],
                    cwd=job_dir,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,  # survives the server's restart and its terminal's Ctrl-C
                )
            (job_dir / "master.pid").write_text(str(master.pid))
            self._children[spec.job_name] = master
            entry = self._entry(job, status, self._signature(job_dir / "status.json"), self._signature(job_dir / "job.json"), None)
            entry.reported, entry.checked_alive = entry.signature, time.monotonic()  # submit publishes the event
            self._store(spec.job_name, entry)
            return status
        except BaseException:
            if master is not None:
                master.kill()
                master.wait()
            shutil.rmtree(job_dir, ignore_errors=True)
            raise

    async def submit(self, request: SubmitRequest, *, dry_run: bool = False) -> dict[str, Any]:
        try:
            if dry_run:
                return await asyncio.to_thread(self._dry_run, request)
            raw = await asyncio.to_thread(self._create, request)
        except SpecError as error:
            raise InvalidRequest(error.message, error.field) from None
        status = self._status(raw).to_dict()
        self.events.publish(JobEvent(UPDATED, request.owner, request.spec.job_name, status))
        return status

    # ------------------------------------------------------------------ reading jobs
    def _watching(self) -> bool:
        return self._watcher is not None and not self._watcher.done()

    def _from_memory(self, owner: str) -> list[JobStatus]:
        with self._seen_lock:
            entries = list(self._seen.values())
        result = [entry.status for entry in entries if entry.owner == owner]
        result.sort(key=lambda s: (s.created or "", s.name), reverse=True)
        return result

    def _list(self, owner: str) -> list[JobStatus]:
        """Without a running watcher (a backend used directly, not started): bring `_seen` up to
        date first; that reads only the jobs whose files changed."""
        self._scan(False, check_alive=False)
        return self._from_memory(owner)

    async def list_jobs(self, owner: str) -> list[JobStatus]:
        if self._watching():
            return self._from_memory(owner)  # the watcher keeps it at most one poll behind the disk
        return await asyncio.to_thread(self._list, owner)

    def _read_through(self, name: str, owner: str) -> JobStatus:
        """Read the job from disk into `_seen` (signatures taken before reading, so a write in
        between shows as a change next time)."""
        job_dir = self._job_dir(name)
        signature = self._signature(job_dir / "status.json")
        job_signature = self._signature(job_dir / "job.json")
        with self._seen_lock:
            old = self._seen.get(name)
        if old is not None and job_signature is not None and (signature, job_signature) == (old.signature, old.job_signature):
            entry = old
        else:
            try:
                job, raw = self._load(job_dir)
            except (OSError, ValueError):
                raise JobNotFound(f"There is no job named '{name}'.") from None
            entry = self._entry(job, raw, signature, job_signature, old if old is not None and old.job_signature == job_signature else None)
            self._store(name, entry)
        if entry.owner != owner:
            raise JobNotFound(f"There is no job named '{name}'.")
        return entry.status

    def _get(self, name: str, owner: str) -> JobStatus:
        job_dir = self._job_dir(name)
        with self._seen_lock:
            seen = self._seen.get(name)
        if (
            seen is not None
            and seen.job_signature is not None
            and self._signature(job_dir / "job.json") == seen.job_signature
            and self._signature(job_dir / "status.json") == seen.signature
        ):
            if seen.owner != owner:
                raise JobNotFound(f"There is no job named '{name}'.")
            return seen.status
        return self._read_through(name, owner)

    async def get_job(self, name: str, owner: str) -> JobStatus:
        return await asyncio.to_thread(self._get, name, owner)

    # ------------------------------------------------------------------ logs
    def _log_path(self, name: str, owner: str, role: str, index: int, previous: bool) -> tuple[Path, Path]:
        job_dir, job, raw = self._owned(name, owner)
        known = {(r["role"], r["index"]) for r in raw.get("replicas", [])}
        if (role, index) not in known:
            have = ", ".join(f"{r} {i}" for r, i in sorted(known)) or "none"
            raise InvalidState(f"Job '{name}' has no replica {role} {index}; its replicas are: {have}.", "role")
        return job_dir, job_dir / "logs" / f"{role}-{index}{'.previous' if previous else ''}.log"

    @staticmethod
    def _tail(text: str, tail: int | None) -> str:
        if tail is None:
            return text
        if tail <= 0:
            return ""
        lines = text.splitlines(keepends=True)
        return "".join(lines[-tail:])

    def _read_log(self, name: str, owner: str, role: str, index: int, tail: int | None, previous: bool) -> str:
        _, path = self._log_path(name, owner, role, index, previous)
        try:
            text = path.read_bytes().decode("utf-8", errors="replace")
        except FileNotFoundError:
            return ""
        return self._tail(text, tail)

    async def read_logs(
        self, name: str, owner: str, role: str, index: int, *, tail: int | None = None, previous: bool = False
    ) -> str:
        return await asyncio.to_thread(self._read_log, name, owner, role, index, tail, previous)

    def _replica_ended(self, job_dir: Path, role: str, index: int) -> bool:
        """No more output will come: the job ended, or this replica ended and will not restart."""
        try:
            raw = self._read_json(job_dir / "status.json")
        except (OSError, ValueError):
            return not job_dir.exists()
        if raw.get("phase") in (SUCCEEDED, FAILED, CANCELLED):
            return True
        max_restarts = int(raw.get("spec", {}).get("max_restarts", 0) or 0)
        for replica in raw.get("replicas", []):
            if replica["role"] == role and replica["index"] == index:
                phase = replica.get("phase")
                return phase in (SUCCEEDED, STOPPED) or (phase == FAILED and replica.get("restarts", 0) >= max_restarts)
        return False

    def _follow_step(self, job_dir: Path, path: Path, state: dict[str, Any]) -> tuple[str, bool]:
        ended = self._replica_ended(job_dir, *state["replica"])
        try:
            with open(path, "rb") as handle:
                inode = os.fstat(handle.fileno()).st_ino
                if inode != state.get("inode"):  # a restart rotated the log: start the new one
                    state["inode"], state["position"] = inode, 0
                handle.seek(state["position"])
                data = handle.read()
                state["position"] += len(data)
        except FileNotFoundError:
            data = b""
        pending = state.get("partial", b"") + data
        # Never cut a UTF-8 character in two between chunks.
        cut = len(pending)
        while cut > 0 and cut > len(pending) - 4 and (pending[cut - 1] & 0xC0) == 0x80:
            cut -= 1
        if cut > 0 and pending[cut - 1] >= 0xC0:
            cut -= 1
        if ended:
            cut = len(pending)
        state["partial"] = pending[cut:]
        return pending[:cut].decode("utf-8", errors="replace"), ended

    async def follow_logs(
        self, name: str, owner: str, role: str, index: int, *, tail: int | None = None
    ) -> AsyncIterator[str]:
        job_dir, path = await asyncio.to_thread(self._log_path, name, owner, role, index, False)
        state: dict[str, Any] = {"replica": (role, index), "position": 0}
        if tail is not None:
            def first() -> str:
                try:
                    with open(path, "rb") as handle:
                        data = handle.read()
                        state["inode"] = os.fstat(handle.fileno()).st_ino
                except FileNotFoundError:
                    return ""
                state["position"] = len(data)
                return self._tail(data.decode("utf-8", errors="replace"), tail)

            text = await asyncio.to_thread(first)
            if text:
                yield text
        while True:
            text, ended = await asyncio.to_thread(self._follow_step, job_dir, path, state)
            if text:
                yield text
            if ended:
                return
            await asyncio.sleep(max(self.poll_interval, 0.1))

    # ------------------------------------------------------------------ cancel and delete
    def _signal_master(self, job_dir: Path, job: dict[str, Any]) -> bool:
        """SIGTERM the master (its cancel); False when there is no live master to ask."""
        pid = self._master_pid(job_dir)
        if pid is None or not self._master_alive(job_dir, job):
            return False
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            return False
        return True

    def _cancel_step(self, name: str, owner: str, deadline: float) -> dict[str, Any] | None:
        job_dir, job, raw = self._owned(name, owner)
        if raw.get("phase") in (SUCCEEDED, FAILED, CANCELLED):
            return raw
        if not self._master_alive(job_dir, job) or time.monotonic() > deadline:
            pid = self._master_pid(job_dir)
            if pid is not None and local_master.pid_alive(pid):
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            return self._mark_lost(job_dir, CANCELLED, "Cancelled by the user; logs are kept until the job is deleted.")
        return None

    async def cancel(self, name: str, owner: str) -> JobStatus:
        job_dir, job, raw = await asyncio.to_thread(self._owned, name, owner)
        if raw.get("phase") not in (SUCCEEDED, FAILED, CANCELLED):
            await asyncio.to_thread(self._signal_master, job_dir, job)
            deadline = time.monotonic() + CANCEL_WAIT + self.grace_period
            while await asyncio.to_thread(self._cancel_step, name, owner, deadline) is None:
                await asyncio.sleep(0.1)
        # The final status as written, now also what `list_jobs` answers.
        return await asyncio.to_thread(self._read_through, name, owner)

    def _remove(self, name: str, owner: str) -> None:
        job_dir, _, _ = self._owned(name, owner)
        child = self._children.pop(name, None)
        if child is not None:
            child.wait(timeout=30)
        # Rename first so no reader ever sees a half-deleted job.
        trash = self.root / f".deleting-{name}-{os.getpid()}-{time.monotonic_ns()}"
        os.replace(job_dir, trash)
        self._forget(name)
        shutil.rmtree(trash, ignore_errors=True)

    async def delete(self, name: str, owner: str) -> None:
        await self.cancel(name, owner)
        await asyncio.to_thread(self._remove, name, owner)
        self.events.publish(JobEvent(DELETED, owner, name))
