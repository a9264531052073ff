package gid

import (
	"slices"
	"testing"
	"time"
	"unsafe"

	"github.com/rdma-macvlan/rdma-macvlan/rdma"
	"github.com/rdma-macvlan/rdma-macvlan/rdma/rdmatest"
)

// driftTracker is a tracker whose drift reports go to a channel.
func driftTracker(t *testing.T) (*testTracker, chan Drift) {
	t.Helper()
	ch := make(chan Drift, 10)
	tr := mlx5Tracker(t, 32, Config{Drift: func(d Drift) { ch <- d }})
	return tr, ch
}

// readyAt has endpoint id with IPv4 ip ready at the entries the kernel
// gives its address now.
func readyAt(t *testing.T, tr *testTracker, id, ip string) []Entry {
	t.Helper()
	if _, err := tr.Admit(id, ipv4Request(ip)); err != nil {
		t.Fatal(err)
	}
	idx, err := rdmatest.AddAddress(tr.root, "mlx5_0", 1, ip, "eth0")
	if err != nil {
		t.Fatal(err)
	}
	g := rdmatest.IPv4GID(ip)
	found := []Entry{{Index: idx[0], Type: rdma.GIDTypeRoCEv1, GID: g}, {Index: idx[1], Type: rdma.GIDTypeRoCEv2, GID: g}}
	tr.Ready(id, found, time.Now())
	return found
}

