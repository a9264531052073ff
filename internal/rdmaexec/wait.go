// Package rdmaexec is the logic of rdma-exec, the entrypoint `docker rdma
// run` puts in front of a workload: wait until the container's own RoCE GID
// entries are in its HCA ports' tables (as the container's /sys shows them:
// in the shared RDMA netns mode every container sees every HCA and its
// whole table), work out the environment NCCL and UCX need, and exec the
// workload. The sysfs root and the source of interfaces are parameters, so
// tests run it against fake trees.
package rdmaexec

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/rdma-macvlan/rdma-macvlan/internal/rdmaenv"
	"github.com/rdma-macvlan/rdma-macvlan/internal/sysattr"
)

// Network is one rdma-macvlan network of the container, as docker rdma run
// describes it.
type Network struct {
	Name string
	// HCA and Port serve the network; "" and 0 when docker rdma run could
	// not tell: every HCA and port the container sees is looked at.
	HCA  string
	Port int
	// Subnets are the network's subnets: the container's interface on it
	// is the one with an address in one of them. None: every interface
	// but loopback.
	Subnets []netip.Prefix
	// TrafficClass and ServiceLevel are the network's -o traffic_class and
	// service_level; nil when not set.
	TrafficClass, ServiceLevel *int
}

// QoS is the network's QoS as rdmaenv takes it.
func (n Network) QoS() rdmaenv.QoS {
	return rdmaenv.QoS{Network: n.Name, TrafficClass: n.TrafficClass, ServiceLevel: n.ServiceLevel}
}

// Iface is one network interface of the container.
type Iface struct {
	Name  string
	Addrs []netip.Prefix
}

// Config is what Wait needs.
type Config struct {
	Networks []Network
	Choice   rdmaenv.Choice
	Timeout  time.Duration
	Poll     time.Duration // default 100 ms
	// SysfsRoot is where sys/class/infiniband is read ("" is /).
	SysfsRoot string
	// Ifaces lists the container's interfaces and addresses.
	Ifaces func() ([]Iface, error)
	// AcceptMismatch starts the workload even when NCCL or UCX would use
	// another entry than the container's on some port.
	AcceptMismatch bool
}

// NotReadyError says why the container's entries did not appear.
type NotReadyError struct {
	Timeout time.Duration
	Reasons []string
}

func (e *NotReadyError) Error() string {
	return fmt.Sprintf("the container's RDMA GID entries did not appear within %s; the workload was not started:\n  %s",
		e.Timeout, strings.Join(e.Reasons, "\n  "))
}

// Wait polls until every network's interface has its own entry (see
// rdmaenv.Pick) and returns them in the order of cfg.Networks, or a
// *NotReadyError at the timeout, or ctx's error. Each look runs on a
// goroutine of its own, so that neither a read that never returns (a file
// system that hangs, whatever stands in a fake tree) nor the listing of
// interfaces holds Wait past the end of ctx, or more than overrun past its
// deadline: a look still under way then is left behind, for rdma-exec
// exits soon after.
func Wait(ctx context.Context, cfg Config) ([]rdmaenv.Port, error) {
	poll := cfg.Poll
	if poll <= 0 {
		poll = 100 * time.Millisecond
	}
	deadline := time.Now().Add(cfg.Timeout)
	for {
		var ports []rdmaenv.Port
		var missing []int
		done, err := within(ctx, deadline.Add(overrun), func() { ports, missing = look(cfg) })
		if err != nil {
			return nil, err
		}
		if !done {
			return nil, &NotReadyError{Timeout: cfg.Timeout, Reasons: []string{stuck(cfg, "a look at the container's interfaces and GID tables")}}
		}
		if len(missing) == 0 {
			return ports, nil
		}
		if !time.Now().Before(deadline) {
			var reasons []string
			done, err := within(ctx, time.Now().Add(overrun), func() { reasons = explain(cfg, missing) })
			if err != nil {
				return nil, err
			}
			if !done {
				reasons = []string{stuck(cfg, "looking into why the entries are missing")}
			}
			return nil, &NotReadyError{Timeout: cfg.Timeout, Reasons: reasons}
		}
		t := time.NewTimer(min(poll, time.Until(deadline)))
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		}
	}
}

// overrun is how long a look under way at the deadline may go on (a
// table of 1024 slots on a loaded host takes a good part of a second), and
// how long the reads that explain the timeout may take.
const overrun = 2 * time.Second

// within runs f on a goroutine of its own and says whether it returned
// before the deadline; ctx's error when ctx ends first. An f that has not
// returned goes on running, and must not write what the caller reads.
func within(ctx context.Context, deadline time.Time, f func()) (bool, error) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case <-done:
		return true, nil
	case <-ctx.Done():
		return false, ctx.Err()
	case <-t.C:
		return false, nil
	}
}

