#!/usr/bin/env bash
# A real Kubernetes control plane on 127.0.0.1 for the cluster suite (tests/support/controlplane):
#   bash scripts/controlplane.sh build    compile kube-apiserver, kube-controller-manager,
#                                         kube-scheduler, kubectl, etcd, KWOK and the queueing
#                                         controllers (JobSet, Kueue; started only for the queued
#                                         tests) from source at pinned versions into
#                                         ~/.cache/paddle-nbext/controlplane
#                                         (PADDLE_NBEXT_CONTROLPLANE_CACHE); reused when present
#   bash scripts/controlplane.sh up       start one and leave it running (prints its kubeconfig)
#   bash scripts/controlplane.sh down     stop it: no process left, ports free
#   bash scripts/controlplane.sh status
# Needs a Go on PATH or in /usr/local/go or /usr/lib/go-1.N (build: it runs the toolchain pinned in
# scripts/go-toolchain.txt as GOTOOLCHAIN) and the .venv, both from scripts/setup.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHONPATH="$(pwd)/tests${PYTHONPATH:+:$PYTHONPATH}" exec .venv/bin/python -m support.controlplane "$@"
