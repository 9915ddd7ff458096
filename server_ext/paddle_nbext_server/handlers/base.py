"""The base of every paddle-nbext REST handler: authentication, the error body, query parsing.

Every route requires Jupyter authentication (token for kernels, cookie + XSRF for browsers);
without it the answer is 403 with the JSON error body.  Handlers raise `BackendError`s,
`SpecError`s or `HTTPError`s; `write_error` turns all of them into
`{"error": code, "message": sentence, "field": name-or-null}` with the right status.

Work per request is bounded: a body over `MAX_BODY_BYTES` or nested deeper than
`MAX_JSON_DEPTH` is refused before anything reads it as a job, and no error body repeats more
than a few hundred characters of what the request sent.
"""

from __future__ import annotations

import json
from typing import Any

from jupyter_server.base.handlers import APIHandler
from tornado import web

from paddle_nbext.model.rules import clip
from paddle_nbext.model.spec import SpecError, validate_name

from ..backends.base import Backend
from ..errors import BackendError, JobNotFound
from ..identity import resolve_owner
from ..state import STATE_KEY, ExtensionState

AUTH_RESOURCE = "paddle"

_HTTP_CODES = {
    400: "bad_request",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
    413: "too_large",
    422: "invalid",
    429: "too_many",
    503: "unavailable",
}


#: The largest request body read: a job spec is a few hundred bytes, a cell body
#: (`entry_script`, at most 1 MiB of UTF-8) at most about twice that once JSON-escaped.
MAX_BODY_BYTES = 4 * 1024 * 1024
#: The deepest nesting of a request body: a job spec nests two levels (`env`).
MAX_JSON_DEPTH = 32
#: Characters of an error body's message (and of each `errors` entry) at most.
MAX_MESSAGE_LENGTH = 2000


class RequestError(BackendError):
    """Malformed JSON body or query parameter (400)."""

    status = 400
    code = "bad_request"


class RequestTooLarge(BackendError):
    """A request body over `MAX_BODY_BYTES` (413)."""

    status = 413
    code = "too_large"


def json_depth(value: Any) -> int:
    """How deeply `value` nests (a scalar is 0), found without recursion so no input can
    exhaust the stack."""
    deepest, pending = 0, [(value, 1)]
    while pending:
        item, depth = pending.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else None
        if children is None:
            continue
        deepest = max(deepest, depth)
        pending.extend((child, depth + 1) for child in children)
    return deepest


def _error_body(code: str, message: str, field: str | None, **extra: Any) -> dict[str, Any]:
    return {"error": code, "message": message, "field": field or None, **extra}


class PaddleAPIHandler(APIHandler):
    """Shared behaviour of the paddle-nbext routes (subclasses decorate their methods with
    `@web.authenticated` and `@authorized`)."""

    auth_resource = AUTH_RESOURCE

    @property
    def state(self) -> ExtensionState:
        state: ExtensionState = self.settings[STATE_KEY]
        return state

    @property
    def owner(self) -> str:
        try:
            return resolve_owner(self.identity_provider, self.current_user)
        except PermissionError as error:
            raise web.HTTPError(403, str(error)) from None

    async def backend(self) -> Backend:
        """The started backend, or `BackendUnavailable` (503) naming why there is none."""
        return await self.state.ready_backend()

    # ---- request parsing
    def json_body(self) -> dict[str, Any]:
        raw = self.request.body or b""
        if len(raw) > MAX_BODY_BYTES:
            raise RequestTooLarge(f"the request body is {len(raw)} bytes; at most {MAX_BODY_BYTES} are accepted")
        if not raw.strip():
            raise RequestError("the request body is empty; send the job spec as a JSON object")
        too_deep = f"the request body nests deeper than {MAX_JSON_DEPTH} levels; a job spec is a flat JSON object"
        try:
            data = json.loads(raw)
        except RecursionError:
            raise RequestError(too_deep) from None
        except (ValueError, UnicodeDecodeError) as error:
            raise RequestError(f"the request body is not valid JSON ({clip(str(error), 200)})") from None
        if json_depth(data) > MAX_JSON_DEPTH:
            raise RequestError(too_deep)
        if not isinstance(data, dict):
            raise RequestError(f"the request body must be a JSON object, got {type(data).__name__}")
        return data

    def query_bool(self, name: str, default: bool = False) -> bool:
        raw = self.get_query_argument(name, None)
        if raw is None or raw == "":
            return default
        lowered = raw.strip().lower()
        if lowered in ("true", "1", "yes"):
            return True
        if lowered in ("false", "0", "no"):
            return False
        raise RequestError(f"{name} must be true or false, got {clip(repr(raw))}", field=name)

    def query_int(self, name: str, default: int | None, lowest: int = 0) -> int | None:
        raw = self.get_query_argument(name, None)
        if raw is None or raw == "":
            return default
        text = raw.strip()
        if not text.isdigit() or not text.isascii() or len(text) > 18:
            raise RequestError(f"{name} must be a whole number of at least {lowest}, got {clip(repr(raw))}", field=name)
        value = int(text)
        if value < lowest:
            raise RequestError(f"{name} must be at least {lowest}, got {value}", field=name)
        return value

    @staticmethod
    def job_name(name: str) -> str:
        """Names that can never exist (bad characters, too long) are simply unknown jobs; this
        also keeps path tricks such as '..' away from the backends."""
        try:
            return validate_name(name)
        except SpecError:
            raise JobNotFound(f"no job named {clip(repr(name))}", field=None) from None

    # ---- responses
    def write_json(self, body: Any, status: int = 200) -> None:
        self.set_status(status)
        self.finish(json.dumps(body))

    def write_error(self, status_code: int, **kwargs: Any) -> None:
        """Every error, whatever raised it, leaves as the one JSON error body."""
        exc = kwargs.get("exc_info", (None, None, None))[1]
        extra: dict[str, Any] = {}
        if isinstance(exc, BackendError):
            status_code, code, message, field = exc.status, exc.code, exc.message, exc.field
        elif isinstance(exc, SpecError):
            status_code, code, message, field = 422, "invalid", exc.message, exc.field
            if exc.errors:
                extra["errors"] = exc.errors
        elif isinstance(exc, web.HTTPError):
            code = _HTTP_CODES.get(status_code, "error")
            # tornado stores an argument-less log_message %-escaped; formatting undoes that
            message = (exc.log_message % exc.args if exc.log_message else None) or exc.reason or self._reason
            if status_code == 403 and not exc.log_message:
                message = "authentication required: send the Jupyter token ('Authorization: token ...') or use a logged-in browser session"
            field = None
        else:
            code, message, field = "internal_error", "internal server error; see the Jupyter server log", None
        if "errors" in extra:
            extra["errors"] = {clip(str(k)): clip(str(v), MAX_MESSAGE_LENGTH) for k, v in extra["errors"].items()}
        self.set_status(status_code)
        self.clear_header("Content-Type")
        self.finish(json.dumps(_error_body(code, clip(str(message), MAX_MESSAGE_LENGTH), clip(field) if field else None, **extra)))

    def log_exception(self, typ: Any, value: Any, tb: Any) -> None:
        """Expected request errors are logged in one line, not as tracebacks."""
        if isinstance(value, (BackendError, SpecError)):
            status = getattr(value, "status", 422)
            log = self.log.warning if status >= 500 else self.log.info
            log("%s %s -> %s: %s", self.request.method, self.request.path, status, value)
            return
        super().log_exception(typ, value, tb)
