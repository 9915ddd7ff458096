"""Fixtures for the local-backend end-to-end tests (helpers live in local_jobs.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from paddle_jobs.local_jobs import make_home


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """A throw-away home with the examples under `code/`; jobs go to its `.paddle-jobs`."""
    return make_home(tmp_path)
