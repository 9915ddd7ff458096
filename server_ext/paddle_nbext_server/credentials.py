"""The server's credentials, kept out of every job's environment.

A local job's master and its replicas are started from the server's environment, which holds
the Jupyter token (`JUPYTER_TOKEN`, the `PADDLE_NBEXT_TOKEN` the extension exports for kernels)
and under JupyterHub the Hub's API token.  User code must never see them: a replica that can read
the token can act as the user's whole server.  `job_environment` drops them, the names a site
adds (`c.PaddleNbext.secret_env`, shell-style patterns such as `AWS_*`), and any other variable
that holds one of those values under another name.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from fnmatch import fnmatchcase

#: Variables that hold a credential of the server on every installation.
SERVER_CREDENTIAL_ENV = ("JUPYTER_TOKEN", "JUPYTER_PASSWORD", "JUPYTERHUB_API_TOKEN", "JPY_API_TOKEN", "PADDLE_NBEXT_TOKEN")
#: A value shorter than this is not taken for a credential when it appears under another name
#: (a token is long; "1" or "true" are everywhere).
MIN_SECRET_LENGTH = 8


def is_credential(name: str, patterns: Iterable[str] = ()) -> bool:
    """Whether the variable `name` is one of the server's credentials or matches a deny pattern."""
    return name in SERVER_CREDENTIAL_ENV or any(fnmatchcase(name, pattern) for pattern in patterns)


def job_environment(environ: Mapping[str, str], deny: Iterable[str] = ()) -> dict[str, str]:
    """`environ` without the server's credentials (see the module docstring)."""
    patterns = tuple(deny)
    secrets = {value for name, value in environ.items() if is_credential(name, patterns) and len(value) >= MIN_SECRET_LENGTH}
    return {name: value for name, value in environ.items() if not is_credential(name, patterns) and value not in secrets}
