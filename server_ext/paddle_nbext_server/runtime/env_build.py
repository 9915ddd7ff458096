"""Building a job's environment: what the interpreter already has, the environment's key, and
the installer run (uv when there is one, pip otherwise) that adds what is missing into a prefix
of its own.

Why this shape (the whole story is in `environments.py`): everything the interpreter has is a
constraint at its installed version, so Paddle and the libraries its compiled code was built
against stay the image's, and a requirement that needs another version fails with the
installer's own words (`installer_reason`, `explain`) instead of breaking Paddle at import time.
This module only builds; who builds, and when, is `environments.ensure`'s business.

Standard library only: this file is shipped into every job beside the launcher.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
from collections.abc import Callable, Mapping

if __package__:  # imported from the installed package (the server, the local backend)
    from . import env_index, env_requirements
else:  # a plain script: the bundle's files beside this one
    import env_index  # type: ignore[import-not-found,no-redef]
    import env_requirements  # type: ignore[import-not-found,no-redef]

#: Bumped when the layout changes, so an older release's environments are never reused.
LAYOUT = "1"


class BuildFailed(RuntimeError):
    """The environment could not be built; the message is the installer's own line."""


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
                found.setdefault(env_requirements.canonical_name(match["name"]), (match["name"].replace("_", "-"), match["version"]))
    return found


def interpreter_id() -> str:
    """What makes wheels fit: version, ABI and platform."""
    return f"{sys.implementation.cache_tag}|{sys.version.split()[0]}|{sysconfig.get_platform()}|{sys.maxsize > 2**32}"


def environment_key(
    requirements: env_requirements.Requirements, settings: env_index.IndexSettings, base: Mapping[str, tuple[str, str]]
) -> str:
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
    if env_index.site_installer(env) == "pip":
        return None
    beside = os.path.join(os.path.dirname(sys.executable), "uv")
    if os.access(beside, os.X_OK):
        return beside
    return shutil.which("uv", path=env.get("PATH") or None)


class InstallerOutput:
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


def _run(argv: list[str], output: InstallerOutput, env: Mapping[str, str], cwd: str) -> int:
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


def build(
    prefix: str,
    requirements: env_requirements.Requirements,
    settings: env_index.IndexSettings,
    base: Mapping[str, tuple[str, str]],
    output: InstallerOutput,
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


def explain(reason: str, requirements: env_requirements.Requirements, base: Mapping[str, tuple[str, str]]) -> str:
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
    have = base.get(env_requirements.canonical_name(found.group(1)))
    return have is not None and have[1] == found.group(2)


def installed_in(prefix: str) -> list[str]:
    """`name==version` of the distributions in an environment's package directories."""
    from importlib import metadata  # here only: importing it took ~25 ms of every replica's start

    site = [os.path.join(prefix, each) for each in site_dirs(prefix)]
    if not site:
        return []
    return sorted(f"{dist.metadata['Name']}=={dist.version}" for dist in metadata.distributions(path=site) if dist.metadata["Name"])
