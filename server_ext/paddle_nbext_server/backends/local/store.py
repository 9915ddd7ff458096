"""The jobs dir on disk: one dir per job, its records, its master process, its removal.

Everything a reader needs to know about a job dir is answered here, from the files alone, so any
server (this one after a restart, or a second one on the same jobs dir) sees the same jobs:
which dirs are jobs and whose, their status (with the Pending fallback before the master wrote
one), whether their master still runs, and how a job whose master vanished is recorded as ended.
A job dir whose job.json or status.json is damaged is still a job: listed as Unknown with the
file named (`JobFiles.damaged`), cancellable and deletable, and never rewritten by a guess.
File layout and the records themselves: `backend` and `records`.

Job names are per user: a job's dir is `<name>`, or `<name>.<owner tag>` when another user's job
already has `<name>` (`claim`).  Every lookup goes through the asking owner (`job_dir`), so a
user can neither reach another's job nor learn whether it exists.
"""

from __future__ import annotations

import dataclasses
import errno
import hashlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from paddle_nbext.model.contract import Phase, ReplicaPhase, now_iso
from paddle_nbext.model.status import JobStatus

from ...jobfiles import timeline
from ..base import InvalidState, JobExists, JobNotFound
from . import pending_end
from .processes import kill_processes, marked_processes, pid_alive, runs_job_master, signal_replica
from .record_files import MASTER_PID_FILE, read_master_pid, read_record, read_text, write_record
from .record_json import NewerRecord, RecordDamaged
from .records import JobRecord, StatusRecord, damage_message, damaged_status, owner_hint, pending_status, refused_status

#: A job dir with job.json but no master.pid this long after creation lost its server mid-submit.
STARTING_GRACE = 60.0
BACKEND_NAME = "local"
MASTER_MODULE = "paddle_nbext_server.backends.local.master"
STARTING_MESSAGE = "Starting the job master."

#: The file naming a job dir's owner: in the dir from its first moment (see `claim`), so a lookup
#: can tell whose it is before job.json exists.
OWNER_FILE = ".owner"

#: (mtime_ns, size, inode) of a file: a changed one means the file was rewritten.
Signature = tuple[int, int, int]


def signature(path: Path | str) -> Signature | None:
    """The file's signature, None if it does not exist (one `stat`, no read)."""
    try:
        stat = os.stat(path)
    except OSError:
        return None
    return (stat.st_mtime_ns, stat.st_size, stat.st_ino)


def owner_tag(owner: str) -> str:
    """A short, stable, file-name-safe stand-in for `owner`: the suffix of the dir of a job whose
    plain name another user's job has."""
    return hashlib.sha256(owner.encode("utf-8", "surrogatepass")).hexdigest()[:12]


def job_name_of(job_dir: Path) -> str:
    """The job's name from its dir's: `train` for `train/` and for `train.<owner tag>/`."""
    return job_dir.name.partition(".")[0]


def name_taken(name: str) -> JobExists:
    return JobExists(f"A job named '{name}' already exists; pick another job_name or delete it.", "job_name")


