// Command etcd is etcd's own server, built from the go.etcd.io/etcd/server/v3
// module at the version kube-apiserver pins, for the local control plane.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
