#!/usr/bin/env bash
# The quality gates, run by scripts/test.sh before the tests (docs/development.md: "Running the tests"), and on
# their own while working: Python lint and format (ruff, config in pyproject.toml), mypy --strict
# on both packages and on the tests, benchmarks and scripts, and the panel's ESLint, Prettier, tsc
# (sources and tests) and vitest.
# Expects scripts/setup.sh to have run (the venv and labextension/node_modules).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin

step() { printf 'check: %s\n' "$*"; }

step "ruff check"
"$PY/ruff" check --no-cache .
step "ruff format --check"
"$PY/ruff" format --no-cache --check .
step "mypy --strict (paddle_nbext, paddle_nbext_server)"
"$PY/mypy"
step "mypy --strict (tests, benchmarks, scripts, deploy/cephfs)"
"$PY/mypy" tests benchmarks scripts deploy/cephfs
step "panel: eslint, prettier --check, tsc, vitest"
(cd labextension && npm run --silent check)
step "all gates passed"
