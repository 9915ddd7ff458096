"""The `local` backend: real Paddle processes on the server's machine.

A job is a directory under `c.LocalBackend.jobs_dir` and one detached master process that owns
its lifecycle; the server only reads what the master records, so restarting Jupyter loses
nothing.  The modules are split by the process that runs them:

* the server's: `backend.LocalBackend` is the `Backend` the server extension talks to, built from
  `store` (job dirs on disk), `plan`, `watcher`, `logs`, `health_reads` and `metrics`, with
  `bytecode` and `paddle_env` for submits;
* the master's: the `master` package (`python -m paddle_nbext_server.backends.local.master
  <job_dir>`), which the server never imports;
* what both use: `records` (the typed files they exchange, checked by `record_json`, read and
  written by `record_files`), `usage` (usage.json), `pending_end`, and `processes` and `ports`
  of the machine.

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
