"""openapi.json is generated (openapi_base.json + the job field table), the panel's TypeScript
types (labextension/src/generated/api_types.ts) from it, and `/config` serves the job schema the panel's
form is built from."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from paddle_nbext.model import contract
from paddle_nbext.model.schema import job_schema
from paddle_nbext.model.spec import JobSpec, Limits
from paddle_nbext_server.codegen import openapi_gen, openapi_ts

from .conftest import Api


def test_committed_contract_files_are_what_the_generator_writes() -> None:
    stale = [
        str(path) for path, text in openapi_gen.contract_files().items() if not path.exists() or path.read_text(encoding="utf-8") != text
    ]
    assert stale == [], f"{', '.join(stale)} differ from the field table; regenerate with: .venv/bin/{openapi_gen.COMMAND}"


def test_check_mode_reports_a_stale_file_with_the_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    stale = tmp_path / "openapi.json"
    stale.write_text("{}\n")
    monkeypatch.setattr(openapi_gen, "OPENAPI_PATH", stale)
    monkeypatch.setattr(openapi_gen, "VECTORS_PATH", tmp_path / "absent.json")
    monkeypatch.setattr(openapi_gen, "API_TYPES_PATH", tmp_path / "no-panel" / "api_types.ts")
    assert openapi_gen.main(["--check"]) == 1
    assert openapi_gen.COMMAND in capsys.readouterr().err
    assert openapi_gen.main([]) == 0 and openapi_gen.main(["--check"]) == 0
    assert json.loads(stale.read_text())["components"]["schemas"]["SubmitBody"]["additionalProperties"] is False


def test_submit_body_fields_are_the_table_plus_the_entry_script() -> None:
    body = openapi_gen.build_document()["components"]["schemas"]["SubmitBody"]
    assert list(body["properties"]) == [*JobSpec.FIELDS, "entry_script"] and body["required"] == ["entry_point"]


async def test_config_serves_the_job_schema_of_this_server(api: Api) -> None:
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
async def test_config_schema_applies_the_configured_limits_and_defaults(api: Api, paddle_config: dict[str, Any]) -> None:
    status, config = await api("GET", "config")
    assert status == 200
    properties = config["job_schema"]["properties"]
    assert properties["trainers"]["maximum"] == 4 and properties["trainers"]["default"] == 2
    assert properties["image"]["enum"] == ["paddle:3.0", None] and properties["image"]["default"] == "paddle:3.0"
    assert properties["image"]["examples"] == ["paddle:3.0"] and properties["timeout"]["x-maximum-seconds"] == 600
    assert config["job_schema"]["x-limits"] == config["limits"]


# ---- the panel's types: labextension/src/generated/api_types.ts is rendered from the same document


def test_the_panels_api_types_are_a_contract_file() -> None:
    assert openapi_gen.API_TYPES_PATH.parent.is_dir(), "a source checkout has the panel's sources"
    files = openapi_gen.contract_files()
    assert files[openapi_gen.API_TYPES_PATH] == openapi_ts.render_typescript(openapi_gen.build_document())
    text = files[openapi_gen.API_TYPES_PATH]
    assert text.startswith("/**\n * GENERATED FILE, DO NOT EDIT") and openapi_gen.COMMAND in text
    assert "phase: 'Pending' | 'Running' | 'Succeeded' | 'Failed' | 'Cancelled' | 'Unknown';" in text


def test_check_mode_reports_stale_panel_types(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """Drift: a document change (or a hand edit of the TypeScript) fails --check until regenerated."""
    openapi = tmp_path / "openapi.json"
    openapi.write_text(openapi_gen.render(openapi_gen.build_document()))
    types = tmp_path / "src" / "api_types.ts"
    types.parent.mkdir()
    types.write_text(openapi_gen.contract_files()[openapi_gen.API_TYPES_PATH].replace("'Unknown'", "'Lost'"))
    monkeypatch.setattr(openapi_gen, "OPENAPI_PATH", openapi)
    monkeypatch.setattr(openapi_gen, "API_TYPES_PATH", types)
    monkeypatch.setattr(openapi_gen, "VECTORS_PATH", tmp_path / "absent.json")
    assert openapi_gen.main(["--check"]) == 1
    err = capsys.readouterr().err
    assert str(types) in err and str(openapi) not in err and openapi_gen.COMMAND in err
    assert openapi_gen.main([]) == 0 and openapi_gen.main(["--check"]) == 0
    assert "'Unknown'" in types.read_text() and "'Lost'" not in types.read_text()


def test_a_copy_without_the_panels_sources_writes_no_types(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(openapi_gen, "API_TYPES_PATH", tmp_path / "labextension" / "src" / "generated" / "api_types.ts")
    assert openapi_gen.API_TYPES_PATH not in openapi_gen.contract_files()


def test_the_document_names_every_phase_and_limit_the_model_has() -> None:
    """What the panel's types come from must say what the server sends."""
    schemas = openapi_gen.build_document()["components"]["schemas"]
    assert schemas["JobStatus"]["properties"]["phase"]["enum"] == [str(phase) for phase in contract.Phase]
    assert schemas["Replica"]["properties"]["phase"]["enum"] == [str(phase) for phase in contract.ReplicaPhase]
    limits = schemas["Limits"]
    assert list(limits["properties"]) == list(Limits().to_dict()) == limits["required"]


