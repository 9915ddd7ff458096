"""Label and field selectors, parsed and matched the way the apiserver does for list, watch and deletecollection.

Supported label operators: ``=``, ``==``, ``!=``, ``in (..)``, ``notin (..)``, ``key`` (exists) and
``!key``. Field selectors: ``=``, ``==``, ``!=`` on dotted paths such as ``metadata.name`` or
``status.phase``. A malformed selector is a 400, as on a real cluster.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable

from .errors import bad_request

_KEY = r"[A-Za-z0-9][-A-Za-z0-9_./]*"
_VALUE = r"[-A-Za-z0-9_.]*"
_SET_RE = re.compile(rf"^\s*({_KEY})\s+(in|notin)\s*\(\s*([^)]*)\)\s*$")
_CMP_RE = re.compile(rf"^\s*({_KEY})\s*(==|!=|=)\s*({_VALUE})\s*$")
_EXISTS_RE = re.compile(rf"^\s*(!?)\s*({_KEY})\s*$")


@dataclass(frozen=True)
class Requirement:
    key: str
    op: str  # "=", "!=", "in", "notin", "exists", "!"
    values: tuple[str, ...] = ()

    def matches(self, labels: dict[str, str]) -> bool:
        present = self.key in labels
        value = labels.get(self.key)
        if self.op == "=":
            return present and value == self.values[0]
        if self.op == "!=":
            return not present or value != self.values[0]
        if self.op == "in":
            return present and value in self.values
        if self.op == "notin":
            return not present or value not in self.values
        if self.op == "exists":
            return present
        return not present


def _split_top_level(text: str) -> list[str]:
    """Split on commas outside parentheses: ``a in (x,y),b`` is two requirements."""
    parts, depth, current = [], 0, []
    for char in text:
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        if char == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    parts.append("".join(current))
    return [p for p in parts if p.strip()]


def parse_labels(text: str | None) -> list[Requirement]:
    if not text:
        return []
    requirements = []
    for part in _split_top_level(text):
        if m := _SET_RE.match(part):
            values = tuple(v.strip() for v in m.group(3).split(",") if v.strip())
            requirements.append(Requirement(m.group(1), m.group(2), values))
        elif m := _CMP_RE.match(part):
            requirements.append(Requirement(m.group(1), "=" if m.group(2) in ("=", "==") else "!=", (m.group(3),)))
        elif m := _EXISTS_RE.match(part):
            requirements.append(Requirement(m.group(2), "!" if m.group(1) else "exists"))
        else:
            raise bad_request(f"unable to parse requirement: found '{part.strip()}', expected: "
                              "key, !key, key=value, key!=value, key in (v1,v2) or key notin (v1,v2)")
    return requirements


def parse_fields(text: str | None) -> list[tuple[str, bool, str]]:
    """``(path, equal, value)`` triples for a fieldSelector."""
    if not text:
        return []
    result = []
    for part in text.split(","):
        m = re.match(r"^\s*([A-Za-z0-9_.]+)\s*(==|!=|=)\s*(.*?)\s*$", part)
        if not m:
            raise bad_request(f'invalid selector: \'{text}\'; can\'t understand \'{part}\'')
        result.append((m.group(1), m.group(2) != "!=", m.group(3)))
    return result


def _field_value(obj: dict[str, Any], path: str) -> str:
    current: Any = obj
    for part in path.split("."):
        if not isinstance(current, dict):
            return ""
        current = current.get(part)
    return "" if current is None else str(current)


def matcher(label_selector: str | None, field_selector: str | None) -> Callable[[dict[str, Any]], bool]:
    """A predicate over stored objects; raises 400 for a malformed selector before any object is read."""
    labels = parse_labels(label_selector)
    fields = parse_fields(field_selector)

    def match(obj: dict[str, Any]) -> bool:
        obj_labels = obj.get("metadata", {}).get("labels") or {}
        if not all(r.matches(obj_labels) for r in labels):
            return False
        return all((_field_value(obj, path) == value) == equal for path, equal, value in fields)

    return match
