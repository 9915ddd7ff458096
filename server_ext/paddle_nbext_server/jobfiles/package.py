"""Resolving and snapshotting the trainer package, shared by both backends.

The package must be a directory inside the user's home (the home volume is what Kubernetes
replicas mount, and the local backend must not read other people's files) and outside the jobs
dir (a job's dir holds its owner's records and logs, and another user's job may be there).  With
`snapshot` the directory is copied into the job's own dir, so editing the notebook's files while
a job runs changes nothing in that job.

What a snapshot copies, by rule (docs/user-guide.md, "What the snapshot copies"):

* regular files and directories, with their permission bits and modification times;
* a symbolic link as what it points to, when that is inside the user's home and outside the jobs
  dir; a link pointing anywhere else, or nowhere, is skipped (the server never reads outside the
  user's files on the user's behalf);
* never: FIFOs, sockets and device files (opening a FIFO would hang the submit), the jobs dir
  and any job's dir, and the names in `SKIPPED_NAMES`.

The copy never follows a symlink while writing (every file is created new, `O_EXCL|O_NOFOLLOW`),
so nothing outside the snapshot can be written through it; the snapshot itself holds no links.
A file that cannot be read is a `SpecError` on `trainer_package` naming the path (a 422), never
a server error.  Blocking: run it in a thread.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

from paddle_nbext.model.spec import JobSpec, SpecError

ENTRY_SCRIPT_NAME = "paddle_entry.py"
#: The jobs dir's name in a home (the Kubernetes backend's, and the local backend's default).
HOME_JOBS_DIR = ".paddle-jobs"
#: Directory names a snapshot leaves out: job dirs, editor and tool caches, version control.
SKIPPED_NAMES = frozenset({HOME_JOBS_DIR, ".ipynb_checkpoints", "__pycache__", ".git", "node_modules"})
MAX_SNAPSHOT_BYTES = 512 * 1024 * 1024
MAX_SNAPSHOT_FILES = 100_000
#: The files that make a directory a job's dir (a jobs dir under another name is left out too).
JOB_DIR_MARKERS = frozenset({"job.json", "plan.json"})
_COPY_CHUNK = 1024 * 1024
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_CREATE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def _unreadable(path: str, error: OSError) -> SpecError:
    return SpecError(
        "trainer_package",
        f"'{path}' cannot be read ({error.strerror or error}); make it readable, or move it out of the package",
    )


def _cannot_copy(destination: str, error: OSError) -> SpecError:
    return SpecError("trainer_package", f"the package could not be copied to '{destination}' ({error.strerror or error})")


def resolve_package(spec: JobSpec, home: Path, jobs_dir: Path | None = None) -> Path:
    """The package dir as an absolute real path inside `home` and outside the jobs dir
    (`jobs_dir`, and the home's own `.paddle-jobs` in any case); SpecError on trainer_package
    otherwise."""
    home_real = os.path.realpath(home)
    raw = spec.trainer_package or home_real
    # `~` is the user's home as this server knows it (not the server process's $HOME)
    candidate = home_real + raw[1:] if raw == "~" or raw.startswith("~/") else os.path.expanduser(raw)
    if not os.path.isabs(candidate):
        candidate = os.path.join(home_real, candidate)
    real = os.path.realpath(candidate)
    if not _inside(real, home_real):
        raise SpecError("trainer_package", f"'{raw}' is outside your home directory ({home_real}); put the code under it")
    for jobs in {os.path.realpath(jobs_dir) if jobs_dir is not None else "", os.path.join(home_real, HOME_JOBS_DIR)} - {""}:
        if _inside(real, jobs):
            raise SpecError("trainer_package", f"'{raw}' is inside the jobs dir ({jobs}); give the directory of your code")
    try:
        info = os.stat(real)
    except FileNotFoundError:
        raise SpecError("trainer_package", f"'{raw}' does not exist; give a directory under {home_real}") from None
    except OSError as error:
        raise _unreadable(real, error) from None
    if not stat.S_ISDIR(info.st_mode):
        raise SpecError("trainer_package", f"'{raw}' is a file; give the directory that holds your training code")
    if not os.access(real, os.R_OK | os.X_OK):
        raise SpecError("trainer_package", f"'{real}' cannot be read (permission denied); make it readable")
    return Path(real)


@dataclass
class Snapshot:
    """What a snapshot copied and what it left out by rule (relative paths, with the reason)."""

    target: Path
    files: int = 0
    bytes: int = 0
    skipped: list[tuple[str, str]] = field(default_factory=list)


class _Copier:
    """One snapshot: a walk with its own stack (no recursion, however deep the tree), the
    directories already copied (a link loop is copied once), and the limits."""

    def __init__(self, source: Path, target: Path, home: Path, jobs_dir: Path | None, max_bytes: int, max_files: int) -> None:
        self.source, self.home = str(source), os.path.realpath(home)
        self.jobs = {os.path.join(self.home, HOME_JOBS_DIR)} | ({os.path.realpath(jobs_dir)} if jobs_dir is not None else set())
        self.max_bytes, self.max_files = max_bytes, max_files
        self.result = Snapshot(target)
        self.visited: set[tuple[int, int]] = set()

    def _skip(self, path: str, reason: str) -> None:
        self.result.skipped.append((os.path.relpath(path, self.source), reason))

    def run(self) -> Snapshot:
        root = os.stat(self.source)
        self.visited.add((root.st_dev, root.st_ino))
        try:
            os.mkdir(self.result.target, 0o700)
        except OSError as error:
            raise _cannot_copy(str(self.result.target), error) from None
        pending = [(self.source, str(self.result.target), root.st_mode)]
        while pending:
            source, target, mode = pending.pop()
            subdirs = self._copy_dir(source, target)
            if subdirs is not None:
                pending.extend(subdirs)
                os.chmod(target, stat.S_IMODE(mode) | stat.S_IRWXU)  # the owner must be able to delete it
        return self.result

    def _copy_dir(self, source: str, target: str) -> list[tuple[str, str, int]] | None:
        """Copy the files of one directory; return its subdirectories to copy next (None: the
        directory is left out after all, and `target` removed)."""
        try:
            entries = sorted(os.scandir(source), key=lambda entry: entry.name)
        except OSError as error:
            raise _unreadable(source, error) from None
        if source != self.source and JOB_DIR_MARKERS <= {entry.name for entry in entries}:
            self._skip(source, "a job's directory")
            os.rmdir(target)  # made empty a moment ago by the walk of its parent
            return None
        subdirs = []
        for entry in entries:
            if entry.name in SKIPPED_NAMES:
                continue
            path, real, info = entry.path, entry.path, self._lstat(entry.path)
            if stat.S_ISLNK(info.st_mode):
                real = os.path.realpath(path)
                if not _inside(real, self.home) or any(_inside(real, jobs) for jobs in self.jobs):
                    self._skip(path, f"a link to {real}, outside your home or inside the jobs dir")
                    continue
                try:
                    info = os.stat(real)
                except FileNotFoundError:
                    self._skip(path, "a link to nothing")
                    continue
                except OSError as error:
                    raise _unreadable(path, error) from None
            destination = os.path.join(target, entry.name)
            if stat.S_ISDIR(info.st_mode):
                key = (info.st_dev, info.st_ino)
                if key in self.visited or any(_inside(real, jobs) for jobs in self.jobs):
                    self._skip(path, "a directory copied already or the jobs dir")
                    continue
                self.visited.add(key)
                try:
                    os.mkdir(destination, 0o700)
                except OSError as error:
                    raise _cannot_copy(destination, error) from None
                subdirs.append((real, destination, info.st_mode))
            elif stat.S_ISREG(info.st_mode):
                self._copy_file(real, destination, path)
            else:
                self._skip(path, "a FIFO, socket or device file")
        return subdirs

    @staticmethod
    def _lstat(path: str) -> os.stat_result:
        try:
            return os.lstat(path)
        except OSError as error:
            raise _unreadable(path, error) from None

    def _count(self, size: int) -> None:
        self.result.files += 1
        self.result.bytes += size
        if self.result.bytes > self.max_bytes:
            raise SpecError(
                "trainer_package",
                f"'{self.source}' holds more than {self.max_bytes // 2**20} MiB; point trainer_package at the code directory "
                "(keep data outside it) or set snapshot to false",
            )
        if self.result.files > self.max_files:
            raise SpecError(
                "trainer_package",
                f"'{self.source}' holds more than {self.max_files} files; point trainer_package at the code directory "
                "or set snapshot to false",
            )

    def _copy_file(self, real: str, destination: str, shown: str) -> None:
        try:
            reader = os.open(real, _READ_FLAGS)
        except OSError as error:
            raise _unreadable(shown, error) from None
        try:
            info = os.fstat(reader)
            if not stat.S_ISREG(info.st_mode):  # replaced by something else since it was listed
                self._skip(shown, "a FIFO, socket or device file")
                return
            self._count(info.st_size)
            try:
                writer = os.open(destination, _CREATE_FLAGS, stat.S_IMODE(info.st_mode) | stat.S_IRUSR | stat.S_IWUSR)
            except OSError as error:
                raise _cannot_copy(destination, error) from None
            try:
                self._pump(reader, writer, shown, destination)
                os.utime(writer, ns=(info.st_atime_ns, info.st_mtime_ns))
            finally:
                os.close(writer)
        finally:
            os.close(reader)

    def _pump(self, reader: int, writer: int, shown: str, destination: str) -> None:
        while True:
            try:
                chunk = os.read(reader, _COPY_CHUNK)
            except OSError as error:
                raise _unreadable(shown, error) from None
            if not chunk:
                return
            view = memoryview(chunk)
            while view:
                try:
                    written = os.write(writer, view)
                except OSError as error:
                    raise _cannot_copy(destination, error) from None
                view = view[written:]


def write_entry_script(target: Path, entry_script: str) -> Path:
    """Write the cell body as `paddle_entry.py` in the snapshot: whatever the package had under
    that name is replaced, and the new file is created without following a link, so the write
    lands in the snapshot and nowhere else."""
    path = target / ENTRY_SCRIPT_NAME
    try:
        if os.path.lexists(path):
            if os.path.isdir(path) and not os.path.islink(path):
                raise SpecError("entry_script", f"the package has a directory named {ENTRY_SCRIPT_NAME}, where the cell body goes")
            os.unlink(path)
        descriptor = os.open(path, _CREATE_FLAGS, 0o644)
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(entry_script.encode("utf-8"))
    except OSError as error:
        raise SpecError("trainer_package", f"the cell body could not be written to '{path}' ({error.strerror or error})") from None
    return path


def snapshot_package(
    source: Path,
    target: Path,
    entry_script: str | None,
    *,
    home: Path | None = None,
    jobs_dir: Path | None = None,
    max_bytes: int = MAX_SNAPSHOT_BYTES,
    max_files: int = MAX_SNAPSHOT_FILES,
) -> Snapshot:
    """Copy `source` to `target` (which must not exist) by the rules above, then write the
    cell's entry script.  Links may point anywhere in `home` (the package itself when None).
    Refuses packages of more than `max_bytes` or `max_files` (a home with data sets in it is a
    common slip); the caller removes `target` on any error."""
    copier = _Copier(source, target, home if home is not None else source, jobs_dir, max_bytes, max_files)
    try:
        result = copier.run()
    except FileNotFoundError as error:
        raise SpecError("trainer_package", f"'{error.filename or source}' vanished while it was copied; submit again") from None
    if entry_script is not None:
        write_entry_script(target, entry_script)
    return result
