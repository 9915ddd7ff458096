#!/usr/bin/env bash
# The whole test suite (README: "Run the tests"): the quality gates, then pytest.  Expects
# scripts/setup.sh to have run.
# The cluster contract suite runs on a real Kubernetes control plane built from source
# (scripts/controlplane.sh build: once, into ~/.cache/paddle-nbext/controlplane, then reused);
# with PADDLE_NBEXT_TEST_KUBECONFIG set it runs against that cluster instead and nothing is built.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p test-artifacts
# The quality gates first (ruff, mypy --strict, eslint, prettier, tsc, vitest): a red gate stops
# the run before the long suites. PADDLE_NBEXT_SKIP_CHECKS=1 skips them in a quick local loop.
if [ -z "${PADDLE_NBEXT_SKIP_CHECKS:-}" ]; then
  bash scripts/check.sh
fi
if [ -z "${PADDLE_NBEXT_TEST_KUBECONFIG:-}" ]; then
  bash scripts/controlplane.sh build
fi
exec .venv/bin/python -m pytest -p no:cacheprovider "$@"
