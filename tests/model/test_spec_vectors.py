"""The shared validation vectors (tests/vectors/job_spec_validation.json) against `JobSpec.check`.

The same file is run by the panel's vitest suite against its validator
(labextension/src/__tests__/vectors.test.ts), so the message the browser shows inline is the one
the server returns.  Every field of the table must have at least one refused case here, so a new
field cannot arrive without vectors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from paddle_nbext.model.spec import JOB_FIELDS, JobSpec, Limits

VECTORS = json.loads((Path(__file__).parent.parent / "vectors" / "job_spec_validation.json").read_text(encoding="utf-8"))
CASES: list[dict[str, Any]] = VECTORS["cases"]


@pytest.mark.parametrize("case", CASES, ids=[case["name"] for case in CASES])
def test_vector(case: dict[str, Any]) -> None:
    limits = Limits.from_dict(VECTORS["limits"][case["limits"]])
    assert JobSpec.check(case["input"], limits=limits) == case["errors"]


def test_case_names_are_unique() -> None:
    names = [case["name"] for case in CASES]
    assert len(names) == len(set(names))


def test_every_field_and_kind_has_refused_and_accepted_cases() -> None:
    refused = {field for case in CASES for field in case["errors"]}
    given_and_accepted = {field for case in CASES if not case["errors"] and isinstance(case["input"], dict) for field in case["input"]}
    missing_refused = [row.name for row in JOB_FIELDS if row.name not in refused]
    missing_accepted = [row.name for row in JOB_FIELDS if row.name not in given_and_accepted]
    assert missing_refused == [], f"add a refused case for {missing_refused} to tests/vectors/job_spec_validation.json"
    assert missing_accepted == [], f"add an accepted case for {missing_accepted} to tests/vectors/job_spec_validation.json"


def test_the_vectors_exercise_the_named_limits() -> None:
    """A case checked with the tight limits must differ from the default limits, or it tests nothing."""
    tight = [case for case in CASES if case["limits"] != "default" and case["errors"]]
    assert tight
    for case in tight:
        assert JobSpec.check(case["input"]) != case["errors"], case["name"]
