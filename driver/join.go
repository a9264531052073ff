package driver

import (
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/rdma-macvlan/rdma-macvlan/api"
	"github.com/rdma-macvlan/rdma-macvlan/netns"
	"github.com/sirupsen/logrus"
)

// ContainerIfPrefix is the prefix libnetwork gives the link inside the
// container (eth0, eth1, ...).
const ContainerIfPrefix = "eth"

// JoinResponse is what Join answers.
type JoinResponse struct {
	SrcName               string
	DstPrefix             string
	DstName               string // the name asked inside the container, or ""
	Gateway               string
	GatewayIPv6           string
	DisableGatewayService bool
}

// Join hands the endpoint's link to libnetwork, which moves it into the
// container, renames it and sets MAC and addresses after Join returns.
func (d *Driver) Join(nid, eid, sandboxKey string) (JoinResponse, error) {
	var resp JoinResponse
	joinedAt := time.Now()
	if err := checkID("endpoint", eid); err != nil {
		return resp, err
	}
	if err := checkSandboxKey(sandboxKey); err != nil {
		return resp, err
	}
	log := d.logFor("Join", logrus.Fields{"nid": ShortID(nid), "eid": ShortID(eid)})
	e, err := d.claimEndpoint(nid, eid)
	if err != nil {
		return resp, err
	}
	if e == nil {
		return resp, fmt.Errorf("%w: endpoint %s is not known to rdma-macvlan (its state may have been lost): remove the container and start it again",
			ErrEndpointNotFound, ShortID(eid))
	}
	// The watch of an earlier Join must not record its outcome meanwhile;
	// this Join starts a new one.
	d.gids.StopWatch(eid)
	save := e.Sandbox != sandboxKey || e.RDMAReady || len(e.Conflicts) > 0
	rec := e.endpoint
	rec.Sandbox, rec.GIDs, rec.RDMAReady, rec.RDMAReason, rec.Conflicts = sandboxKey, nil, false, "", nil
	check := d.networks[e.NetworkID].addressCheck()
	d.mu.Unlock()

	err = d.ensureLink(&e.endpoint, log)
	if err == nil && check == api.AddressCheckStrict && d.probe != nil {
		err = d.strictProbe(&e.endpoint, log)
	}
	if err == nil && save {
		if err = d.store.saveEndpointUnsynced(&rec); err != nil {
			err = fmt.Errorf("save endpoint %s: %w", ShortID(e.ID), err)
		} else {
			crashPoint("join:state-written")
		}
	}

	d.mu.Lock()
	defer d.mu.Unlock()
	defer d.release(eid)
	if err == nil && save {
		e.Sandbox, e.GIDs, e.RDMAReady, e.RDMAReason, e.Conflicts = sandboxKey, nil, false, "", nil
		d.gids.Reset(eid)
	}
	n, nok := d.networks[e.NetworkID]
	if e.Sandbox != "" && !e.RDMAReady {
		// libnetwork sets the addresses after Join returns: watch for the
		// GID entries they bring without blocking Join (on a network with
		// an RDMA port: the tracker knows no other endpoint). After a
		// failed Join, the watch of the one before goes on.
		d.gids.Watch(eid)
		e.phase = epLive
		d.obs.join(eid, joinedAt)
	}
	if err != nil {
		return resp, err
	}
	if check == api.AddressCheckWarn && d.probe != nil {
		d.probes.Add(1)
		go d.probeLater(eid, sandboxKey, e.Parent, e.MAC, e.IPv4, e.IPv6)
	}
	if check != api.AddressCheckOff {
		d.watchParent(e.Parent)
	}
	resp = JoinResponse{
		SrcName:   e.Ifname,
		DstPrefix: ContainerIfPrefix,
		DstName:   e.DstName,
		// As the built-in macvlan driver: the network's own gateway is the
		// container's default route; no docker_gwbridge.
		DisableGatewayService: true,
	}
	if nok && !n.Internal {
		resp.Gateway = gatewayFor(n.IPv4, e.IPv4)
		resp.GatewayIPv6 = gatewayFor(n.IPv6, e.IPv6)
	}
	log.WithFields(logrus.Fields{"ifname": e.Ifname, "sandbox": sandboxKey}).Info("endpoint joined")
	return resp, nil
}

// ensureLink re-creates the endpoint's link if a crash lost it between
// CreateEndpoint's record and Join. It reads only fields of e that never
// change, and needs the claim on e, not d.mu.
func (d *Driver) ensureLink(e *endpoint, log *logrus.Entry) error {
	_, err := d.links.LinkByName(e.Ifname)
	if err == nil {
		return nil
	}
	if !errors.Is(err, netns.ErrLinkNotFound) {
		return fmt.Errorf("look up link %s of endpoint %s: %w", e.Ifname, ShortID(e.ID), err)
	}
	mac, _ := net.ParseMAC(e.MAC)
	if _, err := d.links.CreateMacvlan(netns.MacvlanSpec{Name: e.Ifname, Parent: e.Parent, Mode: e.Mode, MTU: e.MTU, MAC: mac, Alias: d.owner}); err != nil {
		if err := d.explainBusy(e.NetworkID, e.Parent, err); IsRefusal(err) {
			return err
		}
		return fmt.Errorf("re-create link %s of endpoint %s on parent %q: %w", e.Ifname, ShortID(e.ID), e.Parent, err)
	}
	log.WithField("ifname", e.Ifname).Info("endpoint link re-created")
	crashPoint("join:link-recreated")
	return nil
}

// gatewayFor returns the gateway (plain IP) of the subnet of subnets that
// holds the address addr (CIDR), or "" if none does.
func gatewayFor(subnets []Subnet, addr string) string {
	ip, _, err := net.ParseCIDR(addr)
	if err != nil {
		return ""
	}
	for _, s := range subnets {
		_, pool, err := net.ParseCIDR(s.Pool)
		if err != nil || !pool.Contains(ip) || s.Gateway == "" {
			continue
		}
		gw, _, err := net.ParseCIDR(s.Gateway)
		if err != nil {
			gw = net.ParseIP(s.Gateway)
		}
		if gw != nil {
			return gw.String()
		}
	}
	return ""
}