// stuck says that what did not finish in time, and where it reads.
func stuck(cfg Config, what string) string {
	return fmt.Sprintf("%s did not finish in time: a read under %s, or the listing of the container's interfaces, does not return (is %s the kernel's sysfs?)",
		what, filepath.Join(rootOr(cfg.SysfsRoot), "sys/class/infiniband"), filepath.Join(rootOr(cfg.SysfsRoot), "sys"))
}

// look makes one pass: the ports found, and the indexes of the networks
// whose entry is missing.
func look(cfg Config) ([]rdmaenv.Port, []int) {
	ifaces, err := cfg.Ifaces()
	var ports []rdmaenv.Port
	var missing []int
	for i, n := range cfg.Networks {
		if err != nil {
			missing = append(missing, i)
			continue
		}
		p, ok := find(cfg, n, ifaces)
		if !ok {
			missing = append(missing, i)
			continue
		}
		ports = append(ports, p)
	}
	return ports, missing
}

// find looks for the network's interface and its own entry on the
// network's port (or any port when it is not known).
func find(cfg Config, n Network, ifaces []Iface) (rdmaenv.Port, bool) {
	for _, ifc := range netIfaces(n, ifaces) {
		addrs := addrsOf(ifc)
		for _, hp := range portsOf(cfg.SysfsRoot, n) {
			table, size, err := rdmaenv.ReadTable(cfg.SysfsRoot, hp.hca, hp.port)
			if err != nil {
				continue
			}
			if e, a, ok := rdmaenv.Pick(table, addrs, ifc.Name, cfg.Choice); ok {
				return rdmaenv.Port{HCA: hp.hca, Port: hp.port, Ifname: ifc.Name, Index: e.Index, Addr: a, Table: table, Slots: size, QoS: n.QoS(), Subnets: n.Subnets}, true
			}
		}
	}
	return rdmaenv.Port{}, false
}

// netIfaces returns the interfaces with an address in one of the
// network's subnets (every interface but lo when it has none).
func netIfaces(n Network, ifaces []Iface) []Iface {
	var out []Iface
	for _, ifc := range ifaces {
		for _, a := range ifc.Addrs {
			in := len(n.Subnets) == 0 && !a.Addr().IsLoopback()
			for _, s := range n.Subnets {
				if s.Contains(a.Addr().Unmap()) {
					in = true
				}
			}
			if in {
				out = append(out, ifc)
				break
			}
		}
	}
	return out
}

func addrsOf(ifc Iface) []netip.Addr {
	out := make([]netip.Addr, 0, len(ifc.Addrs))
	for _, a := range ifc.Addrs {
		out = append(out, a.Addr())
	}
	return out
}

type hcaPort struct {
	hca  string
	port int
}

// portsOf returns the network's port, or every port of every HCA under
// root when the network's HCA or port is not known.
func portsOf(root string, n Network) []hcaPort {
	if n.HCA != "" && n.Port > 0 {
		return []hcaPort{{n.HCA, n.Port}}
	}
	hcas := []string{n.HCA}
	if n.HCA == "" {
		hcas = listDir(filepath.Join(rootOr(root), "sys/class/infiniband"))
	}
	var out []hcaPort
	for _, h := range hcas {
		for _, p := range listDir(filepath.Join(rootOr(root), "sys/class/infiniband", h, "ports")) {
			if i, err := strconv.Atoi(p); err == nil && i > 0 {
				out = append(out, hcaPort{h, i})
			}
		}
	}
	return out
}

func rootOr(root string) string {
	if root == "" {
		return "/"
	}
	return root
}

func listDir(dir string) []string {
	names, err := sysattr.ReadDir(dir)
	if err != nil {
		return nil
	}
	sort.Strings(names)
	return names
}

