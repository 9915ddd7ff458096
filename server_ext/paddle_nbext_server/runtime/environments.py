"""A job's own Python packages: its `requirements.txt`, installed once into an environment kept
in the home and layered over the interpreter that runs the job (the image's, with its Paddle).

Why this shape (docs/architecture.md, "Job environments"):

- **Built with the job's own interpreter, where the job runs.**  The notebook pod cannot build
  images (that needs the container engine's socket), and wheels picked for the notebook's Python
  may not fit the image's.  So the launcher of every replica calls `ensure` before the user's
  code: the first one to take the environment's lock builds it, the others wait on the lock and
  then start with it; a later job with the same inputs finds it built and installs nothing.
- **Keyed by everything that changes the result**: the requirements (and the files they include
  or name), the interpreter (version, ABI, platform), what that interpreter already has
  installed, and the index settings.  Two images with the same Python but other packages never
  share an environment.
- **An overlay that adds, never replaces.**  Everything the interpreter already has is passed to
  the resolver as a constraint at its installed version, and only what is missing is installed,
  into a prefix of its own (`<envs>/<key>/lib/pythonX.Y/site-packages`) that replicas get first
  on `PYTHONPATH`.  Paddle and the libraries its compiled code was built against (numpy,
  protobuf) therefore stay the image's; a requirement that needs another version of one of them
  fails with the resolver's own words instead of breaking Paddle at import time.  A virtual
  environment with `--system-site-packages` would not do: made from an interpreter that is itself
  a virtual environment (the local backend's usual case) it sees the base interpreter's packages,
  not Paddle's.
- **uv when the image or the interpreter's environment has it, pip otherwise.**  uv resolves
  (`uv pip compile`, with the constraints) and installs exactly the missing pins (`--no-deps`);
  pip installs with `--prefix`, which leaves what is installed alone, under the same constraints.
  Both run without their own configuration files; the index settings are the site's (the
  server's `pip_*` settings) merged with the user's own `pip.conf`, passed to either installer
  the same way, and their credentials are never written anywhere.
- A build is atomic: it happens in a private directory renamed into place when complete, so a
  crash mid-build leaves no environment that looks ready.  A failure is remembered for the job
  that met it (its other replicas and its retries fail at once with the same words); any other
  job tries again.

Its parts, each a module of its own: `env_requirements` (the requirements files as pip reads
them), `env_index` (where packages come from), `env_build` (the interpreter, the key and the
installer run) and `env_status` (the status and record files the server reads).  This module is
the environment step itself: the lock that makes one replica build while the others wait, the
remembered failure, and the atomic rename of a finished build.

Standard library only: this file is shipped into every job beside the launcher.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import os
import random
import shutil
import sys
import sysconfig
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

if __package__:  # imported from the installed package (the server, the local backend)
    from . import env_build, env_index, env_requirements, env_status
else:  # a plain script: the bundle's files beside this one
    import env_build  # type: ignore[import-not-found,no-redef]
    import env_index  # type: ignore[import-not-found,no-redef]
    import env_requirements  # type: ignore[import-not-found,no-redef]
    import env_status  # type: ignore[import-not-found,no-redef]

#: Inputs from the job runner (both backends set them; none set: the job has no requirements).
REQUIREMENTS_VAR = "PADDLE_NBEXT_REQUIREMENTS"  # the requirements file's path, in the package
ENVS_DIR_VAR = "PADDLE_NBEXT_ENVS_DIR"  # where environments live: <home>/.paddle-jobs/envs

# The names the server, the launcher and the tests use through this module (its parts' own).
INDEX_FILE_VAR = env_index.INDEX_FILE_VAR
STATUS_FILE, LOG_FILE = env_status.STATUS_FILE, env_status.LOG_FILE
INFO_FILE, LAST_USED_FILE, INSTALL_LOG = env_status.INFO_FILE, env_status.LAST_USED_FILE, env_status.INSTALL_LOG
LAYOUT = env_build.LAYOUT
MAX_REQUIREMENTS_BYTES = env_requirements.MAX_REQUIREMENTS_BYTES
RequirementsError = env_requirements.RequirementsError
Requirements = env_requirements.Requirements
read_requirements = env_requirements.read_requirements
IndexSettings = env_index.IndexSettings
mask_url = env_index.mask_url
read_pip_conf = env_index.read_pip_conf
BuildFailed = env_build.BuildFailed
environment_key = env_build.environment_key
explain = env_build.explain
installer_reason = env_build.installer_reason
read_json, write_json = env_status.read_json, env_status.write_json
read_status, phase_message = env_status.read_status, env_status.phase_message
environments = env_status.environments


@dataclass
class Prepared:
    """A ready environment: where it is and what the replicas' environment gains from it."""

    key: str
    prefix: str
    installer: str
    reused: bool
    packages: list[str] = field(default_factory=list)
    seconds: float = 0.0
    #: The environment's lock, held shared while the replica runs (closed when the process ends).
    lock_fd: int | None = None

    def holding(self, fd: int) -> Prepared:
        self.lock_fd = fd
        return self

    def apply(self, env: dict[str, str]) -> None:
        """Put the environment first on the replica's `PYTHONPATH` and `PATH`."""
        for variable, found in (("PYTHONPATH", env_build.site_dirs(self.prefix)), ("PATH", env_build.bin_dirs(self.prefix))):
            if found:
                paths = os.pathsep.join(os.path.join(self.prefix, each) for each in found)
                env[variable] = paths + (os.pathsep + env[variable] if env.get(variable) else "")
        env["PADDLE_NBEXT_ENV"] = self.prefix


