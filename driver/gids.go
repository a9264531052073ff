package driver

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/rdma-macvlan/rdma-macvlan/driver/gid"
	"github.com/sirupsen/logrus"
)

// endpointGID is one RoCE GID entry of an endpoint, as its record holds it.
type endpointGID struct {
	Index int    `json:"index"`
	Type  string `json:"type"`
	GID   string `json:"gid"`
}

// portOfNet is the tracker's name of r's port.
func portOfNet(r *networkRDMA) gid.Port { return gid.Port{HCA: r.HCA, Port: r.Port} }

// expectOf is what the kernel will add for e on network n.
func expectOf(n *network, e *endpoint) gid.Expected {
	return gid.Expect(e.IPv4, e.IPv6, e.MAC, n.ipv6())
}

func (n *network) ipv6() bool { return n.EnableIPv6 || len(n.IPv6) > 0 }

// track tells the GID tracker of endpoint e, as its record says, if its
// network has an RDMA port (readyAt: see addEndpoint). Caller holds d.mu.
func (d *Driver) track(e *endpoint, readyAt time.Time) {
	n, ok := d.networks[e.NetworkID]
	if !ok || n.RDMA == nil || n.hcaProblem != "" {
		return
	}
	d.gids.Add(e.ID, gid.Endpoint{Port: portOfNet(n.RDMA), Want: expectOf(n.network, e), Need: e.GIDNeed, Types: e.GIDTypes,
		Ready: e.RDMAReady, ReadyAt: readyAt, Found: toEntries(e.GIDs)})
}

// admit asks the GID tracker to reserve room in the table of n's port for
// the entries of res, which is being created. It returns what it reserved
// and the port's RoCE types. Caller holds the claim on res, not d.mu.
func (d *Driver) admit(n *network, res *endpoint, log *logrus.Entry) (need, types int, err error) {
	r := n.RDMA
	types = d.roceTypes(r) // recorded with the network: no read
	need, err = d.gids.Admit(res.ID, gid.Request{Port: portOfNet(r), Want: expectOf(n, res), Types: types,
		Collect: func() int { return d.collectIfDue(log) }})
	var full *gid.FullError
	if errors.As(err, &full) {
		return 0, 0, &TableFullError{HCA: r.HCA, Port: r.Port, Need: full.Need, Free: full.Free, Size: full.Size, Held: full.Held, Starting: full.Starting,
			Msg: fmt.Sprintf("GID table of RDMA device %s port %d is too full for this container: it needs %d entries (%d addresses x RoCE types), %d of %d are free and %d are held for %d containers still starting. Each container holds its entries until it stops: stop or disconnect containers on this port (parent %q), or use a parent on another port%s",
				r.HCA, r.Port, full.Need, full.Addresses, full.Free, full.Size, full.Held, full.Starting, n.Parent, full.PassedOverNote())}
	}
	return need, types, err
}

// roceTypes returns the number of RoCE types (entries per address) of r's
// port, recorded when the network was created (records of older versions
// have none: read it from the table then).
func (d *Driver) roceTypes(r *networkRDMA) int {
	if r.Types > 0 {
		return r.Types
	}
	return d.rdma.RoCETypesPerAddress(r.HCA, r.Port)
}

// watchEnded records the outcome of a GID watch, unless the endpoint was
// deleted, left or re-joined meanwhile (the outcome is stale then). The
// record is written without d.mu, under the claim on the endpoint; the
// tracker ends the watch (strict's wait) once this returns, with the
// outcome in memory.
func (d *Driver) watchEnded(o gid.Outcome) {
	log := d.logFor("gid-watch", logrus.Fields{"ibdev": o.Port.HCA, "port": o.Port.Port, "eid": ShortID(o.ID)})
	d.mu.Lock()
	defer d.mu.Unlock()
	if !o.Current() {
		return
	}
	d.claim(o.ID)
	defer d.release(o.ID)
	if !o.Take() { // stopped while we waited for the claim
		return
	}
	e, ok := d.endpoint(o.ID)
	if !ok {
		return
	}
	ready := o.Reason == ""
	rec := e.endpoint
	rec.GIDs, rec.RDMAReady, rec.RDMAReason = fromEntries(o.Found), ready, o.Reason
	if ready {
		// From now on the endpoint holds what it really got: an address
		// the container does not have (IPv6 disabled in it) reserves no
		// entries.
		rec.GIDNeed = len(o.Found)
	}
	d.mu.Unlock()
	err := d.store.saveEndpointUnsynced(&rec)
	d.mu.Lock()
	if err != nil {
		log.WithError(err).Error("could not record the endpoint's GIDs")
		return
	}
	e.GIDs, e.RDMAReady, e.RDMAReason, e.GIDNeed = rec.GIDs, rec.RDMAReady, rec.RDMAReason, rec.GIDNeed
	d.obs.watchEnded(o.ID, ready, o.At)
	if !ready {
		d.gids.Reset(o.ID)
		log.WithField("reason", o.Reason).Warn("endpoint not RDMA-ready")
		return
	}
	d.gids.Ready(o.ID, o.Found, o.At)
	log.WithField("gids", gidIndexes(o.Found)).Info("endpoint rdma ready")
}

// gidIndexes lists entries as the logs show them: "2(IB/RoCE v1) 3(RoCE v2)".
func gidIndexes(found []gid.Entry) string {
	idx := make([]string, 0, len(found))
	for _, g := range found {
		idx = append(idx, fmt.Sprintf("%d(%s)", g.Index, g.Type))
	}
	return strings.Join(idx, " ")
}

// gidsMoved logs, once per endpoint and readiness, that the entries an
// endpoint was found at moved (a bond failover, a device reset): its
// workload keeps the index it was given. /v1/status shows both.
func (d *Driver) gidsMoved(dr gid.Drift) {
	moves := make([]string, len(dr.Moves))
	for i, m := range dr.Moves {
		moves[i] = fmt.Sprintf("%s %d->%d", m.Type, m.Given, m.Now)
	}
	d.logFor("gid-watch", logrus.Fields{"ibdev": dr.Port.HCA, "port": dr.Port.Port, "eid": ShortID(dr.ID)}).
		WithField("moves", strings.Join(moves, ", ")).
		Warn("the endpoint's GID entries moved after it was ready (-1: gone): its workload keeps the index it was given; restart the container to give it the new one (NCCL 2.21 and later follow a moved entry in a container started with -e NCCL_IB_GID_INDEX=-1)")
}

func toEntries(gs []endpointGID) []gid.Entry {
	if gs == nil {
		return nil
	}
	out := make([]gid.Entry, len(gs))
	for i, g := range gs {
		out[i] = gid.Entry(g)
	}
	return out
}

func fromEntries(es []gid.Entry) []endpointGID {
	if es == nil {
		return nil
	}
	out := make([]endpointGID, len(es))
	for i, g := range es {
		out[i] = endpointGID(g)
	}
	return out
}
