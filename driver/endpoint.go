package driver

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/rdma-macvlan/rdma-macvlan/api"
	"github.com/rdma-macvlan/rdma-macvlan/netns"
	"github.com/sirupsen/logrus"
)

// CreateEndpointRequest is the typed form of Docker's CreateEndpoint.
type CreateEndpointRequest struct {
	NetworkID  string
	EndpointID string
	IPv4       string // CIDR assigned by IPAM, may be empty
	IPv6       string // CIDR assigned by IPAM, may be empty
	MAC        string // only when the user asked for one
	Options    []Option
	// ContainerIfname is the interface name asked inside the container
	// (OptEndpointIfname), or "".
	ContainerIfname string
}

// CreateEndpointResponse carries what the driver chose: the MAC, when Docker
// did not send one.
type CreateEndpointResponse struct {
	MAC string
}

// CreateEndpoint creates the endpoint's macvlan link (down, in the host
// namespace) and records the endpoint.
func (d *Driver) CreateEndpoint(req CreateEndpointRequest) (CreateEndpointResponse, error) {
	var resp CreateEndpointResponse
	if err := checkID("network", req.NetworkID); err != nil {
		return resp, err
	}
	if err := checkID("endpoint", req.EndpointID); err != nil {
		return resp, err
	}
	opts, err := ParseEndpointOptions(req.Options)
	if err != nil {
		return resp, err
	}
	var mac net.HardwareAddr
	if req.MAC != "" {
		if mac, err = net.ParseMAC(req.MAC); err != nil || len(mac) != 6 {
			return resp, invalidf("MAC address %q is not a 6-byte Ethernet address: use the form 02:42:ac:11:00:02", req.MAC)
		}
		if mac[0]&1 == 1 {
			return resp, invalidf("MAC address %s is a multicast address: use a unicast one, e.g. 02:42:ac:11:00:02", req.MAC)
		}
		if slices.Equal(mac, net.HardwareAddr{0, 0, 0, 0, 0, 0}) {
			return resp, invalidf("MAC address %s is all zeros: use a real one, e.g. 02:42:ac:11:00:02, or leave it out", req.MAC)
		}
	}
	if req.ContainerIfname != "" {
		if err := checkIfname("option "+OptEndpointIfname, req.ContainerIfname); err != nil {
			return resp, err
		}
	}
	if err := checkAddress(req.IPv4, false); err != nil {
		return resp, err
	}
	if err := checkAddress(req.IPv6, true); err != nil {
		return resp, err
	}
	d.refindHCA(req.NetworkID, d.logFor("CreateEndpoint", logrus.Fields{"nid": ShortID(req.NetworkID)}))
	d.recheckHCA(req.NetworkID, d.logFor("CreateEndpoint", nil))

	log := d.logFor("CreateEndpoint", logrus.Fields{"nid": ShortID(req.NetworkID), "eid": ShortID(req.EndpointID)})
	eid := req.EndpointID
	ifname := LinkName(eid)

	// Under the lock: decide, and reserve the link name and the endpoint
	// (DeleteNetwork waits for it).
	d.mu.Lock()
	d.claim(eid)
	n, err := d.createDecide(req, ifname)
	if err != nil || n == nil {
		if e, ok := d.endpoint(eid); err == nil && ok && req.MAC == "" {
			resp.MAC = e.MAC // created before: the same answer again
		}
		d.release(eid)
		d.mu.Unlock()
		return resp, err
	}
	res := &endpoint{ID: eid, NetworkID: n.ID, Ifname: ifname, IPv4: req.IPv4, IPv6: req.IPv6}
	if mac != nil {
		res.MAC = mac.String()
	}
	d.ifnames[ifname] = eid
	d.endpoints[eid] = &epState{endpoint: *res, phase: epReserved}
	d.mu.Unlock()

	// Without it: what the link needs from the kernel, and admission (the
	// GID tracker reserves the endpoint's entries).
	mtu, err := d.endpointMTU(n, opts.MTU)
	need, types := 0, 0
	if err == nil && n.RDMA != nil {
		need, types, err = d.admit(n, res, log)
	}
	var e *endpoint
	if err == nil {
		e, err = d.createIO(n, req, res, need, types, mtu, mac, log)
	}

	// Under the lock: record, or give the reservation back.
	d.mu.Lock()
	defer d.mu.Unlock()
	if err != nil {
		d.undoCreate(res)
		return resp, err
	}
	d.addEndpoint(e, time.Time{})
	d.release(eid)
	if req.MAC == "" {
		resp.MAC = e.MAC
	}
	log.WithFields(logrus.Fields{"ifname": ifname, "parent": n.Parent, "mac": e.MAC, "ipv4": e.IPv4, "ipv6": e.IPv6}).Info("endpoint created")
	return resp, nil
}

