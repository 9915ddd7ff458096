"""The REST routes of paddle-nbext, all under `{base_url}paddle/api/v1` (docs/architecture.md)."""

from __future__ import annotations

from typing import Any

from .compare import CompareHandler
from .environments import EnvironmentHandler, EnvironmentsHandler, PruneHandler
from .health import TimelineHandler, UsageHandler
from .jobs import CancelHandler, CheckpointsHandler, JobHandler, JobsHandler, ResumeHandler
from .meta import ConfigHandler, NotFoundHandler, OpenAPIHandler, VersionHandler
from .metrics import MetricsHandler
from .notifications import NotificationsHandler
from .streams import EventsHandler, LogsHandler

API_BASE = "paddle/api/v1"
_NAME = r"(?P<name>[^/]+)"


def routes() -> list[tuple[str, Any]]:
    """(pattern relative to base_url, handler) pairs."""
    return [
        (rf"{API_BASE}/jobs/?", JobsHandler),
        (rf"{API_BASE}/jobs/{_NAME}/cancel/?", CancelHandler),
        (rf"{API_BASE}/jobs/{_NAME}/resume/?", ResumeHandler),
        (rf"{API_BASE}/jobs/{_NAME}/checkpoints/?", CheckpointsHandler),
        (rf"{API_BASE}/jobs/{_NAME}/logs/?", LogsHandler),
        (rf"{API_BASE}/jobs/{_NAME}/metrics/?", MetricsHandler),
        (rf"{API_BASE}/jobs/{_NAME}/usage/?", UsageHandler),
        (rf"{API_BASE}/jobs/{_NAME}/timeline/?", TimelineHandler),
        (rf"{API_BASE}/jobs/{_NAME}/?", JobHandler),
        (rf"{API_BASE}/compare/?", CompareHandler),
        (rf"{API_BASE}/environments/?", EnvironmentsHandler),
        (rf"{API_BASE}/environments/prune/?", PruneHandler),
        (rf"{API_BASE}/environments/(?P<key>[^/]+)/?", EnvironmentHandler),
        (rf"{API_BASE}/events/?", EventsHandler),
        (rf"{API_BASE}/notifications/?", NotificationsHandler),
        (rf"{API_BASE}/config/?", ConfigHandler),
        (rf"{API_BASE}/version/?", VersionHandler),
        (rf"{API_BASE}/openapi\.json", OpenAPIHandler),
        (rf"{API_BASE}(?:/.*)?", NotFoundHandler),
    ]
