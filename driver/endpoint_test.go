package driver

import (
	"strconv"
	"strings"
	"testing"

	"github.com/rdma-macvlan/rdma-macvlan/driver/drivertest"
)

// TestCreateEndpointAddressFamily: each address field holds its own family.
// An address in the other field would be counted, watched and reported as
// the wrong family, so it is refused before anything is created.
func TestCreateEndpointAddressFamily(t *testing.T) {
	links := drivertest.NewLinks("p0")
	d := newTestDriver(t, links, t.TempDir())
	req := netReq("n1", "parent", "p0")
	req.IPv6 = []Subnet{{Pool: "fd00:5::/64"}}
	req.EnableIPv6 = true
	if err := d.CreateNetwork(req); err != nil {
		t.Fatal(err)
	}
	for i, tt := range []struct {
		name, v4, v6 string
		want         []string // "" for accepted
	}{
		{"IPv6 in Address", "fd00:5::9/64", "", []string{`address "fd00:5::9/64" from IPAM is an IPv6 address in the IPv4 field (Address)`, "IPv6 addresses in AddressIPv6"}},
		{"IPv4-mapped IPv6 in Address", "::ffff:10.5.0.9/120", "", []string{`"::ffff:10.5.0.9/120" from IPAM is an IPv6 address in the IPv4 field (Address)`}},
		{"IPv4 in AddressIPv6", "10.5.0.9/24", "10.5.0.10/24", []string{`address "10.5.0.10/24" from IPAM is an IPv4 address in the IPv6 field (AddressIPv6)`, "IPv4 addresses in Address"}},
		{"both swapped", "fd00:5::9/64", "10.5.0.9/24", []string{"is an IPv6 address in the IPv4 field"}},
		{"each in its own field", "10.5.0.9/24", "fd00:5::9/64", nil},
		{"IPv6 only", "", "fd00:5::a/64", nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			eid := "e" + strconv.Itoa(i)
			_, err := d.CreateEndpoint(CreateEndpointRequest{NetworkID: "n1", EndpointID: eid, IPv4: tt.v4, IPv6: tt.v6})
			if tt.want == nil {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Address %q, AddressIPv6 %q accepted", tt.v4, tt.v6)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			if !IsRefusal(err) {
				t.Errorf("error %v is not a refusal (it would be logged as a failure)", err)
			}
			if links.Has(LinkName(eid)) {
				t.Error("a link was created for a refused endpoint")
			}
		})
	}
}
