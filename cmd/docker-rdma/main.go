// Command docker-rdma is the Docker CLI plugin "docker rdma": docker run
// with what RDMA on an rdma-macvlan network needs (the HCA's devices,
// CAP_IPC_LOCK, a locked-memory limit), and ls, inspect and doctor to see
// networks, containers and what on the host is not ready. Install it as
// ~/.docker/cli-plugins/docker-rdma (or in /usr/libexec/docker/cli-plugins);
// it also runs on its own as docker-rdma COMMAND.
package main

import (
	"os"
	"runtime/debug"

	"github.com/rdma-macvlan/rdma-macvlan/cmd/docker-rdma/internal/commands"
)

// version is set at build time: -ldflags "-X main.version=...".
var version string

func main() {
	os.Exit(commands.Main(os.Args[1:], commands.System(), buildVersion()))
}

// buildVersion is the version set at build time, else the module version
// and VCS revision Go recorded, else "dev".
func buildVersion() string {
	if version != "" {
		return version
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "dev"
	}
	v := bi.Main.Version
	if v == "" || v == "(devel)" {
		v = "dev"
	}
	for _, s := range bi.Settings {
		if s.Key == "vcs.revision" && len(s.Value) >= 12 {
			v += "+" + s.Value[:12]
		}
	}
	return v
}
