"""A job's `requirements.txt` read the way pip reads it, for the environment's key and for the
words of its errors (`environments.py` builds the environment from it).

Why a reader of our own: the environment's key must cover every byte that changes what gets
installed, including the files the requirements include (`-r`, `-c`) and the local wheels and
directories they name, and a refusal must name the file and line a user has to fix; pip's own
parser is not a public API and is not in every image.  Every file must be inside the job's
package snapshot, so that the key covers all of it.

Standard library only: this file is shipped into every job beside the launcher.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

MAX_REQUIREMENTS_BYTES = 256 * 1024
_PADDLE = re.compile(r"^paddlepaddle(?:-[a-z0-9-]+)?$")
_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")
_INCLUDE = re.compile(r"^(-r|--requirement|-c|--constraint)(?:\s+|=)(.+)$")


class RequirementsError(ValueError):
    """A requirements file that cannot be used as it is; `file` and `line` say where."""

    def __init__(self, message: str, file: str = "", line: int = 0) -> None:
        super().__init__(message)
        self.file, self.line = file, line


def canonical_name(name: str) -> str:
    """A project name as indexes compare them (PEP 503)."""
    return re.sub(r"[-_.]+", "-", name).lower()


@dataclass(frozen=True)
class Requirement:
    """One requirement line: its project name (None for a bare path or URL), where it is, its text."""

    name: str | None
    file: str
    line: int
    text: str


@dataclass(frozen=True)
class Requirements:
    """A requirements file as read: its requirement lines, and the bytes of every file it is
    made of (itself, what it includes with -r/-c, the local files it names) for the key."""

    path: str
    entries: tuple[Requirement, ...]
    digest: str

    def count(self) -> int:
        return len(self.entries)

    def line_of(self, text: str) -> Requirement | None:
        """The requirement a message is about: the first whose project name it names."""
        lowered = text.lower()
        for entry in self.entries:
            if entry.name and re.search(rf"(?<![a-z0-9_.-]){re.escape(entry.name.lower())}(?![a-z0-9_-])", lowered):
                return entry
        return None

    def paddle_lines(self) -> list[Requirement]:
        """Lines that name Paddle itself, which is the image's and never replaced."""
        return [entry for entry in self.entries if entry.name and _PADDLE.match(canonical_name(entry.name))]


def _logical_lines(text: str) -> Iterator[tuple[int, str]]:
    """(first line number, line) with comments dropped and `\\` continuations joined, as pip reads."""
    pending, start = "", 0
    for number, raw in enumerate(text.splitlines(), start=1):
        line = re.sub(r"(^|\s)#.*$", "", raw).rstrip()
        if not pending:
            start = number
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        whole = (pending + line).strip()
        pending = ""
        if whole:
            yield start, whole


def read_requirements(path: str, package_dir: str) -> Requirements:
    """Read `path` and what it includes; every file must be inside `package_dir` (the job's
    snapshot), so the key covers all of it.  Raises RequirementsError naming file and line."""
    root = os.path.realpath(package_dir)
    hashed = hashlib.sha256()
    entries: list[Requirement] = []
    seen: set[str] = set()

    def shown(real: str) -> str:
        return os.path.relpath(real, root)

    def inside(candidate: str) -> bool:
        return candidate == root or candidate.startswith(root + os.sep)

    def read(file: str, included_from: tuple[str, int] | None) -> None:
        real = os.path.realpath(file)
        where = f"{included_from[0]} line {included_from[1]}: " if included_from else ""
        if not inside(real):
            raise RequirementsError(
                f"{where}{file} is outside the package directory; keep requirement files in the package", *(included_from or ("", 0))
            )
        if real in seen:
            return
        seen.add(real)
        try:
            with open(real, "rb") as handle:
                data = handle.read(MAX_REQUIREMENTS_BYTES + 1)
        except FileNotFoundError:
            raise RequirementsError(f"{where}{shown(real)} does not exist in the package", *(included_from or ("", 0))) from None
        except OSError as error:
            raise RequirementsError(
                f"{where}{shown(real)} cannot be read ({error.strerror or error})", *(included_from or ("", 0))
            ) from None
        if len(data) > MAX_REQUIREMENTS_BYTES:
            raise RequirementsError(
                f"{shown(real)} is larger than {MAX_REQUIREMENTS_BYTES // 1024} KiB; is it a requirements file?", shown(real)
            )
        try:
            text = data.decode("utf-8-sig")
        except UnicodeDecodeError:
            raise RequirementsError(f"{shown(real)} is not UTF-8 text; is it a requirements file?", shown(real)) from None
        hashed.update(shown(real).encode() + b"\0" + data + b"\0")
        for number, line in _logical_lines(text):
            include = _INCLUDE.match(line)
            if include:
                read(os.path.join(os.path.dirname(real), include.group(2).strip()), (shown(real), number))
                continue
            if line.startswith("-"):
                continue  # an option line (--index-url, --pre, ...): part of the file's bytes, so of the key
            local = _local_file(line, root)
            if local is not None:
                _hash_tree(hashed, local)
            name_match = None if local is not None or "://" in line.split("@")[0] else _NAME.match(line)
            named = name_match.group(1) if name_match else None
            if " @ " in line:
                named = line.split(" @ ", 1)[0].strip().split("[")[0]
            entries.append(Requirement(named, shown(real), number, line))

    read(path, None)
    return Requirements(shown(os.path.realpath(path)), tuple(entries), hashed.hexdigest())


def _local_file(line: str, root: str) -> str | None:
    """The local file or directory a requirement line names (`./wheels/x.whl`, `file:` URLs,
    `name @ file://...`), when it exists."""
    target = line.split(" @ ", 1)[1].strip() if " @ " in line else line.split(";")[0].strip()
    if target.startswith("file://"):
        target = urlsplit(target).path
    elif "://" in target or not (target.startswith((".", "/")) or target.endswith((".whl", ".tar.gz", ".zip"))):
        return None
    candidate = os.path.join(root, target)
    return candidate if os.path.exists(candidate) else None


def _hash_tree(hashed: Any, path: str) -> None:
    """Fold a local file's (or a directory's files') names and bytes into the key."""
    if os.path.isfile(path):
        paths = [path]
    else:
        paths = sorted(os.path.join(dirpath, name) for dirpath, _, names in os.walk(path) for name in names)
    for each in paths:
        with contextlib.suppress(OSError), open(each, "rb") as handle:
            hashed.update(each.encode() + b"\0")
            for block in iter(lambda: handle.read(1 << 20), b""):
                hashed.update(block)
