package driver

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/rdma-macvlan/rdma-macvlan/netns"
	"github.com/rdma-macvlan/rdma-macvlan/rdma"
	"github.com/sirupsen/logrus"
)

// EndpointGID is one RoCE GID entry of an endpoint.
type EndpointGID struct {
	Index int    `json:"index"`
	Type  string `json:"type"`
	GID   string `json:"gid"`
}

// endpointGIDs are the GIDs (kernel text) the kernel will add for an
// endpoint once libnetwork has set its addresses.
type endpointGIDs struct {
	// Required make the endpoint RDMA-ready: its IPv4 address's, or its
	// IPv6 address's on an IPv6-only network.
	Required []string
	// Optional are expected but may never come: the IPv6 address's beside
	// an IPv4 one, and the link-local's on an IPv6 network. A container
	// with IPv6 disabled (--sysctl net.ipv6.conf.all.disable_ipv6=1, or
	// Docker 28's per-endpoint IPv6 off) has neither.
	Optional []string
	// LinkLocal is the GID of the IPv6 link-local address the kernel
	// derives from the MAC: expected (in Optional) on IPv6 networks; on
	// IPv4-only networks the engines disable IPv6 in the container (Docker
	// 20.10 does, measured with a real rxe device), but a container that
	// turns it on gets it, and it is then reported with the others.
	LinkLocal string
}

// gidsOf returns what the kernel will add for e on a network with (ipv6) or
// without IPv6.
func gidsOf(e *Endpoint, ipv6 bool) endpointGIDs {
	var g endpointGIDs
	var v4, v6 string
	if ip, _, err := net.ParseCIDR(e.IPv4); err == nil {
		v4 = rdma.GIDFromIP(ip)
	}
	if ip, _, err := net.ParseCIDR(e.IPv6); err == nil {
		v6 = rdma.GIDFromIP(ip)
	}
	switch {
	case v4 != "":
		g.Required = []string{v4}
		if v6 != "" {
			g.Optional = append(g.Optional, v6)
		}
	case v6 != "":
		g.Required = []string{v6}
	}
	if mac, err := net.ParseMAC(e.MAC); err == nil {
		g.LinkLocal = rdma.DefaultGID(mac)
		if ipv6 {
			g.Optional = append(g.Optional, g.LinkLocal)
		}
	}
	return g
}

// gidsOfEndpoint is gidsOf for e of network n, computed once. Caller holds
// d.mu.
func (d *Driver) gidsOfEndpoint(n *Network, e *Endpoint) endpointGIDs {
	if e.gids == nil {
		g := gidsOf(e, n.ipv6())
		e.gids = &g
	}
	return *e.gids
}

// expected lists the GIDs admission reserves room for.
func (g endpointGIDs) expected() []string { return append(slices.Clone(g.Required), g.Optional...) }

// observed lists every GID of the endpoint worth looking up in the table.
func (g endpointGIDs) observed() []string {
	out := g.expected()
	if g.LinkLocal != "" && !slices.Contains(out, g.LinkLocal) {
		out = append(out, g.LinkLocal)
	}
	return out
}

func (n *Network) ipv6() bool { return n.EnableIPv6 || len(n.IPv6) > 0 }

// findGIDs finds the table entries of each of want, reading the type of
// the entries found only. A GID is complete when it has one entry per RoCE
// type of the port; missing lists the ones that are not.
func (d *Driver) findGIDs(r NetworkRDMA, table rdma.GIDTable, want []string, types int) (found []EndpointGID, missing []string) {
	for _, w := range want {
		idx := table.ByGID[w]
		for _, i := range idx {
			found = append(found, EndpointGID{Index: i, Type: d.rdma.GIDType(r.HCA, r.Port, i), GID: w})
		}
		if len(idx) < types {
			missing = append(missing, w)
		}
	}
	return found, missing
}

