package driver

import (
	"errors"
	"fmt"
	"maps"
	"net"
	"sort"
	"strings"
	"time"

	"github.com/rdma-macvlan/rdma-macvlan/api"
	"github.com/rdma-macvlan/rdma-macvlan/cdi"
	"github.com/rdma-macvlan/rdma-macvlan/driver/gid"
	"github.com/rdma-macvlan/rdma-macvlan/rdma"
	"github.com/sirupsen/logrus"
)

// Status reports every network and endpoint, sorted by ID, with the live
// state of their RDMA ports, in the wire format of GET /v1/status (package
// api): the persisted records are converted, never served as they are.
// sysfs is read without holding the driver's lock.
func (d *Driver) Status() api.Status {
	d.mu.Lock()
	nets := make([]network, 0, len(d.networks))
	notes := make(map[string]string, len(d.networks))
	noHCA := make(map[string]string, len(d.networks))
	for _, n := range d.networks {
		nets = append(nets, *n.network)
		notes[n.ID] = n.strictNote
		noHCA[n.ID] = n.hcaProblem
	}
	written := maps.Clone(d.cdiNodes)
	eps := make([]endpoint, 0, len(d.endpoints))
	watching := make(map[string]bool, len(d.endpoints))
	for e := range d.live {
		eps = append(eps, e.endpoint)
		watching[e.ID] = d.gids.Watching(e.ID)
	}
	d.mu.Unlock()

	readAt := time.Now() // no table below is read earlier
	var late []lateReady
	var stale []string // networks whose CDI spec lists other nodes than their HCA has
	mode, _, modeErr := rdma.NetnsMode(d.netnsMode, d.rdma)
	tables := map[gid.Port]rdma.GIDTable{}
	rooms := map[gid.Port]int{} // what admission would give new containers, per port
	st := api.Status{Version: d.version, GIDTimeout: d.gidWait.String(), Networks: make([]api.Network, 0, len(nets))}
	byNet := map[string]*api.Network{}
	ipv6 := map[string]bool{}
	for i := range nets {
		n := &nets[i]
		ipv6[n.ID] = n.ipv6()
		ns := api.Network{ID: n.ID, Parent: n.Parent, VLAN: vlanStatus(n.VLAN), Mode: n.Mode, MTU: n.MTU, GIDCheck: n.GIDCheck, AddressCheck: n.addressCheck(),
			GIDCheckNote: notes[n.ID], RDMADevice: n.RDMADevice, Endpoints: []api.Endpoint{},
			TrafficClass: optionalOf(n.TrafficClass).Ptr(), ServiceLevel: optionalOf(n.ServiceLevel).Ptr(), Subnets: n.subnets()}
		if ns.VLAN != nil {
			if err := d.vlanChainStatus(ns.VLAN, n.Parent); err != nil {
				ns.Problems = append(ns.Problems, err.Error())
			}
		}
		if n.MTU == 0 {
			ns.MTUFromParent = true
			if l, err := d.links.LinkByName(n.Parent); err == nil {
				ns.MTU = l.MTU
			} else {
				ns.Problems = append(ns.Problems, fmt.Sprintf("parent %q: %v", n.Parent, err))
			}
		}
		if p := noHCA[n.ID]; n.RDMA != nil && p != "" {
			// Its recorded name may be another NIC's now: nothing of it
			// is read.
			ns.Problems = append(ns.Problems, p)
		} else if n.RDMA != nil {
			if p := d.bondProblem(n); p != "" {
				ns.Problems = append(ns.Problems, p)
			}
			if p := d.stackedVLANProblem(n); p != "" {
				ns.Problems = append(ns.Problems, p)
			}
			if d.rdmaStatus(&ns, n.RDMA, tables, rooms, written) {
				stale = append(stale, n.ID)
			}
			if modeErr == nil {
				ns.NetnsMode = mode
			} else {
				ns.Problems = append(ns.Problems, modeErr.Error())
			}
		}
		st.Networks = append(st.Networks, ns)
	}
	for i := range st.Networks {
		byNet[st.Networks[i].ID] = &st.Networks[i]
	}
	for i := range eps {
		e := &eps[i]
		ns, ok := byNet[e.NetworkID]
		if !ok {
			continue
		}
		es := api.Endpoint{ID: e.ID, Ifname: e.Ifname, IPv4: addrOnly(e.IPv4), IPv6: addrOnly(e.IPv6), MAC: e.MAC,
			Sandbox: e.Sandbox, GIDs: []api.GID{}, AddressConflicts: conflictsStatus(e.Conflicts)}
		for _, c := range e.Conflicts {
			ns.Problems = append(ns.Problems, "endpoint "+ShortID(e.ID)+": "+conflictText(c, ns.Parent))
		}
		port := gid.Port{HCA: ns.HCA, Port: ns.Port}
		if table, ok := tables[port]; ok && ns.HCA != "" {
			want := gid.Expect(e.IPv4, e.IPv6, e.MAC, ipv6[e.NetworkID])
			found, missing := d.gids.Lookup(port, table, want, ns.RoCETypes)
			for _, g := range found {
				es.GIDs = append(es.GIDs, gidStatus(g))
			}
			es.RDMAReady = e.Sandbox != "" && len(want.Required) > 0 && len(missing) == 0
			if e.RDMAReady {
				es.GIDDrift = driftOf(e.GIDs, found)
			} else if es.RDMAReady && !watching[e.ID] {
				late = append(late, lateReady{id: e.ID, sandbox: e.Sandbox, found: found})
			}
			switch {
			case es.RDMAReady:
			case e.Sandbox == "":
				es.RDMAReason = "not in a container"
			case watching[e.ID]:
				es.RDMAReason = "waiting for the kernel to add its GID entries"
			case e.RDMAReason != "":
				es.RDMAReason = e.RDMAReason
			default:
				es.RDMAReason = "its GID entries are not in the table"
			}
		}
		ns.Endpoints = append(ns.Endpoints, es)
	}
	for i := range st.Networks {
		eps := st.Networks[i].Endpoints
		sort.Slice(eps, func(a, b int) bool { return eps[a].ID < eps[b].ID })
	}
	sort.Slice(st.Networks, func(i, j int) bool { return st.Networks[i].ID < st.Networks[j].ID })
	d.recordLateReady(late, readAt)
	for _, nid := range stale {
		d.recheckHCA(nid, d.logFor("status", nil))
	}
	return st
}

