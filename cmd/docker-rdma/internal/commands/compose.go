package commands

import (
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/rdma-macvlan/rdma-macvlan/api"
	"github.com/rdma-macvlan/rdma-macvlan/cmd/docker-rdma/internal/compose"
	"github.com/rdma-macvlan/rdma-macvlan/cmd/docker-rdma/internal/docker"
	"github.com/rdma-macvlan/rdma-macvlan/cmd/docker-rdma/internal/runflags"
)

const composeUsage = `Usage:  docker rdma compose [OPTIONS] COMMAND [ARGS...]
        docker rdma compose [OPTIONS] --print-override

Runs docker compose with one more file after yours: an override that gives
every service on an rdma-macvlan network what docker rdma run gives a
container: its HCAs' devices (CDI names where the engine resolves the
plugin's CDI specs, else device nodes), cap_add IPC_LOCK, ulimits memlock,
and rdma-exec mounted read-only in front of the service's entrypoint and
command, so the workload starts once its GID entries are in the table, with
NCCL_IB_GID_INDEX and the rest set. Every other service, and everything your
files say, is left as it is. The override goes with up, create, run, scale,
watch and config; every other COMMAND (down, ps, logs, ...) runs unchanged.

Options (before COMMAND; docker compose's own global options, such as -f,
-p, --project-directory, --env-file and --profile, are passed on):
      --print-override      print the override file and run nothing; use it
                            with plain docker compose -f compose.yaml -f FILE
      --memlock SIZE        locked-memory limit: -1/unlimited (default), bytes,
                            or with K/M/G; SOFT:HARD sets both
      --device-mode MODE    auto (default), cdi or nodes
      --no-wait             no rdma-exec: the workload starts at once
      --gid-timeout DURATION, --roce-version 1|2, --gid-family auto|ipv4|ipv6,
      --accept-gid-mismatch, --exec-helper PATH
                            as for docker rdma run
      --plugin NAME, --socket PATH
                            how the rdma-macvlan daemon is found

A network the project creates does not exist before up: its HCA is found
from its driver_opts (parent, or rdma_device) in the sysfs the plugin reads,
as the plugin finds it; a network that exists (external, or made by an
earlier up) is taken from the daemon's status, as docker rdma run does.
`

// cmdCompose is docker rdma compose.
func (s *session) cmdCompose(args []string) int {
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
		return s.composeFail("%v", err)
	}
	if a.Own.Plugin != "" {
		s.opts.plugin = a.Own.Plugin
	}
	if a.Own.Socket != "" {
		s.opts.socket = a.Own.Socket
	}
	switch {
	case a.PrintOverride && a.Command != "":
		return s.composeFail("--print-override prints the override and runs no command: drop %s, or drop --print-override", a.Command)
	case !a.PrintOverride && a.Command == "":
		return s.composeFail("no COMMAND: docker rdma compose [OPTIONS] COMMAND (up, run, ...), or --print-override")
	case !a.PrintOverride && !compose.NeedsOverride(a.Command):
		return s.runCompose(append(append(append([]string{}, a.Global...), a.Command), a.Rest...))
	}
	ov, err := s.composeOverride(a)
	if err != nil {
		return s.composeFail("%v", err)
	}
	for _, n := range ov.Notes {
		tprintf(s.env.Stderr, "# %s\n", n)
	}
	if a.PrintOverride {
		if err := ov.Write(s.env.Stdout); err != nil {
			return s.composeFail("write the override: %v", err)
		}
		return 0
	}
	wd, _ := os.Getwd()
	files, err := a.ConfigFiles(s.env.Getenv, wd)
	if err != nil {
		return s.composeFail("%v", err)
	}
	for _, f := range files {
		if f == "-" {
			return s.composeFail("-f - (the compose file on stdin) is read twice (once for its model): write it to a file, or print the override (--print-override) and use plain docker compose")
		}
	}
	f, err := os.CreateTemp("", "docker-rdma-compose-*.yaml")
	if err != nil {
		return s.composeFail("write the override: %v", err)
	}
	defer os.Remove(f.Name())
	if err := ov.Write(f); err != nil {
		f.Close()
		return s.composeFail("write the override %s: %v", f.Name(), err)
	}
	if err := f.Close(); err != nil {
		return s.composeFail("write the override %s: %v", f.Name(), err)
	}
	argv := append([]string{}, a.Global...)
	if len(a.Files) == 0 {
		for _, cf := range files {
			argv = append(argv, "--file", cf)
		}
	}
	argv = append(append(argv, "--file", f.Name(), a.Command), a.Rest...)
	return s.runCompose(argv)
}

