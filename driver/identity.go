package driver

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/rdma-macvlan/rdma-macvlan/cdi"
	"github.com/rdma-macvlan/rdma-macvlan/rdma"
	"github.com/sirupsen/logrus"
)

// The HCA behind a network's parent is found again at every start: kernel
// names (mlx5_N) follow probe order and udev may rename devices, so the
// name recorded at CreateNetwork can name another NIC after a reboot. The
// parent is what the containers' macvlans hang on, and so what their GID
// entries follow; the HCA's identity (node GUID, PCI function) recorded
// with the network tells a renamed device from another one, and picks the
// right one when the parent has several.

// hcaResolution is what resolveHCA found for one network.
type hcaResolution struct {
	r       *networkRDMA // the port now; nil with a problem
	renamed bool         // the HCA's name or port differs from the record's
	other   bool         // the parent's HCA is another device than the recorded one
	problem string       // why the network has no HCA now
}

// resolveHCA finds the HCA port of network n's parent as the host is now.
// It asks the kernel (RDMA netlink) and sysfs (see ports.go). A parent
// with no RDMA device, or with several that the recorded identity does
// not tell apart, is a problem: the network is never pointed at a device
// that may be another NIC's.
func (d *Driver) resolveHCA(n *network) hcaResolution {
	old := n.RDMA
	netdev := old.Netdev
	if netdev == "" {
		netdev = n.Parent
	}
	was := fmt.Sprintf("%s port %d (%s)", old.HCA, old.Port, old.identity())
	cands, err := d.hcaPortsForNetdev(netdev)
	if err != nil {
		return hcaResolution{problem: fmt.Sprintf("the RDMA device of parent %q is gone (it was %s): %v; new containers are refused and its CDI spec is removed: bring the device back (check: rdma link show; the next container looks again), or remove the network",
			n.Parent, was, err)}
	}
	ids := make([]rdma.Identity, len(cands))
	for i, c := range cands {
		ids[i], _ = d.rdma.Identity(c.HCA) // unreadable: matches nothing
	}
	pick := -1
	other := false
	switch {
	case old.identity().Known():
		var same []int
		for i := range cands {
			if ids[i].Same(old.identity()) {
				same = append(same, i)
			}
		}
		switch {
		case len(same) == 1:
			pick = same[0]
		case len(same) > 1: // ports of one device: the recorded port
			for _, i := range same {
				if cands[i].Port == old.Port {
					pick = i
				}
			}
		case len(cands) == 1:
			// The parent's device is another one (a NIC replaced in
			// its slot): the containers' entries go where the parent
			// is, so follow it.
			pick, other = 0, true
		}
	default: // a record of a version before identities: the name
		for i, c := range cands {
			if c.HCA == old.HCA && c.Port == old.Port {
				pick = i
			}
		}
		if pick < 0 && len(cands) == 1 {
			pick = 0
		}
	}
	if pick < 0 {
		names := make([]string, len(cands))
		for i, c := range cands {
			names[i] = fmt.Sprintf("%s (%s)", c, ids[i])
		}
		return hcaResolution{problem: fmt.Sprintf("parent %q has several RDMA device ports now (%s) and none is the recorded %s; new containers are refused and its CDI spec is removed: remove the network and create it again with -o rdma_device=<one of them>",
			n.Parent, strings.Join(names, ", "), was)}
	}
	c, id := cands[pick], ids[pick]
	r := *old
	r.NodeGUID, r.PCI = id.NodeGUID, id.PCI
	res := hcaResolution{r: &r, other: other, renamed: c.HCA != old.HCA || c.Port != old.Port}
	if res.renamed || other {
		r.HCA, r.Port = c.HCA, c.Port
		r.Types = d.rdma.RoCETypesPerAddress(c.HCA, c.Port)
		name, err := cdi.NameOnHost(d.rdma, c.HCA, c.Port)
		if err != nil {
			name = c.HCA
		}
		r.CDIName = name
	}
	return res
}

