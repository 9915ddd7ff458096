"""examples/first-hour.ipynb, executed top to bottom as a new user runs it, says what it shows.

The notebook runs in a real kernel (nbclient) against a real Jupyter server with the local
backend, from `~/examples` of a fresh home (doc_server.py): its jobs are real Paddle jobs, and its
requirements step installs `tabulate` (examples/first-hour/requirements.txt) from the package
index the machine is configured with, so this test needs that index.

How the notebook states what the reader will see: a markdown cell's **blockquote lines** (`> `)
hold the words to look for as inline code spans, and each span must appear in the output of the
nearest code cell above that markdown cell (its text, stream and error outputs, and the plain
text of its displays).  So a change that makes a cell show something else than the text around
it says fails here, naming the cell, the words and what the cell showed.  Any error output, and
any output on stderr, fails the test too.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError
from nbformat import NotebookNode

from .block_runner import plain
from .doc_server import EXAMPLES, DocServer

NOTEBOOK = EXAMPLES / "first-hour.ipynb"
_QUOTED_CODE = re.compile(r"`([^`]+)`")
#: Fewer expectations than this means the convention was lost in an edit, not that all is well.
LEAST_EXPECTATIONS = 10


@dataclass(frozen=True)
class Expectation:
    """Words the reader is told to look for, and the code cell whose output must show them."""

    words: str
    markdown_cell: int
    code_cell: int


def expectations(notebook: NotebookNode) -> list[Expectation]:
    """Every inline code span of a blockquote line, paired with the code cell above it."""
    found: list[Expectation] = []
    last_code: int | None = None
    for index, cell in enumerate(notebook.cells):
        if cell.cell_type == "code":
            last_code = index
            continue
        if cell.cell_type != "markdown":
            continue
        for line in cell.source.splitlines():
            if not line.startswith(">"):
                continue
            spans = _QUOTED_CODE.findall(line)
            if spans and last_code is None:
                raise AssertionError(f"cell {index} quotes {spans} before any code cell")
            found += [Expectation(words, index, last_code) for words in spans if last_code is not None]
    return found


def shown_text(cell: NotebookNode) -> str:
    """What a reader sees of a code cell's outputs, as plain text."""
    return outputs_text(cell.get("outputs", []))


def outputs_text(outputs: list[NotebookNode]) -> str:
    parts: list[str] = []
    for output in outputs:
        kind = output.get("output_type")
        if kind == "stream":
            parts.append(output.get("text", ""))
        elif kind == "error":
            parts.append("\n".join(output.get("traceback", [])))
        else:
            parts.append(output.get("data", {}).get("text/plain", ""))
    return plain("\n".join(parts))


def problems(notebook: NotebookNode) -> list[str]:
    """Error outputs and stderr writes, each naming its cell."""
    found: list[str] = []
    for index, cell in enumerate(notebook.cells):
        for output in cell.get("outputs", []):
            if output.get("output_type") == "error" or output.get("name") == "stderr":
                found.append(f"cell {index} ({_first_line(cell)}): {outputs_text([output])[-2000:]}")
    return found


def _first_line(cell: NotebookNode) -> str:
    return str(cell.source.splitlines()[0]) if cell.source else "(empty)"


def run_notebook(server: DocServer) -> NotebookNode:
    notebook: NotebookNode = nbformat.read(NOTEBOOK, as_version=4)  # type: ignore[no-untyped-call]  # nbformat leaves read unannotated
    client = NotebookClient(notebook, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(server.home / "examples")}})
    try:
        client.execute(env=server.reader_environment())
    except CellExecutionError as error:
        pytest.fail(f"{NOTEBOOK.name} stopped with an error:\n{plain(str(error))}")
    return notebook


@pytest.mark.paddle
@pytest.mark.timeout(900)
def test_the_first_hour_runs_and_shows_what_its_text_says(doc_server: DocServer) -> None:
    notebook = run_notebook(doc_server)
    assert not problems(notebook), "\n".join(problems(notebook))
    expected = expectations(notebook)
    assert len(expected) >= LEAST_EXPECTATIONS, f"only {len(expected)} quoted expectations found: {expected}"
    missing = [
        f"cell {each.markdown_cell} says `{each.words}`, but cell {each.code_cell} ({_first_line(notebook.cells[each.code_cell])}) "
        f"showed:\n{shown_text(notebook.cells[each.code_cell])[-3000:]}"
        for each in expected
        if each.words not in shown_text(notebook.cells[each.code_cell])
    ]
    assert not missing, "\n\n".join(missing)
    assert doc_server.jobs() == {}, "the notebook ends by deleting every job it made"


def test_quoted_words_are_checked_against_the_code_cell_above(tmp_path: Path) -> None:
    notebook = nbformat.v4.new_notebook(  # type: ignore[no-untyped-call]
        cells=[
            nbformat.v4.new_markdown_cell("Intro: `code` outside a quote is not an expectation."),  # type: ignore[no-untyped-call]
            nbformat.v4.new_code_cell("print('Succeeded')"),  # type: ignore[no-untyped-call]
            nbformat.v4.new_markdown_cell("You see:\n\n> `Succeeded` and `resumed from step 20`\n\nnot `quoted` here"),  # type: ignore[no-untyped-call]
        ]
    )
    notebook.cells[1].outputs = [nbformat.v4.new_output("stream", name="stdout", text="Job x: Succeeded\n")]  # type: ignore[no-untyped-call]
    found = expectations(notebook)
    assert found == [Expectation("Succeeded", 2, 1), Expectation("resumed from step 20", 2, 1)]
    assert [each.words for each in found if each.words not in shown_text(notebook.cells[each.code_cell])] == ["resumed from step 20"]
