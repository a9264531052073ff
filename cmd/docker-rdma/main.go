// Command docker-rdma is the Docker CLI plugin "docker rdma": docker run
// with what RDMA on an rdma-macvlan network needs (the HCA's devices,
// CAP_IPC_LOCK, a locked-memory limit), and ls, inspect and doctor to see
// networks, containers and what on the host is not ready. Install it as
// ~/.docker/cli-plugins/docker-rdma (or in /usr/libexec/docker/cli-plugins);
// it also runs on its own as docker-rdma COMMAND.
package main

import (
	"os"

	"github.com/rdma-macvlan/rdma-macvlan/cmd/docker-rdma/internal/commands"
	"github.com/rdma-macvlan/rdma-macvlan/internal/version"
)

func main() {
	os.Exit(commands.Main(os.Args[1:], commands.System(), version.String()))
}
