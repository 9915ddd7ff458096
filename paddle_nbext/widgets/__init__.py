"""ipywidgets front ends: `form()` (new job), `job_list()` (all jobs), and the job status view.

Importing this package imports ipywidgets; `paddle_nbext` itself only does so when `form` or
`job_list` is first used.
"""

from __future__ import annotations

from typing import Any

from ..client import Client

__all__ = ["form", "job_list"]


def form(client: Client | None = None, *, interval: float = 2.0) -> Any:
    """The resources form (fields, defaults, limits and images from the server's `GET /config`);
    after Submit it becomes the job's live status view (refreshed every `interval` seconds)."""
    from .form import JobForm

    return JobForm(client, interval=interval)


def job_list(client: Client | None = None, *, interval: float = 5.0) -> Any:
    """Auto-refreshing table of your jobs (one request per `interval` seconds) with
    logs / cancel / delete buttons; it stops refreshing when closed."""
    from .job_list import JobListWidget

    return JobListWidget(client, interval=interval)
