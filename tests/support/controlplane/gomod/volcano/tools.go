//go:build tools

// Package tools records what this module needs: the command it builds (`go build
// sigs.k8s.io/controller-tools/cmd/controller-gen`, at the release Volcano's own Makefile uses)
// and the Volcano API types it reads, whose kubebuilder markers controller-gen turns into the
// PodGroup CRD (as Volcano generates config/crd/volcano/bases), so that `go mod tidy` keeps both.
package tools

import (
	_ "sigs.k8s.io/controller-tools/cmd/controller-gen"
	_ "volcano.sh/apis/pkg/apis/scheduling/v1beta1"
)
