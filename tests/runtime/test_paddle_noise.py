"""Paddle's noise, one list for the runner and the panel (issue 27, item 6).

The vectors (tests/vectors/paddle_noise.json: real lines of real Paddle 3.0.0 logs, parameter
server and collective) against `runtime/policy.py`, which names a failed replica's error with
them; the panel's vitest suite runs the same file against its "Hide Paddle noise" filter
(labextension/src/__tests__/noise.test.ts), whose patterns are generated from policy.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from paddle_nbext_server.codegen import noise_gen
from paddle_nbext_server.runtime import policy

VECTORS: dict[str, Any] = json.loads((Path(__file__).parent.parent / "vectors" / "paddle_noise.json").read_text(encoding="utf-8"))
LOGS: list[dict[str, Any]] = VECTORS["logs"]


@pytest.mark.parametrize("line", VECTORS["noise"])
def test_a_noise_line_is_noise(line: str) -> None:
    assert policy.is_noise_line(line)


@pytest.mark.parametrize("line", VECTORS["kept"])
def test_a_kept_line_is_not_noise(line: str) -> None:
    assert not policy.is_noise_line(line)


@pytest.mark.parametrize("log", LOGS, ids=[log["name"] for log in LOGS])
def test_a_log_without_its_noise(log: dict[str, Any]) -> None:
    mask = policy.noise_mask(log["log"])
    assert [line for line, hidden in zip(log["log"], mask, strict=True) if not hidden] == log["shown"]


@pytest.mark.parametrize("log", LOGS, ids=[log["name"] for log in LOGS])
def test_the_failure_line_of_a_log(log: dict[str, Any]) -> None:
    assert policy.failure_line("\n".join(log["log"]) + "\n") == log["failure_line"]


def test_the_vectors_cover_both_modes_and_every_new_kind_of_chatter() -> None:
    names = " ".join(log["name"] for log in LOGS)
    assert "ps " in names and "collective " in names
    noise = "\n".join(VECTORS["noise"])
    for chatter in ("is_heter_ps_mode? ", "fl-ps > ", "adam_d2sum", "communicator config", "UserWarning: gloo", "FLAGS(name="):
        assert chatter in noise, chatter
    # The exception line of a traceback stays the failure line, whatever Paddle prints after it.
    assert all(log["failure_line"] == log["exception"] for log in LOGS if log["exception"] and "rank" not in log["name"])


def test_a_warning_of_paddles_hides_its_source_line_and_a_users_keeps_it() -> None:
    paddle = (
        "/opt/venv/lib/python3.10/site-packages/paddle/distributed/ps/the_one_ps.py:1260: UserWarning: gloo may not initialize correctly"
    )
    users = "/home/alice/code/train.py:3: UserWarning: small batch"
    source = '  warnings.warn("...")'
    assert policy.noise_mask([paddle, source, "step 1", source]) == [True, True, False, False]
    assert policy.noise_mask([users, source]) == [False, False]
    # Each rank is its own stream: another rank's line in between does not break the pair.
    assert policy.noise_mask([f"[rank 1] {paddle}", "[rank 0] step 1", f"[rank 1] {source}"]) == [True, False, True]


def test_blank_lines_go_with_the_noise_next_to_them_only() -> None:
    lines = ["step 1", "", "", "--------------------------------------", "", "step 2", "", "step 3", ""]
    assert policy.noise_mask(lines) == [False, True, True, True, True, False, False, False, False]
    assert policy.failure_line("step 3\n[rank 1] FatalError: `Termination signal` is detected\n[rank 1] \n") == "step 3"


def test_the_patterns_are_written_in_the_syntax_python_and_javascript_share() -> None:
    for pattern in (policy.NOISE_GLOG, *policy.NOISE_LINES, policy.NOISE_WARNING):
        assert pattern.startswith("^"), pattern
        for python_only in ("(?P", "(?<", "\\A", "\\Z", "(?i", "(?m", "(?s", "(?x", "(?#", "\\u", "\\N"):
            assert python_only not in pattern, (pattern, python_only)


def test_the_panels_patterns_are_generated_from_the_policy() -> None:
    assert noise_gen.TS_PATH.read_text(encoding="utf-8") == noise_gen.render(), f"regenerate with: .venv/bin/{noise_gen.COMMAND}"


def test_the_generator_reports_a_stale_file_with_its_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    stale = tmp_path / "paddlenoise.ts"
    stale.write_text("export const NOISE_GLOG = '';\n")
    monkeypatch.setattr(noise_gen, "TS_PATH", stale)
    assert noise_gen.main(["--check"]) == 1
    assert noise_gen.COMMAND in capsys.readouterr().err
    assert noise_gen.main([]) == 0 and noise_gen.main(["--check"]) == 0
    assert "fl-ps > " in stale.read_text()


@pytest.mark.parametrize("log", LOGS, ids=[log["name"] for log in LOGS])
def test_job_lists_log_view_hides_the_same_lines(log: dict[str, Any]) -> None:
    """`job_list()`'s log (the notebook side) reads the same rules from `model.paddle_noise`."""
    from paddle_nbext.widgets._log_html import without_noise

    shown, hidden = without_noise("".join(f"{line}\n" for line in log["log"]))
    assert shown.splitlines() == log["shown"] and hidden == len(log["log"]) - len(log["shown"])