// createDecide checks that endpoint req can be created. It returns its
// network, or nil and no error when the endpoint exists already (a retry).
// Caller holds d.mu and the claim on the endpoint.
func (d *Driver) createDecide(req CreateEndpointRequest, ifname string) (*network, error) {
	n, ok := d.networks[req.NetworkID]
	if !ok {
		return nil, fmt.Errorf("%w: network %s is not known to rdma-macvlan (its state may have been lost): remove it with docker network rm and create it again",
			ErrNetworkNotFound, ShortID(req.NetworkID))
	}
	if n.removing {
		return nil, fmt.Errorf("%w: network %s is being removed: create the container on another network", ErrNetworkNotFound, ShortID(n.ID))
	}
	if n.hcaProblem != "" {
		return nil, errHCAProblem(n.network, n.hcaProblem)
	}
	if e, ok := d.endpoint(req.EndpointID); ok {
		if e.NetworkID != req.NetworkID {
			return nil, conflictf("endpoint %s already exists on network %s: remove the container using it, or retry to get a new endpoint ID", ShortID(e.ID), ShortID(e.NetworkID))
		}
		return nil, nil
	}
	if n.Mode == api.ModePassthru {
		for _, e := range d.endpoints { // reserved ones too
			if e.NetworkID == n.ID {
				return nil, conflictf("network %s is in passthru mode and its parent %q already serves container endpoint %s: passthru allows one container; use macvlan_mode=bridge for more",
					ShortID(n.ID), n.Parent, ShortID(e.ID))
			}
		}
	}
	if other, ok := d.ifnames[ifname]; ok {
		return nil, conflictf("endpoint %s would reuse link name %s of endpoint %s (their IDs share the first 12 characters): retry to get a new endpoint ID",
			truncate(req.EndpointID, 64), ifname, other)
	}
	if err := d.sameAddressOnPort(n.network, req); err != nil {
		return nil, err
	}
	return n.network, nil
}

// sameAddressOnPort refuses an address that another endpoint, of any
// network, already holds on the same HCA port: the kernel would add a
// second entry with the same GID, and the two are told apart only by
// their netdev, which is eth0 in both containers' namespaces: neither the
// driver nor the workload can tell which entry is whose. Caller holds
// d.mu.
func (d *Driver) sameAddressOnPort(n *network, req CreateEndpointRequest) error {
	if n.RDMA == nil {
		return nil
	}
	mine := [2]netip.Addr{addrOf(req.IPv4), addrOf(req.IPv6)}
	if !mine[0].IsValid() && !mine[1].IsValid() {
		return nil
	}
	for _, o := range d.endpoints { // reserved ones too
		for i, theirs := range [2]string{o.IPv4, o.IPv6} {
			if !mine[i].IsValid() || mine[i] != addrOf(theirs) {
				continue
			}
			on, ok := d.networks[o.NetworkID]
			if o.ID == req.EndpointID || !ok || on.RDMA == nil || on.hcaProblem != "" || portOfNet(on.RDMA) != portOfNet(n.RDMA) {
				continue
			}
			return conflictf("endpoint %s of network %s cannot take address %s: it is already held on RDMA device %s port %d by endpoint %s of network %s (parent %q): two containers with one address on one port get GID entries nobody can tell apart; give this container another address (docker run --ip), or use a network on another RDMA port",
				ShortID(req.EndpointID), ShortID(n.ID), mine[i], n.RDMA.HCA, n.RDMA.Port, ShortID(o.ID), ShortID(o.NetworkID), on.Parent)
		}
	}
	return nil
}

// addrOf is the address of a CIDR ("192.168.7.5/24"), an IPv4-mapped
// IPv6 address as its IPv4 one; the zero Addr when there is none. It
// allocates nothing: it runs once per endpoint of the host at each
// CreateEndpoint.
func addrOf(cidr string) netip.Addr {
	s, _, _ := strings.Cut(cidr, "/")
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Addr{}
	}
	return a.Unmap()
}

