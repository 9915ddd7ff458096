#!/usr/bin/env bash
# The whole test suite (docs/development.md: "Running the tests"): the quality gates, then pytest.  Expects
# scripts/setup.sh to have run.
# The cluster contract suite runs on a real Kubernetes control plane built from source
# (scripts/controlplane.sh build: once, into ~/.cache/paddle-nbext/controlplane, then reused);
# with PADDLE_NBEXT_TEST_KUBECONFIG set it runs against that cluster instead and nothing is built.
#
# Proof that tests do not depend on timing (docs/development.md: "Flaky tests"):
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
build_controlplane() {
  if [ -z "${PADDLE_NBEXT_TEST_KUBECONFIG:-}" ]; then
    bash scripts/controlplane.sh build
  fi
}
whole_suite=0
if [ "$repeat" -eq 1 ] && [ "$busy" -eq 0 ] && [ $# -eq 0 ] && [ -z "${PADDLE_NBEXT_SERIAL_TESTS:-}" ]; then
  whole_suite=1
else
  build_controlplane
fi
if [ "$repeat" -eq 1 ] && [ "$busy" -eq 0 ] && [ "$whole_suite" -eq 0 ]; then
  exec .venv/bin/python -m pytest -p no:cacheprovider "$@"
fi
if [ "$whole_suite" -eq 1 ]; then
  # The whole suite as two lines of pytest runs side by side: the cluster suite (mostly waiting
  # on pods, nodes and Ceph: two thirds of the wall time, little CPU) and everything else (mostly
  # CPU), which also runs while the control plane is built (a cold cache) since it needs none of it.
  # Nothing is shared between them: the cluster suite owns the network namespaces and the fixed
  # ports below 32768; every other server takes an ephemeral port.  The other run's output goes
  # to a file, printed whole at the end.  PADDLE_NBEXT_SERIAL_TESTS=1 runs one pytest instead.
  beside=test-artifacts/pytest-beside-the-cluster-suite.log
  echo "== scripts/test.sh: tests/cluster here; the rest beside it into $beside (at $(date -u +%H:%M:%S))"
  # The browser tests last, after the CPU-heavy rest: two of them failed when Chromium shared the
  # two cores with real Paddle jobs and a starting control plane at once.
  {
    .venv/bin/python -m pytest -p no:cacheprovider --ignore=tests/cluster --ignore=tests/browser && others_code=0 || others_code=$?
    .venv/bin/python -m pytest -p no:cacheprovider tests/browser && browser_code=0 || browser_code=$?
    [ "$others_code" -eq 0 ] && [ "$browser_code" -eq 0 ]
  } >"$beside" 2>&1 &
  rest=$!
  trap 'kill "$rest" 2>/dev/null || true' EXIT
  cluster_code=0
  if build_controlplane; then
    .venv/bin/python -m pytest -p no:cacheprovider tests/cluster || cluster_code=$?
  else
    cluster_code=$?
    echo "== scripts/test.sh: the control plane build failed (exit $cluster_code): tests/cluster did not run" >&2
  fi
  rest_code=0
  wait "$rest" || rest_code=$?
  trap - EXIT
  echo "== scripts/test.sh: the rest of the suite, run beside tests/cluster (exit $rest_code; done at $(date -u +%H:%M:%S)):"
  cat "$beside"
  echo "== scripts/test.sh: tests/cluster exit $cluster_code, the rest exit $rest_code"
  [ "$cluster_code" -eq 0 ] && [ "$rest_code" -eq 0 ]
  exit
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
