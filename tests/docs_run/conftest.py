"""Fixtures of the docs suite: a fresh home with a real Jupyter server (local backend) per test,
so each document or notebook starts from what a new reader has (doc_server.py says what)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from .doc_server import DocServer


@pytest.fixture
def doc_server(tmp_path: Path) -> Iterator[DocServer]:
    with DocServer(tmp_path) as server:
        yield server
