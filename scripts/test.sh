#!/usr/bin/env bash
# The whole test suite (README: "Run the tests"): the quality gates, then pytest.  Expects
# scripts/setup.sh to have run.
# The cluster contract suite runs on a real Kubernetes control plane built from source
# (scripts/controlplane.sh build: once, into ~/.cache/paddle-nbext/controlplane, then reused);
# with PADDLE_NBEXT_TEST_KUBECONFIG set it runs against that cluster instead and nothing is built.
#
# Proof that tests do not depend on timing (README: "Flaky tests"):
#   --repeat N   run pytest N times in a row, each a fresh process as CI runs it; stop at the
#                first red run and say which
#   --busy K     meanwhile keep K busy-loop processes on the CPU (K=2 takes both cores of a CI
#                machine), so that every wait in the suite is stretched
# e.g. `bash scripts/test.sh --repeat 5 tests/cluster`, `bash scripts/test.sh --busy 2 tests/cluster`.
set -euo pipefail
cd "$(dirname "$0")/.."
repeat=1
busy=0
while [ $# -gt 0 ]; do
  case "$1" in
    --repeat) repeat="${2:?--repeat needs a number}"; shift 2 ;;
    --busy) busy="${2:?--busy needs a number}"; shift 2 ;;
    *) break ;;
  esac
done
case "$repeat$busy" in
  *[!0-9]*) echo "scripts/test.sh: --repeat and --busy take whole numbers" >&2; exit 2 ;;
esac
mkdir -p test-artifacts
# The quality gates first (ruff, mypy --strict, eslint, prettier, tsc, vitest): a red gate stops
# the run before the long suites. PADDLE_NBEXT_SKIP_CHECKS=1 skips them in a quick local loop.
if [ -z "${PADDLE_NBEXT_SKIP_CHECKS:-}" ]; then
  bash scripts/check.sh
fi
if [ -z "${PADDLE_NBEXT_TEST_KUBECONFIG:-}" ]; then
  bash scripts/controlplane.sh build
fi
if [ "$repeat" -eq 1 ] && [ "$busy" -eq 0 ]; then
  exec .venv/bin/python -m pytest -p no:cacheprovider "$@"
fi
hogs=()
stop_hogs() { [ ${#hogs[@]} -eq 0 ] || kill "${hogs[@]}" 2>/dev/null || true; }
trap stop_hogs EXIT
for _ in $(seq 1 "$busy"); do
  (while :; do :; done) &
  hogs+=($!)
done
for run in $(seq 1 "$repeat"); do
  echo "== scripts/test.sh: run $run of $repeat (busy loops: $busy) at $(date -u +%H:%M:%S)"
  if ! .venv/bin/python -m pytest -p no:cacheprovider "$@"; then
    echo "== scripts/test.sh: run $run of $repeat failed" >&2
    exit 1
  fi
done
echo "== scripts/test.sh: $repeat of $repeat runs green (busy loops: $busy) at $(date -u +%H:%M:%S)"
