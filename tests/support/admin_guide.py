"""The admin guide's install, read as the script it is: the numbered steps of "JupyterHub on
Kubernetes" and the "Uninstalling" command, each step's bash blocks as the Markdown holds them.

The suite runs these texts, never a copy of them: the image builds (``controlplane/images.py``,
``notebook_image.py``) take their build folders, tags and build arguments from step 2, the wheel
(``hub_site.clone_wheel``) comes from step 1's commands, and
``tests/cluster/test_admin_guide_install.py`` runs the cluster steps against the real cluster.
So a change of the guide changes what the suite runs.  The blocks read shell variables
(``$NAMESPACE``, ``$REGISTRY``, ...: the guide's table); ``fill`` puts values in where a command
is parsed rather than run by bash.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
GUIDE = REPO / "docs" / "admin-guide.md"
INSTALL_SECTION = "### JupyterHub on Kubernetes"
UNINSTALL_SECTION = "### Uninstalling"
CEPHFS_MARK = "*CephFS:*"
_STEP = re.compile(r"^(\d+)\. (.*)$")
_VARIABLE = re.compile(r"\$\{?([A-Z_][A-Z0-9_]*)\}?")


class GuideError(RuntimeError):
    """The guide no longer reads as the suite expects (a step, block or command is missing)."""


@dataclass(frozen=True)
class Block:
    """One bash block of an install step: its text (indentation removed), and whether the guide
    marks it *CephFS* (only for homes on CephFS, or the CephFS form of the step's command)."""

    step: int
    title: str
    text: str
    cephfs: bool


@dataclass(frozen=True)
class ImageBuild:
    """One ``buildah bud`` of step 2: the build folder (relative to the clone), the tag, the build
    arguments — placeholders filled."""

    folder: str
    tag: str
    build_args: Mapping[str, str]


def _section(title: str, text: str | None = None) -> list[str]:
    lines = (text if text is not None else GUIDE.read_text()).splitlines()
    if title not in lines:
        raise GuideError(f"{GUIDE.name} has no section {title!r}")
    start = lines.index(title) + 1
    end = next((i for i in range(start, len(lines)) if lines[i].startswith(("## ", "### "))), len(lines))
    return lines[start:end]


def _title(line: str) -> str:
    bold = re.search(r"\*\*(.+?)\*\*", line)
    return bold.group(1) if bold else line


def install_blocks(text: str | None = None) -> list[Block]:
    """Every bash block of the install steps, in order."""
    blocks: list[Block] = []
    step, title, cephfs_step, paragraph = 0, "", False, ""
    lines = _section(INSTALL_SECTION, text)
    index = 0
    while index < len(lines):
        line = lines[index]
        numbered = _STEP.match(line)
        if numbered:
            step, title = int(numbered.group(1)), _title(numbered.group(2))
            cephfs_step = numbered.group(2).startswith(CEPHFS_MARK)
            paragraph = numbered.group(2)
        elif line.strip() == "```bash":
            indent = line[: len(line) - len(line.lstrip())]
            end = next(i for i in range(index + 1, len(lines)) if lines[i].strip() == "```")
            body = "\n".join(raw[len(indent) :] if raw.startswith(indent) else raw for raw in lines[index + 1 : end])
            blocks.append(Block(step, title, body + "\n", cephfs_step or paragraph.startswith(CEPHFS_MARK)))
            index, paragraph = end, ""
        elif line.strip() and not paragraph:
            paragraph = line.strip()  # the first line of the paragraph a block follows
        index += 1
    if not blocks:
        raise GuideError(f"{GUIDE.name}'s {INSTALL_SECTION!r} has no bash blocks")
    return blocks


def step_blocks(step: int, text: str | None = None) -> list[Block]:
    found = [b for b in install_blocks(text) if b.step == step]
    if not found:
        raise GuideError(f"{GUIDE.name}'s install has no step {step} with a bash block")
    return found


def uninstall_command(text: str | None = None) -> str:
    lines = _section(UNINSTALL_SECTION, text)
    start = next((i for i, line in enumerate(lines) if line.strip() == "```bash"), None)
    if start is None:
        raise GuideError(f"{GUIDE.name}'s {UNINSTALL_SECTION!r} has no bash block")
    end = next(i for i in range(start + 1, len(lines)) if lines[i].strip() == "```")
    return "\n".join(lines[start + 1 : end]) + "\n"


def variables(text: str) -> set[str]:
    return set(_VARIABLE.findall(text))


def fill(text: str, values: Mapping[str, str]) -> str:
    """``text`` with each ``$NAME`` (or ``${NAME}``) replaced by its value; a name without one is
    an error, never an empty string."""
    missing = variables(text) - set(values)
    if missing:
        raise GuideError(f"no value for {', '.join(sorted(missing))} in: {text.strip()}")
    return _VARIABLE.sub(lambda m: values[m.group(1)], text)


def image_builds(values: Mapping[str, str], folder: str = "", text: str | None = None) -> list[ImageBuild]:
    """Step 2's ``buildah bud`` commands (those of ``folder`` only, if given), parsed with the
    placeholders filled."""
    builds = []
    for block in step_blocks(2, text):
        for command in block.text.replace("\\\n", " ").splitlines():
            if not command.startswith("buildah bud ") or (folder and shlex.split(command)[-1].rstrip("/") != folder):
                continue
            words = shlex.split(fill(command, values))
            tag, folder, args = "", "", {}
            rest = iter(words[2:])
            for word in rest:
                if word == "-t":
                    tag = next(rest)
                elif word == "--build-arg":
                    name, _, value = next(rest).partition("=")
                    args[name] = value
                else:
                    folder = word
            builds.append(ImageBuild(folder, tag, args))
    return builds


def image_build(folder: str, values: Mapping[str, str]) -> ImageBuild:
    """The build of ``folder`` (``deploy/images/job``) in step 2."""
    for build in image_builds(values, folder):
        return build
    raise GuideError(f"{GUIDE.name}'s install step 2 builds no image from {folder}")
