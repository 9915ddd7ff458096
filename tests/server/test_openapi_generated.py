"""openapi.json is generated (openapi_base.json + the job field table), and `/config` serves the
job schema the panel's form is built from."""

from __future__ import annotations

import json

import jsonschema
import pytest

from paddle_nbext.schema import job_schema
from paddle_nbext.spec import JobSpec, Limits
from paddle_nbext_server import openapi_gen


def test_committed_contract_files_are_what_the_generator_writes() -> None:
    stale = [
        str(path) for path, text in openapi_gen.contract_files().items() if not path.exists() or path.read_text(encoding="utf-8") != text
    ]
    assert stale == [], f"{', '.join(stale)} differ from the field table; regenerate with: .venv/bin/{openapi_gen.COMMAND}"


def test_check_mode_reports_a_stale_file_with_the_command(tmp_path, monkeypatch, capsys) -> None:
    stale = tmp_path / "openapi.json"
    stale.write_text("{}\n")
    monkeypatch.setattr(openapi_gen, "OPENAPI_PATH", stale)
    monkeypatch.setattr(openapi_gen, "VECTORS_PATH", tmp_path / "absent.json")
    assert openapi_gen.main(["--check"]) == 1
    assert openapi_gen.COMMAND in capsys.readouterr().err
    assert openapi_gen.main([]) == 0 and openapi_gen.main(["--check"]) == 0
    assert json.loads(stale.read_text())["components"]["schemas"]["SubmitBody"]["additionalProperties"] is False


def test_submit_body_fields_are_the_table_plus_the_entry_script() -> None:
    body = openapi_gen.build_document()["components"]["schemas"]["SubmitBody"]
    assert list(body["properties"]) == [*JobSpec.FIELDS, "entry_script"] and body["required"] == ["entry_point"]


async def test_config_serves_the_job_schema_of_this_server(api) -> None:
    status, config = await api("GET", "config")
    assert status == 200
    schema = config["job_schema"]
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema == job_schema(Limits.from_dict(config["limits"]), {}, backend="local")
    assert schema["x-backend"] == "local" and schema["properties"]["image"]["x-backends"] == ["kubernetes"]


@pytest.mark.parametrize(
    "paddle_config",
    [{"max_trainers": 4, "allowed_images": ["paddle:3.0"], "default_image": "paddle:3.0", "defaults": {"trainers": 2}, "max_timeout": 600}],
)
async def test_config_schema_applies_the_configured_limits_and_defaults(api, paddle_config) -> None:
    status, config = await api("GET", "config")
    assert status == 200
    properties = config["job_schema"]["properties"]
    assert properties["trainers"]["maximum"] == 4 and properties["trainers"]["default"] == 2
    assert properties["image"]["enum"] == ["paddle:3.0", None] and properties["image"]["default"] == "paddle:3.0"
    assert properties["image"]["examples"] == ["paddle:3.0"] and properties["timeout"]["x-maximum-seconds"] == 600
    assert config["job_schema"]["x-limits"] == config["limits"]
