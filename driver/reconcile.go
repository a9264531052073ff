package driver

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/rdma-macvlan/rdma-macvlan/netns"
	"github.com/sirupsen/logrus"
)

// Ownership. A daemon instance (one state directory) marks everything it
// creates on the host with its owner mark, "rdma-macvlan <instance ID>":
// container links and VLAN sub-interfaces carry it as their ifalias, CDI
// specs as their rdma-macvlan/owner annotation. It deletes or replaces only
// objects with its mark. Anything else under a name it needs is a conflict,
// refused with an error that names the object and the fix; it is never
// deleted. Objects of the one release before the mark (VLAN sub-interfaces
// its records say it created, CDI specs) carry no mark and are adopted.

// ownerMark is the mark of the instance with ID id.
func ownerMark(id string) string { return "rdma-macvlan " + id }

// recoverInstanceID finds the ID of a state directory whose instance file
// is lost, from the marks of the links its records name in the host
// namespace: container links not in a container and the VLAN
// sub-interfaces its networks made. It returns "" when the records name
// no such link, or links with different marks. Without it, a lost file
// would give a new ID, and the instance would no longer own its links.
func recoverInstanceID(st *store, links Links, log *logrus.Entry) string {
	nets, eps, problems, err := st.load()
	// Set aside here, so restore would not see them again.
	for _, p := range problems {
		log.WithError(p.Err).WithField("file", p.Path).Error("state file unusable; set aside, the objects in it are forgotten")
	}
	if err != nil || len(nets)+len(eps) == 0 {
		return ""
	}
	named := map[string]bool{}
	for _, e := range eps {
		named[e.Ifname] = true
	}
	for _, n := range nets {
		if n.VLAN != nil && n.VLAN.Created {
			named[n.Parent] = true
		}
	}
	all, err := links.Links()
	if err != nil {
		return ""
	}
	found := ""
	for _, l := range all {
		id, ok := strings.CutPrefix(l.Alias, ownerMark(""))
		if !named[l.Name] || !ok || !idRE.MatchString(id) {
			continue
		}
		if found != "" && found != id {
			return ""
		}
		found = id
	}
	return found
}

