"""Set paddle-nbext's version, or check it: `python scripts/set_version.py 0.2.0` / `--check`.

The version is decided in one place, `paddle_nbext/__init__.py`'s `__version__` (the package
metadata reads it, the server and the CLI show it). The panel's npm package must carry the same
version in its npm form, because JupyterLab lists the extension by it and the built manifest is
what `jupyter labextension list` shows; this script writes that form into
`labextension/package.json` and `package-lock.json`, so a release changes one value with one
command, and `--check` (also run by tests/project/test_packaging.py) fails while they differ.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

from packaging.version import InvalidVersion, Version

ROOT = Path(__file__).resolve().parents[1]
INIT = ROOT / "paddle_nbext" / "__init__.py"
PANEL = ROOT / "labextension"
VERSION_LINE = re.compile(r'^__version__ = "([^"]+)"$', re.M)


def npm_form(version: str) -> str:
    """The npm (semver) form of a PEP 440 version: 1.2 -> 1.2.0, 1.2.0rc1 -> 1.2.0-rc.1."""
    parsed = Version(version)
    if parsed.post is not None or parsed.local is not None or parsed.epoch:
        raise ValueError(f"{version} has no npm form (no post, local or epoch parts)")
    release = ".".join(str(part) for part in (*parsed.release, 0, 0)[:3])
    if parsed.pre is not None:
        kind = {"a": "alpha", "b": "beta", "rc": "rc"}[parsed.pre[0]]
        return f"{release}-{kind}.{parsed.pre[1]}"
    if parsed.dev is not None:
        return f"{release}-dev.{parsed.dev}"
    return release


def python_version() -> str:
    found = VERSION_LINE.search(INIT.read_text(encoding="utf-8"))
    if found is None:
        raise SystemExit(f'set_version: no `__version__ = "..."` line in {INIT}')
    return found.group(1)


def panel_versions() -> dict[str, str]:
    """Where the panel states its version: file (and key) -> the version there."""
    package = json.loads((PANEL / "package.json").read_text(encoding="utf-8"))
    lock = json.loads((PANEL / "package-lock.json").read_text(encoding="utf-8"))
    return {
        "labextension/package.json": package["version"],
        "labextension/package-lock.json": lock["version"],
        'labextension/package-lock.json packages[""]': lock["packages"][""]["version"],
    }


def write_json(path: Path, data: dict[str, Any]) -> None:
    path.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def set_version(version: str) -> None:
    npm = npm_form(version)
    INIT.write_text(VERSION_LINE.sub(f'__version__ = "{version}"', INIT.read_text(encoding="utf-8"), count=1), encoding="utf-8")
    package_path = PANEL / "package.json"
    package = json.loads(package_path.read_text(encoding="utf-8"))
    package["version"] = npm
    write_json(package_path, package)
    lock_path = PANEL / "package-lock.json"
    lock = json.loads(lock_path.read_text(encoding="utf-8"))
    lock["version"] = npm
    lock["packages"][""]["version"] = npm
    write_json(lock_path, lock)


def disagreements() -> list[str]:
    expected = npm_form(python_version())
    return [f"{where} says {found}, not {expected}" for where, found in panel_versions().items() if found != expected]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("version", nargs="?", help="the new version (PEP 440, e.g. 0.2.0 or 0.3.0rc1)")
    parser.add_argument("--check", action="store_true", help="only check that every place agrees")
    args = parser.parse_args(argv)
    if args.version and not args.check:
        try:
            set_version(str(Version(args.version)))
        except (InvalidVersion, ValueError) as error:
            print(f"set_version: {error}", file=sys.stderr)
            return 2
    problems = disagreements()
    for problem in problems:
        print(f"set_version: {problem} (python scripts/set_version.py {python_version()})", file=sys.stderr)
    if not problems:
        print(f"paddle-nbext {python_version()} (panel {npm_form(python_version())})")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
