"""The one job model: quantities, names, defaults, per-field errors and the JSON round trip."""

from __future__ import annotations

import json
import re
from decimal import Decimal
from fractions import Fraction
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from paddle_nbext.model.quantity import Quantity, QuantityError, format_bytes, format_cpu
from paddle_nbext.model.spec import (
    NAME_MAX_LENGTH,
    JobSpec,
    Limits,
    SpecError,
    generate_name,
    parse_duration,
    validate_name,
)

# ---------------------------------------------------------------- quantities


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("500m", Fraction(1, 2)),
        ("2", Fraction(2)),
        ("1.5", Fraction(3, 2)),
        ("0.1", Fraction(1, 10)),
        ("4Gi", 4 * 2**30),
        ("1G", 10**9),
        ("1K", 1000),
        ("1k", 1000),
        ("3Ki", 3 * 1024),
        ("2Ei", 2 * 2**60),
        ("1E", 10**18),
        ("1P", 10**15),
        ("1T", 10**12),
        ("128M", 128 * 10**6),
        ("1e3", 1000),
        ("5E-3", Fraction(5, 1000)),
        ("250u", Fraction(250, 10**6)),
        ("7n", Fraction(7, 10**9)),
        (".5", Fraction(1, 2)),
        ("1.", Fraction(1)),
        (" 2 ", Fraction(2)),
    ],
)
def test_quantity_parses_kubernetes_forms_exactly(text: str, value: Fraction) -> None:
    assert Quantity.parse(text).value == value


@pytest.mark.parametrize("text", ["", "abc", "1.5.2", "4GB", "4gi", "1 Gi", "--1", "1e", "Gi", "1e999"])
def test_quantity_refuses_garbage_with_the_allowed_forms(text: str) -> None:
    with pytest.raises(QuantityError) as caught:
        Quantity.parse(text)
    assert "quantity" in str(caught.value) or "exponent" in str(caught.value)


def test_quantity_arithmetic_is_exact() -> None:
    # 3 x 0.1 CPU is exactly 0.3, not 0.30000000000000004
    assert (Quantity.parse("100m") * 3).value == Fraction(3, 10)
    assert (Quantity.parse("1.5Gi") + Quantity.parse("512Mi")).value == 2 * 2**30
    assert Quantity.parse("1Gi") > Quantity.parse("1G")
    assert Quantity.parse("1000m") == Quantity.parse("1")


@pytest.mark.parametrize(
    ("text", "canonical"),
    [("1500m", "1500m"), ("1.5", "1500m"), ("2", "2"), ("4Gi", "4Gi"), ("1024Mi", "1Gi"), ("1K", "1k"), ("1e3", "1k"), ("0", "0")],
)
def test_canonical_form_is_what_kubernetes_accepts(text: str, canonical: str) -> None:
    assert Quantity.parse(text).canonical() == canonical


def test_people_friendly_formats() -> None:
    assert format_cpu(Fraction(8)) == "8"
    assert format_cpu(Fraction(1, 4)) == "250m"
    assert format_cpu(Fraction(3, 2)) == "1.5"
    assert format_bytes(Fraction(16 * 2**30)) == "16Gi"
    assert format_bytes(Fraction(3 * 2**29)) == "1.5Gi"


_suffix = st.sampled_from(["", "m", "k", "K", "M", "G", "T", "Ki", "Mi", "Gi", "Ti", "Pi"])


@given(number=st.integers(min_value=0, max_value=10**6), suffix=_suffix)
def test_canonical_round_trips(number: int, suffix: str) -> None:
    quantity = Quantity.parse(f"{number}{suffix}")
    assert Quantity.parse(quantity.canonical()) == quantity


@given(
    a=st.fractions(min_value=0, max_value=1000, max_denominator=1000),
    b=st.fractions(min_value=0, max_value=1000, max_denominator=1000),
    count=st.integers(min_value=0, max_value=100),
)
def test_sum_and_scale_match_fraction_arithmetic(a: Fraction, b: Fraction, count: int) -> None:
    assert (Quantity.parse(a) + Quantity.parse(b)).value == a + b
    assert (Quantity.parse(a) * count).value == a * count


