package driver

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/rdma-macvlan/rdma-macvlan/api"
	"github.com/rdma-macvlan/rdma-macvlan/netns"
	"github.com/sirupsen/logrus"
)

// restore loads the state and makes the host agree with it. Problems with
// single objects are logged and skipped: the daemon keeps serving the others.
// It runs before the driver serves any call, and holds d.mu only to fill
// and read the driver's maps (the watches it resumes may finish, and change
// them, before it is done).
func (d *Driver) restore() error {
	// Entries of endpoints found ready before the restart count as held
	// until a table read after this moment shows them.
	started := time.Now()
	nets, eps, problems, err := d.store.load()
	if err != nil {
		return err
	}
	log := d.logFor("restore", nil)
	for _, p := range problems {
		log.WithError(p.Err).WithField("file", p.Path).Error("state file unusable; set aside, the objects in it are forgotten")
	}
	for _, n := range nets {
		if n.MTU != 0 && n.Options[api.OptMTU] == "" && n.Options[OptEngineMTU] == "" {
			// Records written before the MTU followed the parent hold the
			// parent's MTU at creation; the user asked for none.
			n.MTU = 0
		}
	}
	// The HCA names may have changed since the records were written
	// (another probe order at boot): find each network's HCA again before
	// the endpoints are tracked on its port and its CDI spec is written.
	states := make([]*netState, len(nets))
	for i, n := range nets {
		states[i] = &netState{network: n}
	}
	// No call is served yet: the problems are set without the locks.
	d.followHCAs(states, log)
	for _, n := range states {
		if n.hcaProblem == "" {
			d.fillCDIName(n.network, log)
		}
	}
	d.mu.Lock()
	for _, n := range states {
		d.networks[n.ID] = n
	}
	for _, e := range eps {
		if _, ok := d.networks[e.NetworkID]; !ok {
			log.WithFields(logrus.Fields{"eid": ShortID(e.ID), "nid": ShortID(e.NetworkID)}).
				Warn("endpoint of an unknown network; kept so that its link can still be deleted")
		}
		d.addEndpoint(e, started)
	}
	d.mu.Unlock()
	for _, n := range nets {
		if n.VLAN != nil && n.VLAN.Created {
			d.restoreVLAN(n, log)
		}
	}
	// The CDI specs are reconciled after (see New).
	d.collectGone(log)
	var unjoined []string
	d.mu.Lock()
	for e := range d.live {
		// Watches do not survive a restart: resume those that were running.
		if e.Sandbox != "" && !e.RDMAReady {
			d.gids.Watch(e.ID)
			e.phase = epResumed
		}
		if e.Sandbox == "" {
			unjoined = append(unjoined, e.ID)
		} else if d.networks[e.NetworkID].addressCheck() != api.AddressCheckOff {
			d.watchParent(e.Parent)
		}
	}
	if len(unjoined) > 0 {
		d.gcTimer = time.AfterFunc(d.grace, func() { d.deleteUnjoined(unjoined) })
	}
	d.mu.Unlock()
	swept, err := d.sweepOrphans(log)
	if err != nil {
		// Not fatal: the links stay until the next start.
		log.WithError(err).Warn("could not sweep orphan links")
	}
	d.mu.Lock()
	nn, ne := len(d.networks), len(d.endpoints)
	d.mu.Unlock()
	log.WithFields(logrus.Fields{"networks": nn, "endpoints": ne, "orphans_deleted": swept}).Info("state restored")
	return nil
}

// deleteUnjoined deletes the endpoints of ids that are still not in a
// sandbox: their CreateEndpoint answer was lost in a crash (Docker then
// never joins nor deletes them), or their DeleteEndpoint was.
func (d *Driver) deleteUnjoined(ids []string) {
	log := d.logFor("gc", nil)
	for _, id := range ids {
		d.mu.Lock()
		d.claim(id)
		e, ok := d.endpoint(id)
		if !ok || e.Sandbox != "" {
			d.release(id)
			d.mu.Unlock()
			continue
		}
		l := log.WithFields(logrus.Fields{"eid": ShortID(id), "nid": ShortID(e.NetworkID)})
		err := d.deleteClaimed(&e.endpoint, l)
		d.release(id)
		d.mu.Unlock()
		if err != nil {
			l.WithError(err).Warn("could not delete an endpoint never joined since the restart")
			continue
		}
		l.WithField("grace", d.grace).Info("endpoint never joined since the restart: deleted")
	}
}