// lateReady is an endpoint whose watch ended before its entries came,
// found in the table since.
type lateReady struct {
	id, sandbox string
	found       []gid.Entry
}

// recordLateReady records as ready the endpoints whose GID watch ended
// before their entries came and a status read found since (a start slower
// than --gid-timeout: the watch begins at Join, the engine sets the
// addresses after it has set up the whole container), so that their
// entries' moves are reported from now on, against the index found now:
// the one rdma-exec, which waits on its own, gave the workload unless the
// entry moved in between. An endpoint that a call holds, that left or
// joined again, or that is watched again meanwhile is left for the next
// read. Called without d.mu.
func (d *Driver) recordLateReady(late []lateReady, at time.Time) {
	for _, l := range late {
		d.mu.Lock()
		e, ok := d.endpoint(l.id)
		if _, busy := d.busy[l.id]; busy || !ok || e.Sandbox != l.sandbox || e.RDMAReady || d.gids.Watching(l.id) {
			d.mu.Unlock()
			continue
		}
		d.claim(l.id)
		rec := e.endpoint
		rec.GIDs, rec.RDMAReady, rec.RDMAReason, rec.GIDNeed = fromEntries(l.found), true, "", len(l.found)
		d.mu.Unlock()
		err := d.store.saveEndpointUnsynced(&rec)
		d.mu.Lock()
		if err == nil {
			e.GIDs, e.RDMAReady, e.RDMAReason, e.GIDNeed = rec.GIDs, rec.RDMAReady, rec.RDMAReason, rec.GIDNeed
			d.gids.Ready(l.id, l.found, at)
		}
		d.release(l.id)
		d.mu.Unlock()
		log := d.logFor("gid-watch", logrus.Fields{"eid": ShortID(l.id)})
		if err != nil {
			log.WithError(err).Error("could not record the endpoint's GIDs")
			continue
		}
		log.WithField("gids", gidIndexes(l.found)).Info("endpoint rdma ready (found by a status read after its watch timed out)")
	}
}

