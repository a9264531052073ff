package driver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/rdma-macvlan/rdma-macvlan/api"
	"github.com/sirupsen/logrus"
)

// Duplicate addresses across hosts. Each host's engine hands out addresses
// from its own IPAM: two hosts on one RoCE subnet without their own
// --ip-range give two containers one address, hence one RoCE GID on the
// fabric, and RDMA traffic for one goes to the other without an error. No
// configuration the driver sees can rule that out, so at each Join it asks
// the parent's segment whether another MAC holds the endpoint's addresses
// (an ARP probe, a duplicate address detection solicitation: see
// netns.ProbeAddress). With address_check=warn (the default) the probe runs
// after Join has answered, and a duplicate is an endpoint problem; with
// strict, Join waits for it and refuses the start; off sends nothing.
//
// The probe is sent from the parent, never from the container's link, so
// it goes out whether or not libnetwork has set the address yet, and the
// container itself never answers it (a frame its parent sends never reaches
// a macvlan child).
//
// The host whose container started first finds no one when it probes; it
// learns of the duplicate from the other host's frames. While a parent has
// a joined endpoint on a network that checks, the daemon watches that
// parent's segment (netns.WatchClaims): another MAC's probe for one of its
// endpoints' addresses, or its ARP or neighbour discovery frame claiming
// one, is a conflict of that endpoint too. So both hosts report it.

// ProbeFunc asks the segment of the link parent which MACs other than own
// hold addr, within ctx.
type ProbeFunc func(ctx context.Context, parent string, addr netip.Addr, own net.HardwareAddr) ([]net.HardwareAddr, error)

// WatchFunc calls claim for each address another MAC claims (probe: only
// probes for) on the segment of the link parent, until ctx ends.
type WatchFunc func(ctx context.Context, parent string, claim func(addr netip.Addr, mac net.HardwareAddr, probe bool)) error

// watchIdle is how often a parent's watch looks whether it still has an
// endpoint to watch for; a failed watch starts again after watchRetry, then
// twice as long each time, up to watchRetryMax.
var (
	watchIdle     = 30 * time.Second
	watchRetry    = time.Second
	watchRetryMax = 30 * time.Second
)

// probeBound bounds one endpoint's probe of all its addresses, should the
// socket calls themselves hang.
const probeBound = 5 * time.Second

// addressConflict is one address of an endpoint that another MAC on the
// parent's segment answered for.
type addressConflict struct {
	Address string    `json:"address"`
	MAC     string    `json:"mac"`
	Seen    time.Time `json:"seen"`
	Probed  bool      `json:"probed,omitempty"`
}

// probeEndpoint probes each address of e (CIDR strings, as recorded).
func (d *Driver) probeEndpoint(ctx context.Context, parent, mac string, cidrs ...string) ([]addressConflict, error) {
	own, _ := net.ParseMAC(mac)
	var out []addressConflict
	for _, c := range cidrs {
		if c == "" {
			continue
		}
		p, err := netip.ParsePrefix(c)
		if err != nil {
			continue
		}
		macs, err := d.probe(ctx, parent, p.Addr(), own)
		if err != nil {
			return out, err
		}
		for _, m := range macs {
			out = append(out, addressConflict{Address: p.Addr().String(), MAC: m.String(), Seen: time.Now().UTC()})
		}
	}
	return out, nil
}

// conflictText says what a duplicate is and how to fix it.
func conflictText(c addressConflict, parent string) string {
	if c.Probed {
		return fmt.Sprintf("MAC %s on the segment of parent %s probed for address %s, which this container holds: another host is giving it out too (give each host its own --ip-range of the subnet; see docker rdma inspect)",
			c.MAC, parent, c.Address)
	}
	return fmt.Sprintf("address %s is also held by MAC %s on the segment of parent %s: two hosts gave it out (give each host its own --ip-range of the subnet; see docker rdma inspect) or something else on the segment uses it",
		c.Address, c.MAC, parent)
}

