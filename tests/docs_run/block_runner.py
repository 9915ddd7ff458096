"""Runs a document's blocks as a reader would: its Python blocks one after another in ONE real
IPython kernel (so `%load_ext paddle_nbext`, names and magics carry over), its shell blocks in
bash, both with the home as the current directory; then checks the jobs the blocks submitted.

A block fails when the kernel reports an error, when a magic prints its one-line refusal
(`paddle-nbext: ...` on stderr: the magics never raise), when bash exits non-zero, when it runs
past its time, or when a job it submitted ends Failed (unless the block is marked `job-fails`,
whose job must end Failed).  Every block runs even after one failed, so one test run lists all
of a document's failures; the later ones may follow from the first.
"""

from __future__ import annotations

import queue
import re
import subprocess
import textwrap
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, Protocol

from jupyter_client.manager import KernelManager

from .doc_blocks import Block, Mode, shell_script

BLOCK_SECONDS = 300.0  # a `--wait` on a small job, on a busy 2-core machine
JOBS_END_SECONDS = 240.0  # after the last block, for the jobs that were submitted without --wait
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_OUTPUT_TAIL = 4000


def plain(text: str) -> str:
    """Text without terminal colours (IPython colours its tracebacks)."""
    return _ANSI.sub("", text)


@dataclass
class Outcome:
    """What one block did: `error` is empty when it ran cleanly."""

    output: str = ""
    error: str = ""


class JobLister(Protocol):
    """The part of DocServer the checks need (a fake in the runner's own tests)."""

    def jobs(self) -> dict[str, dict[str, Any]]: ...

    def wait_for_ends(self, names: set[str], seconds: float) -> dict[str, dict[str, Any]]: ...


class KernelSession:
    """One IPython kernel for a document: `with KernelSession(env, cwd) as kernel:`."""

    def __init__(self, env: Mapping[str, str], cwd: Path) -> None:
        self.manager = KernelManager(kernel_name="python3")
        self.env, self.cwd = dict(env), cwd

    def __enter__(self) -> KernelSession:
        self.manager.start_kernel(env=self.env, cwd=str(self.cwd))
        self.client = self.manager.client()
        self.client.start_channels()
        self.client.wait_for_ready(timeout=120)
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None) -> None:
        self.client.stop_channels()
        self.manager.shutdown_kernel(now=True)

    def run(self, code: str, seconds: float = BLOCK_SECONDS) -> Outcome:
        """Execute `code` as one cell; the outcome holds everything it showed."""
        shown: list[str] = []
        refusals: list[str] = []

        def collect(message: dict[str, Any]) -> None:
            kind, content = message["header"]["msg_type"], message["content"]
            if kind == "stream":
                shown.append(content["text"])
                if content["name"] == "stderr":
                    refusals.extend(line for line in content["text"].splitlines() if line.startswith("paddle-nbext:"))
            elif kind in ("execute_result", "display_data"):
                shown.append(content["data"].get("text/plain", "") + "\n")
            elif kind == "error":
                shown.append("\n".join(content["traceback"]) + "\n")

        try:
            reply = self.client.execute_interactive(code, timeout=seconds, output_hook=collect)
        except TimeoutError:
            self.manager.interrupt_kernel()
            self._drain()
            return Outcome(plain("".join(shown)), f"still running after {seconds:.0f} s (interrupted)")
        output = plain("".join(shown))
        if reply["content"]["status"] == "error":
            content = reply["content"]
            return Outcome(output, f"{content['ename']}: {content['evalue']}")
        if refusals:
            return Outcome(output, "a magic refused: " + " | ".join(refusals))
        return Outcome(output)

    def _drain(self) -> None:
        """Read the interrupted cell's last messages, so the next block's outputs are its own."""
        try:
            self.client.get_shell_msg(timeout=30)
            while True:
                self.client.get_iopub_msg(timeout=1)
        except queue.Empty:
            pass


