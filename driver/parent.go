package driver

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/rdma-macvlan/rdma-macvlan/api"
	"github.com/rdma-macvlan/rdma-macvlan/netns"
	"github.com/rdma-macvlan/rdma-macvlan/rdma"
	"github.com/sirupsen/logrus"
	"golang.org/x/sys/unix"
)

// splitVLAN splits a parent name of the form IFNAME.VLAN. ok is false when
// the name has no numeric suffix; id may then still be out of range.
func splitVLAN(parent string) (lower string, id int, ok bool) {
	i := strings.LastIndexByte(parent, '.')
	if i <= 0 || i == len(parent)-1 {
		return "", 0, false
	}
	suffix := parent[i+1:]
	for _, c := range suffix {
		if c < '0' || c > '9' {
			return "", 0, false
		}
	}
	id, err := strconv.Atoi(suffix)
	if err != nil {
		return "", 0, false
	}
	return parent[:i], id, true
}

// checkParentConflicts enforces that a passthru network has its parent to
// itself. Caller holds d.netsMu.
func (d *Driver) checkParentConflicts(parent, mode string) error {
	for _, other := range d.networks {
		if other.Parent != parent {
			continue
		}
		if other.Mode == api.ModePassthru {
			return conflictf("parent %q is taken by network %s in passthru mode, which allows no other network on it: use another parent, or a VLAN (-o parent=%s.<vlan id>)",
				parent, ShortID(other.ID), parent)
		}
		if mode == api.ModePassthru {
			return conflictf("macvlan_mode=passthru needs parent %q to itself, but network %s uses it: use -o macvlan_mode=bridge, or another parent",
				parent, ShortID(other.ID))
		}
	}
	return nil
}

// parentPlan is what CreateNetwork learned about a parent before changing
// anything.
type parentPlan struct {
	vlan       *VLAN  // nil: not a VLAN sub-interface
	createVLAN bool   // the VLAN sub-interface is missing and will be created
	mtu        int    // the largest MTU a child may have
	mtuOf      string // the link that MTU comes from
	// real is the device under every VLAN of the parent (the parent
	// itself when it is no VLAN): where the RDMA device sits, as the
	// kernel's GID entries of a VLAN name its real device.
	real string
	// vlans are the parent's VLAN and those under it, top first (a VLAN
	// to be created included); nil when the parent is no VLAN.
	vlans []netns.Link
}

// maxVLANDepth bounds the walk down a stack of VLANs (QinQ is two; the
// kernel allows more, and a loop must not hang the walk).
const maxVLANDepth = 8

// vlanStack walks down from top, a VLAN sub-interface, through the VLANs
// it sits on (802.1Q or 802.1ad, any depth up to maxVLANDepth): vlans are
// top and the VLANs under it, top first; real is the first link under them
// that is no VLAN.
func (d *Driver) vlanStack(top netns.Link) (vlans []netns.Link, real netns.Link, err error) {
	l := top
	for l.Kind == "vlan" {
		vlans = append(vlans, l)
		if len(vlans) > maxVLANDepth {
			return nil, netns.Link{}, invalidf("parent %q sits on more than %d VLANs (%s, ...): pass a parent with %d VLANs or fewer over its real device",
				top.Name, maxVLANDepth, chainNames(vlans), maxVLANDepth)
		}
		lower, err := d.links.LinkByIndex(l.ParentIndex)
		if err != nil {
			return nil, netns.Link{}, fmt.Errorf("look up the lower device (ifindex %d) of VLAN %q, under parent %q (%s): %w",
				l.ParentIndex, l.Name, top.Name, chainNames(vlans), err)
		}
		l = lower
	}
	return vlans, l, nil
}

// chainNames writes a stack of links as "a on b on c".
func chainNames(ls []netns.Link) string {
	names := make([]string, len(ls))
	for i, l := range ls {
		names[i] = l.Name
	}
	return strings.Join(names, " on ")
}

// vlanSuffix is the ".<id>..." that the VLANs of vlans (top first) add to
// the name of the device under them, outer id first: ".100.200" for
// p0.100.200 on p0.100 on p0.
func vlanSuffix(vlans []netns.Link) string {
	var b strings.Builder
	for i := len(vlans) - 1; i >= 0; i-- {
		b.WriteString("." + strconv.Itoa(vlans[i].VLANID))
	}
	return b.String()
}

