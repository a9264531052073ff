package driver

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/rdma-macvlan/rdma-macvlan/cdi"
	"github.com/rdma-macvlan/rdma-macvlan/rdma"
	"github.com/sirupsen/logrus"
)

// NetworkRDMA is what a network knows of the RDMA device behind its parent.
type NetworkRDMA struct {
	HCA    string `json:"hca"`
	Port   int    `json:"port"`
	Netdev string `json:"netdev"` // the real device: the parent, or its VLAN's lower device
	// Types is the number of RoCE types (GID entries per address) of the
	// port; 0 in records of older versions, filled in on first use.
	Types int `json:"roce_types,omitempty"`
	// CDIName is the CDI device name of the port (cdi.Name): the HCA's
	// name, or <hca>-p<port> on an HCA with more than one port. Records of
	// older versions have none; restore fills it in.
	CDIName string `json:"cdi_name,omitempty"`
}

// cdiName is the CDI device name of r: the one recorded, else the HCA's
// (what versions before per-port names published).
func (r *NetworkRDMA) cdiName() string {
	if r.CDIName != "" {
		return r.CDIName
	}
	return r.HCA
}

// detectRDMA maps the parent to its HCA port and checks that containers on
// it can use RDMA: Ethernet link layer, the shared RDMA netns mode and a
// uverbs node. A port that is down is only a warning: it may come up later.
func (d *Driver) detectRDMA(parent, netdev, override string, log *logrus.Entry) (*NetworkRDMA, error) {
	hca, port, err := d.rdma.HCAForNetdev(netdev)
	switch {
	case override != "" && err == nil && hca != override:
		return nil, invalidf("rdma_device %q does not belong to parent %q: its RDMA device is %s port %d (check: rdma link show): leave rdma_device out, or pass the parent of %s",
			override, parent, hca, port, override)
	case override != "" && err != nil:
		hca, port, err = d.overrideRDMA(parent, netdev, override, err)
		if err != nil {
			return nil, err
		}
	case errors.Is(err, rdma.ErrNoRDMADevice):
		return nil, hostSetupf("parent %q has no RDMA device (check: rdma link show): pass -o parent=<RoCE netdev>, or load its RDMA driver (e.g. modprobe mlx5_ib; for Soft-RoCE: rdma link add rxe0 type rxe netdev %s)",
			parent, netdev)
	case errors.Is(err, rdma.ErrAmbiguousRDMADevice):
		return nil, invalidf("parent %q: %v: pass -o rdma_device=<one of them>", parent, err)
	case err != nil:
		return nil, fmt.Errorf("find the RDMA device of parent %q: %w", parent, err)
	}

	pi, err := d.rdma.Port(hca, port)
	if err != nil {
		return nil, fmt.Errorf("read RDMA device %s port %d of parent %q: %w", hca, port, parent, err)
	}
	if pi.LinkLayer != "Ethernet" {
		return nil, hostSetupf("RDMA device %s port %d (parent %q) has link layer %s; rdma-macvlan needs RoCE, i.e. an Ethernet port (check: rdma link show %s/%d): use an Ethernet port, or switch the port type (e.g. mlxconfig ... LINK_TYPE_P%d=2)",
			hca, port, parent, pi.LinkLayer, hca, port, port)
	}
	if !pi.Active() {
		log.WithFields(logrus.Fields{"ibdev": hca, "port": port, "state": pi.State}).
			Warn("RDMA port is not active; containers get no RDMA traffic until it is (check: rdma link show)")
	}
	mode, source, err := rdma.NetnsMode(d.netnsMode, d.rdma)
	if err != nil {
		return nil, fmt.Errorf("cannot tell the RDMA netns mode (check: rdma system show netns): %w", err)
	}
	if mode != rdma.NetnsShared {
		return nil, hostSetupf("the RDMA subsystem is in %s netns mode (read from %s), which binds %s to one network namespace: containers need the shared mode. Fix at boot, before any container runs: rdma system set netns shared, or the ib_core module option netns_mode=1",
			mode, source, hca)
	}
	if _, err := d.rdma.DeviceNodes(hca); err != nil && !errors.Is(err, rdma.ErrNoRdmaCM) {
		return nil, fmt.Errorf("device nodes of RDMA device %s (parent %q): %w (check: ls /dev/infiniband; load ib_uverbs)", hca, parent, err)
	}
	cdiName, err := cdi.NameOnHost(d.rdma, hca, port)
	if err != nil {
		return nil, fmt.Errorf("CDI device name of RDMA device %s port %d (parent %q): %w", hca, port, parent, err)
	}
	return &NetworkRDMA{HCA: hca, Port: port, Netdev: netdev, Types: d.rdma.RoCETypesPerAddress(hca, port), CDIName: cdiName}, nil
}

