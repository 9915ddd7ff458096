"""TypeScript declarations of the REST API's JSON, from the OpenAPI document: the panel's
`labextension/src/generated/api_types.ts`, which `openapi_gen` writes beside openapi.json (and `--check`
compares) so the panel's types cannot drift from the API.

Every schema of `components.schemas` becomes `export interface I<Name>` (the panel's naming rule,
JupyterLab's: interfaces are `I<Something>`), and every operation whose success response is an
inline object becomes `I<OperationId>Response` (e.g. `IListCheckpointsResponse`).  It covers the
subset of OpenAPI 3.0 schemas the document uses: `$ref`, `type` (one or a list), `enum`,
`nullable`, `oneOf`, `properties` / `required`, `items`, `additionalProperties`; a schema
without a type reads as `unknown`.  Descriptions become doc comments.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

__all__ = ["HEADER", "interface_name", "render_typescript"]

HEADER = """\
/**
 * GENERATED FILE, DO NOT EDIT: the JSON shapes of the paddle-nbext REST API, written by
 * `python -m paddle_nbext_server.codegen.openapi_gen` from server_ext/paddle_nbext_server/openapi.json
 * (itself generated from openapi_base.json and the job field table).
 *
 * Regenerate after changing the API: .venv/bin/python -m paddle_nbext_server.codegen.openapi_gen
 * (tests/server/test_openapi_generated.py fails while this file differs from what it writes).
 * The panel imports these through ../api/types, which names them and opens the phase unions.
 */
