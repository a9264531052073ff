package commands

import (
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/rdma-macvlan/rdma-macvlan/cmd/docker-rdma/internal/docker"
	"github.com/rdma-macvlan/rdma-macvlan/cmd/docker-rdma/internal/escape"
	"github.com/rdma-macvlan/rdma-macvlan/cmd/docker-rdma/internal/runflags"
	"github.com/rdma-macvlan/rdma-macvlan/rdma"
)

// exitRunFailed is docker run's status when docker itself (not the
// container) failed; docker rdma run uses it for its own errors too.
const exitRunFailed = 125

const runUsage = `Usage:  docker rdma run [OPTIONS] --network NETWORK IMAGE [COMMAND] [ARG...]

Runs docker run with what RDMA needs on an rdma-macvlan network: the HCA's
devices (its CDI device where the engine resolves CDI, else --device for its
uverbs node and rdma_cm), --cap-add IPC_LOCK and --ulimit memlock. Every
docker run option is passed on as given; an option of your own (--device,
--cap-add IPC_LOCK, --ulimit memlock=...) is kept and not repeated.

Options (anywhere before IMAGE):
      --memlock SIZE        locked-memory limit: -1/unlimited (default), bytes,
                            or with K/M/G; SOFT:HARD sets both
      --device-mode MODE    auto (default), cdi or nodes
      --dry-run             print the docker command instead of running it
      --plugin NAME         the rdma-macvlan plugin (default: any with
                            rdma-macvlan's manifest; env RDMA_MACVLAN_PLUGIN)
      --socket PATH         the daemon's socket (env RDMA_MACVLAN_SOCKET)

With several --network on an engine before Docker 25 (one network at docker
run), it runs docker create on the first, docker network connect for the
others, then docker start (attached unless -d).

The workload starts once the container's RoCE GID entries are in its HCA
port's table, with NCCL_IB_HCA, NCCL_IB_GID_INDEX, NCCL_SOCKET_IFNAME,
UCX_NET_DEVICES and UCX_IB_GID_INDEX set, and the networks' -o traffic_class
and service_level as NCCL_IB_TC, UCX_IB_TRAFFIC_CLASS, NCCL_IB_SL and
UCX_IB_SL (each unless already set; status 120 when the networks differ in
them): the rdma-exec
helper, mounted read-only into the container, runs first and execs the
image's entrypoint and command (or yours). When the entries do not appear it
exits with status 122 and says why, without starting the workload.
      --no-wait             start the workload directly, without rdma-exec
      --gid-timeout DURATION
                            how long to wait (default: the plugin's
                            RDMA_MACVLAN_GID_TIMEOUT, else 10s)
      --roce-version 1|2    the RoCE version of the GID to use (default 2)
      --gid-family auto|ipv4|ipv6
                            the address of the GID to use (default auto:
                            IPv4 when the container has one on the network)
      --accept-gid-mismatch start the workload even when the container's own
                            GID indexes differ per rail and no setting makes
                            NCCL and UCX use them on every rail (else rdma-exec
                            exits with status 121 without starting it)
      --exec-helper PATH    rdma-exec's path on the engine's host (env
                            RDMA_MACVLAN_EXEC_HELPER; default: next to
                            docker-rdma, else /usr/local/lib/rdma-macvlan/rdma-exec)
`

// cmdRun is docker rdma run: it finds the rdma-macvlan networks of the run,
// works out their devices and runs docker run with them, exiting with
// docker's status.
func (s *session) cmdRun(args []string) int {
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
		return s.runFail("%v\nSee 'docker rdma run --help'.", err)
	}
	if p.Own.Plugin != "" {
		s.opts.plugin = p.Own.Plugin
	}
	if p.Own.Socket != "" {
		s.opts.socket = p.Own.Socket
	}
	if p.Image < 0 {
		return s.runFail("no IMAGE: docker rdma run [OPTIONS] --network NETWORK IMAGE [COMMAND]")
	}
	memlock, err := runflags.ParseMemlock(p.Own.Memlock)
	if err != nil {
		return s.runFail("--memlock: %v", err)
	}
	if len(p.Networks) == 0 {
		return s.runFail("no --network: docker rdma run needs an rdma-macvlan network (--network NETWORK); list them with: docker rdma ls")
	}
	s.prefetchRun(p)
	devs, nets, err := s.runDevices(p)
	if err != nil {
		return s.runFail("%v", err)
	}
	if p.GPUs != "" {
		s.noteNearestRails(p.GPUs, nets)
	}
	helper := ""
	if !p.Own.NoWait {
		if helper, err = s.wrapWithHelper(p, nets); err != nil {
			return s.runFail("%v", err)
		}
	}
	plan := runflags.Build(p, devs, memlock)
	if len(distinctNetworks(p)) > 1 && !s.createsOnSeveralNetworks() {
		return s.runByCreate(p, plan, memlock, helper)
	}
	argv := s.cli.Argv(plan.Argv...)
	if p.Own.DryRun {
		for _, n := range plan.Notes {
			tprintf(s.env.Stderr, "# %s\n", n)
		}
		tprintln(s.env.Stdout, shellJoin(append([]string{s.cli.Path}, argv...)))
		return 0
	}
	return superviseDocker(s.env, s.cli.Path, argv, memlock, helper)
}

