//go:build tools

// Package tools records the command this module builds (`go build
// sigs.k8s.io/metrics-server/cmd/metrics-server`, the resource metrics API server behind
// `kubectl top` and `metrics.k8s.io`), so that `go mod tidy` keeps its dependencies.
package tools

import _ "sigs.k8s.io/metrics-server/cmd/metrics-server"