"""

_REF = "#/components/schemas/"
_IDENTIFIER = re.compile(r"^[A-Za-z_$][A-Za-z0-9_$]*$")
_SIMPLE = re.compile(r"^[A-Za-z_$][A-Za-z0-9_$.]*$")
_PRIMITIVES = {"string": "string", "integer": "number", "number": "number", "boolean": "boolean", "null": "null"}
_INDENT = "  "


def interface_name(schema_name: str) -> str:
    """`JobStatus` -> `IJobStatus`."""
    return f"I{schema_name[:1].upper()}{schema_name[1:]}"


def _literal(value: Any) -> str:
    if isinstance(value, str):
        return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
    return json.dumps(value)


def _key(name: str) -> str:
    return name if _IDENTIFIER.match(name) else _literal(name)


def _comment(text: str, indent: str) -> list[str]:
    lines = text.replace("*/", "*\\/").splitlines() or [""]
    if len(lines) == 1:
        return [f"{indent}/** {lines[0]} */"]
    return [f"{indent}/**", *(f"{indent} * {line}".rstrip() for line in lines), f"{indent} */"]


def _union(members: list[str]) -> str:
    unique = list(dict.fromkeys(members))
    if "unknown" in unique:
        return "unknown"
    return " | ".join(unique)


class _Writer:
    def __init__(self, schemas: Mapping[str, Any]) -> None:
        self.schemas = schemas

    def ref(self, ref: str) -> str:
        if not ref.startswith(_REF) or ref[len(_REF) :] not in self.schemas:
            raise ValueError(f"unsupported $ref {ref!r}: only {_REF}<name> of this document")
        name = ref[len(_REF) :]
        target = self.schemas[name]
        return f"{interface_name(name)} | null" if target.get("nullable") else interface_name(name)

    def type(self, schema: Mapping[str, Any], indent: str) -> str:
        """The TypeScript type of `schema`, written at `indent` (for multi-line object types)."""
        if "$ref" in schema:
            return self.ref(schema["$ref"])
        nullable = bool(schema.get("nullable"))
        if "oneOf" in schema or "anyOf" in schema:
            members = [self.type(member, indent) for member in schema.get("oneOf", schema.get("anyOf", []))]
        elif "enum" in schema:
            members = [_literal(value) for value in schema["enum"]]
        else:
            kinds = schema.get("type")
            if kinds is None:
                return "unknown"
            members = [self.kind(kind, schema, indent) for kind in ([kinds] if isinstance(kinds, str) else kinds)]
        if nullable:
            members.append("null")
        return _union(members)

    def kind(self, kind: str, schema: Mapping[str, Any], indent: str) -> str:
        if kind in _PRIMITIVES:
            return _PRIMITIVES[kind]
        if kind == "array":
            item = self.type(schema.get("items", {}), indent)
            return f"{item}[]" if _SIMPLE.match(item) else f"Array<{item}>"
        if kind == "object":
            return self.object(schema, indent)
        raise ValueError(f"unsupported schema type {kind!r}")

    def object(self, schema: Mapping[str, Any], indent: str) -> str:
        lines = self.members(schema, indent + _INDENT)
        if not lines:
            extra = schema.get("additionalProperties", True)
            if extra is False:
                return "Record<string, never>"
            value = "unknown" if extra is True else self.type(extra, indent + _INDENT)
            if "\n" in value:
                return f"{{\n{indent}{_INDENT}[key: string]: {value};\n{indent}}}"
            return f"{{ [key: string]: {value} }}"
        return "{\n" + "\n".join(lines) + f"\n{indent}}}"

    def members(self, schema: Mapping[str, Any], indent: str) -> list[str]:
        """The property lines of an object schema (with its index signature when it has one)."""
        properties: Mapping[str, Any] = schema.get("properties", {})
        required = set(schema.get("required", []))
        lines: list[str] = []
        for name, prop in properties.items():
            if "description" in prop:
                lines.extend(_comment(prop["description"], indent))
            optional = "" if name in required else "?"
            lines.append(f"{indent}{_key(name)}{optional}: {self.type(prop, indent)};")
        extra = schema.get("additionalProperties")
        if properties and (extra is True or isinstance(extra, Mapping)):
            # Every property must fit the index signature, so it reads as unknown beside them.
            lines.append(f"{indent}[key: string]: unknown;")
        return lines

    def declaration(self, name: str, schema: Mapping[str, Any]) -> list[str]:
        lines = _comment(schema["description"], "") if "description" in schema else []
        if schema.get("type") == "object" and schema.get("properties"):
            body = self.members(schema, _INDENT)
            return [*lines, f"export interface {name} {{", *body, "}"]
        plain = {key: value for key, value in schema.items() if key != "nullable"}
        return [*lines, f"export type {name} = {self.type(plain, '')};"]


def _responses(document: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any]]]:
    """(interface name, schema) of every operation's inline object success responses."""
    out: list[tuple[str, Mapping[str, Any]]] = []
    for item in document.get("paths", {}).values():
        for method, operation in item.items():
            if method == "parameters" or "operationId" not in operation:
                continue
            inline = []
            for code, response in operation.get("responses", {}).items():
                schema = response.get("content", {}).get("application/json", {}).get("schema")
                if str(code).startswith("2") and schema and "$ref" not in schema and schema.get("properties"):
                    inline.append((str(code), schema))
            for code, schema in inline:
                suffix = "Response" if len(inline) == 1 else f"Response{code}"
                described = {"description": f"`{operation['operationId']}`: its {code} response.", **schema}
                out.append((interface_name(operation["operationId"]) + suffix, described))
    return out


def render_typescript(document: Mapping[str, Any]) -> str:
    """api_types.ts for `document` (an OpenAPI 3.0 document)."""
    schemas: Mapping[str, Any] = document.get("components", {}).get("schemas", {})
    writer = _Writer(schemas)
    blocks = [HEADER.rstrip("\n")]
    for name, schema in schemas.items():
        blocks.append("\n".join(writer.declaration(interface_name(name), schema)))
    responses = _responses(document)
    if responses:
        blocks.append("// Inline success responses of operations, named after their operationId.")
        for name, schema in responses:
            blocks.append("\n".join(writer.declaration(name, schema)))
    return "\n\n".join(blocks) + "\n"
