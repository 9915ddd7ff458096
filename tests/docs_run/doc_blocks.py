"""The fenced code blocks of a Markdown document, and what the docs suite does with each.

A document's reader copies its blocks into a notebook or a terminal, so every block that looks
runnable must run.  This module only reads: it finds the fences, their language and the marker
comment on the line right before a fence, and says for each block whether it runs here, runs
only on a real cluster, or is skipped (with the reason the writer gave).

Markers (an HTML comment alone on the line right before the opening fence):

- ``<!-- doc-run: skip REASON -->``: not run; REASON is required (a marker without one is an
  error of the document, so a skip always says why);
- ``<!-- doc-run: cluster -->``: needs a real Kubernetes cluster; listed for the cluster suite;
- ``<!-- doc-run: job-fails -->``: runs, and a job the block submits is expected to end Failed
  (a tutorial showing a failure); any other block whose job ends Failed fails the test.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

PYTHON_LANGUAGES = frozenset({"python", "ipython", "py", "python3"})
SHELL_LANGUAGES = frozenset({"bash", "sh", "shell", "console"})

_FENCE = re.compile(r"^(?P<indent> {0,3})(?P<fence>`{3,}|~{3,})(?P<info>.*)$")
_MARKER = re.compile(r"^\s*<!--\s*doc-run:\s*(?P<body>.*?)\s*-->\s*$")
_ANY_MARKER = re.compile(r"<!--\s*doc-run\b")


class Mode(Enum):
    """What the suite does with a block."""

    RUN = "run"
    JOB_FAILS = "job-fails"
    CLUSTER = "cluster"
    SKIP = "skip"
    NOT_CODE = "not-code"


class DocumentError(ValueError):
    """The document breaks the block conventions (an unknown marker, a skip without a reason, an
    unclosed fence); the message names the file and line."""


@dataclass(frozen=True)
class Block:
    """One fenced block: `line` is the 1-based line of its opening fence."""

    document: Path
    line: int
    language: str
    source: str
    mode: Mode
    reason: str = ""

    @property
    def kind(self) -> str:
        """'python' (run in the document's kernel), 'shell' (run in bash) or 'other'."""
        if self.language in PYTHON_LANGUAGES:
            return "python"
        if self.language in SHELL_LANGUAGES:
            return "shell"
        return "other"

    @property
    def runs_here(self) -> bool:
        return self.mode in (Mode.RUN, Mode.JOB_FAILS)

    @property
    def where(self) -> str:
        """`README.md:42 (python)`: what a failure message names."""
        return f"{self.document.name}:{self.line} ({self.language or 'no language'})"


def _mode_of(marker: str | None, language: str, where: str) -> tuple[Mode, str]:
    runnable = language in PYTHON_LANGUAGES or language in SHELL_LANGUAGES
    if marker is None:
        return (Mode.RUN, "") if runnable else (Mode.NOT_CODE, "")
    word, _, rest = marker.partition(" ")
    reason = rest.strip()
    if word == "skip":
        if not reason:
            raise DocumentError(f"{where}: `<!-- doc-run: skip -->` needs a reason: `<!-- doc-run: skip why it cannot run -->`")
        return Mode.SKIP, reason
    if word == "cluster" and not reason:
        return Mode.CLUSTER, ""
    if word == "job-fails" and not reason:
        if not runnable:
            raise DocumentError(f"{where}: `job-fails` marks a block in {language or 'no language'}, which never runs")
        return Mode.JOB_FAILS, ""
    raise DocumentError(f"{where}: unknown marker `<!-- doc-run: {marker} -->` (known: skip REASON, cluster, job-fails)")


def extract_blocks(document: Path) -> list[Block]:
    """Every fenced block of `document`, in order.  Raises DocumentError for a broken convention;
    a marker comment that is not right before a fence is an error too (it would silently do
    nothing)."""
    lines = document.read_text(encoding="utf-8").splitlines()
    blocks: list[Block] = []
    index = 0
    while index < len(lines):
        opening = _FENCE.match(lines[index])
        if opening is None:
            _refuse_stray_marker(document, lines, index)
            index += 1
            continue
        fence, language = opening["fence"], opening["info"].strip().split(" ")[0].lower()
        closing = _closing_fence(lines, index + 1, fence)
        if closing is None:
            raise DocumentError(f"{document.name}:{index + 1}: the fence opened here is never closed")
        marker = _MARKER.match(lines[index - 1]) if index > 0 else None
        where = f"{document.name}:{index + 1}"
        mode, reason = _mode_of(marker["body"] if marker else None, language, where)
        source = "\n".join(_dedent(lines[index + 1 : closing], len(opening["indent"]))) + "\n"
        blocks.append(Block(document, index + 1, language, source, mode, reason))
        index = closing + 1
    return blocks


def _closing_fence(lines: list[str], start: int, fence: str) -> int | None:
    for number in range(start, len(lines)):
        stripped = lines[number].strip()
        if stripped.startswith(fence[0] * len(fence)) and set(stripped) == {fence[0]}:
            return number
    return None


def _refuse_stray_marker(document: Path, lines: list[str], index: int) -> None:
    if not _ANY_MARKER.search(lines[index]):
        return
    following = lines[index + 1] if index + 1 < len(lines) else ""
    if _MARKER.match(lines[index]) is None or _FENCE.match(following) is None:
        raise DocumentError(
            f"{document.name}:{index + 1}: a doc-run marker must be alone on the line right before a code fence: {lines[index].strip()!r}"
        )


def _dedent(lines: list[str], indent: int) -> list[str]:
    """A fence indented by up to 3 spaces has its content indented the same (CommonMark)."""
    return [line[indent:] if line[:indent].strip() == "" else line for line in lines]


def shell_script(block: Block) -> str:
    """The commands of a shell block: a `console` block whose lines start with `$ ` runs only
    those lines (the prompt stripped; the rest is the output shown); any other block runs whole."""
    if block.language == "console":
        commands = [line[2:] for line in block.source.splitlines() if line.startswith("$ ")]
        if commands:
            return "\n".join(commands) + "\n"
    return block.source