// explain says, for each missing network, why its entry is not there, as
// the daemon's /v1/status does: no address, an HCA the container cannot
// see, the entry on another HCA or for another netdev, a type the port does
// not add, a port that is not active, a full table.
func explain(cfg Config, missing []int) []string {
	ifaces, ierr := cfg.Ifaces()
	var out []string
	for _, i := range missing {
		n := cfg.Networks[i]
		what := "network " + n.Name + ": "
		if ierr != nil {
			out = append(out, what+"cannot list the container's interfaces: "+ierr.Error())
			continue
		}
		nifs := netIfaces(n, ifaces)
		if len(nifs) == 0 {
			out = append(out, what+fmt.Sprintf("no interface in the container has an address in %s (interfaces: %s); RoCE needs an IP address on it",
				prefixes(n.Subnets), describeIfaces(ifaces)))
			continue
		}
		ifc := nifs[0]
		cands := cfg.Choice.Candidates(addrsOf(ifc))
		if len(cands) == 0 {
			out = append(out, what+fmt.Sprintf("interface %s has no address of the family asked for (%s; addresses: %s)", ifc.Name, cfg.Choice, prefixes(ifc.Addrs)))
			continue
		}
		want := fmt.Sprintf("the %s entry of %s on %s", cfg.Choice.Type(), cands[0], ifc.Name)
		if n.HCA == "" {
			out = append(out, what+want+" is in no GID table the container can see (the network's HCA is not known: docker rdma run could not read it; check: docker rdma inspect)")
			continue
		}
		root := rootOr(cfg.SysfsRoot)
		if _, err := os.Stat(filepath.Join(root, "sys/class/infiniband", n.HCA)); err != nil {
			out = append(out, what+fmt.Sprintf("RDMA device %s is not visible in the container (%s): the host's RDMA subsystem is in exclusive netns mode, or the device is gone (check on the host: rdma system show; rdma dev)",
				n.HCA, filepath.Join(root, "sys/class/infiniband", n.HCA)))
			continue
		}
		table, size, err := rdmaenv.ReadTable(cfg.SysfsRoot, n.HCA, n.Port)
		if err != nil {
			out = append(out, what+fmt.Sprintf("cannot read the GID table of %s port %d: %v", n.HCA, n.Port, err))
			continue
		}
		reason := want + fmt.Sprintf(" did not appear in the table of %s port %d", n.HCA, n.Port)
		if elsewhere := onOtherPort(cfg, n, ifc); elsewhere != "" {
			out = append(out, what+reason+"; it is in the table of "+elsewhere+
				" instead: the network's parent is served by that device (check the network's parent and -o rdma_device)")
			continue
		}
		g := rdmaenv.GIDOf(cands[0])
		var others, types []string
		for _, e := range table {
			if e.GID != g {
				continue
			}
			if e.Ndev != ifc.Name && e.Ndev != "" {
				others = append(others, fmt.Sprintf("index %d for netdev %s", e.Index, e.Ndev))
			}
			if e.Ndev == ifc.Name && e.Type != cfg.Choice.Type() && e.Type != "" {
				types = append(types, e.Type)
			}
		}
		switch {
		case len(types) > 0:
			reason += fmt.Sprintf("; the port adds only %s entries for it (choose that version: docker rdma run --roce-version %s)", strings.Join(types, ", "), versionOf(types[0]))
		case len(others) > 0:
			reason += fmt.Sprintf("; the table has that address at %s: another container or the host has the same address", strings.Join(others, ", "))
		}
		free := size - len(table)
		if free <= 0 {
			reason += fmt.Sprintf("; the table is full (%d of %d entries used: the kernel drops new entries, logging __ib_cache_gid_add ... error=-28): stop containers on this port, then start this one again", len(table), size)
		} else {
			reason += fmt.Sprintf(" (%d of %d entries free)", free, size)
		}
		st, err := portState(root, n.HCA, n.Port)
		var notAttr *sysattr.Error
		switch {
		case errors.As(err, &notAttr):
			reason += fmt.Sprintf("; the port's state cannot be read: %v", err)
		case st != "" && st != "ACTIVE":
			reason += fmt.Sprintf("; the port is %s (check the cable and: rdma link show %s/%d)", st, n.HCA, n.Port)
		}
		out = append(out, what+reason)
	}
	return out
}

func versionOf(typ string) string {
	if typ == rdmaenv.TypeV1 {
		return "1"
	}
	return "2"
}

// onOtherPort names the port other than the network's where the
// interface's own entry is, or "".
func onOtherPort(cfg Config, n Network, ifc Iface) string {
	for _, hp := range portsOf(cfg.SysfsRoot, Network{}) {
		if hp.hca == n.HCA && hp.port == n.Port {
			continue
		}
		table, _, err := rdmaenv.ReadTable(cfg.SysfsRoot, hp.hca, hp.port)
		if err != nil {
			continue
		}
		if _, _, ok := rdmaenv.Pick(table, addrsOf(ifc), ifc.Name, cfg.Choice); ok {
			return fmt.Sprintf("%s port %d", hp.hca, hp.port)
		}
	}
	return ""
}

// portState reads a port's state without its number ("4: ACTIVE" ->
// "ACTIVE").
// Equivalent to: cat /sys/class/infiniband/HCA/ports/PORT/state
func portState(root, hca string, port int) (string, error) {
	s, err := sysattr.Read(filepath.Join(rdmaenv.PortDir(root, hca, port), "state"), nil)
	if err != nil {
		return "", err
	}
	if _, after, ok := strings.Cut(s, ": "); ok {
		return after, nil
	}
	return s, nil
}

func prefixes(ps []netip.Prefix) string {
	if len(ps) == 0 {
		return "none"
	}
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = p.String()
	}
	return strings.Join(s, ", ")
}

func describeIfaces(ifaces []Iface) string {
	if len(ifaces) == 0 {
		return "none"
	}
	s := make([]string, len(ifaces))
	for i, ifc := range ifaces {
		s[i] = ifc.Name + " [" + prefixes(ifc.Addrs) + "]"
	}
	return strings.Join(s, ", ")
}
