package commands

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/rdma-macvlan/rdma-macvlan/cmd/docker-rdma/internal/docker"
)

// Metadata is what a Docker CLI plugin answers to docker-cli-plugin-metadata.
type Metadata struct {
	SchemaVersion    string
	Vendor           string
	Version          string
	ShortDescription string
	URL              string `json:",omitempty"`
}

// metadataCommand is how the docker CLI asks a plugin who it is.
const metadataCommand = "docker-cli-plugin-metadata"

// pluginName is the CLI plugin's name: docker rdma ..., binary docker-rdma.
const pluginName = "rdma"

const usage = `Usage:  docker rdma [--plugin NAME] [--socket PATH] COMMAND

Containers with RDMA on rdma-macvlan networks, through the rdma-macvlan OCI
runtime (their HCA's devices, CAP_IPC_LOCK, a locked-memory limit and
rdma-exec), and what the host needs.

Commands:
  run       docker run --runtime rdma-macvlan, its options as the runtime's variables
  compose   docker compose with runtime: rdma-macvlan on every service on an rdma-macvlan network
  ls        rdma-macvlan networks: parent, HCA, port, GID table use, device flags
  inspect   a container's or network's interfaces, GIDs, readiness and RDMA env
  doctor    check the host, the engine and the plugin; exit 1 when RDMA is blocked
  version   versions of docker rdma, the plugin and the engine (CDI or not)
  runtime   install or uninstall the rdma-macvlan OCI runtime in dockerd's daemon.json
  selftest  prove RDMA between two containers on a network, on this host's hardware

Options:
      --plugin NAME   the rdma-macvlan plugin (default: any plugin with
                      rdma-macvlan's manifest; env RDMA_MACVLAN_PLUGIN)
      --socket PATH   the daemon's socket instead of finding it through Docker
                      (env RDMA_MACVLAN_SOCKET)

Run 'docker rdma COMMAND --help' for more on a command.
`

// Main runs docker rdma with args (without the program name) and returns
// the exit status. It takes both forms: as a CLI plugin the docker CLI runs
// "docker-rdma [DOCKER OPTIONS] rdma COMMAND ..."; run directly it is
// "docker-rdma [DOCKER OPTIONS] COMMAND ...".
func Main(args []string, env *Env, version string) int {
	if len(args) > 0 && args[0] == metadataCommand {
		b, _ := json.Marshal(Metadata{
			SchemaVersion:    "0.1.0",
			Vendor:           "rdma-macvlan",
			Version:          version,
			ShortDescription: "Run containers with RDMA on rdma-macvlan networks",
			URL:              "https://github.com/rdma-macvlan/rdma-macvlan",
		})
		fmt.Fprintln(env.Stdout, string(b))
		return 0
	}
	global, rest, err := docker.SplitGlobal(args)
	if err != nil {
		fmt.Fprintf(env.Stderr, "docker rdma: %v\n", err)
		return exitUsage
	}
	if len(rest) > 0 && rest[0] == pluginName {
		rest = rest[1:]
	}
	opts := options{plugin: env.Getenv(envPlugin), socket: env.Getenv(envSocket)}
	for len(rest) > 0 && strings.HasPrefix(rest[0], "-") {
		name, val, hasVal := strings.Cut(rest[0], "=")
		switch name {
		case "-h", "--help":
			fmt.Fprint(env.Stdout, usage)
			return 0
		case "-v", "--version":
			fmt.Fprintf(env.Stdout, "docker rdma version %s\n", version)
			return 0
		case "--plugin", "--socket":
			if !hasVal {
				if len(rest) < 2 {
					fmt.Fprintf(env.Stderr, "docker rdma: %s needs a value\n", name)
					return exitUsage
				}
				val, rest = rest[1], rest[1:]
			}
			if name == "--plugin" {
				opts.plugin = val
			} else {
				opts.socket = val
			}
			rest = rest[1:]
		default:
			fmt.Fprintf(env.Stderr, "docker rdma: unknown option %s\n\n%s", rest[0], usage)
			return exitUsage
		}
	}
	if len(rest) == 0 {
		fmt.Fprint(env.Stderr, usage)
		return exitUsage
	}
	s := newSession(context.Background(), env, global, opts)
	switch cmd, args := rest[0], rest[1:]; cmd {
	case "run":
		return cmdRun(s, args)
	case "compose":
		return cmdCompose(s, args)
	case "ls", "list":
		return cmdLs(s, args)
	case "inspect":
		return cmdInspect(s, args)
	case "doctor":
		return cmdDoctor(s, args)
	case "version":
		return cmdVersion(s, args, version)
	case "runtime":
		return cmdRuntime(s, args)
	case "selftest":
		return cmdSelftest(s, args)
	case "help":
		fmt.Fprint(env.Stdout, usage)
		return 0
	default:
		fmt.Fprintf(env.Stderr, "docker rdma: unknown command %q\n\n%s", cmd, usage)
		return exitUsage
	}
}
