package driver

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

// portAcct is the GID accounting of one port: the endpoints whose entries
// may not yet be in the last table read (not RDMA-ready yet, or found after
// the table admission looks at was read). Every other endpoint on the port
// has its entries counted in the table itself. Guarded by d.mu.
type portAcct struct {
	unsettled map[string]*Endpoint
}

// portOf returns the port of e's network, if it has one. Caller holds d.mu.
func (d *Driver) portOf(e *Endpoint) (portKey, bool) {
	n, ok := d.networks[e.NetworkID]
	if !ok || n.RDMA == nil {
		return portKey{}, false
	}
	return portKey{n.RDMA.HCA, n.RDMA.Port}, true
}

func (d *Driver) acct(key portKey) *portAcct {
	a, ok := d.ports[key]
	if !ok {
		a = &portAcct{unsettled: map[string]*Endpoint{}}
		d.ports[key] = a
	}
	return a
}

// track has admission count e's entries until a table read after e's
// entries were found shows them: called whenever e is added or its
// readiness changes. Caller holds d.mu.
func (d *Driver) track(e *Endpoint) {
	if key, ok := d.portOf(e); ok {
		d.acct(key).unsettled[e.ID] = e
	}
}

// untrack ends the accounting of e (or of the reservation standing for
// it), if it is the one tracked. Caller holds d.mu.
func (d *Driver) untrack(e *Endpoint) {
	if key, ok := d.portOf(e); ok {
		if a := d.ports[key]; a != nil && a.unsettled[e.ID] == e {
			delete(a.unsettled, e.ID)
		}
	}
}

// addEndpoint records e as known. Caller holds d.mu.
func (d *Driver) addEndpoint(e *Endpoint) {
	d.endpoints[e.ID] = e
	d.ifnames[e.Ifname] = e.ID
	d.track(e)
}

// forget drops e from the driver's memory (its record and link are gone).
// Caller holds d.mu.
func (d *Driver) forget(e *Endpoint) {
	d.entriesGoing(e)
	d.untrack(e)
	if d.ifnames[e.Ifname] == e.ID {
		delete(d.ifnames, e.Ifname)
	}
	delete(d.endpoints, e.ID)
}
