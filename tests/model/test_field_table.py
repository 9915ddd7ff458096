"""The job field table drives every entry point: flags, PaddleJob, the JSON Schema `/config`
serves and the OpenAPI request schema are derived from it, and the table itself is consistent."""

from __future__ import annotations

from dataclasses import fields
from typing import Any

import jsonschema
import pytest

from paddle_nbext.api import PaddleJob
from paddle_nbext.model.fields import GROUPS, KINDS
from paddle_nbext.model.rules import RULES, Limits
from paddle_nbext.model.schema import job_schema, request_properties
from paddle_nbext.model.spec import JOB_FIELDS, JobSpec
from paddle_nbext.options import FIELD_FLAGS, Parser, add_job_flags

LIMIT_NAMES = {f.name for f in fields(Limits)}


def test_rows_are_complete_and_name_real_limits_and_rules() -> None:
    assert [row.name for row in JOB_FIELDS] == list(JobSpec.FIELDS) == [f.name for f in fields(JobSpec)]
    flags = [row.info.flag for row in JOB_FIELDS]
    assert len(set(flags)) == len(flags) and all(flag.startswith("--") for flag in flags)
    for row in JOB_FIELDS:
        assert row.kind in KINDS and row.info.group in GROUPS, row.name
        assert row.info.label and row.info.help and not row.info.help.endswith("."), row.name
        assert row.info.limit is None or row.info.limit in LIMIT_NAMES, row.name
        assert row.info.rule is None or row.info.rule in RULES, row.name
        assert set(row.info.modes) <= {"ps", "collective"} and row.info.modes, row.name


def test_flags_come_from_the_table() -> None:
    parser = Parser(prog="t")
    add_job_flags(parser)
    options = {option for action in parser._actions for option in action.option_strings}
    assert {row.info.flag for row in JOB_FIELDS} <= options
    assert FIELD_FLAGS == {row.name: row.info.flag for row in JOB_FIELDS}
    assert parser.parse_args(["--no-snapshot", "--max-restarts", "2"]).snapshot is False


def test_paddle_job_takes_exactly_the_table_fields() -> None:
    job = PaddleJob(**{row.name: None for row in JOB_FIELDS})
    assert job.to_spec() == {}
    assert PaddleJob(max_restarts=2, env={}).to_spec() == {"max_restarts": 2}
    with pytest.raises(TypeError, match="unknown field.*max_restart\\b"):
        PaddleJob(max_restart=2)


def _schema(**limits: Any) -> dict[str, Any]:
    return job_schema(Limits(**limits), {"trainers": 2, "image": "paddle:3"}, backend="kubernetes", images=["paddle:3"])


def test_served_schema_is_valid_json_schema_with_limits_and_defaults_applied() -> None:
    schema = _schema(max_trainers=4, allowed_images=("paddle:3",), max_timeout=600)
    jsonschema.Draft202012Validator.check_schema(schema)
    properties = schema["properties"]
    assert list(properties) == list(JobSpec.FIELDS)
    assert properties["trainers"]["maximum"] == 4 and properties["trainers"]["default"] == 2
    assert properties["image"]["enum"] == ["paddle:3", None] and properties["image"]["x-backends"] == ["kubernetes"]
    assert properties["timeout"]["x-maximum-seconds"] == 600
    assert properties["pservers"]["x-mode-defaults"] == {"ps": 1, "collective": 0}
    assert properties["pserver_cpu"]["x-modes"] == ["ps"]
    assert schema["x-backend"] == "kubernetes" and schema["required"] == ["entry_point"]
    validator = jsonschema.Draft202012Validator(schema)
    assert list(validator.iter_errors({"entry_point": "python t.py", "trainers": 4, "timeout": "10m"})) == []
    assert [error.path[-1] for error in validator.iter_errors({"entry_point": "x", "trainers": 5})] == ["trainers"]


def test_server_default_for_the_entry_point_makes_it_optional() -> None:
    assert job_schema(None, {"entry_point": "python train.py"})["required"] == []


def test_request_schema_has_every_field_without_server_limits() -> None:
    properties = request_properties("openapi")
    assert list(properties) == list(JobSpec.FIELDS)
    assert "maximum" not in properties["trainers"] and properties["trainers"]["minimum"] == 1
    assert all("nullable" in schema for name, schema in properties.items() if name != "entry_point")
