"""API errors rendered as the ``Status`` bodies kube-apiserver sends, with the same codes and reasons.

Clients (and the backend's error messages) key on ``reason`` and ``code``; keeping the wording of
the real server means a test that passes here reads the same against a real cluster.
"""

from __future__ import annotations

from typing import Any


class ApiError(Exception):
    """A failed API call: HTTP ``code``, Kubernetes ``reason`` and a human message."""

    def __init__(self, code: int, reason: str, message: str, details: dict[str, Any] | None = None):
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details

    def status(self) -> dict[str, Any]:
        """The ``Status`` object sent as the response body (or inside a watch ERROR event)."""
        body: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if self.details is not None:
            body["details"] = self.details
        return body


def qualified(plural: str, group: str) -> str:
    """``pods`` for the core group, ``jobs.batch`` otherwise - how the apiserver names resources."""
    return f"{plural}.{group}" if group else plural


def _details(plural: str, group: str, name: str | None) -> dict[str, Any]:
    details: dict[str, Any] = {"kind": plural}
    if name:
        details["name"] = name
    if group:
        details["group"] = group
    return details


def not_found(plural: str, group: str, name: str) -> ApiError:
    return ApiError(404, "NotFound", f'{qualified(plural, group)} "{name}" not found', _details(plural, group, name))


def path_not_found() -> ApiError:
    return ApiError(404, "NotFound", "the server could not find the requested resource", {})


def already_exists(plural: str, group: str, name: str) -> ApiError:
    return ApiError(409, "AlreadyExists", f'{qualified(plural, group)} "{name}" already exists',
                    _details(plural, group, name))


def conflict(plural: str, group: str, name: str, why: str | None = None) -> ApiError:
    why = why or "the object has been modified; please apply your changes to the latest version and try again"
    return ApiError(409, "Conflict", f'Operation cannot be fulfilled on {qualified(plural, group)} "{name}": {why}',
                    _details(plural, group, name))


def invalid(kind: str, group: str, name: str, causes: list[tuple[str, str]]) -> ApiError:
    """422 Invalid; ``causes`` are ``(field, message)`` pairs like the apiserver's field errors."""
    text = ", ".join(f"{field}: {message}" for field, message in causes)
    details: dict[str, Any] = {"name": name, "kind": kind,
                               "causes": [{"reason": "FieldValueInvalid", "message": m, "field": f} for f, m in causes]}
    if group:
        details["group"] = group
    return ApiError(422, "Invalid", f'{kind}.{group} "{name}" is invalid: {text}' if group
                    else f'{kind} "{name}" is invalid: {text}', details)


def bad_request(message: str) -> ApiError:
    return ApiError(400, "BadRequest", message)


def expired(message: str) -> ApiError:
    """410: what a watch (or list continue) from a compacted resourceVersion gets; reason ``Expired`` as real."""
    return ApiError(410, "Expired", message)


def unauthorized() -> ApiError:
    return ApiError(401, "Unauthorized", "Unauthorized")


def forbidden(message: str, plural: str, group: str, name: str | None) -> ApiError:
    return ApiError(403, "Forbidden", message, _details(plural, group, name))


def method_not_allowed() -> ApiError:
    return ApiError(405, "MethodNotAllowed", "the server does not allow this method on the requested resource")


def unsupported_media_type(content_type: str) -> ApiError:
    return ApiError(415, "UnsupportedMediaType", f'the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json (got "{content_type}")')
