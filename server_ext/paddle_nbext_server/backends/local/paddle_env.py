"""What the local replicas' interpreter can run: its PaddlePaddle version and the modes it supports.

The replicas run `c.LocalBackend.python`, which need not be the server's own interpreter, so
the answer comes from that interpreter itself: the job runtime's preflight (`runtime/preflight.py`,
which reads installed distributions' metadata and never imports Paddle) is run by it from a copy
of the job bundle. `/config` reports the facts, and a submit whose mode cannot run here is refused
with a 422 naming `mode` before anything is written, instead of failing at run time.

The probe costs one interpreter start (~50 ms, ~0.1 s on a busy machine), so its answer is kept
for `ttl` seconds: a `pip install` beside a running server is noticed within a minute. A started
backend probes again every `ttl / 2` seconds in the background (`refresh`), so a submit finds a
fresh answer and never waits for the probe. Blocking: call it in a thread.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...jobfiles import runtime_files

#: Set to 0 in the server's environment to skip the check (a Paddle build the metadata misjudges).
SKIP_ENV = "PADDLE_NBEXT_PREFLIGHT"
PROBE_TIMEOUT = 30.0


@dataclass(frozen=True)
class PaddleFacts:
    """One probe's answer. `problems` maps a mode to the sentence saying why it cannot run."""

    python: str
    paddle: str | None = None
    protobuf: str | None = None
    modes: tuple[str, ...] = ()
    problems: dict[str, str] = field(default_factory=dict)
    error: str | None = None  # the probe itself failed (the interpreter is missing or broken)

    @property
    def summary(self) -> str:
        """One sentence for people (forms and the panel show it)."""
        if self.error is not None:
            return f"Local jobs cannot run: {self.error}"
        if not self.modes:
            reason = self.problems.get("collective") or next(iter(self.problems.values()), "")
            return f"Local jobs cannot run: {reason}"
        if "ps" not in self.modes:
            return f"PaddlePaddle {self.paddle} runs collective jobs only: {self.problems.get('ps', '')}"
        return f"PaddlePaddle {self.paddle} runs parameter-server and collective jobs."

    def to_dict(self) -> dict[str, Any]:
        """The `paddle` object of `GET /config` for the local backend."""
        return {
            "summary": self.summary,
            "python": self.python,
            "version": self.paddle,
            "protobuf": self.protobuf,
            "modes": list(self.modes),
            "problems": dict(self.problems),
            "error": self.error,
        }


class PaddleEnvironment:
    """Probes `python` for its Paddle and remembers the answer for `ttl` seconds."""

    def __init__(self, python: str, ttl: float = 60.0) -> None:
        self.python = python
        self.ttl = ttl
        self._lock = threading.Lock()
        self._facts: PaddleFacts | None = None
        self._probed_at = 0.0

    def facts(self) -> PaddleFacts:
        with self._lock:
            if self._facts is None or time.monotonic() - self._probed_at > self.ttl:
                self._facts = self._probe()
                self._probed_at = time.monotonic()
            return self._facts

    def refresh(self) -> PaddleFacts:
        """Probe now and keep the answer; a `facts()` meanwhile still answers from the last one."""
        fresh = self._probe()
        with self._lock:
            self._facts = fresh
            self._probed_at = time.monotonic()
        return fresh

    def cached(self) -> PaddleFacts | None:
        """The last answer without probing (for code on the event loop), None before the first."""
        return self._facts

    def problem(self, mode: str) -> tuple[str, str] | None:
        """(field, sentence) when a `mode` job cannot run here, else None."""
        if os.environ.get(SKIP_ENV) == "0":
            return None
        facts = self.facts()
        if facts.error is not None:
            return "mode", f"local jobs cannot run: {facts.error}"
        sentence = facts.problems.get(mode)
        return ("mode", f"a {mode} job cannot run on this server: {sentence}") if sentence else None

    def _probe(self) -> PaddleFacts:
        with tempfile.TemporaryDirectory(prefix="paddle-nbext-probe-") as directory:
            runtime_files.write_bundle(Path(directory))
            try:
                done = subprocess.run(
                    [self.python, str(Path(directory) / "preflight.py")],
                    capture_output=True,
                    text=True,
                    timeout=PROBE_TIMEOUT,
                    cwd=directory,
                    env=dict(os.environ),  # what the replicas inherit, as they would see it
                    check=False,
                )
            except (OSError, subprocess.TimeoutExpired) as error:
                return PaddleFacts(
                    self.python, error=f"the replicas' interpreter {self.python} cannot be run ({error}); set c.LocalBackend.python"
                )
        if done.returncode != 0:
            last = (done.stderr.strip().splitlines() or ["no output"])[-1]
            return PaddleFacts(self.python, error=f"the replicas' interpreter {self.python} failed to report its Paddle ({last})")
        try:
            raw = json.loads(done.stdout)
            return PaddleFacts(
                python=str(raw.get("python") or self.python),
                paddle=raw.get("paddle"),
                protobuf=raw.get("protobuf"),
                modes=tuple(str(mode) for mode in raw.get("modes") or ()),
                problems={str(mode): str(sentence) for mode, sentence in (raw.get("problems") or {}).items()},
            )
        except (ValueError, AttributeError) as error:
            return PaddleFacts(self.python, error=f"the replicas' interpreter {self.python} gave an unreadable Paddle report ({error})")