// clearStaleLink makes way for a new container link called name: a link of
// that name this instance made (a crash left it) is deleted; any other is a
// conflict.
func (d *Driver) clearStaleLink(name string) error {
	l, err := d.links.LinkByName(name)
	switch {
	case errors.Is(err, netns.ErrLinkNotFound):
		return nil
	case err != nil:
		return fmt.Errorf("look up link %s: %w", name, err)
	case l.Kind != "macvlan" || l.Alias != d.owner:
		return conflictf("link %s exists and was not made by this rdma-macvlan instance (kind %s, ifalias %q, not %q): delete it if nothing uses it (ip link del %s), then start the container again",
			name, l.Kind, l.Alias, d.owner, name)
	}
	if err := d.links.DeleteLink(name); err != nil {
		return fmt.Errorf("remove stale link %s: %w", name, err)
	}
	return nil
}

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
		if n.MTU != 0 && n.Options[OptMTU] == "" && n.Options[OptEngineMTU] == "" {
			// Records written before the MTU followed the parent hold the
			// parent's MTU at creation; the user asked for none.
			n.MTU = 0
		}
		d.fillCDIName(n, log)
	}
	d.mu.Lock()
	for _, n := range nets {
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
	for _, e := range d.endpoints {
		// Watches do not survive a restart: resume those that were running.
		if e.Sandbox != "" && !e.RDMAReady {
			d.gids.Watch(e.ID)
		}
		if e.Sandbox == "" {
			unjoined = append(unjoined, e.ID)
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
		e, ok := d.endpoints[id]
		if !ok || e.Sandbox != "" {
			d.release(id)
			d.mu.Unlock()
			continue
		}
		l := log.WithFields(logrus.Fields{"eid": ShortID(id), "nid": ShortID(e.NetworkID)})
		err := d.deleteClaimed(e, l)
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
func (d *Driver) restoreVLAN(n *Network, log *logrus.Entry) {
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
func (d *Driver) sweepOrphans(log *logrus.Entry) (int, error) {
	links, err := d.links.Links()
	if err != nil {
		return 0, fmt.Errorf("list links: %w", err)
	}
	d.mu.Lock()
	owned := make(map[string]bool, len(d.endpoints))
	for _, e := range d.endpoints {
		owned[e.Ifname] = true
		owned[e.Parent] = true
	}
	for _, n := range d.networks {
		owned[n.Parent] = true
	}
	d.mu.Unlock()
	n := 0
	for _, l := range links {
		ours := l.Alias == d.owner && !owned[l.Name] &&
			(l.Kind == "macvlan" && strings.HasPrefix(l.Name, LinkPrefix) || l.Kind == "vlan")
		if !ours {
			continue
		}
		if err := d.links.DeleteLink(l.Name); err != nil {
			log.WithError(err).WithField("ifname", l.Name).Warn("could not delete orphan link")
			continue
		}
		n++
		log.WithField("ifname", l.Name).Info("orphan link deleted")
	}
	return n, nil
}

// collectIfDue is GID admission's last resort before it refuses an
// endpoint: it collects the endpoints of removed containers (collectGone),
// at most every collectEvery.
func (d *Driver) collectIfDue(log *logrus.Entry) int {
	d.mu.Lock()
	due := time.Since(d.lastCollect) >= d.collectEvery
	d.mu.Unlock()
	if !due {
		return 0
	}
	return d.collectGone(log)
}

// collectGone deletes the records of joined endpoints whose container is
// gone without Docker telling the driver: a container removed while the
// plugin was down or disabled, by a dockerd crash or a reboot with a legacy
// plugin, or a forced delete. Their GID reservations would otherwise last
// until their network is removed. An endpoint is gone when its link is
// neither in the host namespace nor in any namespace that has an ID here:
// libnetwork's move of the link into the container gives the container's
// namespace one for as long as it exists, and the kernel destroys the
// macvlan with the namespace. When other namespaces cannot be read, or a link
// there carries this driver's mark with a MAC no endpoint has (so matching
// by MAC cannot be trusted), nothing is collected. It reads the kernel
// without d.mu, and deletes each record under the endpoint's claim.
func (d *Driver) collectGone(log *logrus.Entry) int {
	// One dump of the host's links instead of a look-up per endpoint (a
	// thousand of them at start-up).
	inHost := func(name string) bool {
		_, err := d.links.LinkByName(name)
		return !errors.Is(err, netns.ErrLinkNotFound)
	}
	if links, err := d.links.Links(); err == nil {
		names := make(map[string]bool, len(links))
		for _, l := range links {
			names[l.Name] = true
		}
		inHost = func(name string) bool { return names[name] }
	}
	type candidate struct {
		e                         *Endpoint
		ifname, mac, nid, sandbox string
	}
	var cand []candidate
	d.mu.Lock()
	byMAC := make(map[string]bool, len(d.endpoints))
	for _, e := range d.endpoints {
		byMAC[e.MAC] = true
		if e.Sandbox == "" {
			continue // not in a container: the unjoined grace handles it
		}
		if d.busy[e.ID] != nil {
			continue // a call is changing it: not gone
		}
		cand = append(cand, candidate{e, e.Ifname, e.MAC, e.NetworkID, e.Sandbox})
	}
	d.mu.Unlock()
	cand = slices.DeleteFunc(cand, func(c candidate) bool { return inHost(c.ifname) })
	if len(cand) == 0 {
		return 0
	}
	d.mu.Lock()
	d.lastCollect = time.Now()
	d.mu.Unlock()
	peers, err := d.links.PeerLinks(d.owner)
	if err != nil {
		log.WithError(err).Warn("cannot read other network namespaces; endpoints of removed containers are kept")
		return 0
	}
	alive := make(map[string]bool, len(peers))
	for _, l := range peers {
		mac := l.MAC.String()
		if !byMAC[mac] {
			log.WithFields(logrus.Fields{"ifname": l.Name, "mac": mac}).
				Warn("a container link of this daemon has a MAC no endpoint has; not collecting endpoints of removed containers")
			return 0
		}
		alive[mac] = true
	}
	collected := 0
	for _, c := range cand {
		if alive[c.mac] {
			continue
		}
		// Moved back to the host (a Leave under way) while we looked?
		if _, err := d.links.LinkByName(c.ifname); !errors.Is(err, netns.ErrLinkNotFound) {
			continue
		}
		elog := log.WithFields(logrus.Fields{"eid": ShortID(c.e.ID), "nid": ShortID(c.nid), "sandbox": c.sandbox})
		if d.collect(c.e, elog) {
			collected++
		}
	}
	return collected
}

// collect deletes the record of endpoint e, found gone, unless a call has
// begun to work on it, or changed it, since.
func (d *Driver) collect(e *Endpoint, log *logrus.Entry) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.busy[e.ID] != nil || d.endpoints[e.ID] != e || e.Sandbox == "" {
		return false
	}
	d.claim(e.ID) // not busy: no wait
	defer d.release(e.ID)
	d.gids.StopWatch(e.ID)
	d.mu.Unlock()
	err := d.store.deleteEndpoint(e.ID)
	d.mu.Lock()
	if err != nil {
		log.WithError(err).Warn("could not delete the record of an endpoint whose container is gone")
		return false
	}
	d.forget(e)
	log.Warn("endpoint collected: its container is gone (removed while rdma-macvlan was not running); its GID entries are free again")
	return true
}
