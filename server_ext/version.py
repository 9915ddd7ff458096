"""The installed paddle-nbext version (one place, used by `/version`, `/config` and the
extension list)."""
from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("paddle-nbext")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0"
