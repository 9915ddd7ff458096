"""The paddle-nbext version, as shown by `/version`, `/config`, the extension list, the panel and
the CLI.  It has one source, `paddle_nbext.__version__` (also the package metadata's version)."""

from __future__ import annotations

from paddle_nbext import __version__

__all__ = ["__version__"]
