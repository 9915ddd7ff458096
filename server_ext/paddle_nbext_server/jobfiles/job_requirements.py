"""The server's half of a job's own Python packages (the replicas' half is
`runtime/environments.py`, which builds the environment with the job's interpreter).

At submit, before anything is written, the requirements file is found (the `requirements` field,
else `requirements.txt` when the package has one) and read: a file that does not exist, escapes
the package, is not text, or names Paddle itself is a 422 on `requirements` naming the file and
line.  The job then carries three launcher inputs: the file's path in the package, where
environments live, and the site's index settings, written into the job's own directory (never
into a record, a manifest or the dry run, since an index URL may hold a credential).  While the
job runs, the environment step's status file gives the job its message ("Preparing environment:
12 packages (uv)") and its output is the job's `environment` log.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from collections.abc import AsyncGenerator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from paddle_nbext.model.spec import JobSpec, SpecError

from ..runtime import environments

#: The requirements file a package without a `requirements` setting is looked for under.
DEFAULT_FILE = "requirements.txt"
#: The site's index settings, in the job's directory (mode 0600).
INDEX_FILE = "pip-index.json"
#: Where environments live, under the jobs dir (`~/.paddle-jobs/envs`); no job may take the name.
ENVS_DIR = "envs"


@dataclass(frozen=True)
class Site:
    """The server's `pip_*` settings: where packages come from and which installer to use."""

    index: environments.IndexSettings
    installer: str = "auto"

    @classmethod
    def from_config(cls, config: Any) -> Site:
        """From the `PaddleNbext` app's traits (absent ones: the installers' defaults)."""

        def words(name: str) -> tuple[str, ...]:
            return tuple(str(each) for each in (getattr(config, name, None) or ()) if str(each).strip())

        index = environments.IndexSettings(
            str(getattr(config, "pip_index_url", "") or ""),
            words("pip_extra_index_urls"),
            words("pip_find_links"),
            words("pip_trusted_hosts"),
            bool(getattr(config, "pip_no_index", False)),
        )
        return cls(index, str(getattr(config, "pip_installer", "auto") or "auto"))

    def is_default(self) -> bool:
        return self.index == environments.IndexSettings() and self.installer == "auto"

    def to_json(self) -> dict[str, Any]:
        return {**self.index.to_json(), "installer": self.installer}

    def shown(self) -> dict[str, Any]:
        """What a dry run may show: credentials masked."""
        return {**self.index.masked(), "installer": self.installer}


@dataclass(frozen=True)
class Requirements:
    """A job's requirements as found at submit."""

    file: str  # relative to the package dir, "/"-separated
    count: int
    digest: str
    lines: tuple[str, ...]

    def launcher_env(self, envs_dir: str, index_file: str | None) -> dict[str, str]:
        """The launcher inputs (`runtime/environments.py`)."""
        env = {environments.REQUIREMENTS_VAR: self.file, environments.ENVS_DIR_VAR: envs_dir}
        if index_file:
            env[environments.INDEX_FILE_VAR] = index_file
        return env


def find_requirements(spec: JobSpec, package: Path) -> Requirements | None:
    """The job's requirements read from its package (blocking; call it in a thread), None when it
    has none.  SpecError on `requirements` for a file that cannot be used."""
    named = spec.requirements.strip()
    relative = named or DEFAULT_FILE
    path = package / relative
    if not named and not path.is_file():
        return None
    if named and not path.is_file():
        what = "is a directory" if path.is_dir() else "does not exist"
        raise SpecError("requirements", f"'{named}' {what} in the package directory {package}; give the path of a requirements file in it")
    try:
        found = environments.read_requirements(str(path), str(package))
    except environments.RequirementsError as error:
        raise SpecError("requirements", str(error)) from None
    refused = found.paddle_lines()
    if refused:
        first = refused[0]
        raise SpecError(
            "requirements",
            f"{first.file} line {first.line} names {first.text}: Paddle comes from the job's image and is never replaced "
            "(its compiled code must match the image's CUDA and libraries); remove the line, or choose an image with the Paddle you need",
        )
    return Requirements(found.path.replace(os.sep, "/"), found.count(), found.digest, tuple(entry.text for entry in found.entries))


