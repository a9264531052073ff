package compose

import (
	"fmt"
	"net/netip"
	"sort"
	"strings"

	"github.com/rdma-macvlan/rdma-macvlan/internal/rdmaexec"
)

// IPCLock is the capability the override adds.
const IPCLock = "IPC_LOCK"

// Rail is one rdma-macvlan network a service's containers are on, as the
// Resolver found it.
type Rail struct {
	// Name is the engine's name of the network.
	Name string
	// HCA and Port serve it ("" and 0 when they could not be told).
	HCA  string
	Port int
	// Subnets are its subnets, when known.
	Subnets []netip.Prefix
	// TrafficClass and ServiceLevel are its -o traffic_class and
	// service_level, nil when not set: rdma-exec exports them.
	TrafficClass, ServiceLevel *int
	// CDI are the CDI device names to give, or Nodes the device nodes.
	CDI   []string
	Nodes []string
}

// Resolver answers what the model alone cannot say.
type Resolver interface {
	// Network returns the rail of the project's network key, or nil when
	// it is not an rdma-macvlan network.
	Network(key string, def ProjectNetwork) (*Rail, error)
	// Container returns the rdma-macvlan rails of an existing container
	// (network_mode: container:NAME).
	Container(name string) ([]*Rail, error)
	// Image returns the ENTRYPOINT and CMD of the service's image.
	Image(service string, svc Service) (entry, cmd []string, err error)
}

// Options are what `docker rdma compose` adds besides devices.
type Options struct {
	// Memlock is the soft:hard memlock limit (runflags.ParseMemlock).
	Memlock string
	// NoWait leaves rdma-exec out.
	NoWait bool
	// Helper is rdma-exec's path on the engine's host.
	Helper string
	// HelperArgs are rdma-exec's options after its --net options
	// (--timeout, --roce-version, --gid-family).
	HelperArgs []string
}

// Override is what the override file adds, per service.
type Override struct {
	Services map[string]*ServiceOverride
	// Notes say what was left out because the user's file has it.
	Notes []string
}

// ServiceOverride is what one service gets. Empty fields are not written.
type ServiceOverride struct {
	// Rails are the service's rdma-macvlan networks (for messages).
	Rails   []string
	Devices []string
	CapAdd  []string
	// Memlock is "soft:hard", "" when the service sets its own.
	Memlock string
	// Helper is the host path of rdma-exec to bind-mount; "" for none.
	Helper     string
	Entrypoint []string
	// Command is set when the image's CMD must be given again (a new
	// entrypoint drops it); nil leaves the service's command alone.
	Command []string
}

// Generate computes the override of every service on an rdma-macvlan
// network, directly or through network_mode. Other services get nothing.
func Generate(m *Model, r Resolver, o Options) (*Override, error) {
	ov := &Override{Services: map[string]*ServiceOverride{}}
	g := &generator{m: m, r: r, rails: map[string][]*Rail{}, nets: map[string]*Rail{}, netDone: map[string]error{}}
	names := make([]string, 0, len(m.Services))
	for n := range m.Services {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		rails, err := g.railsOf(name, nil)
		if err != nil {
			return nil, err
		}
		if len(rails) == 0 {
			continue
		}
		so, notes, err := serviceOverride(name, m.Services[name], rails, r, o)
		if err != nil {
			return nil, err
		}
		ov.Services[name] = so
		ov.Notes = append(ov.Notes, notes...)
	}
	return ov, nil
}

type generator struct {
	m       *Model
	r       Resolver
	rails   map[string][]*Rail // by service
	nets    map[string]*Rail   // by network key
	netDone map[string]error
}

// network resolves one of the project's networks once.
func (g *generator) network(key string) (*Rail, error) {
	if err, done := g.netDone[key]; done {
		return g.nets[key], err
	}
	def, ok := g.m.Networks[key]
	var rail *Rail
	var err error
	if ok {
		rail, err = g.r.Network(key, def)
	}
	g.nets[key], g.netDone[key] = rail, err
	return rail, err
}

