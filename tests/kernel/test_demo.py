"""The demo notebook executed top to bottom by nbclient in a real kernel against the live server."""

from __future__ import annotations

import shutil
from pathlib import Path

import nbformat
from nbclient import NotebookClient
from nbformat import NotebookNode

from .conftest import LiveServer

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _text(output: NotebookNode) -> str:
    if output.get("output_type") == "stream":
        text: str = output.get("text", "")
        return text
    data = output.get("data", {})
    shown: str = data.get("text/plain", "") + data.get("text/html", "")
    return shown


def test_demo_notebook_runs_and_the_jobs_succeed(kernel_env: LiveServer) -> None:
    project = kernel_env.home / "demo"
    shutil.copytree(EXAMPLES, project, ignore=shutil.ignore_patterns("*.ipynb", "__pycache__"))
    notebook = nbformat.read(EXAMPLES / "demo.ipynb", as_version=4)  # type: ignore[no-untyped-call]  # nbformat leaves read unannotated
    NotebookClient(notebook, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(project)}}).execute()

    outputs = {
        index: "".join(_text(o) for o in cell.get("outputs", [])) for index, cell in enumerate(notebook.cells) if cell.cell_type == "code"
    }
    sources = {index: notebook.cells[index].source for index in outputs}
    errors = [o for cell in notebook.cells for o in cell.get("outputs", []) if o.get("output_type") == "error" or o.get("name") == "stderr"]
    assert not errors, errors

    def output_of(fragment: str) -> str:
        return next(outputs[i] for i, src in sources.items() if fragment in src)

    # a running job displays as the live status widget (plain text kept for non-widget frontends)
    submitted = next(c.outputs for c in notebook.cells if c.source.startswith("job = %paddle_submit"))
    assert "application/vnd.jupyter.widget-view+json" in submitted[0]["data"]
    assert submitted[0]["data"]["text/plain"].startswith("Job demo-ps: ")
    assert "Job demo-ps: Succeeded" in output_of("job.wait()")
    assert "pserver 0: Stopped" in output_of("job.wait()")
    assert "step 199 loss" in output_of('log = job.logs("trainer", 0)')
    assert "400 points; trainer-0 loss " in output_of("table = job.metrics()")  # 2 trainers × 200 reported steps
    assert "Job demo-cell: Succeeded" in output_of("%%paddle_submit")
    assert "trainer 1 of 2 at" in output_of('pn.Job("demo-cell")')
    assert "application/vnd.jupyter.widget-view+json" in str(
        next(c.outputs for c in notebook.cells if c.source.startswith("form = pn.form()"))
    )
    assert "must be at least 1, got 0 | Submit disabled: True" in output_of('form.inputs["trainers"].value = 0')
    assert "4 trainers × 2 CPU = 8 CPU, 4Gi" in output_of('form.inputs["trainers"].value = 0')
    assert "no errors | Submit disabled: False" in output_of('form.inputs["trainers"].value = 0')
    assert "demo-ps" in output_of("%paddle_jobs") and "Succeeded" in output_of("%paddle_jobs")
    assert "Deleted demo-ps, freeing " in output_of("%paddle_delete demo-ps")  # and says what it freed
