// Command rdma-exec is the entrypoint docker rdma run puts in front of a
// workload: it waits for the container's RoCE GID entries, exports the GID
// index and devices for NCCL and UCX, and execs the workload (see package
// internal/rdmaexec). It is built static (CGO_ENABLED=0) and needs nothing
// from the image.
package main

import (
	"os"

	"github.com/rdma-macvlan/rdma-macvlan/internal/rdmaexec"
)

func main() {
	os.Exit(rdmaexec.Main(os.Args[1:], rdmaexec.System()))
}