// distinctNetworks are the run's networks, each once.
func distinctNetworks(p *runflags.Parsed) []string {
	var out []string
	for _, n := range p.Networks {
		if !contains(out, n.Name) {
			out = append(out, n.Name)
		}
	}
	return out
}

// createsOnSeveralNetworks reports whether docker run can create a
// container on several networks at once: the engine and the docker CLI
// both speak API 1.44 (Docker 25) or later. When it cannot tell, it says
// no: the other route works on every engine.
func (s *session) createsOnSeveralNetworks() bool {
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
// connected is removed.
func (s *session) runByCreate(p *runflags.Parsed, plan runflags.Plan, memlock, helper string) int {
	built := &runflags.Parsed{}
	*built = *p
	built.Args = plan.Argv[1:]
	built.Image = p.Image + len(plan.Added)
	route, err := built.SplitCreate()
	if err != nil {
		return s.runFail("%v", err)
	}
	for _, n := range append(plan.Notes, route.Notes...) {
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
		return s.runFail("docker create: %v", err)
	}
	for _, c := range route.Connects {
		connect := exec.CommandContext(s.ctx, s.cli.Path, s.cli.Argv(append(append([]string{"network", "connect"}, c...), id)...)...)
		connect.Stdout, connect.Stderr = s.env.Stderr, s.env.Stderr
		if err := connect.Run(); err != nil {
			rm := exec.Command(s.cli.Path, s.cli.Argv("rm", "-f", id)...)
			_ = rm.Run()
			return s.runFail("docker network connect %s: %v: the container was removed (this engine takes one network at docker run: docker rdma run connects the others before starting it)", c[len(c)-1], err)
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
			return s.runFail("docker start: %v", err)
		}
		tprintln(s.env.Stdout, id)
		return 0
	}
	return superviseDocker(s.env, s.cli.Path, s.cli.Argv(append(append([]string{"start"}, route.Start...), id)...), memlock, helper)
}

// prefetchRun asks the engine's API at once, side by side, what the run
// then reads one after the other: docker info, the plugins, the networks
// and the image's entrypoint and command (unless --pull always, which
// pulls first). Nothing is asked when Docker is asked through the docker
// CLI.
func (s *session) prefetchRun(p *runflags.Parsed) {
	q := docker.Ahead{Info: true, Plugins: s.opts.plugin == "" || s.opts.socket == ""}
	for _, n := range p.Networks {
		if n.Name != "" && n.Name != "default" && !strings.HasPrefix(n.Name, "container:") {
			q.Networks = append(q.Networks, n.Name)
		}
	}
	if !p.Own.NoWait && !p.EntrypointSet && !strings.EqualFold(p.Pull, "always") {
		q.Images = append(q.Images, p.ImageName())
	}
	s.cli.Prefetch(s.ctx, q)
}

func (s *session) runFail(format string, a ...any) int {
	tprintf(s.env.Stderr, "docker rdma run: "+format+"\n", a...)
	return exitRunFailed
}

// runDevices resolves the run's networks and returns the devices its
// rdma-macvlan networks need. At least one network must be rdma-macvlan.
func (s *session) runDevices(p *runflags.Parsed) (runflags.Devices, []runNet, error) {
	var devs runflags.Devices
	var nets []runNet
	var others, drivers []string
	seen := map[string]bool{}
	nRDMA := 0
	for _, n := range p.Networks {
		name := n.Name
		if seen[name] {
			continue
		}
		seen[name] = true
		if name == "" || name == "default" || strings.HasPrefix(name, "container:") {
			others = append(others, fmt.Sprintf("%q", name))
			continue
		}
		dn, err := s.cli.NetworkInspect(s.ctx, name)
		if err != nil {
			return devs, nil, fmt.Errorf("network %q: %w (list networks: docker network ls)", name, err)
		}
		if !s.isRDMADriver(dn.Driver) {
			others = append(others, fmt.Sprintf("%s (driver %s)", name, dn.Driver))
			if !builtinDriver(dn.Driver) {
				drivers = append(drivers, dn.Driver)
			}
			continue
		}
		nRDMA++
		v, err := s.resolveNetwork(dn)
		if err != nil {
			return devs, nil, fmt.Errorf("network %s: %w", name, err)
		}
		nets = append(nets, runNet{net: dn, view: v})
		for _, pr := range v.Problems {
			tprintf(s.env.Stderr, "docker rdma run: warning: network %s: %s\n", name, pr)
		}
		if v.PortState != "" && v.PortState != "ACTIVE" {
			tprintf(s.env.Stderr, "docker rdma run: warning: network %s: port %s/%d is %s (check the cable and: rdma link show)\n", name, v.HCA, v.Port, v.PortState)
		}
		if err := s.addDevices(&devs, v, p.Own.DeviceMode); err != nil {
			return devs, nil, fmt.Errorf("network %s: %w", name, err)
		}
	}
	if nRDMA == 0 {
		what := "networks " + strings.Join(others, ", ") + " are"
		if len(others) == 1 {
			what = "network " + others[0] + " is"
		}
		msg := fmt.Sprintf("%s not rdma-macvlan: give --network an rdma-macvlan network (list them: docker rdma ls; %s)", what, s.createHint())
		if len(drivers) > 0 {
			msg += "; " + pluginHint(drivers[0])
		}
		return devs, nil, errors.New(msg)
	}
	return devs, nets, nil
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

var errNoDevices = errors.New("cannot tell which RDMA devices the network needs")

// addDevices adds the devices of one network: its CDI device when the
// engine resolves it (mode auto) or when asked (cdi), else its nodes.
func (s *session) addDevices(devs *runflags.Devices, v *netView, mode string) error {
	useCDI := mode == "cdi"
	if mode == "" || mode == "auto" {
		useCDI, _ = s.cdiSpecInEngine(v)
	}
	if useCDI {
		name := v.cdiDevice()
		if name == "" {
			return fmt.Errorf("%w: %s", errNoDevices, strings.Join(v.Missing, "; "))
		}
		if !contains(devs.CDI, name) {
			devs.CDI = append(devs.CDI, name)
		}
		return nil
	}
	if len(v.Nodes) == 0 {
		var why []string
		for _, m := range append(append([]string{}, v.Problems...), v.Missing...) {
			if m != missingReadiness {
				why = append(why, m)
			}
		}
		return fmt.Errorf("%w: %s (pass --device yourself, or run docker rdma as root so it can ask the daemon)", errNoDevices, strings.Join(why, "; "))
	}
	for _, n := range v.Nodes {
		if !rdmaNode(n.Path) {
			return fmt.Errorf("device %q named by %s is not an RDMA device node (%s/NAME) and is not passed to docker run: check that rdma-macvlan wrote it (docker rdma doctor), or pass --device yourself",
				n.Path, v.nodesFrom, rdma.DevDir)
		}
		if !contains(devs.Nodes, n.Path) {
			devs.Nodes = append(devs.Nodes, n.Path)
		}
	}
	return nil
}

// rdmaNode reports whether path names a node directly in /dev/infiniband,
// written cleanly (no .., no //) and with a plain name: what docker run
// --device then reads as a host path and nothing more (a colon would start
// a container path or permissions).
func rdmaNode(path string) bool {
	dir, name := filepath.Split(path)
	if dir != rdma.DevDir+"/" || filepath.Clean(path) != path || name == "." || name == ".." || name == "" {
		return false
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' || r == '.') {
			return false
		}
	}
	return true
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
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
	safe := true
	for _, r := range a {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./:=,+@%", r)) {
			safe = false
			break
		}
	}
	if safe {
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