// restoreVLAN re-creates a VLAN sub-interface the driver owns that is
// missing (after a reboot, say), and marks one made before the mark.
func (d *Driver) restoreVLAN(n *network, log *logrus.Entry) {
	l, err := d.links.LinkByName(n.Parent)
	log = log.WithFields(logrus.Fields{"nid": ShortID(n.ID), "parent": n.Parent})
	if err == nil {
		if l.Kind == "vlan" && l.VLANID == n.VLAN.ID && l.Alias == "" {
			// Made by the release before the mark: the record says ours.
			if err := d.links.SetAlias(n.Parent, d.owner); err != nil {
				log.WithError(err).Warn("could not mark the vlan sub-interface as this instance's; it stays when its networks go")
			}
		}
		return
	}
	if !errors.Is(err, netns.ErrLinkNotFound) {
		log.WithError(err).Warn("could not look up vlan sub-interface")
		return
	}
	if err := d.createVLAN(n.Parent, n.VLAN); err != nil {
		log.WithError(err).Error("could not re-create vlan sub-interface; containers on this network cannot start until it exists")
	}
}

// sweepOrphans deletes links in the host namespace that this instance made
// (its ifalias) but that no record names: macvlans with its name prefix that
// belong to no known endpoint, and VLAN sub-interfaces that are no
// network's parent, left by a crash between creating a link and recording
// it. Links of another instance on the same host (another state directory)
// are not touched.
//
// A crash can also come between creating a container link and marking it:
// netns.CreateMacvlan sets the ifalias in a second netlink call, as the
// kernel ignores one given at creation. Such a link has no mark at all; it
// is deleted too when it is a macvlan with the name prefix on the parent
// of one of this instance's networks and no record names it. Another
// instance's link looks like that only between the two calls of its own
// CreateMacvlan, on the same parent, during this sweep: its CreateEndpoint
// then fails (the link it marks is gone) and Docker says so; no running
// container's link is touched. Unmarked links on a parent of no network of
// this instance never are.
func (d *Driver) sweepOrphans(log *logrus.Entry) (int, error) {
	links, err := d.links.Links()
	if err != nil {
		return 0, fmt.Errorf("list links: %w", err)
	}
	d.mu.Lock()
	owned := make(map[string]bool, len(d.endpoints))
	for e := range d.live {
		owned[e.Ifname] = true
		owned[e.Parent] = true
	}
	parents := make(map[string]bool, len(d.networks))
	for _, n := range d.networks {
		owned[n.Parent] = true
		parents[n.Parent] = true
	}
	d.mu.Unlock()
	ourParent := make(map[int]bool, len(parents))
	for _, l := range links {
		if parents[l.Name] {
			ourParent[l.Index] = true
		}
	}
	n := 0
	for _, l := range links {
		ours := l.Alias == d.owner && !owned[l.Name] &&
			(l.Kind == "macvlan" && strings.HasPrefix(l.Name, LinkPrefix) || l.Kind == "vlan")
		unmarked := l.Alias == "" && !owned[l.Name] && ourParent[l.ParentIndex] &&
			l.Kind == "macvlan" && strings.HasPrefix(l.Name, LinkPrefix)
		if !ours && !unmarked {
			continue
		}
		if err := d.links.DeleteLink(l.Name); err != nil {
			log.WithError(err).WithField("ifname", l.Name).Warn("could not delete orphan link")
			continue
		}
		n++
		log.WithFields(logrus.Fields{"ifname": l.Name, "unmarked": unmarked}).Info("orphan link deleted")
	}
	return n, nil
}
