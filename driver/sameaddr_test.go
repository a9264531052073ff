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
