"""The documented limits of a job request (issue 16): each is refused past its bound and
accepted at it, and no message repeats more than a clipped part of what was sent."""

from __future__ import annotations

from typing import Any

import pytest

from paddle_nbext.model.rules import (
    DURATION_MAX_SECONDS,
    ENTRY_POINT_MAX_LENGTH,
    ENTRY_SCRIPT_MAX_BYTES,
    ENV_MAX_BYTES,
    ENV_MAX_COUNT,
    PATH_MAX_LENGTH,
    SHOWN_MAX_LENGTH,
    SpecError,
    check_entry_script,
    clip,
)
from paddle_nbext.model.spec import JobSpec

BASE = {"entry_point": "python train.py"}


def errors(**fields: Any) -> dict[str, str]:
    return JobSpec.check({**BASE, **fields})


def test_clip_keeps_short_text_and_cuts_long_text() -> None:
    assert clip("train") == "train"
    cut = clip("a" * 10_000_000)
    assert len(cut) < SHOWN_MAX_LENGTH + 40 and "10000000 characters" in cut


@pytest.mark.parametrize(
    ("field", "at_limit", "past_limit"),
    [
        ("entry_point", "x" * ENTRY_POINT_MAX_LENGTH, "x" * (ENTRY_POINT_MAX_LENGTH + 1)),
        ("trainer_package", "a" * PATH_MAX_LENGTH, "a" * (PATH_MAX_LENGTH + 1)),
        ("env", {f"V{i}": "1" for i in range(ENV_MAX_COUNT)}, {f"V{i}": "1" for i in range(ENV_MAX_COUNT + 1)}),
        ("env", {"BIG": "x" * (ENV_MAX_BYTES - len("BIG") - 2)}, {"BIG": "x" * (ENV_MAX_BYTES - len("BIG") - 1)}),
        ("timeout", DURATION_MAX_SECONDS, DURATION_MAX_SECONDS + 1),
        ("trainer_mem", str(2**63 - 1), str(2**63)),
    ],
    ids=["entry_point", "trainer_package", "env count", "env bytes", "timeout", "trainer_mem"],
)
def test_each_limit_holds_at_its_bound_and_not_past_it(field: str, at_limit: Any, past_limit: Any) -> None:
    assert field not in errors(**{field: at_limit})
    message = errors(**{field: past_limit})[field]
    assert len(message) < 300, message


def test_cpu_quantities_kubernetes_takes_stay_accepted() -> None:
    assert errors(trainer_cpu="4Gi") == {}
    assert "trainer_cpu" in errors(trainer_cpu="1E")


@pytest.mark.parametrize(
    "fields",
    [
        {"mode": "m" * 100_000},
        {"trainers": ["x" * 100_000]},
        {"snapshot": "y" * 100_000},
        {"env": ["A" * 100_000]},
        {"env": {"1" + "A" * 100_000: "x"}},
        {"image": "a b" * 100_000},
        {"job_name": "A" * 100_000},
        {"timeout": "x" * 20},
        {"z" * 100_000: 1},
    ],
    ids=["mode", "trainers", "snapshot", "env item", "env name", "image", "job_name", "timeout", "unknown field"],
)
def test_no_message_repeats_a_long_value(fields: dict[str, Any]) -> None:
    found = errors(**fields)
    assert found
    for key, message in found.items():
        assert len(key) < 200 and len(message) < 1500, (key[:80], message[:200])


def test_line_breaks_are_refused_where_a_line_is_expected() -> None:
    assert errors(entry_point="python train.py\r --epochs 1")["entry_point"] == "must be a single-line command"
    assert "line break" in errors(trainer_package="code\nother")["trainer_package"]
    assert "job_name" in errors(job_name="train\n")


def test_the_cell_body_is_checked() -> None:
    assert check_entry_script(None) is None
    assert check_entry_script("print(1)\n") == "print(1)\n"
    assert check_entry_script("é" * (ENTRY_SCRIPT_MAX_BYTES // 2)) is not None
    for bad in (7, "é" * (ENTRY_SCRIPT_MAX_BYTES // 2 + 1), "x\x00", "x\ud800"):
        with pytest.raises(SpecError) as error:
            check_entry_script(bad)
        assert error.value.field == "entry_script"
