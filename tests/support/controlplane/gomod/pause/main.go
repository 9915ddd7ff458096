// Command pause is the first process of every pod sandbox on the real test node: it holds the
// pod's namespaces open, reaps children it inherits, and exits 0 on SIGINT or SIGTERM, as the
// pause container of Kubernetes does. Built static (CGO_ENABLED=0) so that it is the whole image.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	signals := make(chan os.Signal, 8)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for sig := range signals {
		if sig == syscall.SIGCHLD {
			for {
				var status syscall.WaitStatus
				pid, err := syscall.Wait4(-1, &status, syscall.WNOHANG, nil)
				if pid <= 0 || err != nil {
					break
				}
			}
			continue
		}
		os.Exit(0)
	}
}
