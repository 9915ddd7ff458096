"""The one error the control plane raises: what failed, and the log file that says why."""

from __future__ import annotations


class ControlPlaneError(RuntimeError):
    """A component failed to build, start or stop; the message names it and its log file."""
