package driver

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/rdma-macvlan/rdma-macvlan/cdi"
	"github.com/rdma-macvlan/rdma-macvlan/rdma"
	"github.com/sirupsen/logrus"
)

// writeCDI writes the CDI spec of the HCA port r: its uverbs and rdma_cm
// nodes and the port's environment, with the QoS of the networks on the
// port (see portQoS; adding is a network about to be added, nil when none;
// except one that is going, "" when none).
// It refuses to replace a spec another instance wrote, or what is no spec
// of this plugin (see ownCDI). Caller holds d.netsMu and not d.mu.
func (d *Driver) writeCDI(r networkRDMA, adding *network, except string, log *logrus.Entry) error {
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
	tc, sl := d.portQoS(name, adding, except, log)
	path, err := cdi.WriteSpec(d.cdiDir, cdi.Device{Name: name, HCA: r.HCA, Port: r.Port, Nodes: nodes, Netdev: r.Netdev, Owner: d.owner,
		TrafficClass: tc, ServiceLevel: sl})
	if err != nil {
		return fmt.Errorf("write CDI spec for %s in %s: %w (check --cdi-dir, or the plugin's cdi mount)", name, d.cdiDir, err)
	}
	d.mu.Lock()
	d.cdiNodes[name] = nodes
	d.mu.Unlock()
	log.WithFields(logrus.Fields{"ibdev": r.HCA, "port": r.Port, "cdi_device": name, "file": path}).Debug("cdi spec written")
	return nil
}

// portQoS is the traffic class and service level the CDI device name
// carries: each one when every network on the port (d.networks but except,
// and adding) sets it to the same value, else none. A device is shared by every network
// on its port, and a container given it may be on any of them: a value one
// network asks for and another does not is no value of the device. Caller
// holds d.netsMu.
func (d *Driver) portQoS(name string, adding *network, except string, log *logrus.Entry) (tc, sl *int) {
	var nets []*network
	for _, n := range d.networksOnCDI(name, except) {
		if adding == nil || n.ID != adding.ID {
			nets = append(nets, n)
		}
	}
	if adding != nil {
		nets = append(nets, adding)
	}
	sort.Slice(nets, func(i, j int) bool { return nets[i].ID < nets[j].ID })
	agreed := func(what string, get func(*network) *int) *int {
		var v *int
		var seen []string
		for i, n := range nets {
			p := get(n)
			seen = append(seen, ShortID(n.ID)+": "+intText(p))
			if i == 0 {
				v = p
			} else if v != nil && (p == nil || *p != *v) {
				v = nil
			}
		}
		if v == nil && len(nets) > 1 && slices.ContainsFunc(nets, func(n *network) bool { return get(n) != nil }) {
			log.WithFields(logrus.Fields{"cdi_device": name, "networks": strings.Join(seen, ", ")}).
				Warnf("the networks on this HCA port ask for different %s: its CDI device carries none (docker rdma run gives each container its network's)", what)
		}
		return optionalOf(v).Ptr()
	}
	tc = agreed("traffic classes", func(n *network) *int { return n.TrafficClass })
	sl = agreed("service levels", func(n *network) *int { return n.ServiceLevel })
	return tc, sl
}

func intText(p *int) string {
	if p == nil {
		return "none"
	}
	return strconv.Itoa(*p)
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

// networksOnCDI returns the networks but except that use the CDI device
// name, in ID order. A network whose RDMA device was not found uses none:
// the name it recorded may be another NIC's now. Caller holds d.netsMu.
func (d *Driver) networksOnCDI(name, except string) []*network {
	var nets []*network
	for id, n := range d.networks {
		if id != except && n.RDMA != nil && n.hcaProblem == "" && n.RDMA.cdiName() == name {
			nets = append(nets, n.network)
		}
	}
	sort.Slice(nets, func(i, j int) bool { return nets[i].ID < nets[j].ID })
	return nets
}

// cdiUsedByOthers reports whether a network other than except uses the
// CDI device name. Caller holds d.netsMu.
func (d *Driver) cdiUsedByOthers(name, except string) bool {
	return len(d.networksOnCDI(name, except)) > 0
}

// removeCDIUnlessUsed removes the spec of the CDI device name when no
// network but except uses it and it is this instance's; while others use
// it, it is rewritten for them (the QoS they agree on may have changed).
// Caller holds d.netsMu, so that no network takes the name up meanwhile,
// and not d.mu.
func (d *Driver) removeCDIUnlessUsed(name, except string, log *logrus.Entry) {
	if d.cdiUsedByOthers(name, except) {
		d.rewriteCDIFor(name, except, log)
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
	d.mu.Lock()
	delete(d.cdiNodes, name)
	d.mu.Unlock()
	log.Info("cdi spec removed")
}

// rewriteCDIFor rewrites the spec of the CDI device name for the networks
// that use it but except (which is going, or never came). Caller holds
// d.netsMu and not d.mu.
func (d *Driver) rewriteCDIFor(name, except string, log *logrus.Entry) {
	nets := d.networksOnCDI(name, except)
	if len(nets) == 0 {
		return
	}
	if err := d.writeCDI(*nets[0].RDMA, nil, except, log); err != nil {
		log.WithError(err).WithField("cdi_device", name).Warn("could not rewrite CDI spec for the networks left on its port")
	}
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
		// A network whose HCA is not found has no spec: its name may be
		// another NIC's now.
		if n.RDMA != nil && n.hcaProblem == "" {
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
		if err := d.writeCDI(p.r, nil, "", log); err != nil {
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
