"""The job field table as schemas: the JSON Schema `/config` serves and the OpenAPI request schema.

Both are written from `JOB_FIELDS`, so the panel's form, the OpenAPI document and the model
cannot disagree about which fields exist, their types, labels, groups, defaults and fixed
bounds.  `job_schema()` also applies one server's settings: its limits become `maximum`/`enum`
(or `x-maximum-...` where JSON Schema has no word for it, e.g. a largest quantity), its defaults
become `default`, and `x-backend` names the backend so a form can hide fields it does not use
(`x-backends`).  The panel builds its New job form from that document alone.

Form facts ride in `x-` keywords: `x-kind` (how to parse and which input to show), `x-group`,
`x-modes` (hidden in other modes), `x-backends`, `x-placeholder`, `x-flag`, `x-rule` (a named
cross-field rule, rules.RULES, given the server's `x-limits`), `x-choice-labels`,
`x-mode-defaults` (a default that depends on the mode, e.g. pservers),
`x-reserved-names`/`x-reserved-prefix` (env).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Literal

from .fields import GROUPS, JobField
from .progress_pattern import MAX_LENGTH as PATTERN_MAX_LENGTH
from .quantity import QUANTITY_PATTERN
from .rules import (
    DURATION_PATTERN,
    ENV_NAME_PATTERN,
    IMAGE_MAX_LENGTH,
    NAME_MAX_LENGTH,
    NAME_PATTERN,
    RESERVED_ENV,
    RESERVED_ENV_PREFIX,
    Limits,
    SpecError,
)
from .spec import JOB_FIELDS, MODES, JobSpec

__all__ = ["JSON_SCHEMA_DIALECT", "effective_defaults", "job_schema", "request_properties"]

JSON_SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"
Flavor = Literal["json-schema", "openapi"]
_PLACEHOLDER_COMMAND = "python train.py"


def effective_defaults(configured: Mapping[str, Any], mode: str | None = None) -> dict[str, Any]:
    """Every job field's value when a request leaves it out (what forms pre-fill), given the
    server's configured defaults; with `mode`, for a request that picks that mode."""
    data: dict[str, Any] = {"entry_point": _PLACEHOLDER_COMMAND, **configured}
    if mode is not None:
        data["mode"] = mode
    try:
        spec = JobSpec.from_dict(data)
    except SpecError:
        return dict(configured)
    values = spec.to_dict()
    values.pop("job_name")
    values.pop("entry_point")
    return values


def _nullable(schema: dict[str, Any], flavor: Flavor) -> dict[str, Any]:
    """A request may send null for any optional field: it means "the default"."""
    if flavor == "openapi":
        schema["nullable"] = True
    elif "type" in schema:
        schema["type"] = [schema["type"], "null"]
    else:
        schema["oneOf"] = [*schema["oneOf"], {"type": "null"}]
    if "enum" in schema:
        schema["enum"] = [*schema["enum"], None]
    return schema


def _value_schema(row: JobField, limits: Limits | None, flavor: Flavor) -> dict[str, Any]:
    """Type and bounds of one field's value (the limits only when given)."""
    info = row.info
    bound = limits.bound(info.limit) if limits is not None else None
    if row.kind == "name":
        return {"type": "string", "maxLength": NAME_MAX_LENGTH, "pattern": f"^({NAME_PATTERN})?$"}
    if row.kind in ("command", "path"):
        return {"type": "string", "minLength": 1} if info.required else {"type": "string"}
    if row.kind == "image":
        schema: dict[str, Any] = {"type": "string", "maxLength": IMAGE_MAX_LENGTH}
        if bound is not None:
            schema["enum"] = list(bound)
        return schema
    if row.kind == "choice":
        return {"type": "string", "enum": list(info.choices), "x-choice-labels": dict(info.choices)}
    if row.kind == "count":
        schema = {"type": "integer", "minimum": info.minimum if info.minimum is not None else 0}
        if bound is not None:
            schema["maximum"] = bound
        return schema
    if row.kind in ("cpu", "memory"):
        schema = {"type": "string", "pattern": f"^{QUANTITY_PATTERN}$"}
        if bound is not None:
            schema["x-maximum-quantity"] = bound
        return schema
    if row.kind == "env":
        schema = {"type": "object", "additionalProperties": {"type": "string"}}
        if flavor == "json-schema":
            schema["propertyNames"] = {"pattern": f"^{ENV_NAME_PATTERN}$"}
            schema["additionalProperties"] = {"type": ["string", "number"]}
        schema["x-reserved-names"] = sorted(RESERVED_ENV)
        schema["x-reserved-prefix"] = RESERVED_ENV_PREFIX
        return schema
    if row.kind == "switch":
        return {"type": "boolean"}
    if row.kind == "pattern":
        return {"type": "string", "maxLength": PATTERN_MAX_LENGTH}
    # duration: seconds, or text such as 90s, 30m, 1h30m
    seconds: dict[str, Any] = {"type": "integer", "minimum": 1}
    if bound is not None:
        seconds["maximum"] = bound
    schema = {"oneOf": [seconds, {"type": "string", "pattern": f"^([0-9]+|{DURATION_PATTERN})$"}]}
    if bound is not None:
        schema["x-maximum-seconds"] = bound
    return schema


