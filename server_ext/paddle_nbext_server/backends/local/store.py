"""The jobs dir on disk: one dir per job, its records, its master process, its removal.

Everything a reader needs to know about a job dir is answered here, from the files alone, so any
server (this one after a restart, or a second one on the same jobs dir) sees the same jobs:
which dirs are jobs and whose, their status (with the Pending fallback before the master wrote
one), whether their master still runs, and how a job whose master vanished is recorded as ended.
File layout and the records themselves: `backend` and `records`.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from paddle_nbext.contract import Phase, ReplicaPhase, now_iso

from ..base import InvalidState, JobNotFound
from .processes import pid_alive, runs_job_master, signal_replica
from .records import (
    JobRecord,
    NewerRecord,
    StatusRecord,
    pending_status,
    read_record,
    refused_status,
    write_record,
)

#: A job dir with job.json but no master.pid this long after creation lost its server mid-submit.
STARTING_GRACE = 60.0
BACKEND_NAME = "local"
MASTER_MODULE = "paddle_nbext_server.backends.local.master"
STARTING_MESSAGE = "Starting the job master."

#: (mtime_ns, size, inode) of a file: a changed one means the file was rewritten.
Signature = tuple[int, int, int]


def signature(path: Path | str) -> Signature | None:
    """The file's signature, None if it does not exist (one `stat`, no read)."""
    try:
        stat = os.stat(path)
    except OSError:
        return None
    return (stat.st_mtime_ns, stat.st_size, stat.st_ino)


@dataclass(frozen=True)
class JobFiles:
    """What one job dir says, as read.  `refused` is set when a newer paddle-nbext wrote one of
    its records: `status` then only carries that in words, and nothing may act on the job."""

    job: JobRecord
    record: StatusRecord
    refused: NewerRecord | None = None

    @property
    def owner(self) -> str:
        return self.job.owner

    def require_manageable(self) -> None:
        """Refuse to act (cancel, logs) on a job this code cannot read: 409 with the reason."""
        if self.refused is not None:
            raise InvalidState(self.refused.message)


class JobStore:
    """The jobs dir `root`: reading and writing job dirs, and the masters this server started."""

    def __init__(self, root: Path) -> None:
        self.root = root
        # Masters this process started: polled so they never linger as zombies (a zombie
        # master would look alive to nobody, but it holds a process-table slot until reaped).
        self._children: dict[str, subprocess.Popen[bytes]] = {}

    # ------------------------------------------------------------------ paths and reading
    def job_dir(self, name: str) -> Path:
        if not name or "/" in name or name.startswith("."):
            raise JobNotFound(f"There is no job named '{name}'.")
        return self.root / name

    def load(self, job_dir: Path) -> JobFiles:
        """The job dir's records.  OSError/ValueError when job.json is missing or damaged (the dir
        is not a job, or not yet); a damaged or missing status.json reads as Pending."""
        try:
            job = read_record(JobRecord, job_dir)
        except NewerRecord as error:
            job = JobRecord(owner=error.owner, created=error.created)
            return JobFiles(job, refused_status(job_dir.name, job, BACKEND_NAME, error), error)
        try:
            record = read_record(StatusRecord, job_dir)
        except NewerRecord as error:
            return JobFiles(job, refused_status(job_dir.name, job, BACKEND_NAME, error), error)
        except (OSError, ValueError):
            record = pending_status(job_dir.name, job, BACKEND_NAME, STARTING_MESSAGE)
        return JobFiles(job, record)

    def owned(self, name: str, owner: str) -> tuple[Path, JobFiles]:
        """The job `name` of `owner`; another owner's job is as missing as no job at all."""
        job_dir = self.job_dir(name)
        try:
            files = self.load(job_dir)
        except (OSError, ValueError):
            raise JobNotFound(f"There is no job named '{name}'.") from None
        if files.owner != owner:
            raise JobNotFound(f"There is no job named '{name}'.")
        return job_dir, files

    # ------------------------------------------------------------------ the master
    def launch_master(self, job_dir: Path) -> subprocess.Popen[bytes]:
        """Start the job's detached master and record its pid in master.pid."""
        with open(job_dir / "master.log", "ab") as log:
            master = subprocess.Popen(
                [sys.executable, "-m", MASTER_MODULE, str(job_dir)],
                cwd=job_dir,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # survives the server's restart and its terminal's Ctrl-C
            )
        self._children[job_dir.name] = master
        (job_dir / "master.pid").write_text(str(master.pid))
        return master

    def master_pid(self, job_dir: Path) -> int | None:
        try:
            return int((job_dir / "master.pid").read_text().strip())
        except (OSError, ValueError):
            return None

    def master_alive(self, job_dir: Path, job: JobRecord) -> bool:
        """The job's master runs (a pid reused by another program does not count); before
        master.pid exists, a fresh job counts as starting for `STARTING_GRACE` seconds."""
        child = self._children.get(job_dir.name)
        if child is not None and child.poll() is not None:
            self._children.pop(job_dir.name, None)
        pid = self.master_pid(job_dir)
        if pid is None:
            return time.time() - job.created_epoch < STARTING_GRACE
        return runs_job_master(pid, job_dir)

    def signal_master(self, job_dir: Path, job: JobRecord) -> bool:
        """SIGTERM the master (its cancel); False when there is no live master to ask."""
        pid = self.master_pid(job_dir)
        if pid is None or not self.master_alive(job_dir, job):
            return False
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            return False
        return True

    def kill_master(self, job_dir: Path) -> None:
        """SIGKILL a master that did not stop in time (its replicas die with it: PDEATHSIG)."""
        pid = self.master_pid(job_dir)
        if pid is not None and pid_alive(pid) and runs_job_master(pid, job_dir):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass

    def mark_lost(self, job_dir: Path, phase: Phase, message: str) -> StatusRecord:
        """The master is gone without a terminal status: stop what it left and record the end.
        A job a newer release wrote is left as it is (this code cannot write its records)."""
        files = self.load(job_dir)
        record = files.record
        if files.refused is not None or record.terminal:
            return record
        for leader in record.processes.values():
            signal_replica(leader, signal.SIGKILL)
        stamp = now_iso()
        replicas = [
            dataclasses.replace(r, phase=ReplicaPhase.STOPPED, finished=stamp)
            if r.phase in (ReplicaPhase.PENDING, ReplicaPhase.RUNNING)
            else r
            for r in record.status.replicas
        ]
        status = dataclasses.replace(record.status, phase=phase, message=message, finished=stamp, replicas=replicas)
        lost = dataclasses.replace(record, status=status, processes={}, admitted=None)
        write_record(job_dir, lost)
        return lost

    # ------------------------------------------------------------------ removal
    def remove(self, name: str, owner: str) -> None:
        """Delete the job dir; renamed away first so no reader ever sees a half-deleted job."""
        job_dir, _ = self.owned(name, owner)
        child = self._children.pop(name, None)
        if child is not None:
            child.wait(timeout=30)
        trash = self.root / f".deleting-{name}-{os.getpid()}-{time.monotonic_ns()}"
        os.replace(job_dir, trash)
        shutil.rmtree(trash, ignore_errors=True)

    def forget_master(self, name: str) -> None:
        """Stop tracking (and reap) a master this process started, e.g. after a failed submit."""
        child = self._children.pop(name, None)
        if child is not None and child.poll() is None:
            child.kill()
            child.wait()
