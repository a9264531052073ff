package commands

import (
	"errors"
	"fmt"
	"maps"
	"os/exec"
	"slices"
	"strings"

	"github.com/rdma-macvlan/rdma-macvlan/api"
	"github.com/rdma-macvlan/rdma-macvlan/cmd/docker-rdma/internal/docker"
	"github.com/rdma-macvlan/rdma-macvlan/cmd/docker-rdma/internal/escape"
	"github.com/rdma-macvlan/rdma-macvlan/cmd/docker-rdma/internal/runflags"
)

// exitRunFailed is docker run's status when docker itself (not the
// container) failed; docker rdma run uses it for its own errors too.
const exitRunFailed = 125

const runUsage = `Usage:  docker rdma run [OPTIONS] --network NETWORK IMAGE [COMMAND] [ARG...]

Runs docker run --runtime rdma-macvlan: the rdma-macvlan runtime gives a
container on rdma-macvlan networks what RDMA needs (its HCAs' CDI devices,
CAP_IPC_LOCK, an unlimited locked-memory limit unless --ulimit memlock is
given, and rdma-exec in front of its process), as it does for plain docker
run --runtime rdma-macvlan. The options below become the runtime's
RDMA_MACVLAN_* variables (rdma-macvlan-runtime --help); every docker run
option is passed on as given (a --runtime of your own is kept). At least
one --network must be rdma-macvlan. The engine must have the runtime:
docker rdma runtime install (once per host), else status 125.

Options (anywhere before IMAGE):
      --memlock SIZE        --ulimit memlock: bytes, or with K/M/G, or
                            -1/unlimited; SOFT:HARD sets both (default:
                            the runtime's, unlimited)
      --dry-run             print the docker command instead of running it
      --plugin NAME         the rdma-macvlan plugin, to tell its networks
                            (default: any with rdma-macvlan's manifest;
                            env RDMA_MACVLAN_PLUGIN)
      --socket PATH         accepted for older scripts; run asks no daemon
      --device-mode MODE, --exec-helper PATH
                            accepted for older scripts and ignored: the
                            runtime gives the devices and rdma-exec

With several --network on an engine before Docker 25 (one network at docker
run), it runs docker create on the first, docker network connect for the
others, then docker start (attached unless -d).

The workload starts once the container's RoCE GID entries are in its HCA
ports' tables, with NCCL_IB_HCA, NCCL_IB_GID_INDEX, NCCL_SOCKET_IFNAME,
UCX_NET_DEVICES and UCX_IB_GID_INDEX set, and the networks' -o traffic_class
and service_level as NCCL_IB_TC, UCX_IB_TRAFFIC_CLASS, NCCL_IB_SL and
UCX_IB_SL (each unless already set; status 120 when the networks differ in
them). When the entries do not appear it exits with status 122 and says
why, without starting the workload.
      --no-wait             start the workload directly, without rdma-exec
                            (-e RDMA_MACVLAN_NO_WAIT=1)
      --gid-timeout DURATION
                            how long to wait (-e RDMA_MACVLAN_GID_TIMEOUT;
                            default: the plugin's gid_timeout)
      --roce-version 1|2    the RoCE version of the GID to use (default 2;
                            -e RDMA_MACVLAN_ROCE_VERSION)
      --gid-family auto|ipv4|ipv6
                            the address of the GID to use (default auto:
                            IPv4 when the container has one on the network;
                            -e RDMA_MACVLAN_GID_FAMILY)
      --accept-gid-mismatch start the workload even when the container's own
                            GID indexes differ per rail and no setting makes
                            NCCL and UCX use them on every rail (else rdma-exec
                            exits with status 121 without starting it;
                            -e RDMA_MACVLAN_ACCEPT_GID_MISMATCH=1)
`

