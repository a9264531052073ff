package driver

import "time"

// The lock rule, kept by every call. The driver's lock, d.mu, guards its
// maps and in-memory records only: no netlink call, sysfs read, file read
// or write and no fsync happens while it is held, on any call (the
// endpoint calls, CreateNetwork and DeleteNetwork, /v1/status), nor in the
// recording of a GID watch's outcome, the collection of endpoints whose
// container is gone, the deletion of endpoints never joined, the restore
// at start or Close. The one exception: log lines are written while it is
// held (a write to the daemon's standard error, which the engine drains);
// it would cost a copy of every field to write them after.
//
// Calls on one endpoint work in three steps: under d.mu they claim the
// endpoint (one call at a time per endpoint ID: claimEndpoint), decide and
// reserve (the link name, the endpoint's GID entries); without it they do
// the kernel and disk work; under it again they record the outcome or undo
// the reservation, and give the claim back. A second call for the same
// endpoint waits for the first to finish and then sees its outcome. An
// endpoint's run-time state is one entry of d.endpoints, its epState:
// reserved, live or resumed (records.go), and gone with the entry. A
// reserved one counts where the address or passthru's one container is
// decided, and DeleteNetwork waits for it; everything else sees only those
// that exist (d.endpoint, d.live). The link names, reserved ones too, are
// indexed in d.ifnames.
//
// Calls on networks: d.netsMu serialises CreateNetwork, DeleteNetwork and
// the reconciliation of CDI specs at start, for their whole length. The
// map of networks changes only with both d.netsMu and d.mu held, so those
// calls read it holding d.netsMu alone, do their kernel, sysfs and disk
// work without d.mu, and take d.mu only to change the maps; DeleteNetwork
// deletes each endpoint of the network as DeleteEndpoint does, under its
// claim. What the driver knows of a network at run time only (removing,
// the strict note, the HCA problem) is in its netState, beside its record:
// it goes with the network, and a record copied to be saved carries none
// of it. Locks are taken in the order d.netsMu, d.mu, the GID tracker's
// lock (package gid), never the other way round.

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

// endpoint looks up endpoint eid among those that exist: not one whose
// CreateEndpoint is under way. Caller holds d.mu.
func (d *Driver) endpoint(eid string) (*epState, bool) {
	e, ok := d.endpoints[eid]
	if !ok || e.phase == epReserved {
		return nil, false
	}
	return e, true
}

// live yields the endpoints that exist (not those reserved), in no order.
// Caller holds d.mu, and adds or deletes no entry while it loops.
func (d *Driver) live(yield func(*epState) bool) {
	for _, e := range d.endpoints {
		if e.phase != epReserved && !yield(e) {
			return
		}
	}
}

// endpointOf looks up endpoint eid of network nid: nil (and no error) when
// it is unknown, an error when it belongs to another network. Caller holds
// d.mu.
func (d *Driver) endpointOf(nid, eid string) (*epState, error) {
	e, ok := d.endpoint(eid)
	if !ok {
		return nil, nil
	}
	if err := checkEndpointNetwork(&e.endpoint, nid); err != nil {
		return nil, err
	}
	return e, nil
}

// claimEndpoint is how a call on one endpoint begins: it takes d.mu and
// the claim on endpoint eid and looks it up (endpointOf). It returns the
// endpoint with both held; or, holding neither, nil and no error when the
// endpoint is unknown, or the error of a call that names another network.
func (d *Driver) claimEndpoint(nid, eid string) (*epState, error) {
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
func (d *Driver) addEndpoint(e *endpoint, readyAt time.Time) {
	d.endpoints[e.ID] = &epState{endpoint: *e, phase: epLive}
	d.ifnames[e.Ifname] = e.ID
	d.track(e, readyAt)
}

// forget drops e from the driver's memory (its record and link are gone).
// Caller holds d.mu.
func (d *Driver) forget(e *endpoint) {
	d.gids.Going(e.ID)
	d.gids.Forget(e.ID)
	d.obs.forget(e.ID)
	if d.ifnames[e.Ifname] == e.ID {
		delete(d.ifnames, e.Ifname)
	}
	delete(d.endpoints, e.ID)
}