// Brief is the status without anything read from the kernel (api.BriefQuery):
// each network's HCA port, CDI device, subnets and QoS options, and the
// problem of an HCA it lost. The runtime asks it on every container start,
// so it costs a copy under the lock and nothing more.
func (d *Driver) Brief() api.Status {
	d.mu.Lock()
	defer d.mu.Unlock()
	st := api.Status{Version: d.version, GIDTimeout: d.gidWait.String(), Networks: make([]api.Network, 0, len(d.networks))}
	for _, n := range d.networks {
		ns := api.Network{ID: n.ID, Parent: n.Parent, Mode: n.Mode, MTU: n.MTU, RDMADevice: n.RDMADevice,
			Endpoints: []api.Endpoint{}, TrafficClass: optionalOf(n.TrafficClass).Ptr(), ServiceLevel: optionalOf(n.ServiceLevel).Ptr(),
			Subnets: n.subnets()}
		if p := n.hcaProblem; p != "" {
			ns.Problems = append(ns.Problems, p)
		} else if n.RDMA != nil {
			ns.HCA, ns.Port = n.RDMA.HCA, n.RDMA.Port
			ns.CDIDevice = cdi.Qualified(n.RDMA.cdiName())
		}
		st.Networks = append(st.Networks, ns)
	}
	sort.Slice(st.Networks, func(i, j int) bool { return st.Networks[i].ID < st.Networks[j].ID })
	return st
}

// subnets are the network's pools, IPv4 first.
func (n *network) subnets() []string {
	var out []string
	for _, s := range append(append([]Subnet{}, n.IPv4...), n.IPv6...) {
		out = append(out, s.Pool)
	}
	return out
}

// driftOf lists the entries of given (where the endpoint's entries were
// when it became ready) that found (where they are now) does not hold at
// the same index.
func driftOf(given []endpointGID, found []gid.Entry) []api.GIDMove {
	var moves []api.GIDMove
	for _, g := range given {
		now := -1
		for _, f := range found {
			if f.GID != g.GID || f.Type != g.Type {
				continue
			}
			if now < 0 || f.Index == g.Index {
				now = f.Index
			}
		}
		if now != g.Index {
			moves = append(moves, api.GIDMove{GID: g.GID, Type: g.Type, GivenIndex: g.Index, Index: now})
		}
	}
	return moves
}

// rdmaStatus fills in the port, its GID table and the device nodes. The
// table is read once per port (the GID files only: attributes are read for
// the entries of endpoints) and kept in tables. It reports whether the CDI
// spec written for the port (written, by CDI name) lists other nodes than
// the HCA has now: a problem of the network.
func (d *Driver) rdmaStatus(ns *api.Network, r *networkRDMA, tables map[gid.Port]rdma.GIDTable, rooms map[gid.Port]int, written map[string][]rdma.DeviceNode) (stale bool) {
	ns.HCA, ns.Port = r.HCA, r.Port
	ns.NodeGUID, ns.PCI = r.NodeGUID, r.PCI
	ns.CDIDevice = cdi.Qualified(r.cdiName())
	ns.RoCETypes = d.roceTypes(r)
	pi, err := d.rdma.Port(r.HCA, r.Port)
	if err != nil {
		// Gone, or registered again under another name: looked for again.
		ns.Problems = append(ns.Problems, err.Error())
		_, stale = written[r.cdiName()]
		return stale
	}
	ns.PortState, ns.LinkLayer = pi.State, pi.LinkLayer
	key := portOfNet(r)
	table, ok := tables[key]
	room, roomOK := rooms[key]
	if !ok {
		if table, room, err = d.gids.Room(key, max(ns.RoCETypes, 1)); err != nil {
			ns.Problems = append(ns.Problems, err.Error())
			return
		}
		tables[key], rooms[key], roomOK = table, room, true
	}
	ns.GIDTable = &api.GIDTable{Size: pi.GIDTableSize, Used: table.Used, Free: max(pi.GIDTableSize-table.Used, 0)}
	if roomOK {
		ns.GIDTable.Room = &room
	}
	nodes, err := d.rdma.DeviceNodes(r.HCA)
	if err != nil {
		ns.Problems = append(ns.Problems, err.Error())
	}
	for _, dn := range nodes {
		ns.Devices = append(ns.Devices, api.Device{Path: dn.Path, Major: dn.Major, Minor: dn.Minor})
	}
	if w, ok := written[r.cdiName()]; ok && (err == nil || errors.Is(err, rdma.ErrNoRdmaCM)) {
		if p := specProblem(*r, w, nodes); p != "" {
			ns.Problems = append(ns.Problems, p)
			return true
		}
	}
	return false
}