@dataclass(frozen=True)
class JobFiles:
    """What one job dir says, as read.  `refused` is set when a newer paddle-nbext wrote one of
    its records: `status` then only carries that in words, and nothing may act on the job.
    `damaged` is the message when job.json or status.json cannot be read: `status` is Unknown
    and carries it; the job may be cancelled and deleted, but its records are never rewritten."""

    job: JobRecord
    record: StatusRecord
    refused: NewerRecord | None = None
    damaged: str | None = None

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
    def _candidates(self, name: str, owner: str) -> tuple[Path, Path]:
        """(`<name>`, `<name>.<owner tag>`): the two dirs the owner's job `name` may have."""
        if not name or "/" in name or "." in name:
            raise JobNotFound(f"There is no job named '{name}'.")
        return self.root / name, self.root / f"{name}.{owner_tag(owner)}"

    def job_dir(self, name: str, owner: str) -> Path:
        """The dir of `owner`'s job `name`: the tagged one when it exists (only that owner's job
        can have it), else the plain one, which may be another user's (`load` says whose) or
        missing (then there is no such job)."""
        plain, tagged = self._candidates(name, owner)
        return tagged if os.path.lexists(tagged) else plain

    def dir_owner(self, job_dir: Path) -> str | None:
        """Whose the dir is, from its owner file or else its job.json (dirs from before names
        were per user); None when neither says."""
        try:
            return (job_dir / OWNER_FILE).read_bytes().decode("utf-8", "surrogatepass").strip() or None
        except (OSError, UnicodeDecodeError):
            pass
        try:
            return read_record(JobRecord, job_dir).owner or None
        except NewerRecord as error:
            return error.owner or None
        except (OSError, ValueError):
            return None

    def has_job(self, name: str, owner: str) -> bool:
        """Whether `owner` has a job named `name` (what the dry run asks; other users' jobs
        never count)."""
        plain, tagged = self._candidates(name, owner)
        return os.path.lexists(tagged) or self.dir_owner(plain) == owner

    def claim(self, name: str, owner: str) -> Path:
        """Create the dir of `owner`'s new job `name`: `<name>`, or `<name>.<owner tag>` when
        another user's job has that; `JobExists` when the owner has a job of that name.  The dir
        is renamed into place with its owner file already in it, so no reader ever sees it
        without an owner and two submits of one name by one owner cannot both succeed.  OSError
        when the jobs dir cannot be written."""
        plain, tagged = self._candidates(name, owner)
        self.root.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".claim-{name}-", dir=self.root))
        try:
            (staging / OWNER_FILE).write_bytes(owner.encode("utf-8", "surrogatepass"))
            if not os.path.lexists(tagged):
                try:
                    os.rename(staging, plain)
                    return plain
                except OSError as error:
                    if error.errno not in (errno.EEXIST, errno.ENOTEMPTY):
                        raise
                if self.dir_owner(plain) == owner:
                    raise name_taken(name)
            try:
                os.rename(staging, tagged)
                return tagged
            except OSError as error:
                if error.errno in (errno.EEXIST, errno.ENOTEMPTY):
                    raise name_taken(name) from None
                raise
        finally:
            shutil.rmtree(staging, ignore_errors=True)

    def load(self, job_dir: Path) -> JobFiles:
        """The job dir's records.  OSError when job.json is missing (the dir is not a job, or not
        yet), ValueError when it is damaged and names no owner (nobody may be shown the job); a
        status.json not written yet reads as Pending; any other damage reads as Unknown."""
        try:
            job = read_record(JobRecord, job_dir)
        except NewerRecord as error:
            job = JobRecord(owner=error.owner, created=error.created)
            return JobFiles(job, refused_status(job_name_of(job_dir), job, BACKEND_NAME, error), error)
        except FileNotFoundError:
            raise
        except (OSError, ValueError) as error:
            return self._damaged_job(job_dir, error)
        if not job.owner:  # `{}` reads as a record of nobody's: damaged all the same
            return self._damaged_job(job_dir, RecordDamaged("it names no owner"))
        try:
            record = read_record(StatusRecord, job_dir)
        except NewerRecord as error:
            return JobFiles(job, refused_status(job_name_of(job_dir), job, BACKEND_NAME, error), error)
        except FileNotFoundError:
            record = pending_status(job_name_of(job_dir), job, BACKEND_NAME, STARTING_MESSAGE)
        except (OSError, ValueError) as error:
            message = damage_message(job_dir / StatusRecord.KIND, error)
            return JobFiles(job, damaged_status(job_name_of(job_dir), job, BACKEND_NAME, message), damaged=message)
        if not record.terminal:
            record = self._with_pending_end(job_dir, record)
        if job.resumed_from is not None and record.status.resumed_from is None:
            # The master writes status.json from the job alone; the link is job.json's.
            record.status.resumed_from = job.resumed_from
        return JobFiles(job, record)

    @staticmethod
    def _with_pending_end(job_dir: Path, record: StatusRecord) -> StatusRecord:
        """The end the master keeps aside while the job dir cannot take it (`pending_end`), said
        to be unrecorded yet and why; `record` itself when there is none."""
        pending = pending_end.read(job_dir)
        if pending is None:
            return record
        text, error = pending
        try:
            ended = StatusRecord.from_json(text)
        except ValueError:
            return record
        if not ended.terminal:
            return record
        note = f" This end is not recorded in the job's directory yet ({error}); it will be as soon as the directory can be written again."
        return dataclasses.replace(ended, status=dataclasses.replace(ended.status, message=ended.status.message + note))

    def _damaged_job(self, job_dir: Path, error: OSError | ValueError) -> JobFiles:
        """A job whose job.json cannot be read, shown to the owner its status.json, what is left
        of job.json, or the dir's owner file names; RecordDamaged when none names one."""
        try:
            status: JobStatus | None = read_record(StatusRecord, job_dir).status
        except (OSError, ValueError, NewerRecord):
            status = None
        owner = status.owner if status is not None else ""
        if not owner:
            try:
                owner = owner_hint(read_text(job_dir / JobRecord.KIND))
            except (OSError, ValueError):
                owner = ""
        if not owner:
            # The owner file the dir was claimed with (job.json emptied to `{}` names nobody).
            owner = self.dir_owner(job_dir) or ""
        if not owner:
            raise RecordDamaged(f"{job_dir / JobRecord.KIND} names no owner") from error
        job = JobRecord(owner=owner, spec=status.spec if status else {}, created=status.created if status else "")
        message = damage_message(job_dir / JobRecord.KIND, error)
        return JobFiles(job, damaged_status(job_name_of(job_dir), job, BACKEND_NAME, message), damaged=message)

    def owned(self, name: str, owner: str) -> tuple[Path, JobFiles]:
        """The job `name` of `owner`; another owner's job is as missing as no job at all."""
        job_dir = self.job_dir(name, owner)
        try:
            files = self.load(job_dir)
        except (OSError, ValueError):
            raise JobNotFound(f"There is no job named '{name}'.") from None
        if files.owner != owner:
            raise JobNotFound(f"There is no job named '{name}'.")
        return job_dir, files

    # ------------------------------------------------------------------ the master
    def launch_master(self, job_dir: Path, env: Mapping[str, str] | None = None) -> subprocess.Popen[bytes]:
        """Start the job's detached master and record its pid in master.pid.  `env` is the
        environment it and so every replica inherits (the server's without its credentials:
        `credentials.job_environment`)."""
        with open(job_dir / "master.log", "ab") as log:
            master = subprocess.Popen(
                [sys.executable, "-m", MASTER_MODULE, str(job_dir)],
                cwd=job_dir,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # survives the server's restart and its terminal's Ctrl-C
            )
        self._children[job_dir.name] = master
        (job_dir / MASTER_PID_FILE).write_text(str(master.pid))
        return master

    def master_pid(self, job_dir: Path) -> int | None:
        return read_master_pid(job_dir)

    def master_alive(self, job_dir: Path, job: JobRecord) -> bool:
        """The job's master runs (a pid reused by another program does not count); before
        master.pid exists, a fresh job counts as starting for `STARTING_GRACE` seconds."""
        self.reap_master(job_dir.name)
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

    def stop_orphans(self, name: str | None = None) -> list[int]:
        """SIGKILL every process that carries the job dir of a job (`name`, else any job of this
        jobs dir) whose master is gone: what replicas left running when their master and its
        safeguards were killed, or a job dir removed by hand.  Returns the pids signalled."""
        stopped: list[int] = []
        for job_name, pids in marked_processes(self.root).items():
            if name is not None and job_name != name:
                continue
            job_dir = self.root / job_name
            master = self.master_pid(job_dir)
            if master is not None and runs_job_master(master, job_dir):
                continue
            if master is None:  # a master starting, before its pid file: it carries the marks too
                pids = [pid for pid in pids if not runs_job_master(pid, job_dir)]
            kill_processes(pids)
            stopped.extend(pids)
        return stopped

    def mark_lost(self, job_dir: Path, phase: Phase, message: str) -> StatusRecord:
        """The master is gone without a terminal status: stop what it left and record the end.
        A job a newer release wrote is left as it is (this code cannot write its records), and
        so is a damaged one (its recorded outcome is unknown, and must not be replaced by a
        guess); their processes are stopped all the same.  When the record cannot be written
        (the dir became read-only) the end is returned, in memory only, with why."""
        files = self.load(job_dir)
        record = files.record
        if record.terminal:
            return record
        self.stop_orphans(job_dir.name)
        if files.refused is not None or files.damaged is not None:
            return record
        for leader in record.processes.values():
            # A live leader was stopped above if it is still the replica; a live unmarked one is
            # a pid reused since.  A dead leader's group can only hold the replica's processes.
            if not pid_alive(leader):
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
        try:
            write_record(job_dir, lost)
        except OSError as error:
            unsaved = f"{message} This end could not be recorded in {job_dir / StatusRecord.KIND}: {error.strerror or error}."
            return dataclasses.replace(lost, status=dataclasses.replace(status, message=unsaved))
        # The master, the timeline's only writer, is gone: the end is the server's to say.
        timeline.TimelineWriter(job_dir).add("ended", f"{phase}: {message}")
        return lost

    # ------------------------------------------------------------------ removal
    def remove(self, name: str, owner: str) -> Path:
        """Delete the job dir (answered: where it was); renamed away first so no reader ever
        sees a half-deleted job."""
        job_dir, _ = self.owned(name, owner)
        child = self._children.pop(job_dir.name, None)
        if child is not None:
            child.wait(timeout=30)
        trash = self.root / f".deleting-{job_dir.name}-{os.getpid()}-{time.monotonic_ns()}"
        os.replace(job_dir, trash)
        shutil.rmtree(trash, ignore_errors=True)
        pending_end.clear(job_dir)
        return job_dir

    def reap_master(self, name: str) -> None:
        """Collect the exit of the master of job dir `name` if this process started it and it
        has ended, so that no zombie is left (an ended job is not polled again)."""
        child = self._children.get(name)
        if child is not None and child.poll() is not None:
            self._children.pop(name, None)

    def forget_master(self, name: str) -> None:
        """Stop tracking (and reap) a master this process started, e.g. after a failed submit."""
        child = self._children.pop(name, None)
        if child is not None and child.poll() is None:
            child.kill()
            child.wait()
