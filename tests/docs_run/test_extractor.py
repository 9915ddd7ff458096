"""The docs runner itself catches drift: a block that fails in a document fails the run, naming
the document, the line and the error; a broken marker is refused before anything runs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from .block_runner import KernelSession, run_document
from .doc_blocks import DocumentError, Mode, extract_blocks, shell_script
from .doc_server import clean_environment

FENCE = "```"
DOCUMENT = f"""# A guide

Set a name, then use it.

{FENCE}python
answer = 41
{FENCE}

{FENCE}python
print(answer + 1)
{FENCE}

<!-- doc-run: skip needs a GPU -->
{FENCE}python
raise SystemExit("never run")
{FENCE}

{FENCE}python
1 / 0
{FENCE}

{FENCE}console
$ echo shown-by-bash
shown-by-bash
{FENCE}

{FENCE}bash
false
echo after-false
{FENCE}

<!-- doc-run: cluster -->
{FENCE}bash
kubectl get pods
{FENCE}

{FENCE}json
{{"not": "run"}}
{FENCE}
"""


class NoJobs:
    """A server that never has jobs: the drift blocks submit none."""

    def jobs(self) -> dict[str, dict[str, Any]]:
        return {}

    def wait_for_ends(self, names: set[str], seconds: float) -> dict[str, dict[str, Any]]:
        return {}


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "guide.md"
    path.write_text(text)
    return path


def test_the_blocks_their_lines_and_what_is_done_with_each(tmp_path: Path) -> None:
    blocks = extract_blocks(_write(tmp_path, DOCUMENT))
    assert [(b.line, b.language, b.mode) for b in blocks] == [
        (5, "python", Mode.RUN),
        (9, "python", Mode.RUN),
        (14, "python", Mode.SKIP),
        (18, "python", Mode.RUN),
        (22, "console", Mode.RUN),
        (27, "bash", Mode.RUN),
        (33, "bash", Mode.CLUSTER),
        (37, "json", Mode.NOT_CODE),
    ]
    assert blocks[2].reason == "needs a GPU"
    assert shell_script(blocks[4]) == "echo shown-by-bash\n"


def test_a_failing_block_fails_the_run_naming_the_document_line_block_and_error(tmp_path: Path) -> None:
    blocks = extract_blocks(_write(tmp_path, DOCUMENT))
    with KernelSession(clean_environment(), tmp_path) as kernel:
        run = run_document(blocks, kernel, NoJobs(), clean_environment(), tmp_path)
    assert run.ran == 5  # the skipped, cluster and json blocks are not run
    report = run.report()
    assert report.startswith("2 of 5 blocks failed")
    assert "guide.md:18 (python) failed: ZeroDivisionError: division by zero" in report
    assert "    | 1 / 0" in report
    assert "guide.md:27 (bash) failed: bash exited with 1" in report
    assert "after-false" not in report.split("guide.md:27")[1].split("its output")[1]  # -e stops at the first failure
    assert "guide.md:9" not in report  # the name of block 5 carried into block 9: one kernel


def test_a_magics_refusal_on_stderr_fails_the_block(tmp_path: Path) -> None:
    blocks = extract_blocks(_write(tmp_path, f"{FENCE}python\n%load_ext paddle_nbext\n%paddle_logs\n{FENCE}\n"))
    with KernelSession(clean_environment(), tmp_path) as kernel:
        run = run_document(blocks, kernel, NoJobs(), clean_environment(), tmp_path)
    assert len(run.failures) == 1 and "a magic refused: paddle-nbext: " in run.failures[0], run.report()


@pytest.mark.parametrize(
    ("text", "words"),
    [
        (f"<!-- doc-run: skip -->\n{FENCE}python\nx = 1\n{FENCE}\n", "guide.md:2: `<!-- doc-run: skip -->` needs a reason"),
        (f"<!-- doc-run: skip    -->\n{FENCE}bash\ntrue\n{FENCE}\n", "needs a reason"),
        (f"<!-- doc-run: later -->\n{FENCE}bash\ntrue\n{FENCE}\n", "unknown marker `<!-- doc-run: later -->`"),
        (
            f"<!-- doc-run: skip a reason -->\n\n{FENCE}bash\ntrue\n{FENCE}\n",
            "guide.md:1: a doc-run marker must be alone on the line right before",
        ),
        (f"{FENCE}python\nx = 1\n", "guide.md:1: the fence opened here is never closed"),
    ],
    ids=["skip-without-reason", "skip-with-blanks-only", "unknown-marker", "marker-not-before-fence", "unclosed-fence"],
)
def test_a_broken_marker_or_fence_is_refused_naming_the_line(tmp_path: Path, text: str, words: str) -> None:
    with pytest.raises(DocumentError) as refused:
        extract_blocks(_write(tmp_path, text))
    assert words in str(refused.value)


def test_a_longer_fence_holds_a_shorter_one(tmp_path: Path) -> None:
    blocks = extract_blocks(_write(tmp_path, f"````markdown\n{FENCE}python\nx = 1\n{FENCE}\n````\n"))
    assert [(b.language, b.mode) for b in blocks] == [("markdown", Mode.NOT_CODE)]
