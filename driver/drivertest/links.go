// Package drivertest gives tests of the driver (and of what serves it) an
// in-memory link table in place of a network namespace.
package drivertest

import (
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"

	"github.com/rdma-macvlan/rdma-macvlan/netns"
	"golang.org/x/sys/unix"
)

// Links is an in-memory link table with the kernel's rules that matter to
// the driver: names are unique, a VLAN or macvlan needs its lower link,
// deleting a link deletes its uppers. It implements driver.Links, so the
// driver's logic runs without root and on kernels without 802.1Q; the
// privileged tests drive the real kernel.
type Links struct {
	mu    sync.Mutex
	links map[string]netns.Link // guarded by mu
	next  int                   // guarded by mu
	// NoVLAN makes CreateVLAN fail as on a kernel without CONFIG_VLAN_8021Q.
	NoVLAN bool
	// PeerErr makes PeerLinks fail (other namespaces cannot be read).
	PeerErr error
	// ListErr makes Links fail, as a dump of the link table fails when
	// the kernel keeps interrupting it (links churn on the host).
	ListErr error
	// sandboxed are the links moved into containers, by their host name.
	sandboxed map[string]netns.Link
}

// NewLinks returns a table with lo and a veth (MTU 1500) per parent name.
func NewLinks(parents ...string) *Links {
	f := &Links{links: map[string]netns.Link{}, next: 1}
	f.Add(netns.Link{Name: "lo", Kind: "device", EncapType: "loopback", MTU: 65536})
	for _, p := range parents {
		f.Add(netns.Link{Name: p, Kind: "veth", EncapType: "ether", MTU: 1500})
	}
	return f
}

// Add puts l into the table with the next ifindex (and a MAC if it has
// none) and returns it.
func (f *Links) Add(l netns.Link) netns.Link {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.addLocked(l)
}

func (f *Links) addLocked(l netns.Link) netns.Link {
	l.Index = f.next
	f.next++
	if l.MAC == nil {
		l.MAC = net.HardwareAddr{2, 0, 0, 0, 0, byte(l.Index)}
	}
	f.links[l.Name] = l
	return l
}

// Clone returns an independent copy of the table.
func (f *Links) Clone() *Links {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := &Links{links: make(map[string]netns.Link, len(f.links)), next: f.next, NoVLAN: f.NoVLAN}
	for n, l := range f.links {
		c.links[n] = l
	}
	if f.sandboxed != nil {
		c.sandboxed = make(map[string]netns.Link, len(f.sandboxed))
		for n, l := range f.sandboxed {
			c.sandboxed[n] = l
		}
	}
	return c
}

// Dump describes every link, sorted, for before/after comparisons.
func (f *Links) Dump() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, l := range f.links {
		out = append(out, fmt.Sprintf("%+v", l))
	}
	slices.Sort(out)
	return strings.Join(out, "\n")
}

// Has reports whether a link called name exists.
func (f *Links) Has(name string) bool {
	_, err := f.LinkByName(name)
	return err == nil
}

// Names lists the link names, sorted (ListErr or not).
func (f *Links) Names() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]string, 0, len(f.links))
	for n := range f.links {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// LinkByName implements driver.Links.
func (f *Links) LinkByName(name string) (netns.Link, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	l, ok := f.links[name]
	if !ok {
		return l, fmt.Errorf("link %q: %w", name, netns.ErrLinkNotFound)
	}
	return l, nil
}

// LinkByIndex implements driver.Links.
func (f *Links) LinkByIndex(idx int) (netns.Link, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, l := range f.links {
		if l.Index == idx {
			return l, nil
		}
	}
	return netns.Link{}, fmt.Errorf("index %d: %w", idx, netns.ErrLinkNotFound)
}

// Links implements driver.Links.
func (f *Links) Links() ([]netns.Link, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.ListErr != nil {
		return nil, f.ListErr
	}
	out := make([]netns.Link, 0, len(f.links))
	for _, l := range f.links {
		out = append(out, l)
	}
	return out, nil
}

// CreateMacvlan implements driver.Links.
func (f *Links) CreateMacvlan(s netns.MacvlanSpec) (netns.Link, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	p, ok := f.links[s.Parent]
	if !ok {
		return netns.Link{}, fmt.Errorf("parent %q: %w", s.Parent, netns.ErrLinkNotFound)
	}
	if _, ok := f.links[s.Name]; ok {
		return netns.Link{}, fmt.Errorf("create macvlan %s: %w", s.Name, unix.EEXIST)
	}
	if m, ok := f.masterLocked(p); ok && takesRx[m.Kind] {
		// A port's receive handler is its master's: macvlan_port_create
		// cannot register its own.
		return netns.Link{}, fmt.Errorf("create macvlan %s on %s (a port of %s): %w", s.Name, s.Parent, m.Name, unix.EBUSY)
	}
	mtu := s.MTU
	if mtu == 0 {
		mtu = p.MTU
	}
	if mtu > p.MTU {
		// The kernel refuses a macvlan larger than its lower device.
		return netns.Link{}, fmt.Errorf("create macvlan %s: mtu %d > %d of %s: %w", s.Name, mtu, p.MTU, s.Parent, unix.EINVAL)
	}
	return f.addLocked(netns.Link{Name: s.Name, Kind: "macvlan", EncapType: "ether", MTU: mtu, MAC: s.MAC,
		ParentIndex: p.Index, MacvlanMode: s.Mode, Alias: s.Alias}), nil
}

// CreateVLAN implements driver.Links.
func (f *Links) CreateVLAN(name, lower string, id int, alias string) (netns.Link, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.NoVLAN {
		return netns.Link{}, fmt.Errorf("create vlan %s: %w", name, unix.EOPNOTSUPP)
	}
	p, ok := f.links[lower]
	if !ok {
		return netns.Link{}, fmt.Errorf("lower %q: %w", lower, netns.ErrLinkNotFound)
	}
	if _, ok := f.links[name]; ok {
		return netns.Link{}, fmt.Errorf("create vlan %s: %w", name, unix.EEXIST)
	}
	return f.addLocked(netns.Link{Name: name, Kind: "vlan", EncapType: "ether", MTU: p.MTU, ParentIndex: p.Index, VLANID: id, Up: true, Alias: alias}), nil
}

// SetAlias implements driver.Links.
func (f *Links) SetAlias(name, alias string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	l, ok := f.links[name]
	if !ok {
		return fmt.Errorf("set alias of %s: %w", name, netns.ErrLinkNotFound)
	}
	l.Alias = alias
	f.links[name] = l
	return nil
}

// DeleteLink implements driver.Links; a missing link is not an error.
func (f *Links) DeleteLink(name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	l, ok := f.links[name]
	if !ok {
		return nil
	}
	delete(f.links, name)
	for n, u := range f.links {
		if u.ParentIndex == l.Index {
			delete(f.links, n)
		}
	}
	return nil
}

// MoveToSandbox takes the link called name out of the table into a
// container's namespace, as libnetwork does (Docker 28 and later before
// ProgramExternalConnectivity, older engines only after it), renamed eth0.
// It returns the link, to be put back with MoveBack or destroyed with its
// namespace by DestroySandbox.
func (f *Links) MoveToSandbox(name string) (netns.Link, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	l, ok := f.links[name]
	if !ok {
		return netns.Link{}, fmt.Errorf("move %s: %w", name, netns.ErrLinkNotFound)
	}
	delete(f.links, name)
	if f.sandboxed == nil {
		f.sandboxed = map[string]netns.Link{}
	}
	in := l
	in.Name = "eth0"
	f.sandboxed[name] = in
	return l, nil
}

// MoveBack puts l back into the table, as libnetwork does on Leave.
func (f *Links) MoveBack(l netns.Link) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.sandboxed, l.Name)
	f.links[l.Name] = l
}

