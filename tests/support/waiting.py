"""Waiting for a state, never for a duration: controllers, kubelets and servers act
asynchronously, so a test polls for what it expects and, on timeout, says what it waited for."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def eventually(check: Callable[[], T], what: str, seconds: float = 60.0, interval: float = 0.05) -> T:
    """The first truthy value of ``check()``; AssertionError naming ``what`` after ``seconds``."""
    deadline = time.monotonic() + seconds
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {seconds:.0f} s waiting for {what}")
        time.sleep(interval)
