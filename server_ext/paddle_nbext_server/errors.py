"""The errors the server's parts raise for a request they cannot serve, each with the HTTP status
and error code a handler answers with (`{error, message, field}`, docs/architecture.md).

Backends raise them (a site's own backend too: they are also importable from
`paddle_nbext_server.backends.base`, as in 0.2), and so do the server's job-file helpers, which
sit below the backends and must not import them.
"""

from __future__ import annotations


class BackendError(Exception):
    """Base of errors a handler turns into the REST error body `{error, message, field}`."""

    status = 500
    code = "backend_error"

    def __init__(self, message: str, field: str | None = None):
        super().__init__(message)
        self.message = message
        self.field = field


class InvalidRequest(BackendError):
    """The request is well-formed JSON but cannot be run as asked (bad path, bad entry...)."""

    status = 422
    code = "invalid"


class JobNotFound(BackendError):
    status = 404
    code = "not_found"


class ReplicaNotFound(JobNotFound):
    """The job exists but has no such replica (the log of trainer 9 of a two-trainer job):
    `field` is `role` when the job has no replica of that role at all, else `index`."""


def replica_not_found(job: str, role: str, index: int, count: int) -> ReplicaNotFound:
    """The one sentence both backends answer for a replica the job does not have."""
    if count == 0:
        return ReplicaNotFound(f"job '{job}' has no {role}s; ask for a role it has (role=trainer)", "role")
    return ReplicaNotFound(
        f"job '{job}' has no {role} {index}: it has {count} {role}{'s' if count != 1 else ''} (index 0 to {count - 1})", "index"
    )


class Forbidden(BackendError):
    """The request is authenticated, but this backend does not act for that user."""

    status = 403
    code = "forbidden"


class JobExists(BackendError):
    status = 409
    code = "name_taken"


class InvalidState(BackendError):
    """E.g. a log of a replica that does not exist in this job."""

    status = 409
    code = "conflict"


class BackendUnavailable(BackendError):
    """The substrate cannot be reached (cluster API down, RBAC forbids). Message has the cause."""

    status = 503
    code = "unavailable"


class BackendForbidden(BackendUnavailable):
    """The substrate refuses what the server itself must do (Kubernetes RBAC: the notebook's
    ServiceAccount lacks a verb).  Still 503: nothing the user sends changes it, an admin's
    fix does, and 403 already means "this request's credentials" in the REST API.  The message
    names the verb, the resource, the namespace and the Role that grants it."""

    code = "forbidden_by_cluster"
