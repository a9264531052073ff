package gid

import (
	"net"
	"slices"

	"github.com/rdma-macvlan/rdma-macvlan/rdma"
)

// Expected are the GIDs (kernel text) the kernel will add for an endpoint
// once libnetwork has set its addresses.
type Expected struct {
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
	// MACPending: the MAC is not chosen yet, on an IPv6 network: the
	// link-local address it will give is expected too.
	MACPending bool
}

// Expect returns what the kernel will add for an endpoint with addresses
// ipv4 and ipv6 (CIDR, "" for none) and MAC mac ("" while not chosen) on a
// network with (ipv6Net) or without IPv6.
func Expect(ipv4, ipv6, mac string, ipv6Net bool) Expected {
	var g Expected
	var v4, v6 string
	if ip, _, err := net.ParseCIDR(ipv4); err == nil {
		v4 = rdma.GIDFromIP(ip)
	}
	if ip, _, err := net.ParseCIDR(ipv6); err == nil {
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
	if hw, err := net.ParseMAC(mac); err == nil {
		g.LinkLocal = rdma.DefaultGID(hw)
		if ipv6Net {
			g.Optional = append(g.Optional, g.LinkLocal)
		}
	} else if mac == "" && ipv6Net {
		g.MACPending = true
	}
	return g
}

// expected lists the GIDs admission reserves room for.
func (g Expected) expected() []string { return append(slices.Clone(g.Required), g.Optional...) }

// addresses is how many addresses admission reserves entries for.
func (g Expected) addresses() int {
	n := len(g.Required) + len(g.Optional)
	if g.MACPending {
		n++ // the link-local address of the MAC the kernel will choose
	}
	return n
}

// observed lists every GID of the endpoint worth looking up in the table.
func (g Expected) observed() []string {
	out := g.expected()
	if g.LinkLocal != "" && !slices.Contains(out, g.LinkLocal) {
		out = append(out, g.LinkLocal)
	}
	return out
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
// for the entries found only). An entry's GID is the table's own text of
// its slot, which later reads keep while the slot holds it: the drift
// check then compares it with the slot at the cost of a pointer.
func (t *Tracker) foundIn(p Port, table rdma.GIDTable, g Expected) []Entry {
	var found []Entry
	for _, w := range g.observed() {
		for _, i := range table.ByGID[w] {
			gid := w
			if i < len(table.Slots) && table.Slots[i] == w {
				gid = table.Slots[i]
			}
			found = append(found, Entry{Index: i, Type: t.sys.GIDType(p.HCA, p.Port, i), GID: gid})
		}
	}
	return found
}

// Lookup reports the entries of an endpoint expecting want in table, a
// table of port p with types RoCE types, and which of its required GIDs
// have fewer entries than types. It reads the type of each entry found.
func (t *Tracker) Lookup(p Port, table rdma.GIDTable, want Expected, types int) (found []Entry, missing []string) {
	return t.foundIn(p, table, want), missingIn(table, want.Required, types)
}
