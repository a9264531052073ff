package driver

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/rdma-macvlan/rdma-macvlan/netns"
	"github.com/rdma-macvlan/rdma-macvlan/rdma"
	"github.com/sirupsen/logrus"
)

// A parent's RDMA port is the port whose netdev, as the kernel ties them,
// is the parent's real device (the parent, or the non-VLAN device under
// its VLANs): a bond with its own RDMA device (RoCE LAG, mlx5_bond_0) is
// that device's port, whatever PCI function the device sits under. The
// kernel says so through RDMA netlink (rdma link show's netdev column);
// sysfs, which shows it only through device links and GID tables, is the
// fallback.

// RDMAPorts is the kernel's view of each RDMA port's netdev (RDMA
// netlink). *netns.Handle implements it.
type RDMAPorts interface {
	RdmaPortNetdevs() ([]netns.RdmaPortNetdev, error)
}

// kernelPortView returns the kernel's view of every RDMA port, or ok false
// when the driver has none to ask (a fake sysfs root describes another
// world than the kernel's) or the kernel does not answer.
func (d *Driver) kernelPortView() (view []netns.RdmaPortNetdev, ok bool) {
	if d.rdmaPorts == nil {
		return nil, false
	}
	view, err := d.rdmaPorts.RdmaPortNetdevs()
	switch {
	case errors.Is(err, netns.ErrNoRdmaNetlink):
		d.log.WithError(err).Debug("no RDMA netlink: finding RDMA ports through sysfs")
		return nil, false
	case err != nil:
		d.log.WithError(err).Warn("RDMA netlink port query failed: finding RDMA ports through sysfs")
		return nil, false
	}
	return view, true
}

// kernelPortsOf picks from view the ports whose netdev is l (by ifindex)
// and that sysfs shows too. ok is false when none does, or when a port
// the kernel names is missing from sysfs (a sysfs that is not the
// kernel's, or a device going away): the caller then asks sysfs.
func (d *Driver) kernelPortsOf(l netns.Link, view []netns.RdmaPortNetdev) (ports []rdma.HCAPort, ok bool) {
	for _, p := range view {
		if p.NetdevIndex != l.Index || l.Index == 0 {
			continue
		}
		sysPorts, err := d.rdma.Ports(p.HCA)
		if err != nil || !slices.Contains(sysPorts, p.Port) {
			d.log.WithFields(logrus.Fields{"netdev": l.Name, "ibdev": p.HCA, "port": p.Port, "sysfs_ports": sysPorts}).WithError(err).
				Warn("RDMA netlink names a port that sysfs does not show: finding the netdev's RDMA port through sysfs")
			return nil, false
		}
		ports = append(ports, rdma.HCAPort{HCA: p.HCA, Port: p.Port})
	}
	return ports, len(ports) > 0
}

// hcaPortsForNetdev returns the HCA ports of netdev, a real (non-VLAN)
// device of the host: those the kernel ties to it (RDMA netlink) when the
// driver reads the host's sysfs and the kernel names one, otherwise what
// sysfs shows (rdma.Sysfs.HCAPortsForNetdev). Errors wrap
// rdma.ErrNoRDMADevice when neither finds one.
func (d *Driver) hcaPortsForNetdev(netdev string) ([]rdma.HCAPort, error) {
	if view, ok := d.kernelPortView(); ok {
		if l, err := d.links.LinkByName(netdev); err == nil {
			if ports, ok := d.kernelPortsOf(l, view); ok {
				d.log.WithFields(logrus.Fields{"netdev": netdev, "ports": ports}).Debug("RDMA port of the netdev from the kernel's RDMA netlink view")
				return ports, nil
			}
		}
	}
	return d.rdma.HCAPortsForNetdev(netdev)
}

