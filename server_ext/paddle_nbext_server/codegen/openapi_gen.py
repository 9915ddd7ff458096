"""Writes openapi.json: the hand-maintained parts (openapi_base.json: paths, responses, status
schemas) plus the parts derived from the job field table (`paddle_nbext.model.spec.JOB_FIELDS`).

    python -m paddle_nbext_server.codegen.openapi_gen          # rewrite the generated contract files
    python -m paddle_nbext_server.codegen.openapi_gen --check  # exit 1 if one of them is stale

In a source checkout it also writes tests/vectors/job_spec_schemas.json: the job schema `/config`
serves for each limits set of the shared validation vectors, which the panel's vitest suite
validates the vectors against (it cannot run Python); and labextension/src/generated/api_types.ts:
the panel's TypeScript types of the API's JSON, rendered from the document by `openapi_ts` (the
panel imports them through labextension/src/api/types.ts), so they cannot drift from the API.

Derived: the job fields of `SubmitBody` (the POST /jobs request: types, fixed bounds, defaults,
labels and help of every field), and `JobSchema` / `JobSchemaField`, the shape of the JSON
Schema that `GET /config` serves as `job_schema`.  The server serves the written file as is, so
tests/server/test_openapi_contract.py checks the live server against what this produces.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from paddle_nbext.model.fields import GROUPS, KINDS
from paddle_nbext.model.rules import Limits
from paddle_nbext.model.schema import job_schema, request_properties
from paddle_nbext.model.spec import JOB_FIELDS, MODES

from .openapi_ts import render_typescript

__all__ = ["API_TYPES_PATH", "BASE_PATH", "OPENAPI_PATH", "VECTORS_DIR", "build_document", "contract_files", "main", "render"]

CODEGEN_DIR = Path(__file__).resolve().parent
PACKAGE_DIR = CODEGEN_DIR.parent
BASE_PATH = CODEGEN_DIR / "openapi_base.json"
OPENAPI_PATH = PACKAGE_DIR / "openapi.json"
VECTORS_DIR = PACKAGE_DIR.parents[1] / "tests" / "vectors"
VECTORS_PATH = VECTORS_DIR / "job_spec_validation.json"
VECTOR_SCHEMAS_PATH = VECTORS_DIR / "job_spec_schemas.json"
#: The panel's generated API types (written only where the panel's sources are: a source checkout).
API_TYPES_PATH = PACKAGE_DIR.parents[1] / "labextension" / "src" / "generated" / "api_types.ts"
COMMAND = "python -m paddle_nbext_server.codegen.openapi_gen"
#: The schemas this module writes; openapi_base.json must leave them out (or, SubmitBody, hold
#: only its non-field parts).
GENERATED = ("SubmitBody", "JobSchema", "JobSchemaField")


def _submit_body(base: dict[str, Any]) -> dict[str, Any]:
    """The request: every job field, then the request-only properties of the base (entry_script)."""
    return {
        "type": "object",
        "description": base["description"],
        "properties": {**request_properties("openapi"), **base.get("properties", {})},
        "required": [row.name for row in JOB_FIELDS if row.info.required],
        "additionalProperties": False,
    }


def _job_schema_field() -> dict[str, Any]:
    """One property of the served JSON Schema: the form facts every field carries."""
    text = {"type": "string"}
    count = {"type": "integer"}
    texts = {"type": "array", "items": text}
    return {
        "type": "object",
        "description": "A job field as the New job form shows it: JSON Schema keywords plus x- keywords (see paddle_nbext/model/schema.py).",
        "required": ["title", "description", "x-kind", "x-group", "x-modes", "x-flag"],
        "properties": {
            "title": text,
            "description": text,
            "type": {"oneOf": [text, texts]},
            "oneOf": {"type": "array", "items": {"type": "object"}},
            "default": {"nullable": True},
            "enum": {"type": "array", "items": {"nullable": True}},
            "examples": texts,
            "minimum": count,
            "maximum": count,
            "minLength": count,
            "maxLength": count,
            "pattern": text,
            "propertyNames": {"type": "object", "properties": {"pattern": text}},
            "additionalProperties": {"type": "object"},
            "x-kind": {"type": "string", "enum": list(KINDS)},
            "x-group": {"type": "string", "enum": list(GROUPS)},
            "x-modes": {"type": "array", "items": {"type": "string", "enum": list(MODES)}},
            "x-backends": {"type": "array", "items": text},
            "x-flag": text,
            "x-placeholder": text,
            "x-rule": text,
            "x-mode-defaults": {"type": "object", "additionalProperties": {"nullable": True}},
            "x-choice-labels": {"type": "object", "additionalProperties": text},
            "x-maximum-quantity": text,
            "x-maximum-seconds": count,
            "x-reserved-names": texts,
            "x-reserved-prefix": text,
        },
    }


def _job_schema() -> dict[str, Any]:
    """The served JSON Schema document: its fields are exactly the table's."""
    names = [row.name for row in JOB_FIELDS]
    return {
        "type": "object",
        "description": "JSON Schema (draft 2020-12) of a job spec on this server: limits, defaults and backend applied.",
        "required": ["$schema", "type", "properties", "required", "x-groups", "x-limits"],
        "properties": {
            "$schema": {"type": "string"},
            "type": {"type": "string", "enum": ["object"]},
            "additionalProperties": {"type": "boolean"},
            "required": {"type": "array", "items": {"type": "string", "enum": names}},
            "properties": {
                "type": "object",
                "required": names,
                "additionalProperties": False,
                "properties": {name: {"$ref": "#/components/schemas/JobSchemaField"} for name in names},
            },
            "x-groups": {"type": "array", "items": {"type": "string", "enum": list(GROUPS)}},
            "x-backend": {"type": "string"},
            "x-limits": {"$ref": "#/components/schemas/Limits"},
        },
    }


