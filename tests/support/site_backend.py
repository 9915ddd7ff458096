"""A backend class of a site's own, for `c.PaddleNbext.backend_class` (tests/server/test_api.py):
the local backend under another name, as a site would subclass or write one."""

from __future__ import annotations

from paddle_nbext_server.backends.local import LocalBackend


class SiteBackend(LocalBackend):
    """Runs jobs as the local backend does; reports itself as the site's."""

    name = "site-local"


class NotABackend:
    """Anything else: refused by the trait, naming it."""
