"""The words of the job field table: what one row of `JobSpec` says about its field.

`JobSpec` (spec.py) declares every job field as a dataclass field whose metadata is a
`FieldInfo`; that class body is the one table the CLI and magic flags, the ipywidgets form, the
OpenAPI request schema and the JSON Schema that `/config` serves are derived from.  This module
holds only the vocabulary (kinds, groups, the row type) so the rules and the schema writers can
use it without importing the model.

A field's `kind` says how a value is parsed and checked (rules.py has one parser per kind, and
the panel's logic/validate/ mirrors each; the shared vectors in tests/vectors check they agree).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from .contract import Mode

__all__ = ["FIELD_INFO", "GROUPS", "KINDS", "FieldInfo", "Group", "JobField", "Kind", "spec_field"]

#: How a value is parsed and checked:
#: name      job name, a DNS-1035 label (empty: generated)
#: command   one line of shell, required unless the server has a default
#: path      a directory
#: image     a container image reference, optionally from the server's allow-list
#: choice    one of `choices`
#: count     a whole number between `minimum` and the server limit `limit`; a count outside its
#:           `modes` (pservers in collective mode) defaults to 0
#: cpu       a Kubernetes CPU quantity, at most the limit `limit`, no finer than a millicore
#: memory    a Kubernetes memory quantity, at most the limit `limit`, whole bytes
#: env       NAME=value pairs (mapping or list), launcher-owned names refused
#: switch    true or false
#: duration  seconds or `1h30m`-style text, at most the limit `limit`
#: pattern   a regular expression with a named group `step` (progress_pattern.py); empty: none
Kind = Literal["name", "command", "path", "image", "choice", "count", "cpu", "memory", "env", "switch", "duration", "pattern"]
KINDS: tuple[Kind, ...] = ("name", "command", "path", "image", "choice", "count", "cpu", "memory", "env", "switch", "duration", "pattern")

#: Form sections, in the order forms show them.
Group = Literal["Code", "Replicas", "Resources", "Run"]
GROUPS: tuple[Group, ...] = ("Code", "Replicas", "Resources", "Run")

#: The dataclass-metadata key under which `JobSpec` fields carry their `FieldInfo`.
FIELD_INFO = "paddle_nbext.field"


@dataclass(frozen=True)
class FieldInfo:
    """One row of the field table, minus the name and default (the dataclass field has those).

    `help` is a phrase (no trailing period) used as CLI help and as the form's hint; `label` is
    the form's label.  `required`: a request must give it unless the server has a default.  `modes` are the modes the field means something in: forms hide it in the
    others.  `backends` (None: all) are the backends that use it.  `limit` names the `Limits`
    attribute that bounds the value on a server; `rule` names a cross-field rule of rules.RULES
    run after the field parsed."""

    kind: Kind
    label: str
    help: str
    group: Group
    flag: str
    metavar: str = ""
    placeholder: str = ""
    modes: tuple[Mode, ...] = (Mode.PS, Mode.COLLECTIVE)
    backends: tuple[str, ...] | None = None
    minimum: int | None = None
    limit: str | None = None
    choices: Mapping[str, str] = field(default_factory=dict)
    rule: str | None = None
    required: bool = False


def spec_field(info: FieldInfo) -> dict[str, Any]:
    """Dataclass metadata carrying `info`: `field(default=..., metadata=spec_field(FieldInfo(...)))`."""
    return {FIELD_INFO: info}


@dataclass(frozen=True)
class JobField:
    """A complete row: the field's name and model default with its `FieldInfo`."""

    name: str
    default: Any
    info: FieldInfo

    @property
    def kind(self) -> Kind:
        return self.info.kind

    def applies_to(self, mode: str) -> bool:
        return mode in self.info.modes

    def default_for(self, mode: str) -> Any:
        """The value when a request leaves the field out: a replica count of a role the mode does
        not have is 0, everything else the model default."""
        if self.kind == "count" and mode in {known.value for known in Mode} and not self.applies_to(mode):
            return 0
        return self.default

    def used_by(self, backend: str | None) -> bool:
        return backend is None or self.info.backends is None or backend in self.info.backends