def build_document(base: dict[str, Any] | None = None) -> dict[str, Any]:
    """The OpenAPI document: the base with the derived schemas filled in (SubmitBody in place,
    JobSchema and JobSchemaField right after it)."""
    if base is None:
        base = json.loads(BASE_PATH.read_text(encoding="utf-8"))
    document = dict(base)
    schemas: dict[str, Any] = {}
    for name, schema in base["components"]["schemas"].items():
        if name in GENERATED[1:]:
            raise ValueError(f"{BASE_PATH.name} defines {name}, which {COMMAND} writes; remove it there")
        if name == "SubmitBody":
            schemas[name] = _submit_body(schema)
            schemas["JobSchema"] = _job_schema()
            schemas["JobSchemaField"] = _job_schema_field()
        else:
            schemas[name] = schema
    document["components"] = {**base["components"], "schemas": schemas}
    return document


def render(document: Any) -> str:
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"


def vector_schemas(vectors: dict[str, Any]) -> dict[str, Any]:
    """limits-set name -> the job schema a server with those limits serves (local backend)."""
    return {name: job_schema(Limits.from_dict(limits), backend="local") for name, limits in vectors["limits"].items()}


def contract_files() -> dict[Path, str]:
    """Every generated file with the text it must have."""
    document = build_document()
    files = {OPENAPI_PATH: render(document)}
    if API_TYPES_PATH.parent.is_dir():
        files[API_TYPES_PATH] = render_typescript(document)
    if VECTORS_PATH.exists():
        vectors = json.loads(VECTORS_PATH.read_text(encoding="utf-8"))
        files[VECTOR_SCHEMAS_PATH] = render(vector_schemas(vectors))
    return files


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog=COMMAND.removeprefix("python -m "),
        description="Write openapi.json (and the vectors' job schemas and the panel's api_types.ts) from openapi_base.json and the job field table.",
    )
    parser.add_argument("--check", action="store_true", help="only compare; exit 1 if a generated file differs from what would be written")
    args = parser.parse_args(argv)
    stale = []
    for path, text in contract_files().items():
        current = path.read_text(encoding="utf-8") if path.exists() else ""
        if current == text:
            continue
        stale.append(path)
        if not args.check:
            path.write_text(text, encoding="utf-8")
            print(f"wrote {path}")
    if args.check and stale:
        print(f"stale: {', '.join(map(str, stale))}; regenerate with: {COMMAND}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
