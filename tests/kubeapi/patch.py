"""The three PATCH flavours the official client sends: JSON merge patch, strategic merge patch, JSON patch.

Strategic merge patch is approximated: it is a JSON merge patch (RFC 7386) except that lists whose
field name has a Kubernetes patch merge key (``containers``/``initContainers``/``env``/``volumes``/
``imagePullSecrets``/``ownerReferences``/``conditions``/``volumeMounts``/``ports``) are merged item by
item on that key, and an item carrying ``"$patch": "delete"`` removes the matching item. Other
directives (``$retainKeys``, ``$setElementOrder``, primitive-list merges) are not emulated - the
backend does not use them.
"""

from __future__ import annotations

import copy
from typing import Any

from .errors import ApiError, bad_request

_MERGE_KEYS = {
    "containers": "name", "initContainers": "name", "ephemeralContainers": "name", "env": "name",
    "volumes": "name", "imagePullSecrets": "name", "volumeMounts": "mountPath", "ownerReferences": "uid",
    "conditions": "type", "envFrom": None, "tolerations": None,
}


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: objects merge recursively, ``null`` deletes, everything else replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def _ports_key(items: list[Any]) -> str | None:
    return "containerPort" if any(isinstance(i, dict) and "containerPort" in i for i in items) else "port"


def strategic_merge_patch(target: Any, patch: Any) -> Any:
    """The approximation described in the module docstring."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    if patch.get("$patch") == "replace":
        return {k: copy.deepcopy(v) for k, v in patch.items() if k != "$patch"}
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if key.startswith("$"):
            continue
        if value is None:
            result.pop(key, None)
        elif isinstance(value, list) and isinstance(result.get(key), list):
            merge_key = _ports_key(value + result[key]) if key == "ports" else _MERGE_KEYS.get(key)
            result[key] = _merge_list(result[key], value, merge_key) if merge_key else copy.deepcopy(value)
        elif isinstance(value, dict):
            result[key] = strategic_merge_patch(result.get(key), value)
        else:
            result[key] = copy.deepcopy(value)
    return result


def _merge_list(current: list[Any], patch: list[Any], merge_key: str) -> list[Any]:
    merged = [copy.deepcopy(i) for i in current]
    for item in patch:
        if not isinstance(item, dict) or merge_key not in item:
            raise bad_request(f"strategic merge patch: list item {item!r} has no merge key {merge_key!r}")
        position = next((n for n, old in enumerate(merged)
                         if isinstance(old, dict) and old.get(merge_key) == item[merge_key]), None)
        if item.get("$patch") == "delete":
            if position is not None:
                merged.pop(position)
        elif position is None:
            merged.append({k: v for k, v in item.items() if not k.startswith("$")})
        else:
            merged[position] = strategic_merge_patch(merged[position], item)
    return merged


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise bad_request(f'json patch: path "{path}" must start with "/"')
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _container(doc: Any, parts: list[str], path: str) -> Any:
    for part in parts:
        try:
            doc = doc[int(part)] if isinstance(doc, list) else doc[part]
        except (KeyError, IndexError, ValueError, TypeError):
            raise ApiError(422, "Invalid", f'the server rejected our request due to an error in our request: '
                                           f'json patch: path "{path}" does not exist') from None
    return doc


def json_patch(target: Any, operations: Any) -> Any:
    """RFC 6902 add/remove/replace/move/copy/test; a failed ``test`` or missing path is a 422 as on kube-apiserver."""
    if not isinstance(operations, list):
        raise bad_request("json patch: the body must be a JSON array of operations")
    doc = copy.deepcopy(target)
    for op in operations:
        if not isinstance(op, dict) or "op" not in op or "path" not in op:
            raise bad_request(f"json patch: operation {op!r} needs 'op' and 'path'")
        kind, path = op["op"], op["path"]
        parts = _pointer(path)
        if kind == "test":
            if _container(doc, parts, path) != op.get("value"):
                raise ApiError(422, "Invalid", f'the server rejected our request due to an error in our request: '
                                               f'json patch: testing value at "{path}" failed')
            continue
        if kind in ("move", "copy"):
            source = _pointer(op.get("from", ""))
            value = copy.deepcopy(_container(doc, source, op.get("from", "")))
            if kind == "move":
                doc = _remove(doc, source, op["from"])
            doc = _add(doc, parts, value, path)
        elif kind == "add":
            doc = _add(doc, parts, copy.deepcopy(op.get("value")), path)
        elif kind == "remove":
            doc = _remove(doc, parts, path)
        elif kind == "replace":
            _container(doc, parts, path)
            doc = _add(_remove(doc, parts, path), parts, copy.deepcopy(op.get("value")), path)
        else:
            raise bad_request(f'json patch: unknown operation "{kind}"')
    return doc


def _add(doc: Any, parts: list[str], value: Any, path: str) -> Any:
    if not parts:
        return value
    parent = _container(doc, parts[:-1], path)
    last = parts[-1]
    if isinstance(parent, list):
        index = len(parent) if last == "-" else int(last)
        if index > len(parent):
            raise ApiError(422, "Invalid", f'json patch: index out of range at "{path}"')
        parent.insert(index, value)
    elif isinstance(parent, dict):
        parent[last] = value
    else:
        raise ApiError(422, "Invalid", f'json patch: cannot add at "{path}"')
    return doc


def _remove(doc: Any, parts: list[str], path: str) -> Any:
    if not parts:
        return None
    parent = _container(doc, parts[:-1], path)
    _container(parent, parts[-1:], path)
    if isinstance(parent, list):
        parent.pop(int(parts[-1]))
    else:
        del parent[parts[-1]]
    return doc