// overrideRDMA checks -o rdma_device when detection found nothing or more
// than one device: the named device must have a port on netdev.
func (d *Driver) overrideRDMA(parent, netdev, override string, detectErr error) (string, int, error) {
	cands, err := d.rdma.HCAPortsForNetdev(netdev)
	if err != nil && !errors.Is(err, rdma.ErrAmbiguousRDMADevice) {
		cands = nil
	}
	var names []string
	for _, c := range cands {
		if c.HCA == override {
			return c.HCA, c.Port, nil
		}
		names = append(names, c.String())
	}
	if len(names) == 0 {
		return "", 0, invalidf("rdma_device %q does not belong to parent %q, which has no RDMA device (%v; check: rdma link show): pass the parent of %s",
			override, parent, detectErr, override)
	}
	return "", 0, invalidf("rdma_device %q does not belong to parent %q, whose RDMA devices are %s: pass one of them",
		override, parent, strings.Join(names, ", "))
}

// writeCDI writes the CDI spec of the HCA port r: its uverbs and rdma_cm
// nodes and the port's environment. It refuses to replace a spec another
// instance wrote, or what is no spec of this plugin (see ownCDI). Caller
// holds d.netsMu and not d.mu.
func (d *Driver) writeCDI(r NetworkRDMA, log *logrus.Entry) error {
	name := r.cdiName()
	if err := d.ownCDI(name); err != nil {
		return err
	}
	nodes, err := d.rdma.DeviceNodes(r.HCA)
	if errors.Is(err, rdma.ErrNoRdmaCM) {
		log.WithField("ibdev", r.HCA).Warn("no rdma_cm device (rdma_ucm not loaded): librdmacm applications will fail in containers; load it with modprobe rdma_ucm")
	} else if err != nil {
		return fmt.Errorf("device nodes of %s: %w", r.HCA, err)
	}
	d.beforeCDIIO("write", cdi.SpecPath(d.cdiDir, name))
	path, err := cdi.WriteSpec(d.cdiDir, cdi.Device{Name: name, HCA: r.HCA, Port: r.Port, Nodes: nodes, Netdev: r.Netdev, Owner: d.owner})
	if err != nil {
		return fmt.Errorf("write CDI spec for %s in %s: %w (check --cdi-dir, or the plugin's cdi mount)", name, d.cdiDir, err)
	}
	log.WithFields(logrus.Fields{"ibdev": r.HCA, "port": r.Port, "cdi_device": name, "file": path}).Debug("cdi spec written")
	return nil
}

func (d *Driver) beforeCDIIO(op, path string) {
	if d.cdiIO != nil {
		d.cdiIO(op, path)
	}
}

