"""Helpers shared by the test suites and the benchmarks (importable as `support` once `tests/`
is on sys.path: `tests/conftest.py` does that for pytest, the benchmarks do it themselves)."""
