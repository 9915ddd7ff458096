"""Every code block of README.md and docs/user-guide.md runs, as a reader would run it.

For the writers of those documents, this is the contract:

- **What runs.** Fenced blocks in `python`, `ipython`, `bash`, `sh`, `shell` and `console` run,
  in document order; `text`, `json`, `yaml`, `toml`, `output` and the rest never do.  A
  `console` block whose lines start with `$ ` runs only those lines (prompt stripped); the other
  lines are the output it shows.
- **Where.** The Python blocks of one document share ONE real IPython kernel, so
  `%load_ext paddle_nbext`, names and magics carry from block to block.  Shell blocks run in
  `bash -e -o pipefail` with this checkout's venv first on `PATH` (`paddle-nbext`, `jupyter`,
  `python`).  Both talk to a real Jupyter server with the `local` backend (real Paddle
  processes), through `PADDLE_NBEXT_API_URL` and `PADDLE_NBEXT_TOKEN` as in a kernel it started.
- **The home.** Each document gets a fresh home of its own (`$HOME`, the server's
  `c.PaddleNbext.home_dir`, the current directory of every block) holding only `~/examples/`, a
  copy of the repository's `examples/` (`collective_train.py`, `ps_train.py`, the notebooks,
  `first-hour/requirements.txt` and whatever else is there), and `~/.paddle-jobs/`, the jobs dir
  (made by the first job).  So `--package examples` and `~/examples` both name that copy.  A block that needs a file
  elsewhere writes it first (a `%%writefile` cell, or a shell block), or is marked skip.
- **Markers**, an HTML comment alone on the line right before the fence:
  `<!-- doc-run: skip REASON -->` (not run; the reason is required),
  `<!-- doc-run: cluster -->` (needs a real Kubernetes cluster: not run here, listed by
  `test_cluster_blocks_wait_for_the_cluster_suite` for the cluster suite), and
  `<!-- doc-run: job-fails -->` (runs, and the job it submits must end Failed: a block showing
  a failure on purpose).
- **Failing.** A block fails on an error in the kernel, a magic's one-line refusal
  (`paddle-nbext: ...` on stderr), a non-zero exit, 300 s without finishing, or a job it
  submitted ending Failed.  The test names the document, the line of the fence, the block and
  its output; every block runs even after a failure, so one run lists them all.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from .block_runner import KernelSession, run_document
from .doc_blocks import Block, Mode, extract_blocks
from .doc_server import REPO, DocServer

DOCUMENTS = ["README.md", "docs/user-guide.md"]


@pytest.mark.paddle
@pytest.mark.timeout(1800)
@pytest.mark.parametrize("document", DOCUMENTS)
def test_every_code_block_runs(document: str, doc_server: DocServer) -> None:
    blocks = extract_blocks(REPO / document)
    env = doc_server.reader_environment()
    with KernelSession(env, doc_server.home) as kernel:
        run = run_document(blocks, kernel, doc_server, env, doc_server.home)
    print(f"{document}: {run.ran} blocks ran; their times:\n{run.timings()}")  # shown with -rP, or on a failure
    assert not run.failures, f"{document}: {run.report()}"


@pytest.mark.parametrize("document", DOCUMENTS)
def test_cluster_blocks_wait_for_the_cluster_suite(document: str) -> None:
    """The blocks marked `cluster`: well-formed here, run by the cluster suite (which can
    import `cluster_blocks`).  Skipped with their places while no suite runs them."""
    blocks = cluster_blocks(REPO / document)
    if blocks:
        pytest.skip(f"{len(blocks)} block(s) need a cluster: " + ", ".join(block.where for block in blocks))


def cluster_blocks(document: Path) -> list[Block]:
    return [block for block in extract_blocks(document) if block.mode is Mode.CLUSTER]