func (s *session) composeFail(format string, a ...any) int {
	tprintf(s.env.Stderr, "docker rdma compose: "+format+"\n", a...)
	return exitRunFailed
}

// runCompose runs docker compose ARGS with this process's terminal and
// returns its exit status.
func (s *session) runCompose(args []string) int {
	argv := s.cli.Argv(append([]string{"compose"}, args...)...)
	s.cli.Debugf("running %s %s", s.cli.Path, strings.Join(argv, " "))
	return superviseDocker(s.env, s.cli.Path, argv, "", "")
}

// composeOverride reads the project's merged model from docker compose
// config and computes the override.
func (s *session) composeOverride(a *compose.Args) (*compose.Override, error) {
	memlock, err := runflags.ParseMemlock(a.Own.Memlock)
	if err != nil {
		return nil, fmt.Errorf("--memlock: %w", err)
	}
	out, err := s.cli.Output(s.ctx, append(append([]string{"compose"}, a.Global...), "config", "--format", "json")...)
	if err != nil {
		return nil, fmt.Errorf("read the project's model: %w", err)
	}
	m, err := compose.Decode(out)
	if err != nil {
		return nil, err
	}
	p := &runflags.Parsed{Own: a.Own, Image: -1}
	r := &composeResolver{s: s, mode: a.Own.DeviceMode, project: m.Name}
	// Every rdma-macvlan network first: the GID timeout is the longest of
	// their plugins'.
	for key, def := range m.Networks {
		if _, err := r.Network(key, def); err != nil {
			return nil, fmt.Errorf("network %s: %w", key, err)
		}
	}
	o := compose.Options{Memlock: memlock, NoWait: a.Own.NoWait}
	if !a.Own.NoWait && len(r.nets) > 0 {
		if o.HelperArgs, err = s.helperOptions(p, r.nets); err != nil {
			return nil, err
		}
		if o.Helper, err = s.helperPath(p); err != nil {
			return nil, err
		}
	}
	return compose.Generate(m, r, o)
}

// composeResolver answers compose.Generate's questions from the engine,
// the plugin and sysfs, each network once.
type composeResolver struct {
	s       *session
	mode    string
	project string
	done    map[string]*compose.Rail // by the engine's network name
	nets    []runNet
}

// Network is the rail of a project network when it is rdma-macvlan: an
// external one (or one an earlier up made) as the engine and the daemon
// know it; one compose will create, from its driver_opts.
func (r *composeResolver) Network(key string, def compose.ProjectNetwork) (*compose.Rail, error) {
	s := r.s
	name := firstNonEmpty(def.Name, key)
	if rail, ok := r.done[name]; ok {
		return rail, nil
	}
	if def.External {
		dn, err := s.cli.NetworkInspect(s.ctx, name)
		if err != nil {
			if notFound(err) {
				return nil, fmt.Errorf("external network %s does not exist: create it (docker network create -d rdma-macvlan:latest -o parent=IFNAME --subnet ... %s), or drop external: true so that compose creates it", name, name)
			}
			return nil, fmt.Errorf("external network %s: %w", name, err)
		}
		return r.record(name, dn, nil)
	}
	if !s.isRDMADriver(def.Driver) {
		return r.record(name, docker.Network{}, nil)
	}
	if dn, err := s.cli.NetworkInspect(s.ctx, name); err == nil {
		return r.record(name, dn, nil)
	}
	return r.record(name, docker.Network{}, &def)
}