@dataclass
class Job:
    """What `ensure` needs to know about the job it prepares for."""

    name: str
    logs_dir: str | None
    image: str = ""


def _status(job: Job, data: dict[str, Any]) -> None:
    env_status.write_status(job.logs_dir, job.name, data)


def ensure(
    requirements_path: str,
    package_dir: str,
    envs_dir: str,
    job: Job,
    env: Mapping[str, str],
    say: Callable[[str], None],
) -> Prepared:
    """The job's environment, built now if it does not exist yet (at most once at a time for a
    key, on any number of hosts sharing `envs_dir`).  Raises RequirementsError or BuildFailed;
    the message is the one to end the job with."""
    requirements = read_requirements(requirements_path, package_dir)
    refused = requirements.paddle_lines()
    if refused:
        first = refused[0]
        raise RequirementsError(
            f"{first.file} line {first.line}: {first.text} would replace the image's Paddle; remove the line (choose another image for another Paddle)",
            first.file,
            first.line,
        )
    settings = env_index.site_settings(env).merged(read_pip_conf(env))
    base = env_build.installed()
    key = environment_key(requirements, settings, base)
    prefix = os.path.join(envs_dir, key)
    locks = os.path.join(envs_dir, ".locks")
    os.makedirs(locks, exist_ok=True)
    lock = os.path.join(locks, key + ".lock")
    owner_file = os.path.join(locks, key + ".json")
    # The lock is held shared for as long as the replica runs (the launcher's process keeps the
    # descriptor), so housekeeping, which takes it exclusively without waiting, never removes an
    # environment a replica uses; building takes it exclusively.
    fd = os.open(lock, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o644)
    try:
        return _ready(
            fd,
            prefix,
            key,
            job,
            lambda: _build_locked(requirements, settings, base, key, envs_dir, job, env, package_dir, owner_file, say),
            say,
        )
    except BaseException:
        os.close(fd)
        raise


def _ready(fd: int, prefix: str, key: str, job: Job, build_now: Callable[[], Prepared], say: Callable[[str], None]) -> Prepared:
    """The environment at `prefix` with its lock `fd` held shared, built here when missing.
    Never waits for an exclusive lock while holding a shared one, nor for the exclusive lock while
    the environment exists (its users hold it shared for as long as they run): who cannot build
    waits for the builder with a shared lock, which it gets once the build has ended."""
    exists = functools.partial(os.path.isfile, os.path.join(prefix, INFO_FILE))
    locks = os.path.dirname(os.path.abspath(prefix)) + os.sep + ".locks"
    waited = False
    while True:
        if _try_lock(fd, fcntl.LOCK_SH) and exists():
            return _reuse(prefix, key, job).holding(fd)
        fcntl.flock(fd, fcntl.LOCK_UN)
        if _try_lock(fd, fcntl.LOCK_EX):
            built = None
            if not exists():
                _remembered_failure(locks, key, job)
                built = build_now()
            fcntl.flock(fd, fcntl.LOCK_SH)  # built, here or just before: used from now on
            return (built or _reuse(prefix, key, job)).holding(fd)
        if not waited:
            waited = True
            owner = _builder(os.path.join(locks, key + ".json"))
            by = owner.get("job")
            # When a replica of this job builds, its status is the truer one; when the builder's
            # file is gone, it has just finished (the environment is there once we get the lock).
            if owner and by != job.name:
                _status(
                    job,
                    {
                        "state": "building",
                        "key": key,
                        "by": by,
                        "packages": owner.get("packages"),
                        "requirements": owner.get("requirements"),
                        "installer": owner.get("installer"),
                    },
                )
            say(f"paddle-nbext: waiting for environment {key}, which job {by or 'another replica'} is building")
        fcntl.flock(fd, fcntl.LOCK_SH)  # until the builder is done
        if exists():
            return _reuse(prefix, key, job).holding(fd)
        fcntl.flock(fd, fcntl.LOCK_UN)
        _remembered_failure(locks, key, job)
        time.sleep(random.uniform(0.01, 0.1))  # others looked at the same moment: one of us builds


def _builder(owner_file: str, patience: float = 2.0) -> dict[str, Any]:
    """Who builds the environment, from the file its builder writes right after taking the lock
    and removes when done; {} when it does not appear within `patience` seconds.  A waiter can
    look between the builder's lock and its file: without the wait it would say less than it
    knows, and for a replica of the builder's job overwrite the builder's truer status."""
    deadline = time.monotonic() + patience
    while True:
        owner = read_json(owner_file)
        if owner or time.monotonic() >= deadline:
            return owner or {}
        time.sleep(0.02)