// ownCDI checks that the spec of the CDI device name is this instance's to
// write or remove: there is none, or it carries this instance's mark, or no
// mark at all (written by a version before the mark; adopted). A spec of
// another instance is a conflict: both would publish the same CDI device,
// which the engine refuses to resolve. So is anything at the spec's path
// that is not a spec of this plugin (a link, a FIFO, a directory, a file
// too long or of another kind): it is never read, replaced nor removed.
// Caller holds d.netsMu and not d.mu.
func (d *Driver) ownCDI(name string) error {
	path := cdi.SpecPath(d.cdiDir, name)
	d.beforeCDIIO("read", path)
	spec, ok, err := cdi.ReadSpec(d.cdiDir, name)
	switch {
	case errors.Is(err, cdi.ErrForeignSpec):
		return conflictf("%v: move it away if nothing else uses it, then try again", err)
	case err != nil:
		return err
	case !ok, spec.Owner() == "", spec.Owner() == d.owner:
		return nil
	}
	return conflictf("CDI device %s is already published by another rdma-macvlan instance (%q, in %s): one instance per HCA port; use this port from that instance, or remove %s if that instance is gone",
		cdi.Qualified(name), spec.Owner(), path, path)
}

// cdiUsedByOthers reports whether a network other than except uses the
// CDI device name. Caller holds d.netsMu.
func (d *Driver) cdiUsedByOthers(name, except string) bool {
	for _, n := range d.networks {
		if n.ID != except && n.RDMA != nil && n.RDMA.cdiName() == name {
			return true
		}
	}
	return false
}

// removeCDIUnlessUsed removes the spec of the CDI device name when no
// network but except uses it and it is this instance's. Caller holds
// d.netsMu, so that no network takes the name up meanwhile, and not d.mu.
func (d *Driver) removeCDIUnlessUsed(name, except string, log *logrus.Entry) {
	if d.cdiUsedByOthers(name, except) {
		return
	}
	log = log.WithField("cdi_device", name)
	if err := d.ownCDI(name); err != nil {
		log.WithError(err).Warn("CDI spec left in place")
		return
	}
	d.beforeCDIIO("remove", cdi.SpecPath(d.cdiDir, name))
	if err := cdi.RemoveSpec(d.cdiDir, name); err != nil {
		log.WithError(err).Warn("could not remove CDI spec")
		return
	}
	log.Info("cdi spec removed")
}

// fillCDIName gives the record n of a version before per-port CDI device
// names the name of its HCA port. It reads sysfs: restore calls it before
// the driver knows n.
func (d *Driver) fillCDIName(n *Network, log *logrus.Entry) {
	if n.RDMA == nil || n.RDMA.CDIName != "" {
		return
	}
	name, err := cdi.NameOnHost(d.rdma, n.RDMA.HCA, n.RDMA.Port)
	if err != nil {
		log.WithError(err).WithField("nid", ShortID(n.ID)).Warn("cannot tell the CDI device name of the network's HCA port; keeping the HCA's name")
		name = n.RDMA.HCA
	}
	n.RDMA.CDIName = name
}

// reconcileCDI rewrites the specs of restored networks (the device numbers
// may have changed across a reboot) and removes specs of this instance that
// no network uses any more (left by a crash, or named per HCA by an older
// version). Networks are taken in ID order, so the same state gives the
// same specs whatever the map order. It holds d.netsMu throughout, and d.mu
// only to look at the networks: the files are read and written without it.
func (d *Driver) reconcileCDI(log *logrus.Entry) {
	d.netsMu.Lock()
	defer d.netsMu.Unlock()
	type port struct {
		nid string
		r   NetworkRDMA
	}
	var ports []port
	for id, n := range d.networks {
		if n.RDMA != nil {
			ports = append(ports, port{id, *n.RDMA})
		}
	}
	sort.Slice(ports, func(i, j int) bool { return ports[i].nid < ports[j].nid })
	used := map[string]bool{}
	written := map[string]bool{}
	for _, p := range ports {
		name := p.r.cdiName()
		used[name] = true
		if written[name] {
			continue
		}
		if err := d.writeCDI(p.r, log); err != nil {
			log.WithError(err).WithField("nid", ShortID(p.nid)).Error("could not rewrite CDI spec")
			continue
		}
		written[name] = true
	}
	d.beforeCDIIO("list", d.cdiDir)
	names, err := cdi.SpecNames(d.cdiDir)
	if err != nil {
		log.WithError(err).Warn("could not list CDI specs")
	}
	for _, name := range names {
		if !used[name] {
			d.removeCDIUnlessUsed(name, "", log)
		}
	}
}
