package driver

import (
	"errors"
	"fmt"

	"github.com/rdma-macvlan/rdma-macvlan/api"
	"github.com/rdma-macvlan/rdma-macvlan/netns"
	"github.com/sirupsen/logrus"
)

// gid_check=strict holds a container's start until the GID entries of its
// endpoints on strict networks are in the table, and fails it when they do
// not come. The engine gives a driver two calls after the container's
// interface has its addresses (Docker 28 and later; before, both come
// while the link is still in the host namespace, and strict works as warn):
//
//   - ProgramExternalConnectivity, for the endpoint that is the
//     container's gateway when it joins, and again for each endpoint that
//     takes the gateway over while the container's networks are joined,
//     one by one, in an order the engine does not fix (a map's). An error
//     there fails the start.
//   - EndpointOperInfo, for every endpoint of the container after each of
//     its networks is joined (the engine reads the port mappings). Its
//     errors are ignored.
//
// So each strict endpoint's start is held where its container's gateway
// is programmed (the gateway's own call also holds every strict endpoint
// joined before it in the same container) and, whatever the join order,
// in EndpointOperInfo right after its own join. A start fails only in
// ProgramExternalConnectivity: a strict endpoint joined after the
// container's gateway and whose entries never come is let through by
// EndpointOperInfo, and its network says why in its status.

// ProgramExternalConnectivity holds the start of the container of endpoint
// eid until the GID entries of its endpoints on strict networks are in the
// table (or fails it). libnetwork calls it only for the endpoint that is
// the container's gateway (never on an --internal network).
//
// Docker 28 and later call it once the container's task exists and its
// interface has its addresses. Engines before call it inside Join, before
// the task exists: the link is still in the host namespace, and libnetwork
// moves it and sets its addresses only after this call returns, so waiting
// here could only time out and fail every start. There strict falls back to
// the watch: the start goes on, the network says why in its status and the
// daemon logs it once per network.
func (d *Driver) ProgramExternalConnectivity(nid, eid string) error {
	d.mu.Lock()
	e, err := d.endpointOf(nid, eid)
	if err != nil {
		d.mu.Unlock()
		return err
	}
	if e == nil {
		d.mu.Unlock()
		return nil
	}
	held := d.strictOf(&e.endpoint, true)
	d.mu.Unlock()
	return d.holdStrict(held)
}

// strictHold is one endpoint whose start a strict wait holds, as it was
// when the call began.
type strictHold struct {
	nid, eid, ifname string
	ready            bool
	done             <-chan struct{} // its watch's, nil when none runs
}

// strictOf lists the endpoints on strict networks with an RDMA port whose
// start a call for endpoint e holds: e, and with peers the other endpoints
// of e's container. Caller holds d.mu.
func (d *Driver) strictOf(e *endpoint, peers bool) []strictHold {
	var held []strictHold
	add := func(o *endpoint) {
		n, ok := d.networks[o.NetworkID]
		if !ok || n.RDMA == nil || n.GIDCheck != api.GIDCheckStrict || n.hcaProblem != "" {
			return
		}
		held = append(held, strictHold{nid: o.NetworkID, eid: o.ID, ifname: o.Ifname, ready: o.RDMAReady, done: d.gids.Done(o.ID)})
	}
	add(e)
	if peers && e.Sandbox != "" {
		for o := range d.live {
			if o.ID != e.ID && o.Sandbox == e.Sandbox {
				add(&o.endpoint)
			}
		}
	}
	return held
}