def run_shell(block: Block, env: Mapping[str, str], cwd: Path, seconds: float = BLOCK_SECONDS) -> Outcome:
    """The block's commands in `bash -e -o pipefail`: the first failing command fails it."""
    script = "set -e -o pipefail\n" + shell_script(block)
    try:
        done = subprocess.run(
            ["bash", "-c", script], env=dict(env), cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=seconds, check=False
        )
    except subprocess.TimeoutExpired as expired:
        return Outcome(plain(_text(expired.stdout)), f"still running after {seconds:.0f} s (killed)")
    output = plain(done.stdout.decode(errors="replace"))
    return Outcome(output, "" if done.returncode == 0 else f"bash exited with {done.returncode}")


def _text(data: bytes | str | None) -> str:
    if isinstance(data, bytes):
        return data.decode(errors="replace")
    return data or ""


@dataclass
class DocumentRun:
    """The failures of one document's run, each a paragraph naming the block."""

    ran: int = 0
    submitted: dict[Block, set[str]] = field(default_factory=dict)
    outputs: dict[Block, str] = field(default_factory=dict)
    seconds: dict[Block, float] = field(default_factory=dict)
    _failures: list[tuple[int, str]] = field(default_factory=list)

    @property
    def failures(self) -> list[str]:
        """In document order (a failed job is found after the last block ran)."""
        return [text for _line, text in sorted(self._failures, key=lambda failure: failure[0])]

    def fail(self, block: Block, error: str, output: str = "") -> None:
        listing = textwrap.indent(block.source.rstrip("\n"), "    | ")
        shown = textwrap.indent(output[-_OUTPUT_TAIL:].rstrip("\n"), "    > ") if output.strip() else "    (no output)"
        self._failures.append((block.line, f"{block.where} failed: {error}\n  the block:\n{listing}\n  its output:\n{shown}"))

    def timings(self) -> str:
        """Each block's run time, slowest first: where a document's test spends its time."""
        slowest = sorted(self.seconds.items(), key=lambda item: -item[1])
        return "\n".join(f"{seconds:6.1f} s  {block.where}" for block, seconds in slowest)

    def report(self) -> str:
        return f"{len(self._failures)} of {self.ran} blocks failed:\n\n" + "\n\n".join(self.failures)


def run_document(blocks: list[Block], kernel: KernelSession, server: JobLister, env: Mapping[str, str], cwd: Path) -> DocumentRun:
    """Run every block that runs here, in order, then check the jobs they submitted."""
    run = DocumentRun()
    for block in blocks:
        if not block.runs_here:
            continue
        before, started = set(server.jobs()), time.monotonic()
        outcome = kernel.run(block.source) if block.kind == "python" else run_shell(block, env, cwd)
        run.seconds[block] = time.monotonic() - started
        run.ran += 1
        run.submitted[block] = set(server.jobs()) - before
        run.outputs[block] = outcome.output
        if outcome.error:
            run.fail(block, outcome.error, outcome.output)
    check_jobs(run, server)
    return run


def check_jobs(run: DocumentRun, server: JobLister) -> None:
    """A job a block submitted that ended Failed fails the block (a `job-fails` block instead
    needs one that did); a job still running when the wait ends is not judged."""
    every = set().union(*run.submitted.values()) if run.submitted else set()
    ended = server.wait_for_ends(every, JOBS_END_SECONDS) if every else {}
    for block, names in run.submitted.items():
        failed = {name: ended[name] for name in sorted(names) if ended.get(name, {}).get("phase") == "Failed"}
        if block.mode is Mode.JOB_FAILS and not failed:
            phases = ", ".join(f"{name}: {ended.get(name, {}).get('phase', 'deleted')}" for name in sorted(names)) or "no job"
            run.fail(block, f"marked job-fails, but no job it submitted ended Failed ({phases})", run.outputs[block])
        elif block.mode is Mode.RUN:
            for name, job in failed.items():
                run.fail(block, f"its job {name} ended Failed: {job.get('message', '')}", run.outputs[block])
