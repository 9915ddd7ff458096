"""The `local` backend: real Paddle processes on the server's machine.

A job is a directory under `c.LocalBackend.jobs_dir` and one detached master process (`master`)
that owns its lifecycle; the server only reads what the master records, so restarting Jupyter
loses nothing. `backend` is the `Backend` the server extension talks to.
"""

from .backend import LocalBackend

__all__ = ["LocalBackend"]