def write_index_file(job_dir: Path, site: Site) -> str | None:
    """Write the site's settings for the job's launchers (owner-only), None when the site sets none."""
    if site.is_default():
        return None
    path = job_dir / INDEX_FILE
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        json.dump(site.to_json(), out)
    return str(path)


def message(logs_dir: Path) -> str | None:
    """The job's message while its environment is being prepared, None otherwise (blocking)."""
    status = environments.read_status(str(logs_dir))
    return environments.phase_message(status) if status else None


def log_file(logs_dir: Path) -> Path:
    """The job's `environment` log: the installer's output."""
    return logs_dir / environments.LOG_FILE


def preview(requirements: Requirements | None, envs_dir: Path, site: Site, image: str = "") -> dict[str, Any] | None:
    """What a dry run says about the job's environment (blocking): its file, how many
    requirements, whether an environment for them exists (matched by the requirements' digest
    and the index settings; the interpreter is only known where the job runs, so one built for
    another image or Python is reported as such) or will be built, and the index settings with
    credentials masked."""
    if requirements is None:
        return None
    matches = []
    for info in environments.environments(str(envs_dir)):
        if info.get("requirements_digest") == requirements.digest and info.get("index") == site.index.masked():
            matches.append(info)
    same_image = [info for info in matches if not image or info.get("image") in ("", image)]
    if same_image:
        best = max(same_image, key=lambda info: float(info.get("last_used") or 0))
        state = "exists"
        words = f"environment {best.get('key')} exists ({len(best.get('installed') or [])} packages, Python {best.get('python')}); the job starts without installing"
    elif matches:
        state = "build"
        words = f"will be built: the environments for these requirements were built for other images ({', '.join(sorted({str(i.get('image')) for i in matches}))})"
    else:
        state = "build"
        words = f"will be built before the replicas start ({requirements.count} requirement{'s' if requirements.count != 1 else ''})"
    return {
        "file": requirements.file,
        "requirements": list(requirements.lines),
        "environment": state,
        "summary": words,
        "index": site.shown(),
    }


def read_log(path: Path, tail: int | None) -> str:
    """The environment log's text, or its last `tail` lines (blocking)."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return ""
    if tail is None:
        return text
    return "".join(text.splitlines(keepends=True)[-tail:]) if tail > 0 else ""


def build_finished(logs_dir: Path) -> bool:
    """Whether the job's environment step has ended (ready, reused or failed), so its log is complete."""
    status = environments.read_status(str(logs_dir))
    return status is not None and status.get("state") in ("ready", "failed")


async def follow_log(path: Path, tail: int | None, job_ended: Callable[[], Awaitable[bool]]) -> AsyncGenerator[str, None]:
    """The environment log as it is written, until the step or the job has ended."""
    text = await asyncio.to_thread(read_log, path, tail)
    offset = len(text.encode("utf-8")) if tail is None else await asyncio.to_thread(_size, path)
    if text:
        yield text
    while True:
        done = await asyncio.to_thread(build_finished, path.parent) or await job_ended()
        more = await asyncio.to_thread(_read_from, path, offset)
        if more:
            offset += len(more)
            yield more.decode("utf-8", errors="replace")
        if done:
            return
        await asyncio.sleep(FOLLOW_POLL)


#: Seconds between looks at a followed environment log.
FOLLOW_POLL = 0.5


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _read_from(path: Path, offset: int) -> bytes:
    try:
        with open(path, "rb") as handle:
            handle.seek(offset)
            return handle.read()
    except OSError:
        return b""


def remove_index_file(job_dir: Path) -> None:
    """Take back the settings file of a job whose submit was rolled back."""
    with contextlib.suppress(OSError):
        (job_dir / INDEX_FILE).unlink()