// record resolves an existing network dn, or plans def, and keeps the
// answer.
func (r *composeResolver) record(name string, dn docker.Network, def *compose.ProjectNetwork) (*compose.Rail, error) {
	if r.done == nil {
		r.done = map[string]*compose.Rail{}
	}
	var rail *compose.Rail
	var err error
	switch {
	case def != nil:
		rail, err = r.planned(name, *def)
	case dn.Name != "" && r.s.isRDMADriver(dn.Driver):
		rail, err = r.existing(dn)
	}
	if err != nil {
		return nil, err
	}
	r.done[name] = rail
	return rail, nil
}

// existing is an rdma-macvlan network the engine has: its view as docker
// rdma run builds it, and the same devices.
func (r *composeResolver) existing(dn docker.Network) (*compose.Rail, error) {
	v, err := r.s.resolveNetwork(dn)
	if err != nil {
		return nil, err
	}
	r.warn(dn.Name, v)
	var devs runflags.Devices
	if err := r.s.addDevices(&devs, v, r.mode); err != nil {
		return nil, err
	}
	return r.rail(runNet{net: dn, view: v}, devs), nil
}

// planned is an rdma-macvlan network compose will create: its HCA port
// from driver_opts.rdma_device or driver_opts.parent in the sysfs tree the
// plugin reads, as the plugin will find it. Its CDI device is taken when
// the engine resolves CDI devices from the directory the managed plugin
// writes its specs to (the spec appears when compose creates the network,
// before the containers).
func (r *composeResolver) planned(name string, def compose.ProjectNetwork) (*compose.Rail, error) {
	s := r.s
	parent, dev := def.DriverOpts["parent"], def.DriverOpts["rdma_device"]
	if parent == "" {
		return nil, fmt.Errorf("network %s (driver %s) has no driver_opts.parent: give it the RoCE netdev (driver_opts: {parent: IFNAME}; docker rdma doctor lists the host's RoCE ports)", name, def.Driver)
	}
	v := &netView{Name: name, Driver: def.Driver, Parent: parent}
	v.GIDCheck = firstNonEmpty(def.DriverOpts["gid_check"], api.GIDCheckWarn)
	v.TrafficClass = optionLevel(def.DriverOpts, "traffic_class", 255)
	v.ServiceLevel = optionLevel(def.DriverOpts, "service_level", 7)
	b, err := s.backendFor(def.Driver)
	if err != nil {
		return nil, fmt.Errorf("network %s: %w", name, err)
	}
	v.Backend = b
	s.fallback(v, dev)
	if v.HCA == "" || v.Source != "sysfs" {
		return nil, fmt.Errorf("network %s: cannot tell the RDMA device of driver_opts.parent %q (%s); the plugin would refuse the network too: check the parent (docker rdma doctor), or name the HCA with driver_opts.rdma_device",
			name, parent, strings.Join(v.Missing, "; "))
	}
	r.warn(name, v)
	mode := r.mode
	if (mode == "" || mode == "auto") && r.pluginCDIInEngine(b) {
		mode = "cdi"
	}
	var devs runflags.Devices
	if err := s.addDevices(&devs, v, mode); err != nil {
		return nil, fmt.Errorf("network %s: %w", name, err)
	}
	dn := docker.Network{Name: name, Driver: def.Driver, Options: def.DriverOpts}
	for _, c := range def.IPAM.Config {
		dn.IPAM.Config = append(dn.IPAM.Config, struct{ Subnet string }{Subnet: c.Subnet})
	}
	return r.rail(runNet{net: dn, view: v}, devs), nil
}

