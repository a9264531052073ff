package driver

import (
	"fmt"
	"net"
	"sort"

	"github.com/rdma-macvlan/rdma-macvlan/rdma"
)

// Status is the answer of GET /v1/status (contract: field names).
type Status struct {
	// Version is the daemon's release version (rdma-macvlan --version).
	Version  string          `json:"version"`
	Networks []NetworkStatus `json:"networks"`
}

// NetworkStatus describes one network and the RDMA device behind it.
type NetworkStatus struct {
	ID     string `json:"id"`
	Parent string `json:"parent"`
	VLAN   *VLAN  `json:"vlan,omitempty"`
	Mode   string `json:"macvlan_mode"`
	MTU    int    `json:"mtu"`
	// MTUFromParent: no -o mtu; MTU is the parent's now, which new
	// containers take.
	MTUFromParent bool   `json:"mtu_from_parent,omitempty"`
	GIDCheck      string `json:"gid_check,omitempty"`
	// GIDCheckNote says why gid_check=strict works as warn on this engine.
	GIDCheckNote string           `json:"gid_check_note,omitempty"`
	HCA          string           `json:"hca,omitempty"`
	Port         int              `json:"port,omitempty"`
	PortState    string           `json:"port_state,omitempty"`
	LinkLayer    string           `json:"link_layer,omitempty"`
	NetnsMode    string           `json:"netns_mode,omitempty"`
	RoCETypes    int              `json:"roce_types,omitempty"`
	GIDTable     *GIDTableStatus  `json:"gid_table,omitempty"`
	Devices      []DeviceStatus   `json:"devices,omitempty"`
	CDIDevice    string           `json:"cdi_device,omitempty"`
	Problems     []string         `json:"problems,omitempty"`
	Endpoints    []EndpointStatus `json:"endpoints"`
	RDMADevice   string           `json:"rdma_device,omitempty"` // the -o rdma_device override, if any
}

// GIDTableStatus counts a port's GID slots.
type GIDTableStatus struct {
	Size int `json:"size"`
	Used int `json:"used"`
	Free int `json:"free"`
}

// DeviceStatus is a device node a container on the network needs.
type DeviceStatus struct {
	Path  string `json:"path"`
	Major uint32 `json:"major"`
	Minor uint32 `json:"minor"`
}

// EndpointStatus describes one endpoint. Its GIDs are read from the table
// now, not remembered.
type EndpointStatus struct {
	ID         string        `json:"id"`
	Ifname     string        `json:"ifname"`
	IPv4       string        `json:"ipv4,omitempty"`
	IPv6       string        `json:"ipv6,omitempty"`
	MAC        string        `json:"mac"`
	Sandbox    string        `json:"sandbox,omitempty"`
	GIDs       []EndpointGID `json:"gids"`
	RDMAReady  bool          `json:"rdma_ready"`
	RDMAReason string        `json:"rdma_reason,omitempty"`
}

// Status reports every network and endpoint, sorted by ID, with the live
// state of their RDMA ports. sysfs is read without holding the driver's
// lock.
func (d *Driver) Status() Status {
	d.mu.Lock()
	nets := make([]Network, 0, len(d.networks))
	for _, n := range d.networks {
		nets = append(nets, *n)
	}
	eps := make([]Endpoint, 0, len(d.endpoints))
	watching := make(map[string]bool, len(d.watches))
	for _, e := range d.endpoints {
		eps = append(eps, *e)
		watching[e.ID] = d.watches[e.ID] != nil
	}
	d.mu.Unlock()

	mode, _, modeErr := rdma.NetnsMode(d.netnsMode, d.rdma)
	tables := map[portKey]rdma.GIDTable{}
	st := Status{Version: d.version, Networks: make([]NetworkStatus, 0, len(nets))}
	byNet := map[string]*NetworkStatus{}
	ipv6 := map[string]bool{}
	for i := range nets {
		n := &nets[i]
		ipv6[n.ID] = n.ipv6()
		ns := NetworkStatus{ID: n.ID, Parent: n.Parent, VLAN: n.VLAN, Mode: n.Mode, MTU: n.MTU, GIDCheck: n.GIDCheck,
			GIDCheckNote: n.strictNote, RDMADevice: n.RDMADevice, Endpoints: []EndpointStatus{}}
		if n.MTU == 0 {
			ns.MTUFromParent = true
			if l, err := d.links.LinkByName(n.Parent); err == nil {
				ns.MTU = l.MTU
			} else {
				ns.Problems = append(ns.Problems, fmt.Sprintf("parent %q: %v", n.Parent, err))
			}
		}
		if n.RDMA != nil {
			d.rdmaStatus(&ns, n.RDMA, tables)
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
		es := EndpointStatus{ID: e.ID, Ifname: e.Ifname, IPv4: addrOnly(e.IPv4), IPv6: addrOnly(e.IPv6), MAC: e.MAC,
			Sandbox: e.Sandbox, GIDs: []EndpointGID{}}
		if table, ok := tables[portKey{ns.HCA, ns.Port}]; ok && ns.HCA != "" {
			want := gidsOf(e, ipv6[e.NetworkID])
			found := d.foundIn(NetworkRDMA{HCA: ns.HCA, Port: ns.Port}, table, want, ns.RoCETypes)
			missing := missingIn(table, want.Required, ns.RoCETypes)
			if found != nil {
				es.GIDs = found
			}
			es.RDMAReady = e.Sandbox != "" && len(want.Required) > 0 && len(missing) == 0
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
	return st
}

// rdmaStatus fills in the port, its GID table and the device nodes. The
// table is read once per port (the GID files only: attributes are read for
// the entries of endpoints) and kept in tables.
func (d *Driver) rdmaStatus(ns *NetworkStatus, r *NetworkRDMA, tables map[portKey]rdma.GIDTable) {
	ns.HCA, ns.Port = r.HCA, r.Port
	ns.CDIDevice = rdma.CDIDeviceName(r.HCA)
	ns.RoCETypes = d.roceTypes(r)
	pi, err := d.rdma.Port(r.HCA, r.Port)
	if err != nil {
		ns.Problems = append(ns.Problems, err.Error())
		return
	}
	ns.PortState, ns.LinkLayer = pi.State, pi.LinkLayer
	key := portKey{r.HCA, r.Port}
	table, ok := tables[key]
	if !ok {
		if table, _, _, err = d.table(*r, 0); err != nil {
			ns.Problems = append(ns.Problems, err.Error())
			return
		}
		tables[key] = table
	}
	ns.GIDTable = &GIDTableStatus{Size: pi.GIDTableSize, Used: table.Used, Free: max(pi.GIDTableSize-table.Used, 0)}
	nodes, err := d.rdma.DeviceNodes(r.HCA)
	if err != nil {
		ns.Problems = append(ns.Problems, err.Error())
	}
	for _, dn := range nodes {
		ns.Devices = append(ns.Devices, DeviceStatus{Path: dn.Path, Major: dn.Major, Minor: dn.Minor})
	}
}

func addrOnly(cidr string) string {
	if ip, _, err := net.ParseCIDR(cidr); err == nil {
		return ip.String()
	}
	return cidr
}