// planParent checks the parent (or, for a missing IFNAME.VLAN, its lower
// device and VLAN id) without changing anything.
func (d *Driver) planParent(name string) (parentPlan, error) {
	link, err := d.links.LinkByName(name)
	switch {
	case err == nil:
		if err := checkParentLink(name, link); err != nil {
			return parentPlan{}, err
		}
		if err := d.checkMaster(name, link); err != nil {
			return parentPlan{}, err
		}
		plan := parentPlan{mtu: link.MTU, mtuOf: name, real: name}
		real := link
		if link.Kind == "vlan" {
			vlans, bottom, err := d.vlanStack(link)
			if err != nil {
				return parentPlan{}, err
			}
			if err := d.checkStackMasters(name, false, vlans, bottom); err != nil {
				return parentPlan{}, err
			}
			// Ours when it carries our mark (a crash after creating it
			// lost the network's record) or another network shares it.
			plan.vlan = &VLAN{ID: link.VLANID, Created: link.Alias == d.owner || d.ownsVLAN(name), Lower: bottom.Name}
			if len(vlans) > 1 {
				plan.vlan.Lower = vlans[1].Name
			}
			plan.real, real, plan.vlans = bottom.Name, bottom, vlans
		}
		if err := d.checkBondPorts(name, real); err != nil {
			return parentPlan{}, err
		}
		return plan, nil
	case !errors.Is(err, netns.ErrLinkNotFound):
		return parentPlan{}, fmt.Errorf("look up parent %q: %w", name, err)
	}

	lowerName, id, isVLAN := splitVLAN(name)
	if !isVLAN {
		return parentPlan{}, invalidf("parent %q not found (check: ip link show): pass -o parent=<RoCE netdev>, or <netdev>.<vlan id> to have a VLAN sub-interface created",
			name)
	}
	if id < 1 || id > maxVLANID {
		return parentPlan{}, invalidf("parent %q: VLAN id %d is outside 1-%d: use a VLAN id in that range", name, id, maxVLANID)
	}
	lower, err := d.links.LinkByName(lowerName)
	if errors.Is(err, netns.ErrLinkNotFound) {
		return parentPlan{}, invalidf("parent %q: its lower device %q not found (check: ip link show): pass -o parent=<RoCE netdev>.%d",
			name, lowerName, id)
	}
	if err != nil {
		return parentPlan{}, fmt.Errorf("look up %q, lower device of parent %q: %w", lowerName, name, err)
	}
	if err := checkParentLink(lowerName, lower); err != nil {
		return parentPlan{}, err
	}
	// The lower device may be a VLAN itself: the new one is stacked on it
	// (QinQ), and the RDMA device is under both.
	vlans, real := []netns.Link{{Name: name, Kind: "vlan", VLANID: id}}, lower
	if lower.Kind == "vlan" {
		below, bottom, err := d.vlanStack(lower)
		if err != nil {
			return parentPlan{}, err
		}
		vlans, real = append(vlans, below...), bottom
	}
	if err := d.checkStackMasters(name, true, vlans, real); err != nil {
		return parentPlan{}, err
	}
	if err := d.checkBondPorts(name, real); err != nil {
		return parentPlan{}, err
	}
	return parentPlan{
		vlan:       &VLAN{Lower: lowerName, ID: id, Created: true},
		createVLAN: true,
		mtu:        lower.MTU, // a new VLAN sub-interface takes its lower device's MTU
		mtuOf:      lowerName,
		real:       real.Name,
		vlans:      vlans,
	}, nil
}

// createVLAN creates the VLAN sub-interface name for v.
func (d *Driver) createVLAN(name string, v *VLAN) error {
	_, err := d.links.CreateVLAN(name, v.Lower, v.ID, d.owner)
	if errors.Is(err, unix.EOPNOTSUPP) {
		return fmt.Errorf("create VLAN sub-interface %s: this kernel has no 802.1Q VLAN support (CONFIG_VLAN_8021Q): load it (modprobe 8021q), or create the VLAN yourself and pass it as parent: %w", name, err)
	}
	if err != nil {
		return fmt.Errorf("create VLAN sub-interface %s (id %d on %s): %w", name, v.ID, v.Lower, err)
	}
	d.log.WithFields(logrus.Fields{"parent": name, "lower": v.Lower, "vlan": v.ID}).Info("vlan sub-interface created")
	return nil
}

