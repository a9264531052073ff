package driver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/rdma-macvlan/rdma-macvlan/rdma"
	"github.com/sirupsen/logrus"
)

// EndpointGID is one RoCE GID entry of an endpoint.
type EndpointGID struct {
	Index int    `json:"index"`
	Type  string `json:"type"`
	GID   string `json:"gid"`
}

// wantedGIDs lists the GIDs (kernel text) the kernel will add for e once
// libnetwork has set its addresses: one per address, and the IPv6
// link-local derived from its MAC where the network has IPv6.
func wantedGIDs(e *Endpoint, ipv6 bool) []string {
	var out []string
	for _, a := range []string{e.IPv4, e.IPv6} {
		if ip, _, err := net.ParseCIDR(a); err == nil {
			if g := rdma.GIDFromIP(ip); g != "" {
				out = append(out, g)
			}
		}
	}
	if ipv6 {
		if mac, err := net.ParseMAC(e.MAC); err == nil {
			out = append(out, rdma.DefaultGID(mac))
		}
	}
	return out
}

func (n *Network) ipv6() bool { return n.EnableIPv6 || len(n.IPv6) > 0 }

// linkLocal reports whether containers of n get an IPv6 link-local GID.
func (n *Network) linkLocal() bool { return n.ipv6() || n.LinkLocalSeen }

// findGIDs finds the table entries of each wanted GID, reading the type of
// the entries found only. An address is complete when it has one entry per
// RoCE type of the port.
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

// admit sets what e will take from its port's GID table (e.GIDNeed) and
// refuses it if the table cannot hold that. It counts the free slots and
// subtracts what endpoints created but not yet populated will take, so that
// concurrent starts cannot overcommit. Caller holds d.mu.
func (d *Driver) admit(n *Network, e *Endpoint) error {
	r := n.RDMA
	pi, err := d.rdma.Port(r.HCA, r.Port)
	if err != nil {
		return fmt.Errorf("read RDMA device %s port %d: %w", r.HCA, r.Port, err)
	}
	table, fresh, err := d.table(*r, d.tableMaxAge)
	if err != nil {
		return fmt.Errorf("read GID table: %w", err)
	}
	free := pi.GIDTableSize - table.Used
	d.learnLinkLocal(n, table)
	e.GIDTypes = d.roceTypes(r)
	e.GIDNeed = len(wantedGIDs(e, n.linkLocal())) * e.GIDTypes
	// Every endpoint on the port will take what it needs and the table
	// does not show yet: entries already there are counted there, not
	// twice. With a snapshot (tableMaxAge) this errs on the safe side:
	// entries added since are counted here, entries removed since still
	// count as used until the next read.
	held, starting := 0, 0
	for _, o := range d.endpoints {
		on, ok := d.networks[o.NetworkID]
		if !ok || on.RDMA == nil || on.RDMA.HCA != r.HCA || on.RDMA.Port != r.Port {
			continue
		}
		if o.RDMAReady && fresh {
			continue // its entries are in the table just read
		}
		have := 0
		for _, g := range wantedGIDs(o, on.linkLocal()) {
			have += len(table.ByGID[g])
		}
		if missing := max(o.GIDNeed-have, 0); missing > 0 {
			held += missing
			starting++
		}
	}
	if e.GIDNeed <= free-held {
		return nil
	}
	addrs := e.GIDNeed / max(e.GIDTypes, 1)
	return invalidf("GID table of RDMA device %s port %d is too full for this container: it needs %d entries (%d addresses x RoCE types), %d of %d are free and %d are held for %d containers still starting. Each container holds its entries until it stops: stop or disconnect containers on this port (parent %q), or use a parent on another port",
		r.HCA, r.Port, e.GIDNeed, addrs, max(free, 0), pi.GIDTableSize, held, starting, n.Parent)
}

// portKey names one HCA port.
type portKey struct {
	hca  string
	port int
}

// tableSnap is the last read of a port's GID table.
type tableSnap struct {
	at    time.Time
	table rdma.GIDTable
}