// missingIn lists the GIDs of want that have fewer entries than the port's
// RoCE types in table. It reads nothing from sysfs.
func missingIn(table rdma.GIDTable, want []string, types int) []string {
	var missing []string
	for _, w := range want {
		if len(table.ByGID[w]) < types {
			missing = append(missing, w)
		}
	}
	return missing
}

// foundIn lists every entry of g in table, with its type (read from sysfs
// for the entries found only).
func (d *Driver) foundIn(r NetworkRDMA, table rdma.GIDTable, g endpointGIDs, types int) []EndpointGID {
	found, _ := d.findGIDs(r, table, g.observed(), types)
	return found
}

// admit sets what e will take from its port's GID table (e.GIDNeed: its
// addresses times types, the port's RoCE types per address) and refuses it if the table cannot hold that. It counts the free slots of
// table (read at at) and subtracts what endpoints not yet seen in it will
// take, so that concurrent starts cannot overcommit. It looks only at the
// port's unsettled endpoints (portAcct), not at every endpoint. It changes
// nothing but e's need and the accounting's bookkeeping, except that a
// refusal on a full read (mayCollect) first collects the endpoints of
// removed containers (collectGone, at most every 10 s). Caller holds d.mu.
func (d *Driver) admit(n *Network, e *Endpoint, table rdma.GIDTable, at time.Time, types int, mayCollect bool) (tooFull bool, err error) {
	r := n.RDMA
	e.GIDTypes = types
	addrs := len(gidsOf(e, n.ipv6()).expected())
	if e.MAC == "" && n.ipv6() {
		addrs++ // the link-local address of the MAC the kernel will choose
	}
	e.GIDNeed = addrs * e.GIDTypes
	held, starting := d.heldOn(portKey{r.HCA, r.Port}, table, at)
	free := table.Size - table.Used
	if e.GIDNeed <= free-held {
		return false, nil
	}
	if mayCollect && time.Since(d.lastCollect) >= d.collectEvery &&
		d.collectGone(d.logFor("CreateEndpoint", logrus.Fields{"nid": ShortID(n.ID)})) > 0 {
		// They held reservations: look once more.
		if held, starting = d.heldOn(portKey{r.HCA, r.Port}, table, at); e.GIDNeed <= free-held {
			return false, nil
		}
	}
	return true, &TableFullError{HCA: r.HCA, Port: r.Port, Need: e.GIDNeed, Free: max(free, 0), Size: table.Size, Held: held, Starting: starting,
		Msg: fmt.Sprintf("GID table of RDMA device %s port %d is too full for this container: it needs %d entries (%d addresses x RoCE types), %d of %d are free and %d are held for %d containers still starting. Each container holds its entries until it stops: stop or disconnect containers on this port (parent %q), or use a parent on another port",
			r.HCA, r.Port, e.GIDNeed, addrs, max(free, 0), table.Size, held, starting, n.Parent)}
}

// heldOn counts the entries that endpoints on port key will take and table
// (read at at) does not show yet. Entries already there are counted in the
// table, not twice. An endpoint whose entries were found in a read no newer
// than at is settled: table shows them, and every later table will, so it
// leaves the accounting for good. Caller holds d.mu.
func (d *Driver) heldOn(key portKey, table rdma.GIDTable, at time.Time) (held, starting int) {
	a := d.ports[key]
	if a == nil {
		return 0, 0
	}
	for id, o := range a.unsettled {
		if o.RDMAReady && !o.readyAt.After(at) {
			delete(a.unsettled, id)
			continue
		}
		on, ok := d.networks[o.NetworkID]
		if !ok {
			continue
		}
		have := 0
		for _, g := range d.gidsOfEndpoint(on, o).observed() {
			have += len(table.ByGID[g])
		}
		if missing := max(o.GIDNeed-have, 0); missing > 0 {
			held += missing
			starting++
		}
	}
	return held, starting
}

// portKey names one HCA port.
type portKey struct {
	hca  string
	port int
}

