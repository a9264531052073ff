package commands

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/rdma-macvlan/rdma-macvlan/cmd/docker-rdma/internal/compose"
	"github.com/rdma-macvlan/rdma-macvlan/cmd/docker-rdma/internal/docker"
	"github.com/rdma-macvlan/rdma-macvlan/cmd/docker-rdma/internal/runflags"
)

const composeUsage = `Usage:  docker rdma compose [OPTIONS] COMMAND [ARGS...]
        docker rdma compose [OPTIONS] --print-override

Runs docker compose with one more file after yours: an override that sets
runtime: rdma-macvlan on every service on an rdma-macvlan network (or
sharing the network namespace of one), so that the rdma-macvlan runtime
gives its containers what docker rdma run gives one: its HCAs' CDI devices,
CAP_IPC_LOCK, an unlimited locked-memory limit unless the service sets
ulimits memlock, and rdma-exec in front of its process. Every other service,
and everything your files say, is left as it is. The override goes with up,
create, run, scale, watch and config; every other COMMAND (down, ps, logs,
...) runs unchanged. The engine must have the runtime: docker rdma runtime
install (once per host), else status 125.

Options (before COMMAND; docker compose's own global options, such as -f,
-p, --project-directory, --env-file and --profile, are passed on):
      --print-override      print the override file and run nothing; use it
                            with plain docker compose -f compose.yaml -f FILE
      --memlock SIZE        ulimits memlock for those services: bytes, or
                            with K/M/G, or -1/unlimited; SOFT:HARD sets both
      --no-wait, --gid-timeout DURATION, --roce-version 1|2,
      --gid-family auto|ipv4|ipv6, --accept-gid-mismatch
                            as for docker rdma run: the runtime's
                            RDMA_MACVLAN_* variables in those services'
                            environment
      --plugin NAME         the rdma-macvlan plugin, to tell its networks
      --socket PATH         accepted for older scripts; compose asks no daemon
      --device-mode MODE, --exec-helper PATH
                            accepted for older scripts and ignored: the
                            runtime gives the devices and rdma-exec
`

// cmdCompose is docker rdma compose.
func cmdCompose(s *session, args []string) int {
	if len(args) == 0 || args[0] == "--help" || args[0] == "-h" {
		out := s.env.Stdout
		if len(args) == 0 {
			out = s.env.Stderr
		}
		fmt.Fprint(out, composeUsage)
		if len(args) == 0 {
			return exitUsage
		}
		return 0
	}
	a, err := compose.ParseArgs(args)
	if err != nil {
		return composeFail(s, "%v", err)
	}
	if a.Own.Plugin != "" {
		s.opts.plugin = a.Own.Plugin
	}
	if a.Own.Socket != "" {
		s.opts.socket = a.Own.Socket
	}
	switch {
	case a.PrintOverride && a.Command != "":
		return composeFail(s, "--print-override prints the override and runs no command: drop %s, or drop --print-override", a.Command)
	case !a.PrintOverride && a.Command == "":
		return composeFail(s, "no COMMAND: docker rdma compose [OPTIONS] COMMAND (up, run, ...), or --print-override")
	case !a.PrintOverride && !compose.NeedsOverride(a.Command):
		return runCompose(s, append(append(append([]string{}, a.Global...), a.Command), a.Rest...))
	}
	if a.Own.DeviceMode != "" {
		tprintf(s.env.Stderr, "docker rdma compose: note: --device-mode is ignored: the rdma-macvlan runtime gives the containers their HCAs' devices\n")
	}
	if a.Own.ExecHelper != "" {
		tprintf(s.env.Stderr, "docker rdma compose: note: --exec-helper is ignored: the rdma-macvlan runtime mounts the rdma-exec next to it (its --exec-helper in daemon.json)\n")
	}
	ov, err := composeOverride(s, a)
	if err != nil {
		return composeFail(s, "%v", err)
	}
	if a.PrintOverride {
		if err := ov.Write(s.env.Stdout); err != nil {
			return composeFail(s, "write the override: %v", err)
		}
		return 0
	}
	wd, _ := os.Getwd()
	files, err := a.ConfigFiles(s.env.Getenv, wd)
	if err != nil {
		return composeFail(s, "%v", err)
	}
	for _, f := range files {
		if f == "-" {
			return composeFail(s, "-f - (the compose file on stdin) is read twice (once for its model): write it to a file, or print the override (--print-override) and use plain docker compose")
		}
	}
	if len(ov.Services) > 0 {
		if err := checkRuntime(s); err != nil {
			return composeFail(s, "%v", err)
		}
	}
	f, err := os.CreateTemp("", "docker-rdma-compose-*.yaml")
	if err != nil {
		return composeFail(s, "write the override: %v", err)
	}
	defer os.Remove(f.Name())
	if err := ov.Write(f); err != nil {
		f.Close()
		return composeFail(s, "write the override %s: %v", f.Name(), err)
	}
	if err := f.Close(); err != nil {
		return composeFail(s, "write the override %s: %v", f.Name(), err)
	}
	argv := append([]string{}, a.Global...)
	if len(a.Files) == 0 {
		for _, cf := range files {
			argv = append(argv, "--file", cf)
		}
	}
	argv = append(append(argv, "--file", f.Name(), a.Command), a.Rest...)
	return runCompose(s, argv)
}

