// rdma-macvlan-runtime is the OCI runtime that makes containers on
// rdma-macvlan networks RDMA-ready and hands them to runc: see
// internal/ociruntime.
package main

import (
	"os"

	"github.com/rdma-macvlan/rdma-macvlan/internal/ociruntime"
)

func main() {
	os.Exit(ociruntime.Main(os.Args[1:], ociruntime.System()))
}
