//go:build tools

// Package tools records the command this module builds (`go build helm.sh/helm/v4/cmd/helm`, the
// Helm that lints, renders and installs deploy/chart), so that `go mod tidy` keeps its dependencies.
package tools

import _ "helm.sh/helm/v4/cmd/helm"
