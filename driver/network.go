package driver

import (
	"cmp"
	"fmt"
	"time"

	"github.com/sirupsen/logrus"
)

// CreateNetworkRequest is the typed form of Docker's CreateNetwork.
type CreateNetworkRequest struct {
	NetworkID  string
	Options    []Option // the -o options (com.docker.network.generic)
	IPv4       []Subnet
	IPv6       []Subnet
	EnableIPv6 bool
	Internal   bool
}

// CreateNetwork validates the options and the parent, creates the VLAN
// sub-interface when the parent is IFNAME.VLAN and missing, writes the CDI
// spec of the parent's HCA port and records the network. On any error
// nothing is left behind. It holds d.netsMu throughout, and d.mu only to
// add the network to the driver's map (see claim.go).
func (d *Driver) CreateNetwork(req CreateNetworkRequest) (retErr error) {
	if err := checkID("network", req.NetworkID); err != nil {
		return err
	}
	opts, err := ParseNetworkOptions(req.Options)
	if err != nil {
		return err
	}
	if err := checkSubnets(req.IPv4, false); err != nil {
		return err
	}
	if err := checkSubnets(req.IPv6, true); err != nil {
		return err
	}
	d.netsMu.Lock()
	defer d.netsMu.Unlock()
	log := d.logFor("CreateNetwork", logrus.Fields{"nid": ShortID(req.NetworkID), "parent": opts.Parent})
	// No other call adds or removes a network until this one returns
	// (d.netsMu): d.networks is read without d.mu, and what planNetwork
	// finds stays true.
	n, plan, err := d.planNetwork(req, opts, log)
	if err != nil || n == nil {
		return err
	}
	created := false
	if plan.createVLAN {
		if err := d.createVLAN(opts.Parent, plan.vlan); err != nil {
			return err
		}
		created = true
		crashPoint("create-network:vlan-created")
		defer func() {
			if retErr != nil {
				if err := d.links.DeleteLink(opts.Parent); err != nil {
					log.WithError(err).Warn("could not roll back vlan sub-interface")
				}
			}
		}()
	}
	rinfo := n.RDMA
	if err := d.writeCDI(*rinfo, n, "", log); err != nil {
		return err
	}
	crashPoint("create-network:cdi-written")
	if err := d.store.saveNetwork(n); err != nil {
		d.removeCDIUnlessUsed(rinfo.cdiName(), n.ID, log)
		return fmt.Errorf("save network %s: %w", ShortID(n.ID), err)
	}
	crashPoint("create-network:state-written")
	d.mu.Lock()
	d.networks[n.ID] = &netState{network: n}
	d.mu.Unlock()
	log.WithFields(logrus.Fields{"mode": n.Mode, "mtu": n.MTU, "vlan_created": created, "ibdev": rinfo.HCA, "port": rinfo.Port}).Info("network created")
	return nil
}

// planNetwork checks a CreateNetwork against the networks there are and the
// host, changing nothing, and returns the network to create and how its
// parent is to be made. It returns no network for a repeated CreateNetwork
// of a known network (answered as done). Caller holds d.netsMu.
func (d *Driver) planNetwork(req CreateNetworkRequest, opts NetworkOptions, log *logrus.Entry) (*network, parentPlan, error) {
	if n, ok := d.networks[req.NetworkID]; ok {
		// A repeated CreateNetwork (a retry, or a network restored from
		// state that its creator asks for again) is answered as done;
		// one asking for other settings is refused.
		log.WithField("mode", n.Mode).Debug("network already known")
		return nil, parentPlan{}, sameNetwork(n.network, opts, req)
	}
	if err := d.checkParentConflicts(opts.Parent, opts.Mode); err != nil {
		return nil, parentPlan{}, err
	}

	plan, err := d.planParent(opts.Parent)
	if err != nil {
		return nil, parentPlan{}, err
	}
	// Without -o mtu the containers take the parent's MTU at the time each
	// of them starts, as with the built-in macvlan: the network records 0.
	mtu := opts.MTU
	if mtu > plan.mtu {
		return nil, parentPlan{}, invalidf("mtu %d is larger than the MTU %d of parent %q: use -o mtu=%d or less, or raise the parent's MTU (ip link set %s mtu %d)",
			mtu, plan.mtu, opts.Parent, plan.mtu, plan.mtuOf, mtu)
	}
	if eff := cmp.Or(mtu, plan.mtu); (req.EnableIPv6 || len(req.IPv6) > 0) && eff < minMTUIPv6 {
		return nil, parentPlan{}, invalidf("mtu %d is too small for IPv6 (at least %d): raise -o mtu or the parent's MTU, or create the network without IPv6",
			eff, minMTUIPv6)
	}
	// RDMA devices sit below every VLAN.
	rinfo, err := d.detectRDMA(opts.Parent, plan.real, opts.RDMADevice, log)
	if err != nil {
		return nil, parentPlan{}, err
	}
	if err := d.checkStackedVLANTags(opts.Parent, plan.createVLAN, plan.vlans, plan.real, rinfo.HCA); err != nil {
		return nil, parentPlan{}, err
	}
	return &network{
		ID:           req.NetworkID,
		Parent:       opts.Parent,
		VLAN:         plan.vlan,
		Mode:         opts.Mode,
		MTU:          mtu,
		RDMADevice:   opts.RDMADevice,
		RDMA:         rinfo,
		GIDCheck:     opts.GIDCheck,
		AddressCheck: opts.AddressCheck,
		TrafficClass: opts.TrafficClass.Ptr(),
		ServiceLevel: opts.ServiceLevel.Ptr(),
		IPv4:         req.IPv4,
		IPv6:         req.IPv6,
		EnableIPv6:   req.EnableIPv6,
		Internal:     req.Internal,
		Options:      optionMap(req.Options),
		Created:      time.Now().UTC(),
	}, plan, nil
}