// checkParentLink refuses links a macvlan cannot (or must not) hang off.
func checkParentLink(name string, l netns.Link) error {
	switch {
	case l.Loopback():
		return invalidf("parent %q is a loopback device: pass -o parent=<RoCE netdev>", name)
	case !l.Ethernet():
		return invalidf("parent %q is not an Ethernet device (link type %s); RoCE and macvlan need Ethernet: pass -o parent=<RoCE netdev>",
			name, l.EncapType)
	case l.Kind == "macvlan" && strings.HasPrefix(name, LinkPrefix):
		return invalidf("parent %q is a container link made by rdma-macvlan: pass -o parent=<RoCE netdev>", name)
	}
	return nil
}

// rxMasters are the kinds of master that take the receive handler of each
// port they enslave (netdev_rx_handler_register), by the words the
// messages use for them. A macvlan needs its lower device's receive handler
// for itself, so the kernel refuses a macvlan on such a port (EBUSY), and a
// port with macvlans cannot be enslaved to one. A VRF ("vrf") is not among
// them: it links its ports as an upper device only and sees their traffic
// through the l3mdev hooks, so a macvlan on a VRF port works.
var rxMasters = map[string]string{
	"bond":        "bond",
	"bridge":      "bridge",
	"openvswitch": "Open vSwitch datapath",
	"team":        "team",
	"hsr":         "HSR/PRP device",
}

// rxMaster returns the master l is enslaved to when it is one of
// rxMasters; ok is false when l has no master or one that leaves its
// receive handler free.
func (d *Driver) rxMaster(l netns.Link) (master netns.Link, ok bool, err error) {
	if l.MasterIndex == 0 {
		return netns.Link{}, false, nil
	}
	m, err := d.links.LinkByIndex(l.MasterIndex)
	if errors.Is(err, netns.ErrLinkNotFound) {
		return netns.Link{}, false, nil // freed while we looked
	}
	if err != nil {
		return netns.Link{}, false, fmt.Errorf("look up master (ifindex %d) of %q: %w", l.MasterIndex, l.Name, err)
	}
	_, ok = rxMasters[m.Kind]
	return m, ok, nil
}

// enslavedFix says what to do with name, a port of master: use the master
// (or, for Open vSwitch, whose master is the datapath, an internal port of
// the bridge) as the parent, or free the port.
func enslavedFix(name string, master netns.Link, vlan string) string {
	if master.Kind == "openvswitch" {
		return fmt.Sprintf("take %s out of its Open vSwitch bridge (ovs-vsctl del-port %s), or pass an internal port of that bridge as the parent", name, name)
	}
	return fmt.Sprintf("use the %s as the parent (-o parent=%s%s), or free the port (ip link set %s nomaster)",
		rxMasters[master.Kind], master.Name, vlan, name)
}

// enslavedMsg says why no macvlan can hang off name, a port of master.
func enslavedMsg(name string, master netns.Link) string {
	return fmt.Sprintf("parent %q is a port of %s %q (ip -d link show %s: master %s), which takes every frame %s receives, so the kernel refuses a macvlan on it (EBUSY): %s",
		name, rxMasters[master.Kind], master.Name, name, master.Name, name, enslavedFix(name, master, ""))
}

// checkMaster refuses a parent enslaved to a master that takes its
// receive handler.
func (d *Driver) checkMaster(name string, l netns.Link) error {
	master, ok, err := d.rxMaster(l)
	if err != nil {
		return err
	}
	if ok {
		return hostSetupf("%s", enslavedMsg(name, master))
	}
	return nil
}

// checkStackMasters refuses parent name, a VLAN sub-interface (isNew: one
// CreateNetwork would create), when a device under it is a port of such a
// master: vlans are name's VLAN and those under it (top first), real the
// device under them all. The kernel makes such a VLAN, and a macvlan on
// it, but the VLAN's frames bypass the master: the kernel hands a tagged
// frame to the VLAN sub-interface before the master's receive handler
// sees it, and the VLAN sends straight out of the port.
func (d *Driver) checkStackMasters(name string, isNew bool, vlans []netns.Link, real netns.Link) error {
	below := append(append([]netns.Link{}, vlans[1:]...), real)
	for i, l := range below {
		master, ok, err := d.rxMaster(l)
		if err != nil {
			return err
		}
		if !ok {
			continue
		}
		what := "is a VLAN sub-interface"
		if isNew {
			what = "would be a new VLAN sub-interface"
		}
		rel := "of"
		if i > 0 {
			rel = "stacked on " + chainNames(below[:i]) + " on"
		}
		return hostSetupf("parent %q %s %s %q, which is a port of %s %q (ip -d link show %s: master %s): the VLAN's traffic would bypass %s: %s",
			name, what, rel, l.Name, rxMasters[master.Kind], master.Name, l.Name, master.Name, master.Name, enslavedFix(l.Name, master, vlanSuffix(vlans[:i+1])))
	}
	return nil
}

