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

Standard library only: this file is shipped into every job beside the launcher.
"""

from __future__ import annotations

import configparser
import contextlib
import fcntl
import functools
import hashlib
import json
import os
import random
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit, urlunsplit

#: Inputs from the job runner (both backends set them; none set: the job has no requirements).
REQUIREMENTS_VAR = "PADDLE_NBEXT_REQUIREMENTS"  # the requirements file's path, in the package
ENVS_DIR_VAR = "PADDLE_NBEXT_ENVS_DIR"  # where environments live: <home>/.paddle-jobs/envs
INDEX_FILE_VAR = "PADDLE_NBEXT_PIP_INDEX_FILE"  # the site's index settings (JSON), optional
#: In the job's logs dir: what the environment step is doing (the server shows it as the job's
#: message) and the installer's output (shown as the job's `environment` log).
STATUS_FILE = "environment.json"
LOG_FILE = "environment.log"
#: In an environment's directory.
INFO_FILE = "env.json"
INSTALL_LOG = "install.log"
LAST_USED_FILE = "last-used"
#: Bumped when the layout changes, so an older release's environments are never reused.
LAYOUT = "1"
MAX_REQUIREMENTS_BYTES = 256 * 1024
_PADDLE = re.compile(r"^paddlepaddle(?:-[a-z0-9-]+)?$")
_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")
_INCLUDE = re.compile(r"^(-r|--requirement|-c|--constraint)(?:\s+|=)(.+)$")
_KEY = re.compile(r"^[0-9a-f]{16}$")


class RequirementsError(ValueError):
    """A requirements file that cannot be used as it is; `file` and `line` say where."""

    def __init__(self, message: str, file: str = "", line: int = 0) -> None:
        super().__init__(message)
        self.file, self.line = file, line


class BuildFailed(RuntimeError):
    """The environment could not be built; the message is the installer's own line."""


def canonical_name(name: str) -> str:
    """A project name as indexes compare them (PEP 503)."""
    return re.sub(r"[-_.]+", "-", name).lower()


# ---------------------------------------------------------------------------- requirements files


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


# ---------------------------------------------------------------------------- index settings


@dataclass(frozen=True)
class IndexSettings:
    """Where packages come from: the site's settings merged with the user's pip.conf."""

    index_url: str = ""
    extra_index_urls: tuple[str, ...] = ()
    find_links: tuple[str, ...] = ()
    trusted_hosts: tuple[str, ...] = ()
    no_index: bool = False

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> IndexSettings:
        def words(key: str) -> tuple[str, ...]:
            value = data.get(key) or ()
            return tuple(str(each) for each in ([value] if isinstance(value, str) else value) if str(each).strip())

        return cls(
            str(data.get("index_url") or ""),
            words("extra_index_urls"),
            words("find_links"),
            words("trusted_hosts"),
            bool(data.get("no_index")),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "index_url": self.index_url,
            "extra_index_urls": list(self.extra_index_urls),
            "find_links": list(self.find_links),
            "trusted_hosts": list(self.trusted_hosts),
            "no_index": self.no_index,
        }

    def merged(self, user: IndexSettings) -> IndexSettings:
        """The site's settings, with the user's pip.conf filling what the site leaves open and
        adding its extra indexes, links and trusted hosts."""
        return IndexSettings(
            self.index_url or user.index_url,
            _unique(self.extra_index_urls + user.extra_index_urls),
            _unique(self.find_links + user.find_links),
            _unique(self.trusted_hosts + user.trusted_hosts),
            self.no_index or user.no_index,
        )

    def secrets(self) -> list[str]:
        """The passwords and tokens in the URLs, to keep out of every log."""
        found = []
        for url in (self.index_url, *self.extra_index_urls, *self.find_links):
            parts = urlsplit(url)
            for secret in (parts.password, parts.username if parts.password is None else None):
                if secret and len(secret) >= 4:
                    found.append(secret)
        return found

    def masked(self) -> dict[str, Any]:
        """`to_json` with credentials replaced by `***` (for records, logs and the dry run)."""
        data = self.to_json()
        data["index_url"] = mask_url(self.index_url)
        data["extra_index_urls"] = [mask_url(url) for url in self.extra_index_urls]
        data["find_links"] = [mask_url(url) for url in self.find_links]
        return data

    def args(self, installer: str) -> list[str]:
        """The same settings as either installer's flags."""
        words: list[str] = []
        if self.no_index:
            words.append("--no-index")
        if self.index_url:
            words += ["--index-url", self.index_url]
        for url in self.extra_index_urls:
            words += ["--extra-index-url", url]
        for link in self.find_links:
            words += ["--find-links", link]
        for host in self.trusted_hosts:
            words += ["--allow-insecure-host" if installer == "uv" else "--trusted-host", host]
        return words


