package driver

import (
	"net"
	"sort"
)

// Status is the answer of GET /v1/status (contract: field names).
type Status struct {
	Networks []NetworkStatus `json:"networks"`
}

// NetworkStatus describes one network.
type NetworkStatus struct {
	ID         string           `json:"id"`
	Parent     string           `json:"parent"`
	VLAN       *VLAN            `json:"vlan,omitempty"`
	Mode       string           `json:"macvlan_mode"`
	MTU        int              `json:"mtu"`
	RDMADevice string           `json:"rdma_device,omitempty"`
	Endpoints  []EndpointStatus `json:"endpoints"`
}

// EndpointStatus describes one endpoint.
type EndpointStatus struct {
	ID      string `json:"id"`
	Ifname  string `json:"ifname"`
	IPv4    string `json:"ipv4,omitempty"`
	IPv6    string `json:"ipv6,omitempty"`
	MAC     string `json:"mac"`
	Sandbox string `json:"sandbox,omitempty"`
}

// Status reports every network and endpoint, sorted by ID.
func (d *Driver) Status() Status {
	d.mu.Lock()
	defer d.mu.Unlock()
	st := Status{Networks: make([]NetworkStatus, 0, len(d.networks))}
	byNet := make(map[string][]EndpointStatus, len(d.networks))
	for _, e := range d.endpoints {
		byNet[e.NetworkID] = append(byNet[e.NetworkID], EndpointStatus{
			ID: e.ID, Ifname: e.Ifname, IPv4: addrOnly(e.IPv4), IPv6: addrOnly(e.IPv6), MAC: e.MAC, Sandbox: e.Sandbox,
		})
	}
	for _, n := range d.networks {
		eps := byNet[n.ID]
		if eps == nil {
			eps = []EndpointStatus{}
		}
		sort.Slice(eps, func(i, j int) bool { return eps[i].ID < eps[j].ID })
		st.Networks = append(st.Networks, NetworkStatus{
			ID: n.ID, Parent: n.Parent, VLAN: n.VLAN, Mode: n.Mode, MTU: n.MTU, RDMADevice: n.RDMADevice, Endpoints: eps,
		})
	}
	sort.Slice(st.Networks, func(i, j int) bool { return st.Networks[i].ID < st.Networks[j].ID })
	return st
}

func addrOnly(cidr string) string {
	if ip, _, err := net.ParseCIDR(cidr); err == nil {
		return ip.String()
	}
	return cidr
}
