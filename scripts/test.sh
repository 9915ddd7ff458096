#!/usr/bin/env bash
# The whole test suite (README: "Run the tests").  Expects scripts/setup.sh to have run.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p test-artifacts
exec .venv/bin/python -m pytest -p no:cacheprovider "$@"