// vlanStatus is the wire form of a network's VLAN record.
func vlanStatus(v *VLAN) *api.VLAN {
	if v == nil {
		return nil
	}
	return &api.VLAN{Lower: v.Lower, ID: v.ID, Created: v.Created}
}

// bondProblem says why network n's real device, a master, cannot carry
// RDMA as the host is now (a bond without a device of its own whose ports
// have theirs: RoCE LAG switched off after the network was created, or a
// network from before CreateNetwork refused such bonds); "" when it can.
func (d *Driver) bondProblem(n *network) string {
	l, err := d.links.LinkByName(n.RDMA.Netdev)
	if err != nil {
		return "" // the parent's own problems say it
	}
	if _, master := rxMasters[l.Kind]; !master {
		return ""
	}
	if err := d.checkBondPorts(n.Parent, l); err != nil {
		return err.Error()
	}
	return ""
}

// stackedVLANProblem says why network n's parent, as the links are now, is
// a VLAN stack whose RoCE frames its RDMA device would tag with the top
// VLAN only (see checkStackedVLANTags: a parent made again on another
// VLAN, or a network from before CreateNetwork refused such stacks); ""
// when it is not.
func (d *Driver) stackedVLANProblem(n *network) string {
	if n.VLAN == nil {
		return ""
	}
	l, err := d.links.LinkByName(n.Parent)
	if err != nil {
		return "" // vlanChainStatus says it
	}
	vlans, real, err := d.vlanStack(l)
	if err != nil {
		return ""
	}
	if err := d.checkStackedVLANTags(n.Parent, false, vlans, real.Name, n.RDMA.HCA); err != nil {
		return err.Error()
	}
	return ""
}

// vlanChainStatus fills in the stack of VLANs of parent, as the links
// are now.
func (d *Driver) vlanChainStatus(v *api.VLAN, parent string) error {
	l, err := d.links.LinkByName(parent)
	if err != nil {
		return fmt.Errorf("parent %q: %w", parent, err)
	}
	vlans, real, err := d.vlanStack(l)
	if err != nil {
		return err
	}
	if len(vlans) == 0 {
		return fmt.Errorf("parent %q is no VLAN sub-interface now (kind %s)", parent, l.Kind)
	}
	parts := make([]string, len(vlans))
	for i, vl := range vlans {
		on := real.Name
		if i+1 < len(vlans) {
			on = vlans[i+1].Name
		}
		parts[i] = fmt.Sprintf("vlan %d on %s", vl.VLANID, on)
		v.Stack = append([]int{vl.VLANID}, v.Stack...)
	}
	v.Chain = parent + ": " + strings.Join(parts, ", ")
	return nil
}

// gidStatus is the wire form of an endpoint's GID entry.
func gidStatus(g gid.Entry) api.GID {
	return api.GID{Index: g.Index, Type: g.Type, GID: g.GID}
}

func addrOnly(cidr string) string {
	if ip, _, err := net.ParseCIDR(cidr); err == nil {
		return ip.String()
	}
	return cidr
}
