// Command coredns is CoreDNS v1.15 with the plugins the real test node's cluster DNS needs and no
// others: it answers <pod>.<service>.<namespace>.svc.cluster.local and <service> names from the
// API server and nothing outside the cluster (no forward plugin: the node's network has no way
// out, and a name that is not the cluster's is NXDOMAIN at once).
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/bind"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/ready"
)

func init() {
	// The order plugins run in, as CoreDNS's plugin.cfg gives it, for the plugins built in.
	dnsserver.Directives = []string{"bind", "health", "ready", "errors", "kubernetes"}
}

func main() {
	coremain.Run()
}