// DestroySandbox destroys the namespace the link called name was moved
// into, and the link with it, as the kernel does when a container goes.
func (f *Links) DestroySandbox(name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.sandboxed, name)
}

// PeerLinks implements driver.Links: the links moved into sandboxes.
func (f *Links) PeerLinks(alias string) ([]netns.Link, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.PeerErr != nil {
		return nil, f.PeerErr
	}
	var out []netns.Link
	for _, l := range f.sandboxed {
		if l.Alias == alias {
			out = append(out, l)
		}
	}
	return out, nil
}

// takesRx are the kinds of master that register a receive handler on each
// port they enslave, as the kernel's bonding, bridge, Open vSwitch, team
// and HSR drivers do; a VRF does not.
var takesRx = map[string]bool{"bond": true, "bridge": true, "openvswitch": true, "team": true, "hsr": true}

// masterLocked returns the master of l, if it has one in the table.
func (f *Links) masterLocked(l netns.Link) (netns.Link, bool) {
	if l.MasterIndex == 0 {
		return netns.Link{}, false
	}
	for _, m := range f.links {
		if m.Index == l.MasterIndex {
			return m, true
		}
	}
	return netns.Link{}, false
}

// SetMaster enslaves the link called name to master (a link of the table,
// of Kind "bond", "bridge", "openvswitch", "team", "vrf", ...), or frees it
// when master is "", as ip link set $name master $master (nomaster) does.
// As in the kernel, a link with macvlans on it cannot become the port of a
// master that takes its receive handler (EBUSY).
func (f *Links) SetMaster(name, master string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	l, ok := f.links[name]
	if !ok {
		return fmt.Errorf("set master of %s: %w", name, netns.ErrLinkNotFound)
	}
	if master == "" {
		l.MasterIndex = 0
		f.links[name] = l
		return nil
	}
	m, ok := f.links[master]
	if !ok {
		return fmt.Errorf("set master of %s: master %q: %w", name, master, netns.ErrLinkNotFound)
	}
	if takesRx[m.Kind] {
		for _, u := range f.links {
			if u.ParentIndex == l.Index && u.Kind == "macvlan" {
				return fmt.Errorf("enslave %s to %s: macvlan %s uses it: %w", name, master, u.Name, unix.EBUSY)
			}
		}
	}
	l.MasterIndex = m.Index
	f.links[name] = l
	return nil
}

// SetMTU sets the MTU of the link called name.
func (f *Links) SetMTU(name string, mtu int) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	l, ok := f.links[name]
	if !ok {
		return fmt.Errorf("set mtu of %s: %w", name, netns.ErrLinkNotFound)
	}
	l.MTU = mtu
	f.links[name] = l
	return nil
}

// MacvlanOf returns a macvlan link on parent with ifalias alias, as the
// driver creates them, to Add.
func MacvlanOf(f *Links, name, parent, alias string) netns.Link {
	p, _ := f.LinkByName(parent)
	return netns.Link{Name: name, Kind: "macvlan", EncapType: "ether", MTU: p.MTU, ParentIndex: p.Index, MacvlanMode: "bridge", Alias: alias}
}