// tableSnap is the last read of a port's GID table.
type tableSnap struct {
	at    time.Time // when the read began
	full  time.Time // when the last read of every slot began
	table rdma.GIDTable
}

// How fresh a GID table must be (see table).
type tableRead int

const (
	// readCached accepts a snapshot up to GIDTableMaxAge old; older, it
	// reads what may have changed (readChanges).
	readCached tableRead = iota
	// readChanges reads the lowest free slots and the slots of entries
	// known to be going, or every slot when the last full read is
	// fullEvery old.
	readChanges
	// readFull reads every slot.
	readFull
)

// defaultFullEvery bounds how long a table read only in part (readChanges)
// may miss a change elsewhere: an entry the kernel removed without the
// driver knowing (an address removed by hand, a container gone without
// Leave), or an entry added where such an entry was. A GID watch that has
// waited slowWatch polls reads every slot at most once per slowWatch polls
// too, and every refusal and every timeout is decided on a full read: a
// container's start never waits on a stale view for long.
const (
	defaultFullEvery = 30 * time.Second
	slowWatch        = 10
)

// table returns the GID table of r's port and when its read began; full
// reports whether every slot was read then. Reads of the tables are
// serialized (not under d.mu) and each one starts from the last. With
// GIDTableMaxAge 0 every read is a full one: the table is exact at every
// call. more is how many new entries the caller expects (how many free
// slots to look at beyond the few always read); a partial read becomes a
// full one when the last full read is fullAge old (0: d.fullEvery).
func (d *Driver) table(r NetworkRDMA, how tableRead, more int, fullAge time.Duration) (t rdma.GIDTable, at time.Time, full bool, err error) {
	key := portKey{r.HCA, r.Port}
	if fullAge <= 0 {
		fullAge = d.fullEvery
	}
	if d.tableMaxAge <= 0 {
		how = readFull
	}
	d.tableReadMu.Lock()
	defer d.tableReadMu.Unlock()
	d.tablesMu.Lock()
	snap, ok := d.tables[key]
	going := d.going[key]
	d.tablesMu.Unlock()
	now := time.Now()
	if ok && how == readCached && now.Sub(snap.at) < d.tableMaxAge {
		return snap.table, snap.at, false, nil
	}
	if !ok || how == readFull || snap.table.Slots == nil || now.Sub(snap.full) >= fullAge {
		if t, err = d.rdma.Table(r.HCA, r.Port); err != nil {
			return t, now, false, err
		}
		d.tablesMu.Lock()
		d.tables[key] = tableSnap{at: now, full: now, table: t}
		delete(d.going, key)
		d.tablesMu.Unlock()
		return t, now, true, nil
	}
	idx := snap.table.FreeSlots(minFreeLook + more)
	for i := range going {
		idx = append(idx, i)
	}
	if t, err = d.rdma.Refresh(r.HCA, r.Port, snap.table, idx); err != nil {
		return t, now, false, err
	}
	d.tablesMu.Lock()
	d.tables[key] = tableSnap{at: now, full: snap.full, table: t}
	for i := range going {
		if i >= len(t.Slots) || t.Slots[i] == "" {
			delete(d.going[key], i)
		}
	}
	d.tablesMu.Unlock()
	return t, now, false, nil
}

// minFreeLook is how many of the lowest free slots a partial read always
// looks at: the kernel puts new entries there.
const minFreeLook = 8

// entriesGoing has partial table reads look at the slots where e's
// entries were last seen until they are empty: e left its container or is
// deleted, and its entries go with its addresses. Caller holds d.mu.
func (d *Driver) entriesGoing(e *Endpoint) {
	key, ok := d.portOf(e)
	if !ok {
		return
	}
	n := d.networks[e.NetworkID]
	d.tablesMu.Lock()
	defer d.tablesMu.Unlock()
	snap, ok := d.tables[key]
	if !ok {
		return
	}
	for _, g := range d.gidsOfEndpoint(n, e).observed() {
		for _, i := range snap.table.ByGID[g] {
			if d.going[key] == nil {
				d.going[key] = map[int]bool{}
			}
			d.going[key][i] = true
		}
	}
	for _, g := range e.GIDs {
		if d.going[key] == nil {
			d.going[key] = map[int]bool{}
		}
		d.going[key][g.Index] = true
	}
}

