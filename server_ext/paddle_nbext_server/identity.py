"""Who owns a job: the authenticated identity's `username`.

Jupyter Server's built-in token/password identity providers have no real users: each browser
session gets a fresh anonymous username, and a kernel (token) another one.  On those single-user
servers the owner is the operating-system account the server runs as, so the browser, the kernel
and the CLI all see the same jobs.  Any other provider (JupyterHub's, a site's own) names real
users, and its `username` is used as is.
"""

from __future__ import annotations

import getpass
import os
from typing import Any

from jupyter_server.auth.identity import IdentityProvider, PasswordIdentityProvider

_SINGLE_USER_PROVIDERS = (IdentityProvider, PasswordIdentityProvider)


def server_account() -> str:
    """The account the server process runs as (`$USER` may be missing in containers)."""
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return f"uid-{os.getuid()}"


def resolve_owner(identity_provider: Any, user: Any) -> str:
    """The owner name for an authenticated request's `current_user`."""
    if type(identity_provider) in _SINGLE_USER_PROVIDERS:
        return server_account()
    username = getattr(user, "username", None) or (user if isinstance(user, str) else None)
    if not username:
        # An identity without a username cannot own jobs; the caller turns this into 403.
        raise PermissionError("the authenticated identity has no username")
    return str(username)