@given(st.decimals(min_value=0, max_value=10**6, places=3, allow_nan=False, allow_infinity=False))
def test_decimal_strings_parse_to_their_exact_value(number: Decimal) -> None:
    text = format(number, "f")
    assert Quantity.parse(text).value == Fraction(str(number))


# ---------------------------------------------------------------- names

_DNS_LABEL = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")  # DNS-1035, matched whole


@given(st.text(max_size=60))
def test_generated_names_are_always_valid_labels(prefix: str) -> None:
    name = generate_name(prefix)
    assert len(name) <= NAME_MAX_LENGTH
    assert _DNS_LABEL.fullmatch(name)
    assert validate_name(name) == name


@given(st.from_regex(r"[a-z]([-a-z0-9]{0,38}[a-z0-9])?", fullmatch=True))
def test_every_dns_label_up_to_40_chars_is_accepted(name: str) -> None:
    assert validate_name(name) == name


@given(st.text(min_size=1, max_size=50).filter(lambda s: not (_DNS_LABEL.fullmatch(s) and len(s) <= NAME_MAX_LENGTH)))
@settings(max_examples=200)
def test_anything_else_is_refused_naming_the_field(name: str) -> None:
    """Leading digits (a Service name needs a letter first) and a trailing newline included."""
    with pytest.raises(SpecError) as caught:
        validate_name(name)
    assert caught.value.field == "job_name"


def test_name_rules_are_explained() -> None:
    with pytest.raises(SpecError, match="lower-case letters"):
        validate_name("My_Job")
    with pytest.raises(SpecError, match="at most 40"):
        validate_name("a" * 41)


# ---------------------------------------------------------------- the spec


def test_defaults_follow_the_design() -> None:
    plain = JobSpec.from_dict({"entry_point": "python train.py"})
    assert (plain.mode, plain.pservers, plain.trainers, plain.snapshot, plain.max_restarts, plain.timeout) == (
        "collective",
        0,
        1,
        True,
        0,
        None,
    )
    assert validate_name(plain.job_name)
    ps = JobSpec.from_dict({"entry_point": "python train.py", "mode": "ps"})
    assert (ps.pservers, ps.trainers, ps.roles()) == (1, 1, ("pserver", "trainer"))
    # Asking for parameter servers asks for the mode that has them.
    asked = JobSpec.from_dict({"entry_point": "python train.py", "pservers": "2"})
    assert (asked.mode, asked.pservers, asked.roles()) == ("ps", 2, ("pserver", "trainer"))
    two_ranks = JobSpec.from_dict({"entry_point": "python hi.py", "trainers": 2})
    assert (two_ranks.mode, two_ranks.pservers, two_ranks.roles()) == ("collective", 0, ("trainer",))


def test_json_round_trip_is_lossless() -> None:
    spec = JobSpec.from_dict(
        {
            "job_name": "mnist-ps",
            "entry_point": "python train.py --epochs 3",
            "trainer_package": "/home/jovyan/mnist",
            "image": "paddle:3.0.0",
            "pservers": 2,
            "trainers": 4,
            "pserver_cpu": "500m",
            "trainer_mem": "4Gi",
            "trainer_gpu": 1,
            "env": {"GLOG_v": 1},
            "max_restarts": 2,
            "timeout": "1h30m",
        }
    )
    data = json.loads(json.dumps(spec.to_dict()))
    assert JobSpec.from_dict(data) == spec
    assert data["timeout"] == 5400 and data["env"] == {"GLOG_v": "1"}


