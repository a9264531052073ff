package driver

import "time"

// The driver's lock, d.mu, guards its maps and the in-memory records only:
// no netlink call, sysfs read or fsync of a life-cycle call (CreateEndpoint,
// Join, Leave, DeleteEndpoint) and of the GID watch happens while it is
// held. Each of them works in three steps: under the lock it claims the
// endpoint (one call at a time per endpoint ID), decides and reserves (the
// link name, the endpoint's GID entries); without the lock it does the
// kernel and disk work; under the lock again it records the outcome or
// undoes the reservation, and gives the claim back. A second call for the
// same endpoint waits for the first to finish and then sees its outcome.

// claim waits until no other call works on endpoint eid and marks it as
// worked on by the caller. The caller holds d.mu; claim releases it while
// it waits, so the caller must look the endpoint up after claim returns.
func (d *Driver) claim(eid string) {
	for {
		ch, ok := d.busy[eid]
		if !ok {
			break
		}
		d.mu.Unlock()
		<-ch
		d.mu.Lock()
	}
	d.busy[eid] = make(chan struct{})
}

// release gives back the claim on eid and wakes the calls waiting for it.
// The caller holds d.mu.
func (d *Driver) release(eid string) {
	if ch, ok := d.busy[eid]; ok {
		close(ch)
		delete(d.busy, eid)
	}
}

// endpointOf looks up endpoint eid of network nid: nil (and no error) when
// it is unknown, an error when it belongs to another network. Caller holds
// d.mu.
func (d *Driver) endpointOf(nid, eid string) (*Endpoint, error) {
	e, ok := d.endpoints[eid]
	if !ok {
		return nil, nil
	}
	if err := checkEndpointNetwork(e, nid); err != nil {
		return nil, err
	}
	return e, nil
}

// claimEndpoint is how a call on one endpoint begins: it takes d.mu and
// the claim on endpoint eid and looks it up (endpointOf). It returns the
// endpoint with both held; or, holding neither, nil and no error when the
// endpoint is unknown, or the error of a call that names another network.
func (d *Driver) claimEndpoint(nid, eid string) (*Endpoint, error) {
	d.mu.Lock()
	d.claim(eid)
	e, err := d.endpointOf(nid, eid)
	if e == nil {
		d.release(eid)
		d.mu.Unlock()
	}
	return e, err
}

// addEndpoint records e as known; if it is RDMA-ready, its entries were
// found in a read of its port's table that began no later than readyAt.
// Caller holds d.mu.
func (d *Driver) addEndpoint(e *Endpoint, readyAt time.Time) {
	d.endpoints[e.ID] = e
	d.ifnames[e.Ifname] = e.ID
	d.track(e, readyAt)
}

// forget drops e from the driver's memory (its record and link are gone).
// Caller holds d.mu.
func (d *Driver) forget(e *Endpoint) {
	d.gids.Going(e.ID)
	d.gids.Forget(e.ID)
	if d.ifnames[e.Ifname] == e.ID {
		delete(d.ifnames, e.Ifname)
	}
	delete(d.endpoints, e.ID)
}