// ownPorts returns the RDMA ports whose own netdev is l: by the kernel's
// view when there is one, else those of sysfs's candidates whose default
// GID names l (see rdma.Sysfs.PortNetdev). A bond slave's GID table also
// holds the bond's entries, so sysfs's candidates for a bond include the
// active slave's port: only the netdev a port's default GID names is the
// port's own. That sysfs rule holds on the fake trees only: a real 6.1
// kernel put the bond's default GID in slot 0 of every port of a bond
// without LAG (Soft-RoCE), so on a kernel without RDMA netlink's port
// view such a bond would pass for one with its own device.
func (d *Driver) ownPorts(l netns.Link, view []netns.RdmaPortNetdev, viewOK bool) []rdma.HCAPort {
	if viewOK {
		ports, ok := d.kernelPortsOf(l, view)
		if ok {
			return ports
		}
		if !viewNames(view, l) {
			// The kernel ties no port to l: it has none of its own,
			// whatever GID tables hold l's entries (a bond's entries
			// sit in its ports' tables).
			return nil
		}
	}
	cands, err := d.rdma.HCAPortsForNetdev(l.Name)
	if err != nil {
		return nil
	}
	var own []rdma.HCAPort
	for _, c := range cands {
		if d.rdma.PortNetdev(c.HCA, c.Port) == l.Name {
			own = append(own, c)
		}
	}
	return own
}

// viewNames reports whether the kernel's view ties any port to l.
func viewNames(view []netns.RdmaPortNetdev, l netns.Link) bool {
	return l.Index != 0 && slices.ContainsFunc(view, func(p netns.RdmaPortNetdev) bool { return p.NetdevIndex == l.Index })
}

// masterWords names a master's kind in messages.
func masterWords(m netns.Link) string {
	if w, ok := rxMasters[m.Kind]; ok {
		return w
	}
	return m.Kind + " master"
}

// checkBondPorts refuses real, the real device of parent, when it is a
// bond (or another master) with no RDMA port of its own while its ports
// have RDMA ports of their own: no RoCE LAG. The kernel then adds every
// container's GID entries to every port's table (a macvlan on the master
// is an upper device of each port, and the port filter of
// roce_gid_mgmt.c takes uppers that are no bond of the port for its own),
// so one port's table in the network's record would not count the
// others', and each HCA sends its RoCE traffic out of its own port
// whatever the bond does: failover does not carry RDMA over.
//
// Only a parent of a kind of rxMasters is looked for ports (as
// bondProblem does): any other is let through without a dump of the
// host's links, which fails when links churn on the host faster than the
// kernel lists them (CreateNetwork on a plain NIC needs its parent and the
// devices under it, each looked up by name or index).
func (d *Driver) checkBondPorts(parent string, real netns.Link) error {
	if _, master := rxMasters[real.Kind]; !master {
		return nil
	}
	all, err := d.links.Links()
	if err != nil {
		return fmt.Errorf("list links to find the ports of %q (real device of parent %q): %w", real.Name, parent, err)
	}
	var slaves []netns.Link
	for _, l := range all {
		if l.MasterIndex == real.Index && l.Index != real.Index {
			slaves = append(slaves, l)
		}
	}
	if len(slaves) == 0 {
		return nil
	}
	view, viewOK := d.kernelPortView()
	if len(d.ownPorts(real, view, viewOK)) > 0 {
		return nil // RoCE LAG, or Soft-RoCE on the bond: its own device
	}
	slices.SortFunc(slaves, func(a, b netns.Link) int { return strings.Compare(a.Name, b.Name) })
	var withRDMA []string
	for _, s := range slaves {
		for _, p := range d.ownPorts(s, view, viewOK) {
			withRDMA = append(withRDMA, fmt.Sprintf("%s (RDMA device %s port %d)", s.Name, p.HCA, p.Port))
		}
	}
	if len(withRDMA) == 0 {
		return nil
	}
	via := ""
	if parent != real.Name {
		via = fmt.Sprintf(" (the real device of parent %q)", parent)
	}
	w := masterWords(real)
	return hostSetupf("%s %q%s has no RDMA device of its own, but its ports have theirs: %s. The kernel adds every container's GID entries to every port's table, and each RDMA device sends on its own port whatever the %s does, so RDMA on %s would neither fail over nor be counted right (check: rdma link show: no port names %s as its netdev): set up RoCE LAG so that the %s gets its own RDMA device (e.g. mlx5_bond_0, for a bond of the two ports of one ConnectX NIC), or take one port out of the %s (ip link set %s nomaster) and pass it as the parent",
		w, real.Name, via, strings.Join(withRDMA, ", "), w, real.Name, real.Name, w, w, slaves[0].Name)
}