// followHCAs resolves the HCA of every network of nets at start, before
// its CDI spec is rewritten and before admission counts its table: a
// renamed HCA is followed (and the record saved), a gone or ambiguous one
// is recorded as the network's hcaProblem. It runs before the driver
// serves calls.
func (d *Driver) followHCAs(nets []*netState, log *logrus.Entry) {
	for _, n := range nets {
		if n.RDMA == nil {
			continue
		}
		l := log.WithFields(logrus.Fields{"nid": ShortID(n.ID), "parent": n.Parent})
		res := d.resolveHCA(n.network)
		if res.problem != "" {
			n.hcaProblem = res.problem
			l.WithFields(logrus.Fields{"ibdev": n.RDMA.HCA, "port": n.RDMA.Port}).WithField("problem", res.problem).
				Error("the network's RDMA device is not found; its containers cannot start")
			continue
		}
		if *res.r == *n.RDMA {
			continue
		}
		from := *n.RDMA
		n.RDMA = res.r
		switch {
		case res.other:
			l.WithFields(logrus.Fields{"from": fmt.Sprintf("%s/%d (%s)", from.HCA, from.Port, from.identity()), "to": fmt.Sprintf("%s/%d (%s)", res.r.HCA, res.r.Port, res.r.identity())}).
				Warn("the parent's RDMA device is another NIC than the one recorded: following the parent")
		case res.renamed:
			l.WithFields(logrus.Fields{"from": fmt.Sprintf("%s/%d", from.HCA, from.Port), "to": fmt.Sprintf("%s/%d", res.r.HCA, res.r.Port), "identity": res.r.identity().String(), "cdi_device": res.r.CDIName}).
				Warn("the network's RDMA device was renamed (another probe order, or a udev rename): following it")
		}
		if err := d.store.saveNetwork(n.network); err != nil {
			l.WithError(err).Error("could not record the network's RDMA device; it is found again at the next start")
		}
	}
}

// refindHCA looks again for the HCA of network nid when it was not found
// at start: at boot the plugin may start before the NIC's RDMA driver
// (mlx5_ib) has registered the device, or before a NIC renamed by udev
// has its name. Found now (by the same rules as at start), the network
// takes it: the record is saved, the CDI spec written and the problem
// dropped, so containers are not refused until a restart. Not found, the
// problem stays. Caller holds no lock.
func (d *Driver) refindHCA(nid string, log *logrus.Entry) {
	d.mu.Lock()
	n, ok := d.networks[nid]
	lost := ok && n.hcaProblem != ""
	d.mu.Unlock()
	if !lost {
		return
	}
	d.netsMu.Lock()
	defer d.netsMu.Unlock()
	n, ok = d.networks[nid] // the map changes only with d.netsMu held too
	if !ok || n.RDMA == nil || n.hcaProblem == "" {
		return
	}
	found := *n.network
	res := d.resolveHCA(&found)
	if res.problem != "" {
		return
	}
	found.RDMA = res.r
	d.fillCDIName(&found, log)
	l := log.WithFields(logrus.Fields{"nid": ShortID(nid), "parent": n.Parent, "ibdev": found.RDMA.HCA, "port": found.RDMA.Port})
	if err := d.store.saveNetwork(&found); err != nil {
		l.WithError(err).Error("the network's RDMA device is found now, but its record could not be saved; it stays refused")
		return
	}
	if err := d.writeCDI(*found.RDMA, &found, "", l); err != nil {
		l.WithError(err).Warn("the network's RDMA device is found now, but its CDI spec could not be written: --device rdma-macvlan/hca=... fails until it is")
	}
	d.mu.Lock()
	n.RDMA = found.RDMA
	n.hcaProblem = ""
	// Its endpoints (restored at start, while the device was missing) were
	// left out of the GID tracker: admission counts them from now on, and
	// those in a container are watched again.
	for e := range d.live {
		if e.NetworkID == nid {
			d.track(&e.endpoint, time.Time{})
			if e.Sandbox != "" && !e.RDMAReady {
				d.gids.Watch(e.ID)
				e.phase = epResumed
			}
		}
	}
	d.mu.Unlock()
	l.Warn("the network's RDMA device is found now (it was not at start): its containers are taken again")
}

// errHCAProblem refuses an endpoint of a network whose RDMA device is not
// found.
func errHCAProblem(n *network, problem string) error {
	return hostSetupf("network %s cannot take containers: %s", ShortID(n.ID), problem)
}

// A device registered again while the daemon runs (a RoCE LAG toggle, a
// devlink or driver reload, a firmware reset) can come back with another
// uverbs number, and with another name or port: the CDI spec written for it
// then gives new containers a node of another device, or none. It is
// noticed before each container's endpoint is created and at each status
// read, by the device nodes and identity of the recorded HCA against those
// the spec lists.

