package driver

import (
	"errors"
	"fmt"

	"github.com/rdma-macvlan/rdma-macvlan/netns"
	"github.com/sirupsen/logrus"
)

// ProgramExternalConnectivity is where -o gid_check=strict holds a container
// start until its GIDs are in the table (or fails it). libnetwork calls it
// only for the endpoint that is the container's gateway (never on an
// --internal network).
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
	n, nok := d.networks[nid]
	if e == nil || !nok || n.RDMA == nil || n.GIDCheck != GIDCheckStrict {
		d.mu.Unlock()
		return nil
	}
	done := d.gids.Done(eid)
	ifname, ready := e.Ifname, e.RDMAReady
	d.mu.Unlock()
	// Even for an endpoint whose entries are already there, an engine that
	// asks once the link has moved clears the note below.
	if _, err := d.links.LinkByName(ifname); !errors.Is(err, netns.ErrLinkNotFound) {
		if ready {
			return nil
		}
		why := strictEarlyCall
		if err != nil {
			why = fmt.Sprintf("cannot tell whether the container has its addresses yet (look up %s: %v)", ifname, err)
		}
		d.strictFallsBack(nid, eid, why)
		return nil
	}
	d.mu.Lock()
	delete(d.strictNotes, nid) // this engine asks once the addresses are set (one upgraded to 28+, say)
	d.mu.Unlock()
	if done != nil {
		select {
		case <-done: // bounded by the watch's deadline
		case <-d.stopping:
			return fmt.Errorf("rdma-macvlan is stopping (plugin disabled, upgraded or restarted) before the container's GID entries appeared, and network %s has gid_check=strict: start the container again once the plugin is enabled",
				ShortID(nid))
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	// A watch that has just ended may still be recording its outcome under
	// the claim on the endpoint (its done closes after that, but a watch
	// that ended before this call began is no longer the tracker's): wait
	// for the claim, then read the outcome.
	d.claim(eid)
	d.release(eid)
	e, ok := d.endpoints[eid]
	if !ok {
		return fmt.Errorf("endpoint %s of network %s was deleted while its start waited for its GID entries (gid_check=strict)", ShortID(eid), ShortID(nid))
	}
	if e.RDMAReady {
		return nil
	}
	reason := e.RDMAReason
	if reason == "" {
		reason = "its GID entries are not in the table"
	}
	return &StrictNotReadyError{Msg: fmt.Sprintf("container is not RDMA-ready and network %s has gid_check=strict: %s", ShortID(nid), reason)}
}

// StrictNotReadyError is gid_check=strict failing a container's start: its
// GID entries are not in the table. It is logged as a failure, not as a
// Refusal (the kernel did not add entries it should have), and the metrics
// count it as a refusal of the start (reason gid_check_strict).
type StrictNotReadyError struct{ Msg string }

func (e *StrictNotReadyError) Error() string { return e.Msg }

// strictEarlyCall says why gid_check=strict cannot hold a start on engines
// before Docker 28.
const strictEarlyCall = "the engine asks before the container has its addresses (Docker before 28 calls ProgramExternalConnectivity inside Join): " +
	"gid_check=strict cannot hold the start there and works as warn (the GID watch); docker rdma run waits for the GIDs on any engine"

// strictFallsBack records that strict could not be enforced for a start on
// network nid, and logs it the first time.
func (d *Driver) strictFallsBack(nid, eid, why string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.networks[nid]; !ok {
		return
	}
	first := d.strictNotes[nid] == ""
	d.strictNotes[nid] = why
	log := d.logFor("ProgramExternalConnectivity", logrus.Fields{"nid": ShortID(nid), "eid": ShortID(eid)})
	if first {
		log.WithField("reason", why).Warn("gid_check=strict falls back to the watch on this network")
	} else {
		log.Debug("gid_check=strict falls back to the watch")
	}
}