func composeFail(s *session, format string, a ...any) int {
	tprintf(s.env.Stderr, "docker rdma compose: "+format+"\n", a...)
	return exitRunFailed
}

// runCompose runs docker compose ARGS with this process's terminal and
// returns its exit status.
func runCompose(s *session, args []string) int {
	argv := s.cli.Argv(append([]string{"compose"}, args...)...)
	s.cli.Debugf("running %s %s", s.cli.Path, strings.Join(argv, " "))
	return superviseDocker(s.env, s.cli.Path, argv, "")
}

// composeOverride reads the project's merged model from docker compose
// config and computes the override.
func composeOverride(s *session, a *compose.Args) (*compose.Override, error) {
	env, err := runflags.Env(a.Own)
	if err != nil {
		return nil, err
	}
	memlock := ""
	if a.Own.Memlock != "" {
		if memlock, err = runflags.ParseMemlock(a.Own.Memlock); err != nil {
			return nil, fmt.Errorf("--memlock: %w", err)
		}
	}
	out, err := s.cli.Output(s.ctx, append(append([]string{"compose"}, a.Global...), "config", "--format", "json")...)
	if err != nil {
		return nil, fmt.Errorf("read the project's model: %w", err)
	}
	m, err := compose.Decode(out)
	if err != nil {
		return nil, err
	}
	ov, err := compose.Generate(m, &composeResolver{s: s})
	if err != nil {
		return nil, err
	}
	ov.Env, ov.Memlock = env, memlock
	return ov, nil
}

// composeResolver answers compose.Generate's questions from the engine.
type composeResolver struct {
	s *session
}

// Network reports whether a project network is rdma-macvlan: an external
// one by the engine's network, one compose creates by its driver.
func (r *composeResolver) Network(key string, def compose.ProjectNetwork) (bool, error) {
	s := r.s
	if !def.External {
		return s.isRDMADriver(def.Driver), nil
	}
	name := firstNonEmpty(def.Name, key)
	dn, err := s.cli.NetworkInspect(s.ctx, name)
	if err != nil {
		if notFound(err) {
			return false, fmt.Errorf("external network %s does not exist: create it (docker network create -d rdma-macvlan:latest -o parent=IFNAME --subnet ... %s), or drop external: true so that compose creates it", name, name)
		}
		return false, fmt.Errorf("external network %s: %w", name, err)
	}
	return s.isRDMADriver(dn.Driver), nil
}

// Container is the rdma-macvlan networks of a running container whose
// network namespace a service shares (network_mode: container:NAME).
func (r *composeResolver) Container(name string) ([]string, error) {
	s := r.s
	ct, err := s.cli.ContainerInspect(s.ctx, name)
	if err != nil {
		if notFound(err) {
			return nil, fmt.Errorf("container %s does not exist: start it first, or share a service's namespace with network_mode: service:NAME", name)
		}
		return nil, err
	}
	var rails []string
	// In name order: the override is the same file every time it is made.
	for _, net := range slices.Sorted(maps.Keys(ct.NetworkSettings.Networks)) {
		dn, err := s.cli.NetworkInspect(s.ctx, net)
		if err != nil {
			return nil, fmt.Errorf("network %s of container %s: %w", net, name, err)
		}
		if s.isRDMADriver(dn.Driver) {
			rails = append(rails, dn.Name)
		}
	}
	return rails, nil
}

// notFound reports whether Docker said the object does not exist.
func notFound(err error) bool {
	var de *docker.Error
	if errors.As(err, &de) {
		msg := strings.ToLower(de.Stderr)
		return strings.Contains(msg, "no such") || strings.Contains(msg, "not found")
	}
	return false
}