// specCurrent reports whether the CDI spec written for r (nodes written)
// still matches the device: its nodes and its identity.
func (d *Driver) specCurrent(r networkRDMA, written []rdma.DeviceNode) bool {
	nodes, err := d.rdma.DeviceNodes(r.HCA)
	if err != nil && !errors.Is(err, rdma.ErrNoRdmaCM) || !slices.Equal(nodes, written) {
		return false
	}
	if !r.identity().Known() {
		return true
	}
	id, err := d.rdma.Identity(r.HCA)
	return err == nil && id.Same(r.identity())
}

// recheckHCA finds network nid's HCA again when its CDI spec no longer
// matches the device (see specCurrent): the network takes the port as
// resolveHCA finds it now (the record saved when it moved), and its spec is
// rewritten (a spec under the old name is removed, or rewritten for the
// networks still on it). A device not found is left to the status's
// problem and the next look. Called without locks.
func (d *Driver) recheckHCA(nid string, log *logrus.Entry) {
	d.mu.Lock()
	n, ok := d.networks[nid]
	var r networkRDMA
	var written []rdma.DeviceNode
	known := false
	if ok && n.RDMA != nil && n.hcaProblem == "" {
		r = *n.RDMA
		written, known = d.cdiNodes[r.cdiName()]
	}
	d.mu.Unlock()
	if !known || d.specCurrent(r, written) {
		return
	}
	d.netsMu.Lock()
	defer d.netsMu.Unlock()
	n, ok = d.networks[nid] // the map changes only with d.netsMu held too
	if !ok || n.RDMA == nil || n.hcaProblem != "" || *n.RDMA != r {
		return // changed meanwhile: the next look sees it as it is
	}
	l := log.WithFields(logrus.Fields{"nid": ShortID(nid), "parent": n.Parent})
	found := *n.network
	res := d.resolveHCA(&found)
	if res.problem != "" {
		l.WithField("problem", res.problem).Debug("the network's RDMA device changed while running and is not found again yet: its CDI spec is stale")
		return
	}
	found.RDMA = res.r
	if *res.r != r {
		if err := d.store.saveNetwork(&found); err != nil {
			l.WithError(err).Error("the network's RDMA device moved while running, but its record could not be saved; its CDI spec stays stale")
			return
		}
	}
	if err := d.writeCDI(*found.RDMA, &found, "", l); err != nil {
		l.WithError(err).Warn("the network's RDMA device was registered again while running, but its CDI spec could not be rewritten")
		return
	}
	d.mu.Lock()
	n.RDMA = found.RDMA
	d.mu.Unlock()
	if old := r.cdiName(); old != found.RDMA.cdiName() {
		d.removeCDIUnlessUsed(old, "", l)
	}
	d.mu.Lock()
	nodes := d.cdiNodes[found.RDMA.cdiName()]
	d.mu.Unlock()
	l.WithFields(logrus.Fields{"from": fmt.Sprintf("%s/%d %s", r.HCA, r.Port, nodePaths(written)), "to": fmt.Sprintf("%s/%d %s", found.RDMA.HCA, found.RDMA.Port, nodePaths(nodes))}).
		Warn("the network's RDMA device was registered again while running (a LAG toggle, a devlink or driver reload): its CDI spec is rewritten; containers started before have the old device node: restart them")
}

// specProblem says why the CDI spec written for r (nodes written) does not
// match the device's nodes now read; "" when it does.
func specProblem(r networkRDMA, written []rdma.DeviceNode, now []rdma.DeviceNode) string {
	if slices.Equal(written, now) {
		return ""
	}
	return fmt.Sprintf("the CDI spec of %s lists %s, but %s has %s now (the device was registered again: a LAG toggle, a devlink or driver reload): "+
		"the spec is rewritten at this status read or the next container start; containers started before have the old node: restart them",
		cdi.Qualified(r.cdiName()), nodePaths(written), r.HCA, nodePaths(now))
}

func nodePaths(nodes []rdma.DeviceNode) string {
	if len(nodes) == 0 {
		return "no node"
	}
	s := make([]string, len(nodes))
	for i, n := range nodes {
		s[i] = fmt.Sprintf("%s (%d:%d)", n.Path, n.Major, n.Minor)
	}
	return strings.Join(s, ", ")
}
