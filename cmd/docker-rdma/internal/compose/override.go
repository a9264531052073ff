package compose

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
)

// Resolver answers what the model alone cannot say.
type Resolver interface {
	// Network reports whether the project's network key is an
	// rdma-macvlan network.
	Network(key string, def ProjectNetwork) (bool, error)
	// Container returns the rdma-macvlan networks of an existing
	// container (network_mode: container:NAME).
	Container(name string) ([]string, error)
}

// Override is what the override file says.
type Override struct {
	// Services are the services on rdma-macvlan networks, each with the
	// engine's names of those networks (its rails, for a comment).
	Services map[string][]string
	// Env are the runtime's variables (KEY=VALUE) each of them gets:
	// docker rdma compose's own options.
	Env []string
	// Memlock is "soft:hard" (runflags.ParseMemlock) for ulimits memlock,
	// "" to leave it to the service and the runtime (unlimited).
	Memlock string
}

// Generate finds every service on an rdma-macvlan network, directly or
// through network_mode. Other services get nothing.
func Generate(m *Model, r Resolver) (*Override, error) {
	ov := &Override{Services: map[string][]string{}}
	g := &generator{m: m, r: r, rails: map[string][]string{}, nets: map[string]string{}, netDone: map[string]error{}}
	for _, name := range slices.Sorted(maps.Keys(m.Services)) {
		rails, err := g.railsOf(name, nil)
		if err != nil {
			return nil, err
		}
		if len(rails) == 0 {
			continue
		}
		ov.Services[name] = rails
	}
	return ov, nil
}

type generator struct {
	m       *Model
	r       Resolver
	rails   map[string][]string // by service
	nets    map[string]string   // by network key: its name, "" when not rdma-macvlan
	netDone map[string]error
}

// network resolves one of the project's networks once: its engine name
// when it is rdma-macvlan, else "".
func (g *generator) network(key string) (string, error) {
	if err, done := g.netDone[key]; done {
		return g.nets[key], err
	}
	name := ""
	var err error
	if def, ok := g.m.Networks[key]; ok {
		var rdma bool
		if rdma, err = g.r.Network(key, def); rdma {
			name = cmp.Or(def.Name, key)
		}
	}
	g.nets[key], g.netDone[key] = name, err
	return name, err
}

// railsOf returns the rdma-macvlan networks of a service: its own, or
// those of the service or container whose network namespace it shares.
func (g *generator) railsOf(name string, seen []string) ([]string, error) {
	if r, ok := g.rails[name]; ok {
		return r, nil
	}
	if slices.Contains(seen, name) {
		return nil, fmt.Errorf("service %s: network_mode loops through services %s", name, strings.Join(append(seen, name), " -> "))
	}
	svc, ok := g.m.Services[name]
	if !ok {
		return nil, nil
	}
	var rails []string
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
			if rail != "" {
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
