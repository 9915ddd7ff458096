"""docs/architecture.md's packages table is the layout a newcomer reads first, so it must be the
code's: every package it names is one, in the source dir it gives, and every module or folder it
lists for a package (a backticked `name` or `name/`) is a module or subpackage there. A package
of either Python package that the table leaves out fails too."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ARCHITECTURE = ROOT / "docs" / "architecture.md"
ROW = re.compile(r"^\| `(paddle_nbext[\w.]*)` \| `([\w./]+)` \| (.*) \|$")
#: Backticked words in a row that name no module: dunders, settings objects, files and the like.
NAME = re.compile(r"`([a-z][a-z0-9_]*)(/?)`")


def table_rows(text: str) -> list[tuple[str, str, str]]:
    return [match.groups() for line in text.splitlines() if (match := ROW.match(line))]  # type: ignore[misc]


def row_problems(package: str, source: str, holds: str) -> list[str]:
    directory = ROOT / source
    problems = []
    if not (directory / "__init__.py").is_file():
        return [f"`{package}`: `{source}` is no package"]
    expected = package.replace(".", "/")
    if not source.rstrip("/").endswith(expected):
        problems.append(f"`{package}` does not live in `{source}`")
    for name, folder in NAME.findall(holds):
        found = (directory / name / "__init__.py").is_file() if folder else (directory / f"{name}.py").is_file()
        if not found:
            problems.append(f"`{package}` lists `{name}{folder}`, which is no {'subpackage' if folder else 'module'} of `{source}`")
    return problems


def test_the_table_check_catches_drift() -> None:
    rows = [
        ("paddle_nbext_server.feeds", "server_ext/paddle_nbext_server/feeds/", "`ticker`, `health_events` and `gone/`"),
        ("paddle_nbext_server.events", "server_ext/paddle_nbext_server/events/", "the bus"),
    ]
    problems = [problem for row in rows for problem in row_problems(*row)]
    assert len(problems) == 3 and "health_events" in problems[0] and "gone/" in problems[1] and "no package" in problems[2], problems


def test_the_packages_table_is_the_codes_layout() -> None:
    rows = table_rows(ARCHITECTURE.read_text(encoding="utf-8"))
    assert rows, "docs/architecture.md has no packages table"
    problems = [problem for row in rows for problem in row_problems(*row)]
    assert not problems, "\n".join(problems)


def test_every_package_is_in_the_table() -> None:
    """Each package has a row of its own, or its parent's row lists it as a folder (`client/`)."""
    rows = table_rows(ARCHITECTURE.read_text(encoding="utf-8"))
    named = {package for package, _, _ in rows}
    folders = {f"{package}.{name}" for package, _, holds in rows for name, folder in NAME.findall(holds) if folder}
    homes = {"paddle_nbext": ROOT / "paddle_nbext", "paddle_nbext_server": ROOT / "server_ext" / "paddle_nbext_server"}
    packages = {
        ".".join([top, *init.parent.relative_to(directory).parts])
        for top, directory in homes.items()
        for init in directory.rglob("__init__.py")
        if "labextension" not in init.parts
    }
    assert sorted(packages - named - folders) == []
