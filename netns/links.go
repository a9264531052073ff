package netns

import (
	"errors"
	"fmt"
	"net"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Link is what rdma-macvlan needs to know about a link.
type Link struct {
	Name        string
	Index       int
	Kind        string // "veth", "macvlan", "vlan", "device" (physical), ...
	EncapType   string // "ether", "loopback", "infiniband", ...
	MTU         int
	MAC         net.HardwareAddr
	Up          bool
	ParentIndex int    // lower device of a macvlan or VLAN
	VLANID      int    // for Kind "vlan"
	MacvlanMode string // for Kind "macvlan": bridge, private, vepa, passthru, source
	Alias       string // ifalias: rdma-macvlan marks its links with its instance
	MasterIndex int    // IFLA_MASTER: the bond, bridge, OVS bridge, team or VRF the link is enslaved to; 0: none
}

// Loopback reports whether l is a loopback device.
func (l Link) Loopback() bool { return l.EncapType == "loopback" }

// Ethernet reports whether l carries Ethernet frames (what RoCE and macvlan need).
func (l Link) Ethernet() bool { return l.EncapType == "ether" }

var macvlanModes = map[string]netlink.MacvlanMode{
	"bridge":   netlink.MACVLAN_MODE_BRIDGE,
	"private":  netlink.MACVLAN_MODE_PRIVATE,
	"vepa":     netlink.MACVLAN_MODE_VEPA,
	"passthru": netlink.MACVLAN_MODE_PASSTHRU,
}

func modeName(m netlink.MacvlanMode) string {
	for name, v := range macvlanModes {
		if v == m {
			return name
		}
	}
	if m == netlink.MACVLAN_MODE_SOURCE {
		return "source"
	}
	return "unknown"
}

func toLink(l netlink.Link) Link {
	a := l.Attrs()
	out := Link{
		Name:        a.Name,
		Index:       a.Index,
		Kind:        l.Type(),
		EncapType:   a.EncapType,
		MTU:         a.MTU,
		MAC:         a.HardwareAddr,
		Up:          a.Flags&net.FlagUp != 0,
		ParentIndex: a.ParentIndex,
		Alias:       a.Alias,
		MasterIndex: a.MasterIndex,
	}
	switch v := l.(type) {
	case *netlink.Vlan:
		out.VLANID = v.VlanId
	case *netlink.Macvlan:
		out.MacvlanMode = modeName(v.Mode)
	}
	return out
}

// LinkByName returns the link called name, or an error wrapping ErrLinkNotFound.
// Equivalent to: ip -d link show dev $name
func (h *Handle) LinkByName(name string) (Link, error) {
	l, err := h.nl.LinkByName(name)
	if err != nil {
		if isNotFound(err) {
			return Link{}, fmt.Errorf("link %q: %w", name, ErrLinkNotFound)
		}
		return Link{}, fmt.Errorf("look up link %q: %w", name, err)
	}
	return toLink(l), nil
}

// LinkByIndex returns the link with ifindex idx.
// Equivalent to: ip -d link show | grep "^$idx:"
func (h *Handle) LinkByIndex(idx int) (Link, error) {
	l, err := h.nl.LinkByIndex(idx)
	if err != nil {
		if isNotFound(err) {
			return Link{}, fmt.Errorf("link index %d: %w", idx, ErrLinkNotFound)
		}
		return Link{}, fmt.Errorf("look up link index %d: %w", idx, err)
	}
	return toLink(l), nil
}

// Links lists every link of the namespace. A dump the kernel interrupts
// (links changed meanwhile) is tried again (see redump).
// Equivalent to: ip -d link show
func (h *Handle) Links() ([]Link, error) {
	ls, err := redump(h.linkTable(), h.nl.LinkList)
	if err != nil {
		return nil, fmt.Errorf("list links: %w", err)
	}
	out := make([]Link, 0, len(ls))
	for _, l := range ls {
		out = append(out, toLink(l))
	}
	return out, nil
}

// MacvlanSpec describes a macvlan child to create.
type MacvlanSpec struct {
	Name   string
	Parent string
	Mode   string // bridge, private, vepa or passthru
	MTU    int    // 0: inherit the parent's
	MAC    net.HardwareAddr
	Alias  string // ifalias to set (survives moves between namespaces)
}

// CreateMacvlan adds a macvlan child of spec.Parent, left down, and returns it.
// Equivalent to: ip link add link $parent name $name mtu $mtu address $mac type macvlan mode $mode; ip link set $name alias $alias
func (h *Handle) CreateMacvlan(spec MacvlanSpec) (Link, error) {
	mode, ok := macvlanModes[spec.Mode]
	if !ok {
		return Link{}, fmt.Errorf("create macvlan %s: unknown mode %q", spec.Name, spec.Mode)
	}
	parent, err := h.nl.LinkByName(spec.Parent)
	if err != nil {
		if isNotFound(err) {
			return Link{}, fmt.Errorf("create macvlan %s: parent %q: %w", spec.Name, spec.Parent, ErrLinkNotFound)
		}
		return Link{}, fmt.Errorf("create macvlan %s: look up parent %q: %w", spec.Name, spec.Parent, err)
	}
	attrs := netlink.NewLinkAttrs()
	attrs.Name = spec.Name
	attrs.ParentIndex = parent.Attrs().Index
	attrs.MTU = spec.MTU
	if len(spec.MAC) > 0 {
		attrs.HardwareAddr = spec.MAC
	}
	mv := &netlink.Macvlan{LinkAttrs: attrs, Mode: mode}
	if err := h.nl.LinkAdd(mv); err != nil {
		return Link{}, fmt.Errorf("create macvlan %s on %s: %w", spec.Name, spec.Parent, err)
	}
	l, err := h.nl.LinkByName(spec.Name)
	if err != nil {
		_ = h.nl.LinkDel(mv)
		return Link{}, fmt.Errorf("read back macvlan %s: %w", spec.Name, err)
	}
	if spec.Alias != "" {
		// The kernel ignores IFLA_IFALIAS when it creates a link.
		if err := h.nl.LinkSetAlias(l, spec.Alias); err != nil {
			_ = h.nl.LinkDel(l)
			return Link{}, fmt.Errorf("set alias of macvlan %s: %w", spec.Name, err)
		}
		l.Attrs().Alias = spec.Alias
	}
	return toLink(l), nil
}

// CreateVLAN adds the 802.1Q sub-interface name with id on lower, sets its
// ifalias to alias (unless "") and brings it up.
// Equivalent to: ip link add link $lower name $name type vlan id $id && ip link set $name alias $alias up
func (h *Handle) CreateVLAN(name, lower string, id int, alias string) (Link, error) {
	low, err := h.nl.LinkByName(lower)
	if err != nil {
		if isNotFound(err) {
			return Link{}, fmt.Errorf("create vlan %s: lower link %q: %w", name, lower, ErrLinkNotFound)
		}
		return Link{}, fmt.Errorf("create vlan %s: look up %q: %w", name, lower, err)
	}
	attrs := netlink.NewLinkAttrs()
	attrs.Name = name
	attrs.ParentIndex = low.Attrs().Index
	v := &netlink.Vlan{LinkAttrs: attrs, VlanId: id}
	if err := h.nl.LinkAdd(v); err != nil {
		return Link{}, fmt.Errorf("create vlan %s (id %d) on %s: %w", name, id, lower, err)
	}
	l, err := h.nl.LinkByName(name)
	if err == nil && alias != "" {
		if err = h.nl.LinkSetAlias(l, alias); err == nil {
			l.Attrs().Alias = alias
		}
	}
	if err == nil {
		err = h.nl.LinkSetUp(l)
	}
	if err == nil {
		// Read again: l is from before it was up.
		l, err = h.nl.LinkByName(name)
	}
	if err != nil {
		_ = h.nl.LinkDel(v)
		return Link{}, fmt.Errorf("bring up vlan %s: %w", name, err)
	}
	return toLink(l), nil
}

// SetAlias sets the ifalias of the link called name.
// Equivalent to: ip link set dev $name alias $alias
func (h *Handle) SetAlias(name, alias string) error {
	l, err := h.nl.LinkByName(name)
	if err != nil {
		if isNotFound(err) {
			return fmt.Errorf("set alias of %s: %w", name, ErrLinkNotFound)
		}
		return fmt.Errorf("look up link %q: %w", name, err)
	}
	if err := h.nl.LinkSetAlias(l, alias); err != nil {
		return fmt.Errorf("set alias of %s: %w", name, err)
	}
	return nil
}

// DeleteLink removes the link called name. A missing link is not an error:
// deletes are idempotent.
// Equivalent to: ip link del dev $name
func (h *Handle) DeleteLink(name string) error {
	l, err := h.nl.LinkByName(name)
	if err != nil {
		if isNotFound(err) {
			return nil
		}
		return fmt.Errorf("look up link %q: %w", name, err)
	}
	if err := h.nl.LinkDel(l); err != nil {
		if errors.Is(err, unix.ENODEV) {
			return nil
		}
		return fmt.Errorf("delete link %q: %w", name, err)
	}
	return nil
}