// table returns the GID table of r's port, read now or, when maxAge > 0,
// no older than maxAge. fresh reports whether it was read now.
func (d *Driver) table(r NetworkRDMA, maxAge time.Duration) (t rdma.GIDTable, fresh bool, err error) {
	key := portKey{r.HCA, r.Port}
	d.tablesMu.Lock()
	snap, ok := d.tables[key]
	d.tablesMu.Unlock()
	if ok && maxAge > 0 && time.Since(snap.at) < maxAge {
		return snap.table, false, nil
	}
	at := time.Now()
	if t, err = d.rdma.Table(r.HCA, r.Port); err != nil {
		return t, false, err
	}
	d.tablesMu.Lock()
	if cur, ok := d.tables[key]; !ok || cur.at.Before(at) {
		d.tables[key] = tableSnap{at: at, table: t}
	}
	d.tablesMu.Unlock()
	return t, true, nil
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

// learnLinkLocal notices that containers of the IPv4-only network n get an
// IPv6 link-local GID anyway (engines before Docker 26 leave IPv6 on), and
// from then on counts it for n's containers. Caller holds d.mu.
func (d *Driver) learnLinkLocal(n *Network, table rdma.GIDTable) {
	if n.linkLocal() {
		return
	}
	for _, o := range d.endpoints {
		if o.NetworkID != n.ID || o.Sandbox == "" {
			continue
		}
		mac, err := net.ParseMAC(o.MAC)
		if err != nil || len(table.ByGID[rdma.DefaultGID(mac)]) == 0 {
			continue
		}
		n.LinkLocalSeen = true
		log := d.logFor("CreateEndpoint", logrus.Fields{"nid": ShortID(n.ID), "eid": ShortID(o.ID)})
		if err := d.store.saveNetwork(n); err != nil {
			log.WithError(err).Warn("could not record that containers keep IPv6 link-local addresses")
		}
		log.Info("containers of this IPv4-only network keep an IPv6 link-local address (Docker before 26): counting its GID entries from now on")
		return
	}
}

// gidWatch follows one endpoint's GID entries after Join.
type gidWatch struct {
	cancel context.CancelFunc
	done   chan struct{} // closed when the watch ends
}

// startWatch polls the port's GID table for e's entries until they are all
// there or the deadline passes. It never blocks the caller, which holds d.mu.
func (d *Driver) startWatch(n *Network, e *Endpoint) {
	d.stopWatch(e.ID)
	want := wantedGIDs(e, n.ipv6())
	// CreateEndpoint learned the port's RoCE types; reuse them instead of
	// reading the whole table once more (0: not known).
	types := e.GIDTypes
	ctx, cancel := context.WithTimeout(context.Background(), d.gidTimeout)
	w := &gidWatch{cancel: cancel, done: make(chan struct{})}
	d.watches[e.ID] = w
	go d.watch(ctx, w, e.ID, *n.RDMA, want, types)
}

// stopWatch ends e's watch, if any. Caller holds d.mu.
func (d *Driver) stopWatch(eid string) {
	if w, ok := d.watches[eid]; ok {
		w.cancel()
		delete(d.watches, eid)
	}
}

func (d *Driver) watch(ctx context.Context, w *gidWatch, eid string, r NetworkRDMA, want []string, types int) {
	defer close(w.done)
	defer w.cancel()
	log := d.logFor("gid-watch", logrus.Fields{"eid": ShortID(eid), "ibdev": r.HCA, "port": r.Port})
	if len(want) == 0 {
		d.finishWatch(w, eid, nil, "the endpoint has no IP address; RoCE needs one", log)
		return
	}
	if types <= 0 {
		types = d.rdma.RoCETypesPerAddress(r.HCA, r.Port)
	}
	tick := time.NewTicker(d.gidPoll)
	defer tick.Stop()
	missing := want
	for {
		// The first look waits one interval too: libnetwork sets the
		// addresses only after Join returns, so a look at Join time cannot
		// find their entries and only costs a table read while the
		// container is starting.
		select {
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				d.finishWatch(w, eid, nil, d.notReadyReason(r, missing), log)
			}
			return
		case <-tick.C:
		}
		table, _, err := d.table(r, 0)
		if err == nil {
			var found []EndpointGID
			found, missing = d.findGIDs(r, table, want, types)
			if len(missing) == 0 {
				d.finishWatch(w, eid, found, "", log)
				return
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
// left or re-joined meanwhile.
func (d *Driver) finishWatch(w *gidWatch, eid string, found []EndpointGID, reason string, log *logrus.Entry) {
	d.mu.Lock()
	defer d.mu.Unlock()
	e, ok := d.endpoints[eid]
	if !ok || d.watches[eid] != w {
		return
	}
	delete(d.watches, eid)
	prev := *e
	e.GIDs, e.RDMAReady, e.RDMAReason = found, reason == "", reason
	if err := d.store.saveEndpoint(e); err != nil {
		*e = prev
		log.WithError(err).Error("could not record the endpoint's GIDs")
		return
	}
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
// only for the endpoint that is the container's gateway, after its
// addresses are set.
func (d *Driver) ProgramExternalConnectivity(nid, eid string) error {
	d.mu.Lock()
	e, eok := d.endpoints[eid]
	n, nok := d.networks[nid]
	if !eok || !nok || n.RDMA == nil || n.GIDCheck != GIDCheckStrict || e.RDMAReady {
		d.mu.Unlock()
		return nil
	}
	w := d.watches[eid]
	d.mu.Unlock()
	if w != nil {
		<-w.done // bounded by the watch's deadline
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if e.RDMAReady {
		return nil
	}
	reason := e.RDMAReason
	if reason == "" {
		reason = "its GID entries are not in the table"
	}
	return fmt.Errorf("container is not RDMA-ready and network %s has gid_check=strict: %s", ShortID(nid), reason)
}

// stopWatches ends every watch and waits for them.
func (d *Driver) stopWatches() {
	d.mu.Lock()
	var ws []*gidWatch
	for id, w := range d.watches {
		w.cancel()
		ws = append(ws, w)
		delete(d.watches, id)
	}
	d.mu.Unlock()
	for _, w := range ws {
		<-w.done
	}
}