// holdStrict waits for the watches of the endpoints of held whose links
// have left the host namespace (their addresses are set), and fails when
// one of them is not RDMA-ready then. One whose link is still in the host
// namespace is asked about too early (Docker before 28): strict falls back
// to the watch for its network. It takes d.mu only to read and record.
func (d *Driver) holdStrict(held []strictHold) error {
	var wait []strictHold
	for _, h := range held {
		// Even for an endpoint whose entries are already there, an engine
		// that asks once the link has moved clears the note below.
		if _, err := d.links.LinkByName(h.ifname); !errors.Is(err, netns.ErrLinkNotFound) {
			if h.ready {
				continue
			}
			why := strictEarlyCall
			if err != nil {
				why = fmt.Sprintf("cannot tell whether the container has its addresses yet (look up %s: %v)", h.ifname, err)
			}
			d.strictFallsBack(h.nid, h.eid, why)
			continue
		}
		d.mu.Lock()
		if n, ok := d.networks[h.nid]; ok {
			n.strictNote = "" // this engine asks once the addresses are set (one upgraded to 28+, say)
		}
		d.mu.Unlock()
		wait = append(wait, h)
	}
	for _, h := range wait {
		if h.done == nil {
			continue
		}
		select {
		case <-h.done: // bounded by the watch's deadline
		case <-d.stopping:
			return fmt.Errorf("%w (plugin disabled, upgraded or restarted) before the container's GID entries appeared, and network %s has gid_check=strict: start the container again once the plugin is enabled",
				errStopping, ShortID(h.nid))
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, h := range wait {
		if err := d.strictOutcome(h); err != nil {
			return err
		}
	}
	return nil
}

// strictOutcome reads the outcome of h's watch. Caller holds d.mu.
func (d *Driver) strictOutcome(h strictHold) error {
	// A watch that has just ended may still be recording its outcome under
	// the claim on the endpoint (its done closes after that, but a watch
	// that ended before this call began is no longer the tracker's): wait
	// for the claim, then read the outcome.
	d.claim(h.eid)
	d.release(h.eid)
	e, ok := d.endpoint(h.eid)
	if !ok {
		return fmt.Errorf("endpoint %s of network %s was deleted while its start waited for its GID entries (gid_check=strict)", ShortID(h.eid), ShortID(h.nid))
	}
	if e.RDMAReady {
		return nil
	}
	reason := e.RDMAReason
	if reason == "" {
		reason = "its GID entries are not in the table"
	}
	return &StrictNotReadyError{Msg: fmt.Sprintf("container is not RDMA-ready and network %s has gid_check=strict: %s", ShortID(h.nid), reason)}
}

// StrictNotReadyError is gid_check=strict failing a container's start: its
// GID entries are not in the table. It is logged as a failure, not as a
// Refusal (the kernel did not add entries it should have), and the metrics
// count it as a refusal of the start (reason gid_check_strict).
type StrictNotReadyError struct{ Msg string }

func (e *StrictNotReadyError) Error() string { return e.Msg }

// holdInfo is EndpointOperInfo's part of strict: it holds the start of the
// container of endpoint e, on a strict network, until its entries are in
// the table, whichever endpoint is the container's gateway. It cannot fail
// the start (the engine ignores the call's errors): when the entries do
// not come, the network's status says so. Caller holds neither d.mu nor
// the claim on e.
func (d *Driver) holdInfo(h strictHold) {
	if err := d.holdStrict([]strictHold{h}); err != nil && !errors.Is(err, errStopping) {
		d.strictFallsBack(h.nid, h.eid, strictNotGateway+" ("+err.Error()+")")
	}
}

// errStopping ends the strict waits when the daemon stops.
var errStopping = errors.New("rdma-macvlan is stopping")

// strictEarlyCall says why gid_check=strict cannot hold a start on engines
// before Docker 28.
const strictEarlyCall = "the engine asks before the container has its addresses (Docker before 28 calls ProgramExternalConnectivity inside Join): " +
	"gid_check=strict cannot hold the start there and works as warn (the GID watch); docker rdma run waits for the GIDs on any engine"

// strictNotGateway says why a strict start went on without its entries.
const strictNotGateway = "a container whose GID entries did not appear on this network started anyway: the network was joined after the container's gateway, " +
	"and the engine lets a driver fail a start only in the gateway's call; make this network the container's gateway (docker run --network name=NET,gw-priority=1) for strict to refuse such a start"

// strictFallsBack records that strict could not be enforced for a start on
// network nid, and logs it the first time.
func (d *Driver) strictFallsBack(nid, eid, why string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	n, ok := d.networks[nid]
	if !ok {
		return
	}
	first := n.strictNote == ""
	n.strictNote = why
	log := d.logFor("ProgramExternalConnectivity", logrus.Fields{"nid": ShortID(nid), "eid": ShortID(eid)})
	if first {
		log.WithField("reason", why).Warn("gid_check=strict falls back to the watch on this network")
	} else {
		log.Debug("gid_check=strict falls back to the watch")
	}
}