func (r *composeResolver) rail(n runNet, devs runflags.Devices) *compose.Rail {
	r.nets = append(r.nets, n)
	rn := n.rail()
	return &compose.Rail{Name: rn.Name, HCA: rn.HCA, Port: rn.Port, Subnets: append([]netip.Prefix(nil), rn.Subnets...),
		TrafficClass: rn.TrafficClass, ServiceLevel: rn.ServiceLevel, CDI: devs.CDI, Nodes: devs.Nodes}
}

func (r *composeResolver) warn(name string, v *netView) {
	for _, pr := range v.Problems {
		tprintf(r.s.env.Stderr, "docker rdma compose: warning: network %s: %s\n", name, pr)
	}
	if v.PortState != "" && v.PortState != "ACTIVE" {
		tprintf(r.s.env.Stderr, "docker rdma compose: warning: network %s: port %s/%d is %s (check the cable and: rdma link show)\n", name, v.HCA, v.Port, v.PortState)
	}
}

// defaultCDIDir is the daemon's --cdi-dir default.
const defaultCDIDir = "/var/run/cdi"

// pluginCDIInEngine reports whether the engine resolves CDI devices from
// the directory the managed plugin b writes its specs to (its cdi mount).
// A legacy plugin's --cdi-dir cannot be seen: no.
func (r *composeResolver) pluginCDIInEngine(b *backend) bool {
	if b == nil || b.Plugin == nil {
		return false
	}
	info, err := r.s.dockerInfo()
	if err != nil {
		return false
	}
	dir := firstNonEmpty(b.Plugin.MountSource("cdi"), defaultCDIDir)
	for _, d := range info.CDISpecDirs {
		if filepath.Clean(d) == filepath.Clean(dir) {
			return true
		}
	}
	return false
}

// Container is the rails of a running container whose network namespace
// a service shares (network_mode: container:NAME).
func (r *composeResolver) Container(name string) ([]*compose.Rail, error) {
	s := r.s
	ct, err := s.cli.ContainerInspect(s.ctx, name)
	if err != nil {
		if notFound(err) {
			return nil, fmt.Errorf("container %s does not exist: start it first, or share a service's namespace with network_mode: service:NAME", name)
		}
		return nil, err
	}
	var rails []*compose.Rail
	// In name order: the override is the same file every time it is made.
	for _, net := range slices.Sorted(maps.Keys(ct.NetworkSettings.Networks)) {
		dn, err := s.cli.NetworkInspect(s.ctx, net)
		if err != nil {
			return nil, fmt.Errorf("network %s of container %s: %w", net, name, err)
		}
		rail, err := r.record(dn.Name, dn, nil)
		if err != nil {
			return nil, fmt.Errorf("network %s of container %s: %w", net, name, err)
		}
		if rail != nil {
			rails = append(rails, rail)
		}
	}
	return rails, nil
}

// Image is the ENTRYPOINT and CMD of a service's image, read as docker
// rdma run reads them (pulled first when missing, unless pull_policy says
// never). An image compose builds must be built first.
func (r *composeResolver) Image(service string, svc compose.Service) ([]string, []string, error) {
	image := firstNonEmpty(svc.Image, r.project+"-"+service)
	if len(svc.Build) > 0 || svc.PullPolicy == "build" {
		cfg, err := r.s.cli.ImageInspect(r.s.ctx, image)
		if err != nil {
			if notFound(err) {
				return nil, nil, fmt.Errorf("image %s is built by compose and is not built yet: build it first (docker compose build %s), or give the service an entrypoint", image, service)
			}
			return nil, nil, fmt.Errorf("read the entrypoint and command of image %s: %w", image, err)
		}
		return cfg.Entrypoint, cfg.Cmd, nil
	}
	pull := "missing"
	switch svc.PullPolicy {
	case "always", "never":
		pull = svc.PullPolicy
	}
	p, err := runflags.Parse([]string{"--pull", pull, image})
	if err != nil {
		return nil, nil, err
	}
	cfg, err := r.s.imageConfig(p)
	if err != nil {
		return nil, nil, err
	}
	return cfg.Entrypoint, cfg.Cmd, nil
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
