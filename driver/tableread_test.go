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

// Between full reads the watch reads only the lowest free slots it knows
// of. An entry the kernel puts in a slot that was freed behind the
// driver's back is found by the full read of a watch that waits longer
// than a start takes (slowWatch polls), not only when it times out.
func TestWatchFindsEntryInSlotFreedUnseen(t *testing.T) {
	d, links, root := newPartialReadDriver(t, 16, 10*time.Second) // polls every 5 ms
	if _, err := d.CreateEndpoint(ep("n1", "e0", "10.5.0.2/24")); err != nil {
		t.Fatal(err)
	}
	// The foreign address goes; the driver's table still shows slot 1 used.
	if _, err := rdmatest.RemoveAddress(root, "rxe0", 1, "10.9.0.1"); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Join("n1", "e0", "/sb/e0"); err != nil {
		t.Fatal(err)
	}
	if _, err := links.MoveToSandbox(LinkName("e0")); err != nil {
		t.Fatal(err)
	}
	slots, err := rdmatest.AddAddress(root, "rxe0", 1, "10.5.0.2", "eth0")
	if err != nil {
		t.Fatal(err)
	}
	if len(slots) != 1 || slots[0] != 1 {
		t.Fatalf("entry in slots %v, want the lowest free one, 1", slots)
	}
	// Not through Status: it reads the whole table itself.
	deadline := time.Now().Add(3 * time.Second)
	for {
		d.mu.Lock()
		e := d.endpoints["e0"]
		ready, gids := e.RDMAReady, e.GIDs
		d.mu.Unlock()
		if ready {
			if len(gids) != 1 || gids[0].Index != 1 {
				t.Fatalf("GIDs %+v, want index 1", gids)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("entry in a slot freed unseen not found within 3 s (a full read after 50 ms of waiting; the watch times out after 10 s)")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