// checkStackedVLANTags refuses parent name (isNew: a VLAN CreateNetwork
// would create), a VLAN stacked on other VLANs (vlans, top first, over
// real), when hca, its RDMA device, is not Soft-RoCE. A device that builds
// RoCE frames itself tags them with one VLAN per GID entry: mlx5 takes the
// GID netdev's own VLAN, else that of its first lower device, and the
// core's rdma_read_gid_l2_fields does the same, so a container's RoCE
// frames would leave with the top VLAN's tag only, while its other traffic
// carries every tag of the stack. rxe sends through the netdev stack,
// which adds them all.
func (d *Driver) checkStackedVLANTags(name string, isNew bool, vlans []netns.Link, real, hca string) error {
	if len(vlans) < 2 {
		return nil
	}
	drv := d.rdma.KernelDriver(hca)
	if drv == rdma.DriverRXE {
		return nil
	}
	dev := fmt.Sprintf("its RDMA device %s (kernel driver %s)", hca, drv)
	if drv == "" {
		dev = fmt.Sprintf("its RDMA device %s (kernel driver not named in sysfs, so taken for a NIC's)", hca)
	}
	what := "is"
	if isNew {
		what = "would be"
	}
	outer := make([]string, 0, len(vlans)-1)
	for i := len(vlans) - 1; i >= 1; i-- {
		outer = append(outer, strconv.Itoa(vlans[i].VLANID))
	}
	tags := "tag"
	if len(outer) > 1 {
		tags = "tags"
	}
	return hostSetupf("parent %q %s a VLAN on a VLAN (%s on %s), and %s puts one VLAN tag on each RoCE frame it sends: the containers' RoCE frames would carry only the inner tag %d, without the outer %s %s, while the rest of their traffic carries them all: pass a parent with a single VLAN on the port (-o parent=%s.<vlan id>), or use Soft-RoCE (rxe), which sends through the netdev stack, to test a stacked VLAN",
		name, what, chainNames(vlans), real, dev, vlans[0].VLANID, tags, strings.Join(outer, ", "), real)
}

// explainBusy turns the kernel's EBUSY for a macvlan on parent, of network
// networkID, into words when the parent was enslaved after the network was
// created; other errors, and an EBUSY it cannot explain, are returned as
// they are.
func (d *Driver) explainBusy(networkID, parent string, err error) error {
	if !errors.Is(err, unix.EBUSY) {
		return err
	}
	p, lerr := d.links.LinkByName(parent)
	if lerr != nil {
		return err
	}
	master, ok, lerr := d.rxMaster(p)
	if lerr != nil || !ok {
		return err
	}
	return hostSetupf("network %s: %s", ShortID(networkID), enslavedMsg(parent, master))
}

// ownsVLAN reports whether a network of the driver created (or shares) the
// VLAN sub-interface called name. Caller holds d.netsMu.
func (d *Driver) ownsVLAN(name string) bool {
	for _, n := range d.networks {
		if n.Parent == name && n.VLAN != nil && n.VLAN.Created {
			return true
		}
	}
	return false
}

// parentUsedByOthers reports whether another network has n's parent.
// Caller holds d.netsMu.
func (d *Driver) parentUsedByOthers(n *network) bool {
	for _, o := range d.networks {
		if o.ID != n.ID && o.Parent == n.Parent {
			return true
		}
	}
	return false
}

// deleteOwnedVLAN deletes n's VLAN sub-interface if it is still the one the
// driver made: a VLAN with the same id and this instance's mark.
func (d *Driver) deleteOwnedVLAN(n *network) error {
	l, err := d.links.LinkByName(n.Parent)
	if errors.Is(err, netns.ErrLinkNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("look up vlan sub-interface %s: %w", n.Parent, err)
	}
	if l.Kind != "vlan" || l.VLANID != n.VLAN.ID || l.Alias != d.owner {
		d.log.WithFields(logrus.Fields{"op": "DeleteNetwork", "parent": n.Parent, "kind": l.Kind, "ifalias": l.Alias}).
			Warn("parent is no longer the vlan sub-interface this rdma-macvlan instance created; leaving it")
		return nil
	}
	if err := d.links.DeleteLink(n.Parent); err != nil {
		return fmt.Errorf("delete vlan sub-interface %s: %w", n.Parent, err)
	}
	return nil
}