// cmdRun is docker rdma run: docker run with the rdma-macvlan runtime and
// docker rdma run's own flags as the runtime's variables, exiting with
// docker's status.
func cmdRun(s *session, args []string) int {
	switch {
	case len(args) == 0:
		fmt.Fprint(s.env.Stderr, runUsage)
		return exitRunFailed
	case args[0] == "--help":
		fmt.Fprint(s.env.Stdout, runUsage)
		return 0
	}
	p, err := runflags.Parse(args)
	if err != nil {
		return runFail(s, "%v\nSee 'docker rdma run --help'.", err)
	}
	if p.Own.Plugin != "" {
		s.opts.plugin = p.Own.Plugin
	}
	if p.Own.Socket != "" {
		s.opts.socket = p.Own.Socket
	}
	if p.Image < 0 {
		return runFail(s, "no IMAGE: docker rdma run [OPTIONS] --network NETWORK IMAGE [COMMAND]")
	}
	added, err := runflags.Added(p)
	if err != nil {
		return runFail(s, "%v", err)
	}
	if len(p.Networks) == 0 {
		return runFail(s, "no --network: docker rdma run needs an rdma-macvlan network (--network NETWORK); list them with: docker rdma ls")
	}
	if p.Own.DeviceMode != "" {
		tprintf(s.env.Stderr, "docker rdma run: note: --device-mode is ignored: the rdma-macvlan runtime gives the container its HCAs' devices\n")
	}
	if p.Own.ExecHelper != "" {
		tprintf(s.env.Stderr, "docker rdma run: note: --exec-helper is ignored: the rdma-macvlan runtime mounts the rdma-exec next to it (its --exec-helper in daemon.json)\n")
	}
	prefetchRun(s, p)
	if err := checkNetworks(s, p); err != nil {
		return runFail(s, "%v", err)
	}
	if p.Runtime == "" || p.Runtime == api.RuntimeName {
		if err := checkRuntime(s); err != nil {
			return runFail(s, "%v", err)
		}
	}
	run := p.WithFlags(added)
	if len(distinctNetworks(p)) > 1 && !createsOnSeveralNetworks(s) {
		return runByCreate(s, run)
	}
	argv := s.cli.Argv(append([]string{"run"}, run.Args...)...)
	if p.Own.DryRun {
		tprintln(s.env.Stdout, shellJoin(append([]string{s.cli.Path}, argv...)))
		return 0
	}
	return superviseDocker(s.env, s.cli.Path, argv, memlockText(p.Own.Memlock))
}

// memlockText is the memlock limit a run asks for, for messages.
func memlockText(given string) string {
	if given == "" {
		return "unlimited (the runtime's default)"
	}
	m, _ := runflags.ParseMemlock(given)
	return m
}

// checkRuntime makes sure the engine has the rdma-macvlan runtime (docker
// info's Runtimes), which gives the container what RDMA needs.
func checkRuntime(s *session) error {
	info, err := s.dockerInfo()
	if err != nil {
		return fmt.Errorf("cannot tell whether the engine has the %s runtime: %w", api.RuntimeName, err)
	}
	if _, ok := info.Runtimes[api.RuntimeName]; ok {
		return nil
	}
	have := slices.Sorted(maps.Keys(info.Runtimes))
	return fmt.Errorf("the engine has no %s runtime (it has: %s), which gives containers on rdma-macvlan networks their RDMA devices: register it once per host with: sudo docker rdma runtime install, then reload dockerd (sudo systemctl reload docker, or kill -HUP its pid)",
		api.RuntimeName, strings.Join(have, ", "))
}

// checkNetworks makes sure at least one of the run's networks is
// rdma-macvlan: the runtime leaves a container on none as it is.
func checkNetworks(s *session, p *runflags.Parsed) error {
	var others, drivers []string
	for _, name := range distinctNetworks(p) {
		if name == "" || name == "default" || strings.HasPrefix(name, "container:") {
			others = append(others, fmt.Sprintf("%q", name))
			continue
		}
		dn, err := s.cli.NetworkInspect(s.ctx, name)
		if err != nil {
			return fmt.Errorf("network %q: %w (list networks: docker network ls)", name, err)
		}
		if s.isRDMADriver(dn.Driver) {
			return nil
		}
		others = append(others, fmt.Sprintf("%s (driver %s)", name, dn.Driver))
		if !builtinDriver(dn.Driver) {
			drivers = append(drivers, dn.Driver)
		}
	}
	what := "networks " + strings.Join(others, ", ") + " are"
	if len(others) == 1 {
		what = "network " + others[0] + " is"
	}
	msg := fmt.Sprintf("%s not rdma-macvlan: give --network an rdma-macvlan network (list them: docker rdma ls; %s)", what, s.createHint())
	if len(drivers) > 0 {
		msg += "; " + pluginHint(drivers[0])
	}
	return errors.New(msg)
}

// distinctNetworks are the run's networks, each once.
func distinctNetworks(p *runflags.Parsed) []string {
	var out []string
	for _, n := range p.Networks {
		if !slices.Contains(out, n.Name) {
			out = append(out, n.Name)
		}
	}
	return out
}

// createsOnSeveralNetworks reports whether docker run can create a
// container on several networks at once: the engine and the docker CLI
// both speak API 1.44 (Docker 25) or later. When it cannot tell, it says
// no: the other route works on every engine.
func createsOnSeveralNetworks(s *session) bool {
	client, server, err := s.cli.APIVersions(s.ctx)
	if err != nil {
		s.cli.Debugf("%v: connecting the networks after docker create", err)
		return false
	}
	return docker.AtLeast(client, "1.44") && docker.AtLeast(server, "1.44")
}

