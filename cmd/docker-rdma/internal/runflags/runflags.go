// Package runflags reads the arguments of `docker rdma run` the way `docker
// run` reads them (to find IMAGE, the networks and the user's own --runtime)
// and builds the `docker run` command line that names the rdma-macvlan
// runtime and passes docker rdma run's own flags to it, every other
// argument passed through as given.
package runflags

import (
	"encoding/csv"
	"errors"
	"fmt"
	"strings"
)

// Own are the flags of docker rdma run itself. They may appear anywhere
// before IMAGE and are taken out of the arguments given to docker run.
type Own struct {
	// Memlock is the RLIMIT_MEMLOCK to ask for ("": the runtime's
	// default, unlimited).
	Memlock string
	// DryRun prints the docker command instead of running it.
	DryRun bool
	// DeviceMode is the old --device-mode (auto, cdi or nodes): the
	// runtime gives the devices now, so it is accepted and ignored.
	DeviceMode string
	// Plugin and Socket override how the rdma-macvlan daemon is found.
	Plugin, Socket string
	// NoWait starts the workload without rdma-exec (no wait for the GID
	// entries, no exported GID index).
	NoWait bool
	// GIDTimeout, RoCEVersion and GIDFamily are rdma-exec's wait, RoCE
	// version and address family ("" for the runtime's defaults).
	GIDTimeout, RoCEVersion, GIDFamily string
	// ExecHelper is the old --exec-helper: the runtime finds rdma-exec
	// now, so it is accepted and ignored.
	ExecHelper string
	// AcceptMismatch starts the workload even when its GID indexes
	// differ per rail.
	AcceptMismatch bool
}

// OwnValue and ownBool are the names of the Own flags (OwnValue: those that
// take a value, which docker rdma compose takes too).
var (
	OwnValue = setOf("memlock", "device-mode", "plugin", "socket", "gid-timeout", "roce-version", "gid-family", "exec-helper")
	ownBool  = setOf("dry-run", "no-wait", "accept-gid-mismatch")
)

// Network is one --net/--network of the run.
type Network struct {
	// Value is the flag's value as given.
	Value string
	// Name is the network's name or ID: Value itself, or the name= field
	// of the advanced syntax (--network name=NET,driver-opt=k=v,...).
	Name string
}

// Parsed is a docker rdma run command line taken apart.
type Parsed struct {
	Own Own
	// Args are the user's docker run arguments, Own flags taken out,
	// otherwise exactly as given.
	Args []string
	// Image is the index of IMAGE in Args; -1 when there is none.
	Image int
	// Networks are the --net/--network flags in order.
	Networks []Network
	// Runtime is the user's --runtime, "" without one.
	Runtime string
	// Unknown are flags not in the table of docker run flags; they are
	// passed on and assumed to take no value.
	Unknown []string
}

// ErrUsage marks an argument docker run would refuse too.
var ErrUsage = errors.New("invalid docker run arguments")

// Parse takes a docker rdma run command line apart: the arguments after
// "run", up to and including IMAGE and its command.
func Parse(args []string) (*Parsed, error) {
	p := &Parsed{Image: -1}
	out := make([]string, 0, len(args))
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			// End of flags: IMAGE follows, then its command, untouched.
			out = append(out, a)
			if i+1 < len(args) {
				p.Image = len(out)
				out = append(out, args[i+1:]...)
			}
			p.Args = out
			return p, nil
		case a == "-" || !strings.HasPrefix(a, "-"):
			p.Image = len(out)
			p.Args = append(out, args[i:]...)
			return p, nil
		case strings.HasPrefix(a, "--"):
			name, val, hasVal := strings.Cut(a[2:], "=")
			if OwnValue[name] || ownBool[name] {
				if OwnValue[name] && !hasVal {
					if i+1 >= len(args) {
						return nil, fmt.Errorf("%w: flag --%s needs a value", ErrUsage, name)
					}
					i++
					val = args[i]
				}
				if err := p.setOwn(name, val, hasVal); err != nil {
					return nil, err
				}
				continue
			}
			takes, known := TakesValue(name)
			if !known {
				p.Unknown = append(p.Unknown, a)
			}
			out = append(out, a)
			if takes && !hasVal {
				if i+1 >= len(args) {
					return nil, fmt.Errorf("%w: flag --%s needs a value", ErrUsage, name)
				}
				i++
				val = args[i]
				out = append(out, val)
			}
			p.record(name, val, takes || hasVal)
		default:
			n, err := p.shortGroup(args, i)
			if err != nil {
				return nil, err
			}
			out = append(out, args[i:i+n]...)
			i += n - 1
		}
	}
	p.Args = out
	return p, nil
}