// The port's entries deleted and added again in another order (a bond
// failover): the next read of the table reports the endpoint whose entries
// moved, with the index it was given and the one it has now, once.
func TestDriftReportedOnceOnTheNextRead(t *testing.T) {
	tr, ch := driftTracker(t)
	readyAt(t, tr, "e1", "10.5.0.2") // 2, 3
	readyAt(t, tr, "e2", "10.5.0.3") // 4, 5
	if _, err := tr.Read(mlx5Port); err != nil {
		t.Fatal(err)
	}
	select {
	case d := <-ch:
		t.Fatalf("drift %+v reported while nothing moved", d)
	default:
	}
	// The kernel re-adds the port's entries, e2's first.
	for _, ip := range []string{"10.5.0.2", "10.5.0.3"} {
		if _, err := rdmatest.RemoveAddress(tr.root, "mlx5_0", 1, ip); err != nil {
			t.Fatal(err)
		}
	}
	for _, ip := range []string{"10.5.0.3", "10.5.0.2"} {
		if _, err := rdmatest.AddAddress(tr.root, "mlx5_0", 1, ip, "eth0"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := tr.Read(mlx5Port); err != nil {
		t.Fatal(err)
	}
	got := map[string]Drift{}
	for len(got) < 2 {
		select {
		case d := <-ch:
			got[d.ID] = d
		case <-time.After(time.Second):
			t.Fatalf("drift reports %+v, want e1 and e2", got)
		}
	}
	g := rdmatest.IPv4GID("10.5.0.2")
	want := []Move{{GID: g, Type: rdma.GIDTypeRoCEv1, Given: 2, Now: 4}, {GID: g, Type: rdma.GIDTypeRoCEv2, Given: 3, Now: 5}}
	if d := got["e1"]; d.Port != mlx5Port || !slices.Equal(d.Moves, want) {
		t.Fatalf("drift of e1 = %+v, want %+v", d, want)
	}
	if _, err := tr.Read(mlx5Port); err != nil {
		t.Fatal(err)
	}
	select {
	case d := <-ch:
		t.Fatalf("drift of %s reported twice", d.ID)
	default:
	}
}

// An entry that went (and did not come back) is reported at index -1;
// an endpoint ready again at its new entries is watched from there.
func TestDriftOfAnEntryGone(t *testing.T) {
	tr, ch := driftTracker(t)
	readyAt(t, tr, "e1", "10.5.0.2")
	if _, err := rdmatest.RemoveAddress(tr.root, "mlx5_0", 1, "10.5.0.2"); err != nil {
		t.Fatal(err)
	}
	if _, err := tr.Read(mlx5Port); err != nil {
		t.Fatal(err)
	}
	var d Drift
	select {
	case d = <-ch:
	case <-time.After(time.Second):
		t.Fatal("no drift reported for entries that went")
	}
	if len(d.Moves) != 2 || d.Moves[0].Now != -1 || d.Moves[1].Now != -1 {
		t.Fatalf("drift %+v, want both entries at -1", d)
	}
	found := readyAt(t, tr, "e1x", "10.5.0.9")
	tr.Ready("e1", found, time.Now()) // e1 ready again, elsewhere
	if _, err := tr.Read(mlx5Port); err != nil {
		t.Fatal(err)
	}
	select {
	case d := <-ch:
		t.Fatalf("drift %+v after e1 was found again", d)
	default:
	}
}

// A table read that began before an endpoint was found ready (a slow read
// racing a watch's poll) does not show its entries yet: it is no drift. The
// same table read after the readiness is one. A table read from sysfs has
// its slots, and the second check judges the very slots of the first: the
// endpoint the first left for a later read is judged all the same (see
// checkDrift's skip); a hand-made one has none.
func TestDriftNotJudgedOnAnOlderRead(t *testing.T) {
	for _, slotted := range []bool{false, true} {
		tr, ch := driftTracker(t)
		before := time.Now()
		table, err := tr.sys.Table("mlx5_0", 1) // nothing of e1 yet
		if err != nil {
			t.Fatal(err)
		}
		if !slotted {
			table.Slots = nil
		}
		readyAt(t, tr, "e1", "10.5.0.2")
		tr.checkDrift(mlx5Port, table, before)
		select {
		case d := <-ch:
			t.Fatalf("slots %v: drift %+v reported from a read that began before the endpoint was ready", slotted, d)
		default:
		}
		tr.checkDrift(mlx5Port, table, time.Now())
		select {
		case d := <-ch:
			if d.ID != "e1" {
				t.Fatalf("slots %v: drift of %s, want e1", slotted, d.ID)
			}
		default:
			t.Fatalf("slots %v: a read after the readiness that lacks e1's entries reported no drift", slotted)
		}
	}
}

// Entries that moved between the read that found them and the endpoint's
// readiness (the watch reported after a later read had run) are a drift
// on the next read, even though that read changes none of their slots: a
// read skips only endpoints it knows were in place in the table before.
func TestDriftOfEntriesThatMovedBeforeTheReadiness(t *testing.T) {
	tr, ch := driftTracker(t)
	if _, err := tr.Admit("e1", ipv4Request("10.5.0.2")); err != nil {
		t.Fatal(err)
	}
	idx, err := rdmatest.AddAddress(tr.root, "mlx5_0", 1, "10.5.0.2", "eth0")
	if err != nil {
		t.Fatal(err)
	}
	g := rdmatest.IPv4GID("10.5.0.2")
	found := []Entry{{Index: idx[0], Type: rdma.GIDTypeRoCEv1, GID: g}, {Index: idx[1], Type: rdma.GIDTypeRoCEv2, GID: g}}
	foundAt := time.Now()
	// The port's entries re-added, another address first.
	if _, err := rdmatest.RemoveAddress(tr.root, "mlx5_0", 1, "10.5.0.2"); err != nil {
		t.Fatal(err)
	}
	for _, ip := range []string{"10.5.0.7", "10.5.0.2"} {
		if _, err := rdmatest.AddAddress(tr.root, "mlx5_0", 1, ip, "eth0"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := tr.Read(mlx5Port); err != nil { // e1 not ready yet: not judged
		t.Fatal(err)
	}
	tr.Ready("e1", found, foundAt)
	if _, err := tr.Read(mlx5Port); err != nil { // no slot changed since the read before
		t.Fatal(err)
	}
	select {
	case d := <-ch:
		if d.ID != "e1" || len(d.Moves) != 2 || d.Moves[0].Given != idx[0] || d.Moves[0].Now == idx[0] {
			t.Fatalf("drift %+v, want e1's entries moved from %v", d, idx)
		}
	case <-time.After(time.Second):
		t.Fatal("entries that moved before the readiness reported no drift on a read that changed none of their slots")
	}
}

// A partial read that changes no slot gives the slots of the read before,
// and the drift check skips what it judged on them already: not an
// endpoint found ready since, even with its entries moved before its
// readiness (nor one it left to a later read: TestDriftNotJudgedOnAnOlderRead).
func TestDriftJudgedOnUnchangedSlotsWhenSomethingIsNew(t *testing.T) {
	t.Run("ready since", func(t *testing.T) {
		ch := make(chan Drift, 10)
		tr := mlx5Tracker(t, 32, Config{Drift: func(d Drift) { ch <- d }, MaxAge: time.Hour})
		if _, err := tr.Admit("e1", ipv4Request("10.5.0.2")); err != nil {
			t.Fatal(err)
		}
		idx, err := rdmatest.AddAddress(tr.root, "mlx5_0", 1, "10.5.0.2", "eth0")
		if err != nil {
			t.Fatal(err)
		}
		g := rdmatest.IPv4GID("10.5.0.2")
		found := []Entry{{Index: idx[0], Type: rdma.GIDTypeRoCEv1, GID: g}, {Index: idx[1], Type: rdma.GIDTypeRoCEv2, GID: g}}
		foundAt := time.Now()
		if _, err := rdmatest.RemoveAddress(tr.root, "mlx5_0", 1, "10.5.0.2"); err != nil {
			t.Fatal(err)
		}
		for _, ip := range []string{"10.5.0.7", "10.5.0.2"} {
			if _, err := rdmatest.AddAddress(tr.root, "mlx5_0", 1, ip, "eth0"); err != nil {
				t.Fatal(err)
			}
		}
		first, _, _, err := tr.table(mlx5Port, readChanges, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		tr.Ready("e1", found, foundAt)
		again, _, _, err := tr.table(mlx5Port, readChanges, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		if !sameSlots(first.Slots, again.Slots) {
			t.Fatal("a partial read that changed nothing gave other slots: the case under test is not reached")
		}
		select {
		case d := <-ch:
			if d.ID != "e1" {
				t.Fatalf("drift of %s, want e1", d.ID)
			}
		case <-time.After(time.Second):
			t.Fatal("an endpoint ready since the last check was not judged on the same slots")
		}
	})
}

// The drift check compares every ready endpoint's entries with the table
// at each read that changed a slot: an entry found shares the text of its
// slot, and a full read keeps the text of slots that did not change, so
// that the comparison costs a pointer, not the bytes of a GID.
func TestFoundEntriesShareTheSlotsText(t *testing.T) {
	tr := mlx5Tracker(t, 32, Config{MaxAge: time.Hour})
	if _, err := rdmatest.AddAddress(tr.root, "mlx5_0", 1, "10.5.0.2", "eth0"); err != nil {
		t.Fatal(err)
	}
	first, err := tr.Read(mlx5Port)
	if err != nil {
		t.Fatal(err)
	}
	found := tr.foundIn(mlx5Port, first, Expect("10.5.0.2/24", "", "", false))
	if len(found) != 2 {
		t.Fatalf("found %+v, want two entries", found)
	}
	if _, err := rdmatest.AddAddress(tr.root, "mlx5_0", 1, "10.5.0.3", "eth0"); err != nil {
		t.Fatal(err)
	}
	again, err := tr.Read(mlx5Port) // a full read, one slot pair changed
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range found {
		if unsafe.StringData(f.GID) != unsafe.StringData(first.Slots[f.Index]) {
			t.Errorf("entry %d of the read does not share its slot's text", f.Index)
		}
		if unsafe.StringData(again.Slots[f.Index]) != unsafe.StringData(f.GID) {
			t.Errorf("slot %d, unchanged, has new text after a full read", f.Index)
		}
	}
}