// undoCreate gives back what CreateEndpoint reserved for res. Caller holds
// d.mu.
func (d *Driver) undoCreate(res *endpoint) {
	if e, ok := d.endpoints[res.ID]; ok && e.phase == epReserved { // the caller's: it holds the claim
		delete(d.endpoints, res.ID)
	}
	d.gids.Forget(res.ID)
	if d.ifnames[res.Ifname] == res.ID {
		delete(d.ifnames, res.Ifname)
	}
	d.release(res.ID)
}

// createIO creates the link of endpoint res and writes its record, without
// d.mu; on failure it leaves no link behind.
func (d *Driver) createIO(n *network, req CreateEndpointRequest, res *endpoint, need, types, mtu int, mac net.HardwareAddr, log *logrus.Entry) (_ *endpoint, retErr error) {
	ifname := res.Ifname
	// A link of that name that no endpoint owns is left from a crash.
	if err := d.clearStaleLink(ifname); err != nil {
		return nil, err
	}
	link, err := d.links.CreateMacvlan(netns.MacvlanSpec{Name: ifname, Parent: n.Parent, Mode: n.Mode, MTU: mtu, MAC: mac, Alias: d.owner})
	if errors.Is(err, netns.ErrLinkNotFound) {
		return nil, fmt.Errorf("parent %q of network %s is gone (check: ip link show %s): bring it back, or remove the network and create it on an existing parent",
			n.Parent, ShortID(n.ID), n.Parent)
	}
	if err != nil {
		if err := d.explainBusy(n.ID, n.Parent, err); IsRefusal(err) {
			return nil, err
		}
		return nil, fmt.Errorf("container link for endpoint %s on parent %q: %w", ShortID(req.EndpointID), n.Parent, err)
	}
	crashPoint("create-endpoint:link-created")
	defer func() {
		if retErr != nil {
			if err := d.links.DeleteLink(ifname); err != nil {
				log.WithError(err).Warn("could not roll back container link")
			}
		}
	}()
	e := &endpoint{
		ID:        req.EndpointID,
		NetworkID: n.ID,
		Ifname:    ifname,
		Parent:    n.Parent,
		Mode:      n.Mode,
		MTU:       mtu,
		MAC:       link.MAC.String(),
		IPv4:      req.IPv4,
		IPv6:      req.IPv6,
		DstName:   req.ContainerIfname,
		Created:   time.Now().UTC(),
		GIDNeed:   need,
		GIDTypes:  types,
	}
	if err := d.store.saveEndpoint(e); err != nil {
		return nil, fmt.Errorf("save endpoint %s: %w", ShortID(e.ID), err)
	}
	crashPoint("create-endpoint:state-written")
	return e, nil
}

// endpointMTU is the MTU of a new link of network n: the driver-opt mtu if
// given, else the network's -o mtu, else the parent's MTU now (a parent
// raised after the network was created gives its new MTU to new containers,
// as with the built-in macvlan).
func (d *Driver) endpointMTU(n *network, asked int) (int, error) {
	parent, err := d.links.LinkByName(n.Parent)
	if errors.Is(err, netns.ErrLinkNotFound) {
		return 0, fmt.Errorf("parent %q of network %s is gone (check: ip link show %s): bring it back, or remove the network and create it on an existing parent",
			n.Parent, ShortID(n.ID), n.Parent)
	}
	if err != nil {
		return 0, fmt.Errorf("look up parent %q of network %s: %w", n.Parent, ShortID(n.ID), err)
	}
	limit := parent.MTU
	if n.MTU != 0 {
		if n.MTU > parent.MTU {
			return 0, hostSetupf("network %s has mtu %d, but its parent %q now has MTU %d: raise the parent's MTU (ip link set %s mtu %d), or create the network again with -o mtu=%d or less",
				ShortID(n.ID), n.MTU, n.Parent, parent.MTU, n.Parent, n.MTU, parent.MTU)
		}
		limit = n.MTU
	}
	mtu := limit
	if asked != 0 {
		if asked > limit {
			return 0, invalidf("driver-opt mtu=%d is larger than the MTU %d of network %s: use %d or less", asked, limit, ShortID(n.ID), limit)
		}
		mtu = asked
	}
	if n.ipv6() && mtu < minMTUIPv6 {
		return 0, invalidf("mtu %d is too small for IPv6 (at least %d) on network %s: raise the MTU (of the parent %q, or driver-opt mtu)",
			mtu, minMTUIPv6, ShortID(n.ID), n.Parent)
	}
	return mtu, nil
}

