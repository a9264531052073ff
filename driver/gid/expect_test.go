package gid

import (
	"net"
	"slices"
	"testing"

	"github.com/rdma-macvlan/rdma-macvlan/rdma"
	"github.com/rdma-macvlan/rdma-macvlan/rdma/rdmatest"
)

func TestExpect(t *testing.T) {
	const mac = "02:42:0a:05:00:02"
	hw, _ := net.ParseMAC(mac)
	ll := rdma.DefaultGID(hw)
	v4, v6 := rdmatest.IPv4GID("10.5.0.2"), rdma.GIDFromIP(net.ParseIP("fd00:5::2"))
	for _, c := range []struct {
		name                 string
		ipv4, ipv6, mac      string
		ipv6Net              bool
		required, optional   []string
		linkLocal            string
		addresses            int
		observedHasLinkLocal bool
	}{
		// IPv4-only networks: the engines disable IPv6 in the container,
		// so the link-local entry is looked for but not expected.
		{name: "IPv4 network", ipv4: "10.5.0.2/24", mac: mac, required: []string{v4}, linkLocal: ll, addresses: 1, observedHasLinkLocal: true},
		{name: "dual stack", ipv4: "10.5.0.2/24", ipv6: "fd00:5::2/64", mac: mac, ipv6Net: true,
			required: []string{v4}, optional: []string{v6, ll}, linkLocal: ll, addresses: 3, observedHasLinkLocal: true},
		{name: "IPv6 only", ipv6: "fd00:5::2/64", mac: mac, ipv6Net: true, required: []string{v6}, optional: []string{ll}, linkLocal: ll, addresses: 2, observedHasLinkLocal: true},
		{name: "MAC not chosen yet", ipv4: "10.5.0.2/24", ipv6Net: true, required: []string{v4}, addresses: 2},
		{name: "no address", mac: mac, linkLocal: ll, addresses: 0, observedHasLinkLocal: true},
	} {
		g := Expect(c.ipv4, c.ipv6, c.mac, c.ipv6Net)
		if !slices.Equal(g.Required, c.required) || !slices.Equal(g.Optional, c.optional) || g.LinkLocal != c.linkLocal {
			t.Errorf("%s: %+v, want required %v optional %v link-local %q", c.name, g, c.required, c.optional, c.linkLocal)
		}
		if n := g.addresses(); n != c.addresses {
			t.Errorf("%s: admission counts %d addresses, want %d", c.name, n, c.addresses)
		}
		if has := slices.Contains(g.observed(), ll); has != c.observedHasLinkLocal {
			t.Errorf("%s: link-local observed %v, want %v", c.name, has, c.observedHasLinkLocal)
		}
	}
}