// shortGroup reads a group of one-letter flags (-it, -e X, -eX, -p80:80,
// -d=false) starting at args[i], the way pflag does, and returns how many
// arguments it used (1, or 2 when a value follows).
func (p *Parsed) shortGroup(args []string, i int) (int, error) {
	a := args[i]
	for j := 1; j < len(a); j++ {
		c := a[j]
		long, isValue := shortValue[c]
		if !isValue {
			var isBool bool
			if long, isBool = shortBool[c]; !isBool {
				p.Unknown = append(p.Unknown, "-"+string(c))
				long = ""
			}
		}
		switch {
		case j+1 < len(a) && a[j+1] == '=':
			// -e=X, -d=false: the rest is this flag's value.
			p.record(long, a[j+2:], true)
			return 1, nil
		case isValue && j+1 < len(a):
			p.record(long, a[j+1:], true)
			return 1, nil
		case isValue:
			if i+1 >= len(args) {
				return 0, fmt.Errorf("%w: flag -%c needs a value", ErrUsage, c)
			}
			p.record(long, args[i+1], true)
			return 2, nil
		default:
			p.record(long, "", false)
		}
	}
	return 1, nil
}

func (p *Parsed) setOwn(name, val string, hasVal bool) error {
	switch name {
	case "dry-run", "no-wait", "accept-gid-mismatch":
		b, err := parseBool(val, hasVal)
		if err != nil {
			return fmt.Errorf("%w: --%s=%s: %w", ErrUsage, name, val, err)
		}
		switch name {
		case "dry-run":
			p.Own.DryRun = b
		case "no-wait":
			p.Own.NoWait = b
		default:
			p.Own.AcceptMismatch = b
		}
	default:
		return p.Own.SetValue(name, val, ErrUsage)
	}
	return nil
}

// SetValue sets the Own flag called name (one of OwnValue) to val; a value
// it refuses is an error wrapping usage.
func (o *Own) SetValue(name, val string, usage error) error {
	switch name {
	case "memlock":
		o.Memlock = val
	case "device-mode":
		switch val {
		case "auto", "cdi", "nodes":
			o.DeviceMode = val
		default:
			return fmt.Errorf("%w: --device-mode %q: want auto, cdi or nodes", usage, val)
		}
	case "plugin":
		o.Plugin = val
	case "socket":
		o.Socket = val
	case "gid-timeout":
		o.GIDTimeout = val
	case "roce-version":
		o.RoCEVersion = val
	case "gid-family":
		o.GIDFamily = val
	case "exec-helper":
		o.ExecHelper = val
	}
	return nil
}

// record notes the flags docker rdma run looks at.
func (p *Parsed) record(name, val string, hasVal bool) {
	switch name {
	case "net", "network":
		p.Networks = append(p.Networks, Network{Value: val, Name: networkName(val)})
	case "runtime":
		p.Runtime = val
	}
}

func parseBool(val string, hasVal bool) (bool, error) {
	if !hasVal {
		return true, nil
	}
	switch strings.ToLower(val) {
	case "1", "t", "true":
		return true, nil
	case "0", "f", "false":
		return false, nil
	}
	return false, errors.New("not a boolean")
}

// networkName returns the network of a --network value: the value itself,
// or the name= field of the advanced syntax
// (name=NET,alias=A,driver-opt=k=v,...), which docker reads as CSV.
func networkName(v string) string {
	if !strings.Contains(v, "=") {
		return v
	}
	r := csv.NewReader(strings.NewReader(v))
	fields, err := r.Read()
	if err != nil {
		return v
	}
	for _, f := range fields {
		if k, val, ok := strings.Cut(f, "="); ok && strings.TrimSpace(strings.ToLower(k)) == "name" {
			return val
		}
	}
	return v
}

// ImageName returns IMAGE, "" when there is none.
func (p *Parsed) ImageName() string {
	if p.Image < 0 {
		return ""
	}
	return p.Args[p.Image]
}

// WithFlags returns the run with flags in front of the user's arguments.
func (p *Parsed) WithFlags(flags []string) *Parsed {
	q := *p
	q.Args = append(append([]string{}, flags...), p.Args...)
	if p.Image >= 0 {
		q.Image = p.Image + len(flags)
	}
	return &q
}
