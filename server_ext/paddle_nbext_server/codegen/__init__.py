"""Generators of the files that must not drift from the Python source: the OpenAPI document, the
panel's TypeScript types of it and its copy of Paddle's noise patterns.

Nothing imports this package while the server runs; each module is a `python -m` command, and a
test fails while what it writes differs from what is committed.
"""