// runByCreate runs on an engine that creates a container on one network
// only (before Docker 25): docker create on the first network, docker
// network connect to each other one, then docker start, attached unless
// -d (then it prints the container's ID, as docker run -d does). The exit
// status is the container's when attached; a container that fails to be
// connected is removed. The runtime sees every network: it starts the
// container after the connects.
func runByCreate(s *session, p *runflags.Parsed) int {
	route, err := p.SplitCreate()
	if err != nil {
		return runFail(s, "%v", err)
	}
	for _, n := range route.Notes {
		tprintf(s.env.Stderr, "# %s\n", n)
	}
	if p.Own.DryRun {
		out := []string{shellJoin(append([]string{s.cli.Path}, s.cli.Argv(append([]string{"create"}, route.Create...)...)...)) + " >cid"}
		for _, c := range route.Connects {
			out = append(out, shellJoin(append([]string{s.cli.Path}, s.cli.Argv(append([]string{"network", "connect"}, c...)...)...))+` "$(cat cid)"`)
		}
		start := append([]string{"start"}, route.Start...)
		out = append(out, shellJoin(append([]string{s.cli.Path}, s.cli.Argv(start...)...))+` "$(cat cid)"`)
		for _, line := range out {
			tprintln(s.env.Stdout, line)
		}
		return 0
	}
	create := exec.CommandContext(s.ctx, s.cli.Path, s.cli.Argv(append([]string{"create"}, route.Create...)...)...)
	create.Stdin, create.Stderr = s.env.Stdin, s.env.Stderr
	out, err := create.Output()
	id := strings.TrimSpace(string(out))
	if err != nil || id == "" {
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return exit.ExitCode()
		}
		return runFail(s, "docker create: %v", err)
	}
	for _, c := range route.Connects {
		connect := exec.CommandContext(s.ctx, s.cli.Path, s.cli.Argv(append(append([]string{"network", "connect"}, c...), id)...)...)
		connect.Stdout, connect.Stderr = s.env.Stderr, s.env.Stderr
		if err := connect.Run(); err != nil {
			rm := exec.Command(s.cli.Path, s.cli.Argv("rm", "-f", id)...)
			_ = rm.Run()
			return runFail(s, "docker network connect %s: %v: the container was removed (this engine takes one network at docker run: docker rdma run connects the others before starting it)", c[len(c)-1], err)
		}
	}
	if route.Detach {
		start := exec.CommandContext(s.ctx, s.cli.Path, s.cli.Argv("start", id)...)
		start.Stderr = s.env.Stderr
		if err := start.Run(); err != nil {
			var exit *exec.ExitError
			if errors.As(err, &exit) {
				return exit.ExitCode()
			}
			return runFail(s, "docker start: %v", err)
		}
		tprintln(s.env.Stdout, id)
		return 0
	}
	return superviseDocker(s.env, s.cli.Path, s.cli.Argv(append(append([]string{"start"}, route.Start...), id)...), memlockText(p.Own.Memlock))
}

// prefetchRun asks the engine's API at once, side by side, what the run
// then reads one after the other: docker info, the plugins and the
// networks. Nothing is asked when Docker is asked through the docker CLI.
func prefetchRun(s *session, p *runflags.Parsed) {
	q := docker.Ahead{Info: true, Plugins: s.opts.plugin == ""}
	for _, n := range p.Networks {
		if n.Name != "" && n.Name != "default" && !strings.HasPrefix(n.Name, "container:") {
			q.Networks = append(q.Networks, n.Name)
		}
	}
	s.cli.Prefetch(s.ctx, q)
}

func runFail(s *session, format string, a ...any) int {
	tprintf(s.env.Stderr, "docker rdma run: "+format+"\n", a...)
	return exitRunFailed
}

// builtinDriver reports whether drv is one of Docker's own network drivers
// (no plugin can be named like them).
func builtinDriver(drv string) bool {
	switch drv {
	case "bridge", "host", "null", "none", "macvlan", "ipvlan", "overlay":
		return true
	}
	return false
}

// shellJoin quotes args for a POSIX shell where needed.
func shellJoin(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = shellQuote(a)
	}
	return strings.Join(q, " ")
}

func shellQuote(a string) string {
	if a == "" {
		return "''"
	}
	if shellSafe(a) {
		return a
	}
	if escape.Controls(a) != a {
		// bash's $'...', whose escapes (\n, \x1b, \u009b) are Go's:
		// the shell reads back the same bytes, the terminal shows none
		// of them raw.
		return "$'" + escape.Controls(strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(a)) + "'"
	}
	return "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
}