// roceTypes returns the number of RoCE types (entries per address) of r's
// port, recorded when the network was created (records of older versions
// have none: read it from the table then).
func (d *Driver) roceTypes(r *NetworkRDMA) int {
	if r.Types > 0 {
		return r.Types
	}
	return d.rdma.RoCETypesPerAddress(r.HCA, r.Port)
}

// gidWatch follows one endpoint's GID entries after Join. Its port's poller
// alone reads and changes the fields below done.
type gidWatch struct {
	eid      string
	port     portKey
	want     endpointGIDs
	types    int       // RoCE types of the port (entries per address)
	start    time.Time // its first look comes one poll interval later
	deadline time.Time
	done     chan struct{} // closed when the watch ends, whatever the reason
	once     sync.Once     // closes done

	grace   int // polls left for optional GIDs once the required are there; -1: not yet
	missing []string
	last    rdma.GIDTable // the last table read
	lastAt  time.Time     // when its read began
}

// portPoller reads one port's GID table for every endpoint waiting on it,
// and stops when none waits.
type portPoller struct {
	r       NetworkRDMA
	watches map[string]*gidWatch // by endpoint ID; guarded by Driver.mu
}

// startWatch has e's port poller look for e's entries until they are all
// there or the GID timeout passes. It never blocks the caller, which holds
// d.mu.
func (d *Driver) startWatch(n *Network, e *Endpoint) {
	d.stopWatch(e.ID)
	r := *n.RDMA
	now := time.Now()
	w := &gidWatch{eid: e.ID, port: portKey{r.HCA, r.Port}, want: d.gidsOfEndpoint(n, e),
		// CreateEndpoint learned the port's RoCE types; reuse them instead
		// of reading them once more (0: not known).
		types: e.GIDTypes, start: now, deadline: now.Add(d.gidTimeout), done: make(chan struct{}), grace: -1}
	d.watches[e.ID] = w
	p, ok := d.pollers[w.port]
	if !ok {
		p = &portPoller{r: r, watches: map[string]*gidWatch{}}
		d.pollers[w.port] = p
		d.pollWG.Add(1)
		go d.poll(w.port, p)
	}
	p.watches[e.ID] = w
}

// stopWatch ends e's watch, if any. Caller holds d.mu.
func (d *Driver) stopWatch(eid string) {
	if w, ok := d.watches[eid]; ok {
		d.endWatch(w)
	}
}

// endWatch takes w off its port and ends it. Caller holds d.mu.
func (d *Driver) endWatch(w *gidWatch) {
	d.unwatch(w)
	w.end()
}

// unwatch takes w off its port. Caller holds d.mu.
func (d *Driver) unwatch(w *gidWatch) {
	delete(d.watches, w.eid)
	if p, ok := d.pollers[w.port]; ok {
		delete(p.watches, w.eid)
	}
}

// end tells whoever waits on w that it is over.
func (w *gidWatch) end() { w.once.Do(func() { close(w.done) }) }

// optionalGrace is how many more polls the watch looks for an endpoint's
// optional GIDs once its required ones are there. The kernel adds the
// entries of all the addresses libnetwork sets within one poll or two; one
// that has not come by then (IPv6 disabled in the container) never will.
const optionalGrace = 4

