"""Puts `tests/` on sys.path so every suite can `import support` (shared helpers such as the
real Jupyter server process) however pytest was pointed at the tests."""

from __future__ import annotations

import sys
from pathlib import Path

_TESTS = str(Path(__file__).resolve().parent)
if _TESTS not in sys.path:
    sys.path.insert(0, _TESTS)