def _unique(values: Iterable[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(values))


def mask_url(url: str) -> str:
    """`url` with its password (or a lone token) replaced by `***`."""
    parts = urlsplit(url)
    if not parts.username and not parts.password:
        return url
    host = parts.hostname or ""
    if parts.port:
        host += f":{parts.port}"
    user = f"{parts.username}:***" if parts.password is not None else "***"
    return urlunsplit((parts.scheme, f"{user}@{host}", parts.path, parts.query, parts.fragment))


def pip_conf_files(env: Mapping[str, str]) -> list[str]:
    """The pip configuration files of the user, in pip's order (later ones win)."""
    if env.get("PIP_CONFIG_FILE"):
        return [env["PIP_CONFIG_FILE"]] if env["PIP_CONFIG_FILE"] != os.devnull else []
    home = env.get("HOME", "")
    config_home = env.get("XDG_CONFIG_HOME") or (os.path.join(home, ".config") if home else "")
    files = ["/etc/pip.conf"]
    if home:
        files.append(os.path.join(home, ".pip", "pip.conf"))
    if config_home:
        files.append(os.path.join(config_home, "pip", "pip.conf"))
    return files


def read_pip_conf(env: Mapping[str, str]) -> IndexSettings:
    """The index settings of the user's pip.conf ([global] and [install]); empty when none."""
    parser = configparser.RawConfigParser()
    with contextlib.suppress(configparser.Error, OSError):
        parser.read([path for path in pip_conf_files(env) if os.path.isfile(path)], encoding="utf-8")

    def value(key: str) -> str:
        for section in ("install", "global"):
            if parser.has_option(section, key):
                return parser.get(section, key).strip()
        return ""

    def many(key: str) -> tuple[str, ...]:
        return tuple(word for word in value(key).split() if word)

    return IndexSettings(
        value("index-url"),
        many("extra-index-url"),
        many("find-links"),
        many("trusted-host"),
        value("no-index").lower() in ("1", "true", "yes", "on"),
    )


def site_settings(env: Mapping[str, str]) -> IndexSettings:
    """The site's settings from the file the job runner wrote (`INDEX_FILE_VAR`); empty when none."""
    path = env.get(INDEX_FILE_VAR, "").strip()
    if not path:
        return IndexSettings()
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except (OSError, ValueError):
        return IndexSettings()
    return IndexSettings.from_json(data) if isinstance(data, dict) else IndexSettings()


def site_installer(env: Mapping[str, str]) -> str:
    """The installer the site asks for: `uv`, `pip` or `auto` (uv when there is one) [auto]."""
    path = env.get(INDEX_FILE_VAR, "").strip()
    data = read_json(path) if path else None
    chosen = str((data or {}).get("installer") or "auto")
    return chosen if chosen in ("uv", "pip", "auto") else "auto"


# ---------------------------------------------------------------------------- the interpreter


_DIST_DIR = re.compile(r"^(?P<name>[A-Za-z0-9][A-Za-z0-9._]*?)-(?P<version>[^-]+?)(?:-py\d[\d.]*)?\.(?:dist|egg)-info$")


def installed() -> dict[str, tuple[str, str]]:
    """{canonical name: (name, version)} of what this interpreter imports, first on sys.path
    wins.  From the metadata directories' names (`name-version.dist-info`, one listing per path
    entry), not their METADATA files: a job with an environment starts after this, and parsing
    a few hundred files took most of a second on a busy node."""
    found: dict[str, tuple[str, str]] = {}
    for entry in sys.path:
        try:
            names = os.listdir(entry or ".")
        except OSError:
            continue
        for name in sorted(names):
            match = _DIST_DIR.match(name)
            if match:
                found.setdefault(canonical_name(match["name"]), (match["name"].replace("_", "-"), match["version"]))
    return found


def interpreter_id() -> str:
    """What makes wheels fit: version, ABI and platform."""
    return f"{sys.implementation.cache_tag}|{sys.version.split()[0]}|{sysconfig.get_platform()}|{sys.maxsize > 2**32}"


def environment_key(requirements: Requirements, settings: IndexSettings, base: Mapping[str, tuple[str, str]]) -> str:
    """The environment's name: 16 hex digits over every input that changes what gets installed."""
    hashed = hashlib.sha256(f"layout {LAYOUT}\0".encode())
    hashed.update(requirements.digest.encode() + b"\0" + interpreter_id().encode() + b"\0")
    hashed.update(json.dumps(settings.to_json(), sort_keys=True).encode() + b"\0")
    for name in sorted(base):
        hashed.update(f"{name}=={base[name][1]}\0".encode())
    return hashed.hexdigest()[:16]


def site_dirs(prefix: str) -> list[str]:
    """The package directories an install into `prefix` made, relative to it: where `--prefix`
    puts them is the interpreter's scheme (`lib/python3.11/site-packages`, or Debian's
    `local/lib/python3.11/dist-packages`), so they are looked for rather than assumed."""
    found = []
    for root, dirs, _ in os.walk(prefix):
        for name in list(dirs):
            if name in ("site-packages", "dist-packages"):
                found.append(os.path.relpath(os.path.join(root, name), prefix))
                dirs.remove(name)
        if os.path.relpath(root, prefix).count(os.sep) >= 3:
            dirs.clear()
    return sorted(found)


def bin_dirs(prefix: str) -> list[str]:
    """The script directories of an install into `prefix` (`bin`, Debian's `local/bin`), relative."""
    return [each for each in ("bin", os.path.join("local", "bin")) if os.path.isdir(os.path.join(prefix, each))]


def find_uv(env: Mapping[str, str]) -> str | None:
    """uv on the job's PATH or beside the interpreter (a virtual environment's bin); None when
    the site chose pip (`"installer": "pip"` in its settings file) or there is none."""
    if site_installer(env) == "pip":
        return None
    beside = os.path.join(os.path.dirname(sys.executable), "uv")
    if os.access(beside, os.X_OK):
        return beside
    return shutil.which("uv", path=env.get("PATH") or None)


# ---------------------------------------------------------------------------- status and log files


def write_json(path: str, data: Mapping[str, Any]) -> None:
    """Write atomically (a reader never sees half a file); errors are the caller's."""
    directory = os.path.dirname(path) or "."
    handle, temporary = tempfile.mkstemp(prefix=".", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            json.dump(data, out)
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


def read_json(path: str) -> dict[str, Any] | None:
    """A JSON object file, None when missing or unreadable."""
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def read_status(logs_dir: str) -> dict[str, Any] | None:
    """The job's environment status (`STATUS_FILE`), for the server: None when the job has none."""
    return read_json(os.path.join(logs_dir, STATUS_FILE))


def phase_message(status: Mapping[str, Any]) -> str | None:
    """The job's message while its environment is being prepared; None once it is ready or failed."""
    if status.get("state") != "building":
        return None
    packages, requirements = status.get("packages"), status.get("requirements")
    if isinstance(packages, int):  # resolved: what will be installed
        what = f"{packages} package{'s' if packages != 1 else ''}"
    elif isinstance(requirements, int):  # before the resolver has answered: the file's lines
        what = f"{requirements} requirement{'s' if requirements != 1 else ''}"
    else:
        what = "requirements"
    by = status.get("by")
    waiting = f", built by job {by}" if isinstance(by, str) and by and by != status.get("job") else ""
    installer = status.get("installer")
    by_what = f" ({installer})" if isinstance(installer, str) and installer else ""
    return f"Preparing environment: {what}{by_what}{waiting}"


class _Output:
    """Where the installer's output goes: the job's environment log and the environment's own
    install log, with every credential replaced by `***`."""

    def __init__(self, paths: list[str], secrets: list[str]) -> None:
        self.files = []
        for path in paths:
            with contextlib.suppress(OSError):
                self.files.append(open(path, "a", encoding="utf-8"))  # noqa: SIM115 - closed in close()
        self.secrets = secrets
        self.lines: list[str] = []

    def write(self, line: str) -> None:
        for secret in self.secrets:
            line = line.replace(secret, "***")
        self.lines.append(line.rstrip("\n"))
        del self.lines[:-200]
        for out in self.files:
            with contextlib.suppress(OSError):
                out.write(line if line.endswith("\n") else line + "\n")
                out.flush()

    def close(self) -> None:
        for out in self.files:
            with contextlib.suppress(OSError):
                out.close()


def installer_reason(lines: list[str]) -> str:
    """The installer's own words for why it failed: uv's `error:` (or `×`) line with the lines
    that explain it (`cause: Because ...`), pip's `ERROR:` lines, else the last line."""
    for number, line in enumerate(lines):
        stripped = line.strip()
        if stripped.startswith(("×", "error:")):
            words = [stripped.lstrip("×").strip().removeprefix("error:").strip()]
            for more in lines[number + 1 :]:
                if not more.strip():
                    continue
                if not more[:1].isspace() and not more.startswith(("╰", "│")):
                    break
                cleaned = more.strip().lstrip("│╰─▶ ").strip()
                words.append(cleaned.removeprefix("cause:").removeprefix("help:").strip())
            return ": ".join(word for word in words if word)[:500]
    errors = [line.strip()[len("ERROR:") :].strip() for line in lines if line.strip().startswith("ERROR:")]
    if errors:
        return " ".join(errors)[:500]
    text = [line.strip() for line in lines if line.strip() and not line.startswith("$ ")]
    return text[-1][:500] if text else "the installer failed and said nothing"


# ---------------------------------------------------------------------------- building


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
        for variable, found in (("PYTHONPATH", site_dirs(self.prefix)), ("PATH", bin_dirs(self.prefix))):
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


def _run(argv: list[str], output: _Output, env: Mapping[str, str], cwd: str) -> int:
    """Run an installer step, its output line by line to `output`; its exit code."""
    output.write("$ " + " ".join(argv))
    process = subprocess.Popen(argv, cwd=cwd, env=dict(env), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace")
    assert process.stdout is not None
    for line in process.stdout:
        output.write(line)
    return process.wait()


def _installer_env(env: Mapping[str, str], cache: str) -> dict[str, str]:
    """The installers' environment: theirs without our job's variables or their own config."""
    clean = {key: value for key, value in env.items() if not key.startswith(("PADDLE_", "PIP_", "UV_"))}
    clean.update(
        UV_CACHE_DIR=os.path.join(cache, "uv"),
        PIP_CACHE_DIR=os.path.join(cache, "pip"),
        UV_NO_PROGRESS="1",
        PYTHONDONTWRITEBYTECODE="1",
        # The user's pip.conf is already merged into the settings passed as flags: not read twice.
        PIP_CONFIG_FILE=os.devnull,
        # An interpreter its distribution manages (Debian's EXTERNALLY-MANAGED) refuses installs
        # into itself; ours go into a prefix of their own, beside it.
        PIP_BREAK_SYSTEM_PACKAGES="1",
        UV_BREAK_SYSTEM_PACKAGES="1",
    )
    return clean


def _pins(path: str) -> list[str]:
    """The requirement lines of a `uv pip compile` output."""
    with open(path, encoding="utf-8") as handle:
        return [line.strip() for line in handle if line.strip() and not line.lstrip().startswith("#")]


def _pin_name(pin: str) -> str:
    return canonical_name(re.split(r"[=<>!~ ;@\[]", pin, maxsplit=1)[0])


def build(
    prefix: str,
    requirements: Requirements,
    settings: IndexSettings,
    base: Mapping[str, tuple[str, str]],
    output: _Output,
    env: Mapping[str, str],
    package_dir: str,
    cache: str,
    on_resolved: Callable[[int], None],
) -> tuple[str, list[str]]:
    """Install what `requirements` needs and `base` lacks into `prefix`.  Returns (installer,
    installed pins); raises BuildFailed with the installer's words."""
    os.makedirs(prefix, exist_ok=True)
    constraints = os.path.join(prefix, "constraints.txt")
    with open(constraints, "w", encoding="utf-8") as handle:
        handle.writelines(f"{name}=={version}\n" for name, version in sorted(base.values()))
    run_env = _installer_env(env, cache)
    uv = find_uv(env)
    requirements_path = os.path.join(package_dir, requirements.path)
    if uv is not None:
        resolved = os.path.join(prefix, "resolved.txt")
        compile_argv = [uv, "pip", "compile", "--no-config", "--quiet", "--no-header", "--no-annotate", "--python", sys.executable]
        compile_argv += ["-c", constraints, "-o", resolved, *settings.args("uv"), requirements_path]
        if _run(compile_argv, output, run_env, package_dir) != 0:
            raise BuildFailed(installer_reason(output.lines))
        missing = [pin for pin in _pins(resolved) if not _already(pin, base)]
        on_resolved(len(missing))
        if missing:
            wanted = os.path.join(prefix, "install.txt")
            with open(wanted, "w", encoding="utf-8") as handle:
                handle.writelines(pin + "\n" for pin in missing)
            install_argv = [uv, "pip", "install", "--no-config", "--no-deps", "--python", sys.executable, "--prefix", prefix]
            install_argv += [*settings.args("uv"), "-r", wanted]
            if _run(install_argv, output, run_env, package_dir) != 0:
                raise BuildFailed(installer_reason(output.lines))
        return "uv", missing
    before = installed_in(prefix)
    pip_argv = [
        sys.executable,
        "-m",
        "pip",
        "install",
        "--no-input",
        "--disable-pip-version-check",
        "--no-warn-script-location",
    ]
    pip_argv += ["--prefix", prefix, "-c", constraints, *settings.args("pip"), "-r", requirements_path]
    if _run(pip_argv, output, run_env, package_dir) != 0:
        raise BuildFailed(installer_reason(output.lines))
    return "pip", sorted(set(installed_in(prefix)) - set(before))


def explain(reason: str, requirements: Requirements, base: Mapping[str, tuple[str, str]]) -> str:
    """The installer's reason with the requirement line it is about, and, when the conflict is
    with a package the interpreter has, that the environment only adds packages."""
    where = requirements.line_of(reason)
    if where is not None:
        reason += f" ({where.file} line {where.line})"
    pinned = [
        f"{name}=={version}" for name, version in base.values() if re.search(rf"(?<![\w.-]){re.escape(name)}==", reason, re.IGNORECASE)
    ]
    if pinned:
        reason += f"; {', '.join(pinned[:3])} {'is' if len(pinned) == 1 else 'are'} the image's, and a job's requirements add packages without replacing the image's (use an image that has the version you need)"
    return reason


def _already(pin: str, base: Mapping[str, tuple[str, str]]) -> bool:
    """Whether a resolved `name==version` pin is what the interpreter already has."""
    found = re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;]+)", pin)
    if not found:
        return False
    have = base.get(canonical_name(found.group(1)))
    return have is not None and have[1] == found.group(2)


def installed_in(prefix: str) -> list[str]:
    """`name==version` of the distributions in an environment's package directories."""
    from importlib import metadata  # here only: importing it took ~25 ms of every replica's start

    site = [os.path.join(prefix, each) for each in site_dirs(prefix)]
    if not site:
        return []
    return sorted(f"{dist.metadata['Name']}=={dist.version}" for dist in metadata.distributions(path=site) if dist.metadata["Name"])


def _status(job: Job, data: dict[str, Any]) -> None:
    if job.logs_dir:
        with contextlib.suppress(OSError):
            os.makedirs(job.logs_dir, exist_ok=True)
            write_json(os.path.join(job.logs_dir, STATUS_FILE), {"job": job.name, "time": time.time(), **data})


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
    settings = site_settings(env).merged(read_pip_conf(env))
    base = installed()
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
    installer = "uv" if find_uv(env) else "pip"
    started = time.time()
    owner: dict[str, Any] = {"job": job.name, "requirements": requirements.count(), "installer": installer, "started": started}
    write_json(owner_file, owner)
    _status(job, {"state": "building", "key": key, "requirements": requirements.count(), "installer": installer})
    say(f"paddle-nbext: building environment {key} for {requirements.path} with {installer}")
    building = tempfile.mkdtemp(prefix=f".{key}.building-", dir=envs_dir)
    logs = [os.path.join(building, INSTALL_LOG)]
    if job.logs_dir:
        logs.append(os.path.join(job.logs_dir, LOG_FILE))
    output = _Output(logs, settings.secrets())

    def resolved(count: int) -> None:
        owner["packages"] = count
        with contextlib.suppress(OSError):
            write_json(owner_file, owner)
        _status(job, {"state": "building", "key": key, "packages": count, "installer": installer})

    try:
        used, packages = build(building, requirements, settings, base, output, env, package_dir, os.path.join(envs_dir, ".cache"), resolved)
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
        "interpreter": interpreter_id(),
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


# ---------------------------------------------------------------------------- housekeeping


def environments(envs_dir: str) -> list[dict[str, Any]]:
    """Every built environment's record (`INFO_FILE`) plus its path and when it was last used."""
    found = []
    try:
        names = sorted(os.listdir(envs_dir))
    except OSError:
        return []
    for name in names:
        if not _KEY.match(name):
            continue
        path = os.path.join(envs_dir, name)
        info = read_json(os.path.join(path, INFO_FILE))
        if info is None:
            continue
        try:
            last_used = os.stat(os.path.join(path, LAST_USED_FILE)).st_mtime
        except OSError:
            last_used = float(info.get("built") or 0)
        found.append({**info, "path": path, "last_used": last_used})
    return found