// poll reads the GID table of one port every poll interval, one read for
// all the endpoints waiting on it, and ends their watches as their entries
// appear or their time runs out. The table is read without d.mu.
func (d *Driver) poll(key portKey, p *portPoller) {
	defer d.pollWG.Done()
	tick := time.NewTicker(d.gidPoll)
	defer tick.Stop()
	log := d.logFor("gid-watch", logrus.Fields{"ibdev": key.hca, "port": key.port})
	var ws []*gidWatch
	for {
		select {
		case <-d.closing:
			return
		case <-tick.C:
		}
		now := time.Now()
		d.mu.Lock()
		if len(p.watches) == 0 {
			if d.pollers[key] == p {
				delete(d.pollers, key)
			}
			d.mu.Unlock()
			return
		}
		ws = ws[:0]
		for _, w := range p.watches {
			// The first look waits one interval: libnetwork sets the
			// addresses only after Join returns, so a look at Join time
			// cannot find their entries.
			if now.Sub(w.start) >= d.gidPoll || now.After(w.deadline) {
				ws = append(ws, w)
			}
		}
		d.mu.Unlock()
		if len(ws) == 0 {
			continue
		}
		how, more, fullAge := readChanges, 0, time.Duration(0)
		for _, w := range ws {
			more += len(w.want.observed()) * max(w.types, 1)
			if now.After(w.deadline) {
				how = readFull // a timeout is decided on every slot
			}
			if slow := slowWatch * d.gidPoll; now.Sub(w.start) >= slow {
				fullAge = slow // slower than a start: look everywhere
			}
		}
		table, at, _, err := d.table(p.r, how, more, fullAge)
		for _, w := range ws {
			wlog := log.WithField("eid", ShortID(w.eid))
			if len(w.want.Required) == 0 {
				d.finishWatch(w, nil, "the endpoint has no IP address; RoCE needs one", at, wlog)
				continue
			}
			if err == nil {
				if w.types <= 0 {
					w.types = d.rdma.RoCETypesPerAddress(p.r.HCA, p.r.Port)
				}
				// Counting needs no sysfs read; the entries' types are read
				// once, when the watch ends.
				w.last, w.lastAt = table, at
				w.missing = missingIn(table, w.want.Required, w.types)
				optional := missingIn(table, w.want.Optional, w.types)
				switch {
				case len(w.missing) > 0:
					w.grace = -1 // an entry went again: start over
				case len(optional) == 0 || w.grace == 0:
					d.finishWatch(w, d.foundIn(p.r, table, w.want, w.types), "", at, wlog)
					continue
				case w.grace < 0:
					w.grace = optionalGrace
				default:
					w.grace--
				}
			} else if w.missing == nil {
				w.missing = w.want.Required
			}
			if now.After(w.deadline) {
				if w.grace >= 0 {
					d.finishWatch(w, d.foundIn(p.r, w.last, w.want, w.types), "", w.lastAt, wlog)
				} else {
					d.finishWatch(w, nil, d.notReadyReason(p.r, w.missing), at, wlog)
				}
			}
		}
	}
}

func (d *Driver) notReadyReason(r NetworkRDMA, missing []string) string {
	reason := fmt.Sprintf("GID entries for %s did not appear in the table of %s port %d within %s",
		strings.Join(missing, ", "), r.HCA, r.Port, d.gidTimeout)
	if pi, err := d.rdma.Port(r.HCA, r.Port); err == nil {
		if table, err := d.rdma.GIDs(r.HCA, r.Port); err == nil {
			free := pi.GIDTableSize - len(table)
			if free <= 0 {
				return reason + ": the table is full (the kernel logs __ib_cache_gid_add ... error=-28); stop containers on this port, then restart this one"
			}
			reason += fmt.Sprintf(" (%d of %d entries free)", free, pi.GIDTableSize)
		}
		if !pi.Active() {
			reason += fmt.Sprintf("; the port is %s", pi.State)
		}
	}
	return reason + " (check: ip addr in the container; cat /sys/class/infiniband/" + r.HCA + "/ports/" + fmt.Sprint(r.Port) + "/gids/*)"
}