// DeleteEndpoint deletes the endpoint's link (back in the host namespace by
// now) and its record. An unknown endpoint is not an error.
func (d *Driver) DeleteEndpoint(nid, eid string) error {
	if err := checkID("endpoint", eid); err != nil {
		return err
	}
	log := d.logFor("DeleteEndpoint", logrus.Fields{"nid": ShortID(nid), "eid": ShortID(eid)})
	e, err := d.claimEndpoint(nid, eid)
	if e == nil {
		if err == nil {
			log.Debug("endpoint not known; nothing to delete")
		}
		return err
	}
	defer d.mu.Unlock()
	defer d.release(eid)
	return d.deleteClaimed(&e.endpoint, log)
}

// deleteClaimed deletes endpoint e, whose claim the caller holds, with
// d.mu: it stops e's GID watch, deletes its link and record without d.mu,
// and forgets it. It returns with d.mu held again.
func (d *Driver) deleteClaimed(e *endpoint, log *logrus.Entry) error {
	d.gids.StopWatch(e.ID)
	d.mu.Unlock()
	err := d.deleteEndpointIO(e, log)
	d.mu.Lock()
	if err != nil {
		return err
	}
	d.forget(e)
	log.WithField("ifname", e.Ifname).Info("endpoint deleted")
	return nil
}

// deleteEndpointIO deletes e's link and record. It reads only fields of e
// that never change, and needs the claim on e, not d.mu.
func (d *Driver) deleteEndpointIO(e *endpoint, log *logrus.Entry) error {
	l, err := d.links.LinkByName(e.Ifname)
	switch {
	case errors.Is(err, netns.ErrLinkNotFound):
		// Still in a sandbox being torn down, or already gone: the kernel
		// deletes a macvlan with its namespace.
	case err != nil:
		return fmt.Errorf("look up link %s of endpoint %s: %w", e.Ifname, ShortID(e.ID), err)
	case l.Kind != "macvlan" || l.Alias != d.owner:
		log.WithFields(logrus.Fields{"ifname": e.Ifname, "kind": l.Kind, "ifalias": l.Alias}).Warn("link is not the macvlan this rdma-macvlan instance created; leaving it")
	default:
		if err := d.links.DeleteLink(e.Ifname); err != nil {
			return fmt.Errorf("delete link %s of endpoint %s: %w", e.Ifname, ShortID(e.ID), err)
		}
		crashPoint("delete-endpoint:link-deleted")
	}
	if err := d.store.deleteEndpoint(e.ID); err != nil {
		return fmt.Errorf("delete state of endpoint %s: %w", ShortID(e.ID), err)
	}
	crashPoint("delete-endpoint:state-deleted")
	return nil
}

// EndpointInfo answers EndpointOperInfo: what docker network inspect can
// show. An unknown endpoint has nothing to show; one of another network is
// refused. The engine asks for every endpoint of a container after each of
// its networks is joined: on a gid_check=strict network, it is where the
// start of a container waits for the endpoint's GID entries when the
// endpoint is not the container's gateway (see strict.go). It also asks
// outside starts (at its own start, after a disconnect): only a watch that
// a Join of this process began is waited for.
func (d *Driver) EndpointInfo(nid, eid string) (map[string]string, error) {
	d.mu.Lock()
	e, ok := d.endpoint(eid)
	if !ok {
		d.mu.Unlock()
		return map[string]string{}, nil
	}
	if err := checkEndpointNetwork(&e.endpoint, nid); err != nil {
		d.mu.Unlock()
		return nil, err
	}
	var held []strictHold
	if e.Sandbox != "" && !e.RDMAReady && e.phase != epResumed {
		held = d.strictOf(&e.endpoint, false)
	}
	info := map[string]string{
		"host_ifname": e.Ifname,
		api.OptParent: e.Parent,
		api.OptMode:   e.Mode,
		api.OptMTU:    fmt.Sprint(e.MTU),
	}
	d.mu.Unlock()
	for _, h := range held {
		// A watch a Join of this process began: a start. (A container
		// already running when the watch was resumed is epResumed.)
		if h.done != nil {
			d.holdInfo(h)
		}
	}
	return info, nil
}
