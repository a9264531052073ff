package driver

import (
	"errors"
	"fmt"
	"sort"

	"github.com/rdma-macvlan/rdma-macvlan/cdi"
	"github.com/rdma-macvlan/rdma-macvlan/rdma"
	"github.com/sirupsen/logrus"
)

// writeCDI writes the CDI spec of the HCA port r: its uverbs and rdma_cm
// nodes and the port's environment. It refuses to replace a spec another
// instance wrote, or what is no spec of this plugin (see ownCDI). Caller
// holds d.netsMu and not d.mu.
func (d *Driver) writeCDI(r networkRDMA, log *logrus.Entry) error {
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
func (d *Driver) fillCDIName(n *network, log *logrus.Entry) {
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
		r   networkRDMA
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
