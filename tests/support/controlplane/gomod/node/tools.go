//go:build tools

// Package tools records the commands this module builds, so that `go mod tidy` keeps their
// dependencies; the build itself is `go build k8s.io/kubernetes/cmd/<name>`.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-proxy"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