def _field_schema(row: JobField, limits: Limits | None, flavor: Flavor) -> dict[str, Any]:
    info = row.info
    schema: dict[str, Any] = {"title": info.label, "description": info.help, **_value_schema(row, limits, flavor)}
    if not info.required:
        schema = _nullable(schema, flavor)
    schema["x-kind"] = row.kind
    schema["x-group"] = info.group
    schema["x-modes"] = [str(mode) for mode in info.modes]
    schema["x-flag"] = info.flag
    if info.backends is not None:
        schema["x-backends"] = list(info.backends)
    if info.placeholder:
        schema["x-placeholder"] = info.placeholder
    if info.rule:
        schema["x-rule"] = info.rule
    return schema


def request_properties(flavor: Flavor = "openapi") -> dict[str, dict[str, Any]]:
    """The job fields of a request body with the model's own defaults and no server limits."""
    properties = {}
    for row in JOB_FIELDS:
        schema = _field_schema(row, None, flavor)
        if not info_required(row) and row.default is not None:
            schema["default"] = row.default
        properties[row.name] = schema
    return properties


def info_required(row: JobField, defaults: Mapping[str, Any] | None = None) -> bool:
    """A request must give the field: the table says so and the server has no default for it."""
    return row.info.required and not (defaults and defaults.get(row.name) not in (None, ""))


def _mode_defaults(configured: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """field -> {mode: default} for the fields whose default differs between modes."""
    per_mode = {mode: effective_defaults(configured, mode) for mode in MODES}
    varying: dict[str, dict[str, Any]] = {}
    for row in JOB_FIELDS:
        if row.kind == "choice" and set(row.info.choices) == set(MODES):
            continue  # the mode itself
        values = {mode: defaults[row.name] for mode, defaults in per_mode.items() if row.name in defaults}
        if len({repr(value) for value in values.values()}) > 1:
            varying[row.name] = values
    return varying


def job_schema(
    limits: Limits | None = None,
    configured_defaults: Mapping[str, Any] | None = None,
    *,
    backend: str | None = None,
    images: Iterable[str] = (),
) -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of a job spec on one server: its limits, its defaults
    (`configured_defaults` as in `PaddleNbext.job_defaults()`), its backend and the images it
    suggests.  Without arguments: the model's own defaults and limits, no backend."""
    limits = limits or Limits()
    configured = dict(configured_defaults or {})
    defaults = effective_defaults(configured)
    if "entry_point" in configured:
        defaults["entry_point"] = configured["entry_point"]
    mode_defaults = _mode_defaults(configured)
    suggested = list(images)
    properties: dict[str, Any] = {}
    for row in JOB_FIELDS:
        schema = _field_schema(row, limits, "json-schema")
        if row.name in defaults:
            schema["default"] = defaults[row.name]
        if row.name in mode_defaults:
            schema["x-mode-defaults"] = mode_defaults[row.name]
        if row.kind == "image" and suggested:
            schema["examples"] = suggested
        properties[row.name] = schema
    document: dict[str, Any] = {
        "$schema": JSON_SCHEMA_DIALECT,
        "title": "Job spec",
        "description": "A paddle-nbext job as POST /jobs accepts it, with this server's limits and defaults applied.",
        "type": "object",
        "additionalProperties": False,
        "required": [row.name for row in JOB_FIELDS if info_required(row, defaults)],
        "properties": properties,
        "x-groups": [group for group in GROUPS if any(row.info.group == group for row in JOB_FIELDS)],
        "x-limits": limits.to_dict(),
    }
    if backend is not None:
        document["x-backend"] = backend
    return document
