package driver

import (
	"errors"
	"strings"
	"testing"

	"github.com/rdma-macvlan/rdma-macvlan/driver/drivertest"
)

// An address another endpoint holds on the same HCA port, on any network,
// is refused, naming both endpoints and their networks: the kernel would
// add a second entry with the same GID, told apart only by a netdev that
// is eth0 in both containers. The same address on another port is fine.
func TestSameAddressOnOnePortRefused(t *testing.T) {
	links := drivertest.NewLinks("p0", "p1")
	d := newTestDriverAt(t, links, t.TempDir(), twoRails(t))
	for _, n := range []CreateNetworkRequest{netReq("na", "parent", "p0"), netReq("nb", "parent", "p0"), netReq("nc", "parent", "p1")} {
		if err := d.CreateNetwork(n); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := d.CreateEndpoint(ep("na", "e1", "10.5.0.2/24")); err != nil {
		t.Fatal(err)
	}
	_, err := d.CreateEndpoint(ep("nb", "e2", "10.5.0.2/24"))
	var conflict *ConflictError
	if !errors.As(err, &conflict) {
		t.Fatalf("the same address on one port: got %v, want a conflict", err)
	}
	for _, w := range []string{"endpoint e2 of network nb", "address 10.5.0.2", "mlx5_0 port 1", "endpoint e1 of network na", "--ip"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("refusal %q does not say %q", err, w)
		}
	}
	if links.Has(LinkName("e2")) {
		t.Error("the refused endpoint left its link")
	}
	if _, err := d.CreateEndpoint(ep("nc", "e3", "10.5.0.2/24")); err != nil {
		t.Errorf("the same address on another port refused: %v", err)
	}
	if err := d.DeleteEndpoint("na", "e1"); err != nil {
		t.Fatal(err)
	}
	if _, err := d.CreateEndpoint(ep("nb", "e2", "10.5.0.2/24")); err != nil {
		t.Errorf("the address is free again once its endpoint is deleted, yet: %v", err)
	}
}

// Two spellings of one address are one address: the prefix length, IPv6's
// zero compression and an IPv4-mapped IPv6 form do not tell them apart.
func TestAddrOfComparesAddresses(t *testing.T) {
	same := [][2]string{
		{"192.168.7.5/24", "192.168.7.5/16"},
		{"2001:db8::1/64", "2001:db8:0:0::1/64"},
		{"::ffff:192.168.7.5/120", "192.168.7.5/24"},
	}
	for _, c := range same {
		if a, b := addrOf(c[0]), addrOf(c[1]); !a.IsValid() || a != b {
			t.Errorf("addrOf(%q) = %v, addrOf(%q) = %v: want one valid address", c[0], a, c[1], b)
		}
	}
	for _, c := range []string{"", "/24", "not-an-address/24"} {
		if a := addrOf(c); a.IsValid() {
			t.Errorf("addrOf(%q) = %v, want no address", c, a)
		}
	}
	if a, b := addrOf("192.168.7.5/24"), addrOf("192.168.7.6/24"); a == b {
		t.Errorf("addrOf tells 192.168.7.5 and 192.168.7.6 apart: both %v", a)
	}
}
