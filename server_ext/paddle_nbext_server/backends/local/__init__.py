"""The `local` backend: real Paddle processes on the server's machine.

A job is a directory under `c.LocalBackend.jobs_dir` and one detached master process (`master`)
that owns its lifecycle; the server only reads what the master records, so restarting Jupyter
loses nothing.  `backend.LocalBackend` is the `Backend` the server extension talks to, built from
`store` (job dirs on disk), `plan`, `watcher` and `logs`; `records` are the typed files the
backend and the masters exchange, `processes` and `ports` what both use of the machine.

`LocalBackend` is imported on first use: the job master imports modules of this package, and
starting a master must not pay for the server-side classes (traitlets, the backend) it never uses.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .backend import LocalBackend

__all__ = ["LocalBackend"]


def __getattr__(name: str) -> Any:
    if name == "LocalBackend":
        from .backend import LocalBackend

        return LocalBackend
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
