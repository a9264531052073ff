package driver

import (
	"fmt"
	"testing"
	"time"

	"github.com/rdma-macvlan/rdma-macvlan/driver/drivertest"
	"github.com/rdma-macvlan/rdma-macvlan/rdma"
	"github.com/rdma-macvlan/rdma-macvlan/rdma/rdmatest"
)

// newPartialReadDriver runs a driver with the daemon's kind of table reads
// (GIDTableMaxAge > 0: snapshots and partial reads) on an rxe port of size
// slots whose slot 1 holds an entry of an address the driver knows nothing
// of.
func newPartialReadDriver(t *testing.T, size int, timeout time.Duration) (testDriver, *drivertest.Links, string) {
	t.Helper()
	links := drivertest.NewLinks("p0")
	foreign := rdmatest.Entry{Index: 1, GID: rdmatest.IPv4GID("10.9.0.1"), Type: rdmatest.TypeV2, Ndev: "p0"}
	root := buildRoot(t, func(r string) error {
		return rdmatest.BuildRXE(r, rdmatest.RXEOptions{Netdev: "p0", TableSize: size, Extra: []rdmatest.Entry{foreign}})
	})
	dd, err := New(Config{StateDir: t.TempDir(), Links: links, Log: quietLog(), Sysfs: rdma.NewSysfs(root), CDIDir: t.TempDir(),
		GIDTimeout: timeout, GIDPoll: 5 * time.Millisecond, GIDTableMaxAge: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(dd.Close)
	d := testDriver{Driver: dd, root: root}
	if err := d.CreateNetwork(netReq("n1", "parent", "p0")); err != nil {
		t.Fatal(err)
	}
	return d, links, root
}

// A refusal is decided on a full read of the table, never on a snapshot
// or a partial read: entries removed behind the driver's back make room at
// once, however old the snapshot may be.
func TestRefusalReadsTheWholeTable(t *testing.T) {
	// 6 slots: the default GID, the foreign entry, 4 free.
	d, _, root := newPartialReadDriver(t, 6, time.Hour)
	for i := range 4 {
		if _, err := d.CreateEndpoint(ep("n1", fmt.Sprintf("e%d", i), fmt.Sprintf("10.5.0.%d/24", i+2))); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := d.CreateEndpoint(ep("n1", "e4", "10.5.0.9/24")); err == nil {
		t.Fatal("admitted into a full table")
	}
	if _, err := rdmatest.RemoveAddress(root, "rxe0", 1, "10.9.0.1"); err != nil {
		t.Fatal(err)
	}
	if _, err := d.CreateEndpoint(ep("n1", "e4", "10.5.0.9/24")); err != nil {
		t.Fatalf("refused on a stale table: %v", err)
	}
	if _, err := d.CreateEndpoint(ep("n1", "e5", "10.5.0.10/24")); err == nil {
		t.Fatal("admitted past the table's capacity")
	}
}
