package runflags

import (
	"encoding/csv"
	"fmt"
	"strings"
)

// Engines before API 1.44 (Docker 25) refuse a container created on more
// than one network ("Container cannot be connected to network endpoints").
// On them one docker run becomes docker create on the first network,
// docker network connect for each other one, and docker start.

// CreateRoute is a docker run command line taken apart for such an engine.
type CreateRoute struct {
	// Create is the docker create command line after "create": the run's
	// arguments without the networks after the first and without the flags
	// only docker run takes (--detach, --sig-proxy, --detach-keys).
	Create []string
	// Connects are the docker network connect command lines (after
	// "network connect"), each ending with the network; the container
	// follows.
	Connects [][]string
	// Detach is docker run -d: start without attaching, print the ID.
	Detach bool
	// Start are docker start's flags when attaching: -a, with -i when the
	// run had -i, and --detach-keys.
	Start []string
	// Notes say what could not be carried over.
	Notes []string
}

// SplitCreate takes the run's arguments (Args, after WithFlags) apart into a
// CreateRoute.
func (p *Parsed) SplitCreate() (CreateRoute, error) {
	var r CreateRoute
	if p.Image < 0 {
		return r, fmt.Errorf("%w: no IMAGE", ErrUsage)
	}
	flags, rest := p.Args[:p.Image], p.Args[p.Image:]
	interactive, detachKeys := false, ""
	nets := 0
	for i := 0; i < len(flags); i++ {
		a := flags[i]
		switch {
		case a == "--":
			r.Create = append(r.Create, a)
		case strings.HasPrefix(a, "--"):
			name, val, hasVal := strings.Cut(a[2:], "=")
			takes, _ := TakesValue(name)
			if takes && !hasVal && i+1 < len(flags) {
				i++
				val = flags[i]
			}
			switch name {
			case "net", "network":
				nets++
				if nets == 1 {
					r.Create = append(r.Create, "--network", val)
					continue
				}
				c, err := connectArgs(val)
				if err != nil {
					return r, err
				}
				r.Connects = append(r.Connects, c)
				continue
			case "detach":
				b, err := parseBool(val, hasVal)
				if err != nil {
					return r, fmt.Errorf("%w: --detach=%s", ErrUsage, val)
				}
				r.Detach = b
				continue
			case "sig-proxy":
				if b, err := parseBool(val, hasVal); err == nil && !b {
					r.Notes = append(r.Notes, "--sig-proxy=false is not kept: docker start -a forwards signals")
				}
				continue
			case "detach-keys":
				detachKeys = val
				continue
			case "interactive":
				if b, err := parseBool(val, hasVal); err == nil {
					interactive = b
				}
			}
			r.Create = append(r.Create, a)
			if takes && !hasVal {
				r.Create = append(r.Create, val)
			}
		default:
			// A group of one-letter flags: -d comes out of it (docker
			// create has no -d), -i is noted; a value flag ends the group.
			kept := []byte{'-'}
			j := 1
			for ; j < len(a); j++ {
				c := a[j]
				if _, isValue := shortValue[c]; isValue || (j+1 < len(a) && a[j+1] == '=') {
					break
				}
				switch c {
				case 'd':
					r.Detach = true
					continue
				case 'i':
					interactive = true
				}
				kept = append(kept, c)
			}
			if j < len(a) && a[j] == 'd' && a[j+1] == '=' {
				b, err := parseBool(a[j+2:], true)
				if err != nil {
					return r, fmt.Errorf("%w: %s", ErrUsage, a)
				}
				r.Detach = b
				j = len(a)
			}
			group := string(kept) + a[j:]
			if group != "-" {
				r.Create = append(r.Create, group)
			}
			if j < len(a) {
				if _, isValue := shortValue[a[j]]; isValue && j+1 == len(a) && i+1 < len(flags) {
					i++
					r.Create = append(r.Create, flags[i])
				}
			}
		}
	}
	r.Create = append(r.Create, rest...)
	if !r.Detach {
		r.Start = []string{"--attach"}
		if interactive {
			r.Start = append(r.Start, "--interactive")
		}
		if detachKeys != "" {
			r.Start = append(r.Start, "--detach-keys", detachKeys)
		}
	}
	return r, nil
}

// connectArgs turns a --network value into docker network connect's
// flags and network: a name, or the advanced syntax's name=, alias=,
// driver-opt=, ip=, ip6= and link-local-ip= fields.
func connectArgs(v string) ([]string, error) {
	if !strings.Contains(v, "=") {
		return []string{v}, nil
	}
	fields, err := csv.NewReader(strings.NewReader(v)).Read()
	if err != nil {
		return nil, fmt.Errorf("%w: --network %q: %w", ErrUsage, v, err)
	}
	var out []string
	name := ""
	for _, f := range fields {
		k, val, _ := strings.Cut(f, "=")
		switch strings.ToLower(strings.TrimSpace(k)) {
		case "name":
			name = val
		case "alias":
			out = append(out, "--alias", val)
		case "driver-opt":
			out = append(out, "--driver-opt", val)
		case "ip":
			out = append(out, "--ip", val)
		case "ip6":
			out = append(out, "--ip6", val)
		case "link-local-ip":
			out = append(out, "--link-local-ip", val)
		default:
			return nil, fmt.Errorf("%w: --network %q: field %q cannot be given to docker network connect, which this engine needs for a second network (name, alias, driver-opt, ip, ip6, link-local-ip)", ErrUsage, v, k)
		}
	}
	if name == "" {
		return nil, fmt.Errorf("%w: --network %q has no name= field", ErrUsage, v)
	}
	return append(out, name), nil
}