// railsOf returns the rdma-macvlan networks of a service: its own, or
// those of the service or container whose network namespace it shares.
func (g *generator) railsOf(name string, seen []string) ([]*Rail, error) {
	if r, ok := g.rails[name]; ok {
		return r, nil
	}
	for _, s := range seen {
		if s == name {
			return nil, fmt.Errorf("service %s: network_mode loops through services %s", name, strings.Join(append(seen, name), " -> "))
		}
	}
	svc, ok := g.m.Services[name]
	if !ok {
		return nil, nil
	}
	var rails []*Rail
	switch mode := svc.NetworkMode; {
	case strings.HasPrefix(mode, "service:"):
		var err error
		if rails, err = g.railsOf(strings.TrimPrefix(mode, "service:"), append(seen, name)); err != nil {
			return nil, err
		}
	case strings.HasPrefix(mode, "container:"):
		var err error
		if rails, err = g.r.Container(strings.TrimPrefix(mode, "container:")); err != nil {
			return nil, fmt.Errorf("service %s (network_mode %s): %w", name, mode, err)
		}
	case mode != "":
		// host, none, bridge: no rdma-macvlan network.
	default:
		keys := make([]string, 0, len(svc.Networks))
		for k := range svc.Networks {
			keys = append(keys, k)
		}
		// Compose connects the networks by priority, highest first, then
		// by name; the rails are listed in that order.
		sort.Slice(keys, func(i, j int) bool {
			pi, pj := priority(svc.Networks[keys[i]]), priority(svc.Networks[keys[j]])
			if pi != pj {
				return pi > pj
			}
			return keys[i] < keys[j]
		})
		for _, k := range keys {
			rail, err := g.network(k)
			if err != nil {
				return nil, fmt.Errorf("service %s, network %s: %w", name, k, err)
			}
			if rail != nil {
				rails = append(rails, rail)
			}
		}
	}
	g.rails[name] = rails
	return rails, nil
}

func priority(r *ServiceNetRef) int {
	if r == nil {
		return 0
	}
	return r.Priority
}

// serviceOverride is one service's part of the override.
func serviceOverride(name string, svc Service, rails []*Rail, r Resolver, o Options) (*ServiceOverride, []string, error) {
	so := &ServiceOverride{}
	var notes []string
	has := map[string]bool{}
	for _, d := range svc.Devices {
		has[d.Source] = true
	}
	for _, rail := range rails {
		so.Rails = append(so.Rails, rail.Name)
		for _, d := range append(append([]string{}, rail.CDI...), rail.Nodes...) {
			switch {
			case has[d] && !contains(so.Devices, d):
				notes = append(notes, fmt.Sprintf("service %s: device %s given already", name, d))
			case !contains(so.Devices, d):
				so.Devices = append(so.Devices, d)
			}
			has[d] = true
		}
	}
	switch {
	case hasCap(svc.CapDrop, IPCLock):
		notes = append(notes, fmt.Sprintf("service %s: cap_drop %s: not adding it (pinned memory then counts against the memlock limit)", name, IPCLock))
	case hasCap(svc.CapAdd, IPCLock) || svc.Privileged:
	default:
		so.CapAdd = []string{IPCLock}
	}
	if _, ok := svc.Ulimits["memlock"]; ok {
		notes = append(notes, fmt.Sprintf("service %s: its own ulimits memlock is kept", name))
	} else {
		so.Memlock = o.Memlock
	}
	if o.NoWait {
		return so, notes, nil
	}
	for _, v := range svc.Volumes {
		if v.Target == rdmaexec.ContainerPath {
			return nil, nil, fmt.Errorf("service %s mounts something at %s, where rdma-exec goes: remove that volume, or use docker rdma compose --no-wait", name, rdmaexec.ContainerPath)
		}
	}
	// The model's strings are written as in a compose file ($$ for $),
	// the image's as they are; the override writes every $ doubled.
	entry, cmd := unescape(svc.Entrypoint), unescape(svc.Command)
	if svc.Entrypoint == nil {
		ie, ic, err := r.Image(name, svc)
		if err != nil {
			return nil, nil, fmt.Errorf("service %s: %w", name, err)
		}
		entry = ie
		if svc.Command == nil {
			cmd = ic
			// The new entrypoint drops the image's CMD: give it again.
			if len(ic) > 0 {
				so.Command = append([]string{}, ic...)
			}
		}
	}
	if len(entry)+len(cmd) == 0 {
		return nil, nil, fmt.Errorf("service %s: neither the service nor image %s has an entrypoint or a command: give the service a command", name, svc.Image)
	}
	so.Helper = o.Helper
	so.Entrypoint = []string{rdmaexec.ContainerPath}
	for _, rail := range rails {
		so.Entrypoint = append(so.Entrypoint, "--net", rdmaexec.FormatNet(rdmaexec.Network{Name: rail.Name, HCA: rail.HCA, Port: rail.Port, Subnets: rail.Subnets,
			TrafficClass: rail.TrafficClass, ServiceLevel: rail.ServiceLevel}))
	}
	so.Entrypoint = append(append(append(so.Entrypoint, o.HelperArgs...), "--"), entry...)
	return so, notes, nil
}

// unescape undoes compose's $$ in the model's strings.
func unescape(list []string) []string {
	if list == nil {
		return nil
	}
	out := make([]string, len(list))
	for i, s := range list {
		out[i] = strings.ReplaceAll(s, "$$", "$")
	}
	return out
}

// hasCap reports whether caps names capability c (with or without CAP_,
// any case) or ALL.
func hasCap(caps []string, c string) bool {
	for _, x := range caps {
		x = strings.TrimPrefix(strings.ToUpper(strings.TrimSpace(x)), "CAP_")
		if x == c || x == "ALL" {
			return true
		}
	}
	return false
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