// strictProbe probes the endpoint's addresses before Join answers, on an
// address_check=strict network. It runs under the claim on e, without d.mu.
func (d *Driver) strictProbe(e *endpoint, log *logrus.Entry) error {
	ctx, cancel := context.WithTimeout(context.Background(), probeBound)
	defer cancel()
	start := time.Now()
	found, err := d.probeEndpoint(ctx, e.Parent, e.MAC, e.IPv4, e.IPv6)
	if err != nil {
		return &HostSetupError{Msg: fmt.Sprintf("address_check=strict: could not probe the segment of parent %s for the container's addresses: %v (the daemon needs CAP_NET_RAW; or create the network with -o %s=%s)",
			e.Parent, err, api.OptAddressCheck, api.AddressCheckWarn)}
	}
	log.WithField("took", time.Since(start).Round(time.Millisecond)).Debug("address probe done")
	if len(found) == 0 {
		return nil
	}
	texts := make([]string, len(found))
	for i, c := range found {
		texts[i] = conflictText(c, e.Parent)
		log.WithFields(logrus.Fields{"address": c.Address, "mac": c.MAC}).Warn("duplicate address: start refused (address_check=strict)")
	}
	return &AddressConflictError{Msg: "address_check=strict refused the start: " + strings.Join(texts, "; ")}
}

// probeLater probes the endpoint's addresses after Join answered, and
// records what it found while the endpoint is still in that sandbox.
func (d *Driver) probeLater(eid, sandbox, parent, mac string, cidrs ...string) {
	defer d.probes.Done()
	ctx, cancel := context.WithTimeout(d.probeCtx, probeBound)
	defer cancel()
	found, err := d.probeEndpoint(ctx, parent, mac, cidrs...)
	log := d.logFor("address-probe", logrus.Fields{"eid": ShortID(eid), "parent": parent})
	if err != nil {
		if d.probeCtx.Err() == nil {
			log.WithError(err).Warn("could not probe the parent's segment for the endpoint's addresses: duplicates across hosts go unnoticed (the daemon needs CAP_NET_RAW)")
		}
		return
	}
	d.recordConflicts(eid, sandbox, log, found...)
}

// recordConflicts adds found to the endpoint's conflicts (a known address
// and MAC only loses Probed, when found says the MAC holds it), unless it
// left or joined again meanwhile, and logs the new ones.
func (d *Driver) recordConflicts(eid, sandbox string, log *logrus.Entry, found ...addressConflict) {
	d.mu.Lock()
	defer d.mu.Unlock()
	e, ok := d.endpoint(eid)
	if !ok || e.Sandbox != sandbox || !addsConflicts(e.Conflicts, found) {
		return
	}
	d.claim(eid)
	defer d.release(eid)
	if e, ok = d.endpoint(eid); !ok || e.Sandbox != sandbox || !addsConflicts(e.Conflicts, found) {
		return
	}
	merged := slices.Clone(e.Conflicts)
	for _, c := range found {
		if i := slices.IndexFunc(merged, c.same); i < 0 {
			merged = append(merged, c)
		} else if !c.Probed {
			merged[i].Probed = false
		}
	}
	found = merged
	rec := e.endpoint
	rec.Conflicts = found
	d.mu.Unlock()
	err := d.store.saveEndpointUnsynced(&rec)
	d.mu.Lock()
	if err != nil {
		log.WithError(err).Error("could not record the endpoint's duplicate addresses")
		return
	}
	old := e.Conflicts
	e.Conflicts = found
	for _, c := range found {
		if !slices.ContainsFunc(old, c.same) {
			log.WithFields(logrus.Fields{"address": c.Address, "mac": c.MAC}).Warn(conflictText(c, e.Parent))
		}
	}
}

func (c addressConflict) same(o addressConflict) bool {
	return c.Address == o.Address && c.MAC == o.MAC
}

// addsConflicts reports whether found says more than known: an address and
// MAC not in it, or a holder where known has only a probe.
func addsConflicts(known, found []addressConflict) bool {
	for _, c := range found {
		if i := slices.IndexFunc(known, c.same); i < 0 || (known[i].Probed && !c.Probed) {
			return true
		}
	}
	return false
}

// watchParent starts the watch of parent's segment, unless it runs. d.mu
// is held.
func (d *Driver) watchParent(parent string) {
	if d.watch == nil || d.watching[parent] {
		return
	}
	d.watching[parent] = true
	d.probes.Add(1)
	go d.watchSegment(parent)
}

// watched reports whether a joined endpoint on parent is on a network
// that checks addresses. d.mu is held.
func (d *Driver) watched(parent string) bool {
	for e := range d.live {
		if e.Parent == parent && e.Sandbox != "" && d.networks[e.NetworkID].addressCheck() != api.AddressCheckOff {
			return true
		}
	}
	return false
}

