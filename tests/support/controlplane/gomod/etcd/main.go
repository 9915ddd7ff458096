// Command etcd is the etcd server for the test control plane, built from the published
// go.etcd.io/etcd/server/v3 module (etcd's own main module carries replace directives and cannot
// be built from the module proxy).
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