def _remembered_failure(locks: str, key: str, job: Job) -> None:
    """Raise the failure this job met building `key` before (its other replicas, its retries)."""
    failed = read_json(os.path.join(locks, key + ".failed.json"))
    if failed and failed.get("job") == job.name and isinstance(failed.get("reason"), str):
        _status(job, {"state": "failed", "key": key, "reason": failed["reason"], "installer": failed.get("installer")})
        raise BuildFailed(failed["reason"])


def _try_lock(fd: int, kind: int) -> bool:
    """Take the lock `kind` without waiting (converting one held); False when others hold it."""
    try:
        fcntl.flock(fd, kind | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def _reuse(prefix: str, key: str, job: Job) -> Prepared:
    info = read_json(os.path.join(prefix, INFO_FILE)) or {}
    with contextlib.suppress(OSError):
        with open(os.path.join(prefix, LAST_USED_FILE), "a", encoding="utf-8"):
            pass
        os.utime(os.path.join(prefix, LAST_USED_FILE))
    packages = [str(each) for each in info.get("installed") or []]
    mine = read_status(job.logs_dir) if job.logs_dir else None
    if not (mine and mine.get("key") == key and mine.get("state") == "ready"):  # a replica of this job built it: say so
        _status(job, {"state": "ready", "key": key, "reused": True, "packages": len(packages), "installer": info.get("installer")})
    return Prepared(key, prefix, str(info.get("installer") or ""), True, packages)


def _build_locked(
    requirements: Requirements,
    settings: IndexSettings,
    base: Mapping[str, tuple[str, str]],
    key: str,
    envs_dir: str,
    job: Job,
    env: Mapping[str, str],
    package_dir: str,
    owner_file: str,
    say: Callable[[str], None],
) -> Prepared:
    installer = "uv" if env_build.find_uv(env) else "pip"
    started = time.time()
    owner: dict[str, Any] = {"job": job.name, "requirements": requirements.count(), "installer": installer, "started": started}
    write_json(owner_file, owner)
    _status(job, {"state": "building", "key": key, "requirements": requirements.count(), "installer": installer})
    say(f"paddle-nbext: building environment {key} for {requirements.path} with {installer}")
    building = tempfile.mkdtemp(prefix=f".{key}.building-", dir=envs_dir)
    logs = [os.path.join(building, INSTALL_LOG)]
    if job.logs_dir:
        logs.append(os.path.join(job.logs_dir, LOG_FILE))
    output = env_build.InstallerOutput(logs, settings.secrets())

    def resolved(count: int) -> None:
        owner["packages"] = count
        with contextlib.suppress(OSError):
            write_json(owner_file, owner)
        _status(job, {"state": "building", "key": key, "packages": count, "installer": installer})

    try:
        used, packages = env_build.build(
            building, requirements, settings, base, output, env, package_dir, os.path.join(envs_dir, ".cache"), resolved
        )
    except BuildFailed as failure:
        output.close()
        reason = explain(str(failure), requirements, base)
        write_json(
            os.path.join(envs_dir, ".locks", key + ".failed.json"),
            {"job": job.name, "reason": reason, "installer": installer, "time": time.time()},
        )
        _status(job, {"state": "failed", "key": key, "reason": reason, "installer": installer})
        shutil.rmtree(building, ignore_errors=True)
        raise BuildFailed(reason) from None
    except BaseException:
        output.close()
        shutil.rmtree(building, ignore_errors=True)
        raise
    finally:  # present only while a build runs, so a waiter never reads a past builder's
        with contextlib.suppress(OSError):
            os.unlink(owner_file)
    output.close()
    seconds = round(time.time() - started, 3)
    info = {
        "key": key,
        "layout": LAYOUT,
        "requirements": [entry.text for entry in requirements.entries],
        "requirements_file": requirements.path,
        "requirements_digest": requirements.digest,
        "python": sys.version.split()[0],
        "interpreter": env_build.interpreter_id(),
        "platform": sysconfig.get_platform(),
        "image": job.image,
        "index": settings.masked(),
        "installer": used,
        "installed": packages,
        "built": time.time(),
        "built_by": job.name,
        "seconds": seconds,
    }
    write_json(os.path.join(building, INFO_FILE), info)
    with open(os.path.join(building, LAST_USED_FILE), "w", encoding="utf-8"):
        pass
    prefix = os.path.join(envs_dir, key)
    os.replace(building, prefix)
    with contextlib.suppress(OSError):
        os.unlink(os.path.join(envs_dir, ".locks", key + ".failed.json"))
    _status(job, {"state": "ready", "key": key, "reused": False, "packages": len(packages), "installer": used, "seconds": seconds})
    say(
        f"paddle-nbext: environment {key} ready: {len(packages)} package{'s' if len(packages) != 1 else ''} installed by {used} in {seconds:.1f}s"
    )
    return Prepared(key, prefix, used, False, packages, seconds)