// finishWatch records the outcome of w, unless the endpoint was deleted,
// left or re-joined meanwhile, and ends w. at is when the table read that
// found the entries began. The record is written without d.mu, under the
// claim on the endpoint; w.done is closed once the outcome is in memory.
func (d *Driver) finishWatch(w *gidWatch, found []EndpointGID, reason string, at time.Time, log *logrus.Entry) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.watches[w.eid] != w {
		return
	}
	d.claim(w.eid)
	defer d.release(w.eid)
	if d.watches[w.eid] != w { // stopped while we waited for the claim
		return
	}
	defer w.end()
	d.unwatch(w)
	e, ok := d.endpoints[w.eid]
	if !ok {
		return
	}
	rec := *e
	rec.GIDs, rec.RDMAReady, rec.RDMAReason = found, reason == "", reason
	if reason == "" {
		// From now on the endpoint holds what it really got: an address
		// the container does not have (IPv6 disabled in it) reserves no
		// entries.
		rec.GIDNeed = len(found)
	}
	d.mu.Unlock()
	err := d.store.saveEndpointUnsynced(&rec)
	d.mu.Lock()
	if err != nil {
		log.WithError(err).Error("could not record the endpoint's GIDs")
		return
	}
	e.GIDs, e.RDMAReady, e.RDMAReason, e.GIDNeed = rec.GIDs, rec.RDMAReady, rec.RDMAReason, rec.GIDNeed
	if reason == "" {
		e.readyAt = at
	}
	d.track(e)
	if reason != "" {
		log.WithField("reason", reason).Warn("endpoint not RDMA-ready")
		return
	}
	idx := make([]string, 0, len(found))
	for _, g := range found {
		idx = append(idx, fmt.Sprintf("%d(%s)", g.Index, g.Type))
	}
	log.WithField("gids", strings.Join(idx, " ")).Info("endpoint rdma ready")
}

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
	e, eok := d.endpoints[eid]
	if eok {
		if err := checkEndpointNetwork(e, nid); err != nil {
			d.mu.Unlock()
			return err
		}
	}
	n, nok := d.networks[nid]
	if !eok || !nok || n.RDMA == nil || n.GIDCheck != GIDCheckStrict {
		d.mu.Unlock()
		return nil
	}
	w := d.watches[eid]
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
	n.strictNote = "" // this engine asks once the addresses are set (one upgraded to 28+, say)
	d.mu.Unlock()
	if w != nil {
		select {
		case <-w.done: // bounded by the watch's deadline
		case <-d.stopping:
			return fmt.Errorf("rdma-macvlan is stopping (plugin disabled, upgraded or restarted) before the container's GID entries appeared, and network %s has gid_check=strict: start the container again once the plugin is enabled",
				ShortID(nid))
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	// A watch that has just ended may still be recording its outcome under
	// the claim on the endpoint (its w.done closes after that, but a watch
	// that ended before this call began is no longer in d.watches): wait
	// for the claim, then read the outcome.
	d.claim(eid)
	d.release(eid)
	if e, eok = d.endpoints[eid]; !eok {
		return fmt.Errorf("endpoint %s of network %s was deleted while its start waited for its GID entries (gid_check=strict)", ShortID(eid), ShortID(nid))
	}
	if e.RDMAReady {
		return nil
	}
	reason := e.RDMAReason
	if reason == "" {
		reason = "its GID entries are not in the table"
	}
	return fmt.Errorf("container is not RDMA-ready and network %s has gid_check=strict: %s", ShortID(nid), reason)
}

// strictEarlyCall says why gid_check=strict cannot hold a start on engines
// before Docker 28.
const strictEarlyCall = "the engine asks before the container has its addresses (Docker before 28 calls ProgramExternalConnectivity inside Join): " +
	"gid_check=strict cannot hold the start there and works as warn (the GID watch); docker rdma run waits for the GIDs on any engine"

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

// stopWatches ends every watch and waits for the port pollers to stop.
func (d *Driver) stopWatches() {
	d.mu.Lock()
	for _, w := range d.watches {
		d.endWatch(w)
	}
	select {
	case <-d.closing:
	default:
		close(d.closing)
	}
	d.mu.Unlock()
	d.pollWG.Wait()
}
