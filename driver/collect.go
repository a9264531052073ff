package driver

import (
	"errors"
	"slices"
	"time"

	"github.com/rdma-macvlan/rdma-macvlan/netns"
	"github.com/sirupsen/logrus"
)

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
		e                         *epState
		ifname, mac, nid, sandbox string
	}
	var cand []candidate
	d.mu.Lock()
	byMAC := make(map[string]bool, len(d.endpoints))
	for e := range d.live {
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
func (d *Driver) collect(e *epState, log *logrus.Entry) bool {
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
	d.forget(&e.endpoint)
	log.Warn("endpoint collected: its container is gone (removed while rdma-macvlan was not running); its GID entries are free again")
	return true
}