@pytest.mark.parametrize(
    ("change", "field", "hint"),
    [
        ({"entry_point": ""}, "entry_point", "required"),
        ({"mode": "mpi"}, "mode", "'ps'"),
        ({"trainers": 0}, "trainers", "at least 1"),
        ({"trainers": "two"}, "trainers", "whole number"),
        ({"mode": "ps", "pservers": 0}, "pservers", "at least 1 parameter server"),
        ({"mode": "collective", "pservers": 2}, "pservers", "collective mode"),
        ({"trainer_cpu": "2 cores"}, "trainer_cpu", "'500m'"),
        ({"trainer_cpu": "0"}, "trainer_cpu", "positive"),
        ({"trainer_cpu": "1500u"}, "trainer_cpu", "millicore"),
        ({"pserver_mem": "-1Gi"}, "pserver_mem", "positive"),
        ({"pserver_mem": "1.5"}, "pserver_mem", "whole number of bytes"),
        ({"trainer_gpu": -1}, "trainer_gpu", "at least 0"),
        ({"env": {"1BAD": "x"}}, "env", "variable name"),
        ({"env": {"TRAINING_ROLE": "x"}}, "env", "launcher"),
        ({"env": "A=1"}, "env", "mapping"),
        ({"snapshot": "maybe"}, "snapshot", "true or false"),
        ({"timeout": "soon"}, "timeout", "'30m'"),
        ({"timeout": -5}, "timeout", "positive"),
        ({"image": "bad image"}, "image", "image reference"),
        ({"trainerz": 3}, "trainerz", "unknown field"),
    ],
)
def test_each_bad_field_is_named_with_what_is_allowed(change: dict[str, Any], field: str, hint: str) -> None:
    with pytest.raises(SpecError) as caught:
        JobSpec.from_dict({"entry_point": "python train.py", **change})
    assert caught.value.field == field
    assert hint in caught.value.message


def test_check_reports_every_bad_field_at_once() -> None:
    errors = JobSpec.check({"entry_point": "", "trainers": 0, "trainer_mem": "lots"})
    assert set(errors) == {"entry_point", "trainers", "trainer_mem"}
    assert JobSpec.check({"entry_point": "python t.py"}) == {}


def test_server_limits_and_defaults_apply() -> None:
    limits = Limits(
        max_trainers=4,
        max_gpu_per_replica=2,
        max_gpu_per_job=4,
        allowed_images=("paddle:3.0.0",),
        max_mem_per_replica="8Gi",
        max_timeout=3600,
    )
    base = {"entry_point": "python t.py"}
    bad_changes: list[tuple[dict[str, Any], str]] = [
        ({"trainers": 5}, "trainers"),
        ({"trainer_gpu": 3}, "trainer_gpu"),
        ({"trainers": 3, "trainer_gpu": 2}, "trainer_gpu"),
        ({"image": "evil:latest"}, "image"),
        ({"trainer_mem": "9Gi"}, "trainer_mem"),
        ({"timeout": "2h"}, "timeout"),
    ]
    for change, field in bad_changes:
        with pytest.raises(SpecError) as caught:
            JobSpec.from_dict({**base, **change}, limits=limits)
        assert caught.value.field == field, change
    spec = JobSpec.from_dict(base, defaults={"image": "paddle:3.0.0", "trainer_cpu": "2"}, limits=limits)
    assert (spec.image, spec.trainer_cpu) == ("paddle:3.0.0", "2")
    assert Limits.from_dict(limits.to_dict()) == limits


def test_totals_and_summary_are_exact() -> None:
    spec = JobSpec.from_dict(
        {
            "entry_point": "x",
            "trainers": 4,
            "trainer_cpu": "2",
            "trainer_mem": "4Gi",
            "pservers": 2,
            "pserver_cpu": "500m",
            "pserver_mem": "1Gi",
            "trainer_gpu": 1,
        }
    )
    assert spec.totals() == {"cpu": Fraction(9), "memory": 18 * 2**30, "gpu": 4}
    assert spec.summary() == "2 pservers × 500m CPU + 4 trainers × 2 CPU + 1 GPU = 9 CPU, 18Gi, 4 GPU"


@pytest.mark.parametrize(
    ("raw", "seconds"), [(600, 600), ("600", 600), ("90s", 90), ("30m", 1800), ("2h", 7200), ("1h30m", 5400), ("1d", 86400), (None, None)]
)
def test_durations(raw: object, seconds: int | None) -> None:
    assert parse_duration(raw) == seconds


@pytest.mark.parametrize("name", ["1mnist", "mnist\n", "0"])
def test_names_a_service_cannot_carry_are_refused(name: str) -> None:
    with pytest.raises(SpecError, match="starting with a letter"):
        validate_name(name)