def test_every_keyword_the_served_job_schema_uses_is_declared() -> None:
    declared = set(openapi_gen.build_document()["components"]["schemas"]["JobSchemaField"]["properties"])
    vectors = json.loads(openapi_gen.VECTORS_PATH.read_text(encoding="utf-8"))
    limit_sets = [Limits(), *(Limits.from_dict(limits) for limits in vectors["limits"].values())]
    used = {
        keyword
        for limits in limit_sets
        for backend in ("local", "kubernetes")
        for field in job_schema(limits, {}, backend=backend)["properties"].values()
        for keyword in field
    }
    assert used - declared == set(), f"add these to openapi_gen._job_schema_field: {sorted(used - declared)}"


@pytest.mark.parametrize(
    ("schema", "expected"),
    [
        ({"type": "string", "nullable": True}, "string | null"),
        ({"type": "string", "enum": ["a", "it's"]}, "'a' | 'it\\'s'"),
        ({"type": "boolean", "enum": [True]}, "true"),
        ({"type": ["string", "null"]}, "string | null"),
        ({"oneOf": [{"type": "integer"}, {"type": "string"}]}, "number | string"),
        ({"nullable": True}, "unknown"),
        ({"type": "array", "items": {"$ref": "#/components/schemas/Thing"}}, "IThing[]"),
        ({"type": "array", "items": {"type": "string", "enum": ["x", "y"]}}, "Array<'x' | 'y'>"),
        ({"$ref": "#/components/schemas/Maybe"}, "IMaybe | null"),
        ({"type": "object"}, "{ [key: string]: unknown }"),
        ({"type": "object", "additionalProperties": {"type": "integer"}}, "{ [key: string]: number }"),
        ({"type": "object", "additionalProperties": False}, "Record<string, never>"),
        (
            {"type": "object", "required": ["a"], "properties": {"a": {"type": "integer"}, "b-c": {"type": "string"}}},
            "{\n  a: number;\n  'b-c'?: string;\n}",
        ),
    ],
)
def test_typescript_of_a_schema(schema: dict[str, Any], expected: str) -> None:
    document = {
        "components": {
            "schemas": {
                "Thing": {"type": "object", "properties": {"x": {"type": "string"}}},
                "Maybe": {"type": "object", "nullable": True, "properties": {"x": {"type": "string"}}},
                "Probe": {"type": "object", "properties": {"value": schema}},
            }
        }
    }
    text = openapi_ts.render_typescript(document)
    value = text.split("export interface IProbe {\n  value?: ", 1)[1].rsplit(";\n}\n", 1)[0]
    assert value == expected.replace("\n", "\n  ")


def test_typescript_of_the_operations_inline_responses() -> None:
    text = openapi_gen.contract_files()[openapi_gen.API_TYPES_PATH]
    for name in ("IListCheckpointsResponse", "IDeleteJobResponse", "IGetVersionResponse"):
        assert f"\nexport interface {name} {{\n" in text
    with pytest.raises(ValueError, match="unsupported"):
        openapi_ts.render_typescript({"components": {"schemas": {"X": {"type": "object", "properties": {"y": {"$ref": "other.json#/Z"}}}}}})
