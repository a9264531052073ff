package driver

import (
	"fmt"

	"github.com/sirupsen/logrus"
)

// Leave records that the endpoint left its sandbox; libnetwork moves the link
// back to the host namespace and DeleteEndpoint removes it. An unknown
// endpoint is not an error.
func (d *Driver) Leave(nid, eid string) error {
	if err := checkID("endpoint", eid); err != nil {
		return err
	}
	log := d.logFor("Leave", logrus.Fields{"nid": ShortID(nid), "eid": ShortID(eid)})
	e, err := d.claimEndpoint(nid, eid)
	if e == nil {
		if err == nil {
			log.Debug("endpoint not known; nothing to leave")
		}
		return err
	}
	d.gids.StopWatch(eid)
	if e.Sandbox == "" {
		d.release(eid)
		d.mu.Unlock()
		return nil
	}
	// The link leaves the sandbox without its addresses: its GIDs go.
	rec := e.endpoint
	rec.Sandbox, rec.GIDs, rec.RDMAReady, rec.RDMAReason, rec.Conflicts = "", nil, false, "", nil
	d.mu.Unlock()

	err = d.store.saveEndpointUnsynced(&rec)
	if err == nil {
		crashPoint("leave:state-written")
	}

	d.mu.Lock()
	defer d.mu.Unlock()
	defer d.release(eid)
	if err != nil {
		return fmt.Errorf("save endpoint %s: %w", ShortID(e.ID), err)
	}
	e.Sandbox, e.GIDs, e.RDMAReady, e.RDMAReason, e.Conflicts = "", nil, false, "", nil
	d.gids.Left(eid)
	log.WithField("ifname", e.Ifname).Info("endpoint left")
	return nil
}