// DeleteNetwork removes the network, the links of any endpoints it still has
// and, with the last network using it, the VLAN sub-interface the driver
// created and the CDI spec of its HCA port. An unknown network is not an
// error. It holds d.netsMu throughout, and d.mu only to look at and change
// the driver's maps (see claim.go).
func (d *Driver) DeleteNetwork(nid string) error {
	if err := checkID("network", nid); err != nil {
		return err
	}
	d.netsMu.Lock()
	defer d.netsMu.Unlock()
	log := d.logFor("DeleteNetwork", logrus.Fields{"nid": ShortID(nid)})
	n, err := d.removeNetwork(nid, log)
	if err != nil || n == nil {
		return err
	}
	// A network whose HCA was not found has no spec of its own: the one
	// of its recorded name, if any, is another network's.
	if n.RDMA != nil && n.hcaProblem == "" {
		d.removeCDIUnlessUsed(n.RDMA.cdiName(), nid, log)
	}
	log.WithField("parent", n.Parent).Info("network deleted")
	return nil
}

// removeNetwork is DeleteNetwork but for the CDI spec: it returns the
// network it deleted, nil if there was none. Caller holds d.netsMu.
func (d *Driver) removeNetwork(nid string, log *logrus.Entry) (*netState, error) {
	n, ok := d.networks[nid]
	if !ok {
		log.Debug("network not known; nothing to delete")
		return nil, nil
	}
	// No endpoint is created on it from now on; those being created or
	// changed are waited for, then deleted.
	d.mu.Lock()
	n.removing = true
	d.mu.Unlock()
	defer func() {
		d.mu.Lock()
		n.removing = false
		d.mu.Unlock()
	}()
	for {
		d.mu.Lock()
		var ids []string
		for id, e := range d.endpoints { // reserved ones too
			if e.NetworkID == nid {
				ids = append(ids, id)
			}
		}
		d.mu.Unlock()
		if len(ids) == 0 {
			break
		}
		for _, id := range ids {
			if err := d.deleteOf(nid, id, log); err != nil {
				return nil, err
			}
		}
	}
	if n.VLAN != nil && n.VLAN.Created && !d.parentUsedByOthers(n.network) {
		if err := d.deleteOwnedVLAN(n.network); err != nil {
			return nil, err
		}
		log.WithField("parent", n.Parent).Info("vlan sub-interface deleted")
		crashPoint("delete-network:vlan-deleted")
	}
	if err := d.store.deleteNetwork(nid); err != nil {
		return nil, fmt.Errorf("delete state of network %s: %w", ShortID(nid), err)
	}
	crashPoint("delete-network:state-deleted")
	d.mu.Lock()
	delete(d.networks, nid)
	d.mu.Unlock()
	return n, nil
}

// deleteOf deletes endpoint eid if it is one of network nid's, once the
// call that works on it (its CreateEndpoint, say) is done.
func (d *Driver) deleteOf(nid, eid string, log *logrus.Entry) error {
	e, _ := d.claimEndpoint(nid, eid)
	if e == nil {
		return nil // gone meanwhile
	}
	defer d.mu.Unlock()
	defer d.release(eid)
	return d.deleteClaimed(&e.endpoint, log)
}

func optionMap(opts []Option) map[string]string {
	if len(opts) == 0 {
		return nil
	}
	m := make(map[string]string, len(opts))
	for _, o := range opts {
		m[o.Key] = o.Value
	}
	return m
}