// watchSegment watches parent's segment for other hosts' claims of the
// endpoints' addresses while it has endpoints to watch for. A watch that
// fails (the parent down or gone, no CAP_NET_RAW) starts again after
// watchRetry, twice as long after each failure up to watchRetryMax.
func (d *Driver) watchSegment(parent string) {
	defer d.probes.Done()
	log := d.logFor("address-watch", logrus.Fields{"parent": parent})
	retry := watchRetry
	for {
		start := time.Now()
		err := d.watchUntilIdle(parent, log)
		if err != nil && d.probeCtx.Err() == nil {
			if time.Since(start) > watchRetryMax {
				retry = watchRetry
			}
			log.WithError(err).WithField("retry_in", retry.String()).Warn("could not watch the parent's segment (is it down or gone? the daemon needs CAP_NET_RAW): a duplicate address another host gives out meanwhile goes unnoticed here")
			select {
			case <-d.probeCtx.Done():
			case <-time.After(retry):
			}
			retry = min(2*retry, watchRetryMax)
		}
		if d.unwatch(parent) {
			return
		}
	}
}

// watchUntilIdle runs one watch of parent's segment until it fails (its
// error), the driver closes, or the parent has no endpoint left to watch
// for (nil).
func (d *Driver) watchUntilIdle(parent string, log *logrus.Entry) error {
	ctx, cancel := context.WithCancel(d.probeCtx)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- d.watch(ctx, parent, func(addr netip.Addr, mac net.HardwareAddr, probe bool) {
			d.claimSeen(parent, addr, mac, probe, log)
		})
	}()
	idle := time.NewTicker(watchIdle)
	defer idle.Stop()
	for {
		select {
		case err := <-done:
			if ctx.Err() != nil {
				return nil
			}
			if err == nil {
				err = errors.New("the watch ended")
			}
			return err
		case <-idle.C:
			d.mu.Lock()
			still := d.watched(parent)
			d.mu.Unlock()
			if !still {
				cancel()
				<-done
				return nil
			}
		}
	}
}

// unwatch ends the watch of parent, unless the driver is not closing and
// the parent still has an endpoint to watch for (a Join may have come
// since the watch looked).
func (d *Driver) unwatch(parent string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.probeCtx.Err() == nil && d.watched(parent) {
		return false
	}
	delete(d.watching, parent)
	return true
}

// claimSeen records mac's claim of addr on parent's segment as a conflict
// of each joined endpoint there that holds addr under another MAC.
func (d *Driver) claimSeen(parent string, addr netip.Addr, mac net.HardwareAddr, probe bool, log *logrus.Entry) {
	a, m := addr.Unmap().String(), mac.String()
	c := addressConflict{Address: a, MAC: m, Seen: time.Now().UTC(), Probed: probe}
	type hit struct{ eid, sandbox string }
	var hits []hit
	d.mu.Lock()
	for e := range d.live {
		if e.Parent != parent || e.Sandbox == "" || strings.EqualFold(e.MAC, m) ||
			!(strings.HasPrefix(e.IPv4, a+"/") || strings.HasPrefix(e.IPv6, a+"/")) ||
			!addsConflicts(e.Conflicts, []addressConflict{c}) || d.networks[e.NetworkID].addressCheck() == api.AddressCheckOff {
			continue
		}
		hits = append(hits, hit{e.ID, e.Sandbox})
	}
	d.mu.Unlock()
	for _, h := range hits {
		d.recordConflicts(h.eid, h.sandbox, log.WithField("eid", ShortID(h.eid)), c)
	}
}

// addressCheck is the network's address_check (records of versions before
// it have none: warn).
func (n *network) addressCheck() string {
	if n == nil || n.AddressCheck == "" {
		return api.AddressCheckWarn
	}
	return n.AddressCheck
}

// addressCheck is the address_check of a network the driver may not know
// (nil: warn).
func (n *netState) addressCheck() string {
	if n == nil {
		return api.AddressCheckWarn
	}
	return n.network.addressCheck()
}

// conflictsStatus turns an endpoint's conflicts into the status's.
func conflictsStatus(cs []addressConflict) []api.AddressConflict {
	var out []api.AddressConflict
	for _, c := range cs {
		out = append(out, api.AddressConflict{Address: c.Address, MAC: c.MAC, Seen: c.Seen.Format(time.RFC3339), Probed: c.Probed})
	}
	return out
}
