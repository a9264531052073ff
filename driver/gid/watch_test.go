package gid

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rdma-macvlan/rdma-macvlan/rdma"
	"github.com/rdma-macvlan/rdma-macvlan/rdma/rdmatest"
)

// A watch reports the entries once they are all there, with the slots the
// kernel put them in (a hole left by entries gone is filled first).
func TestWatchReportsTheEntriesFound(t *testing.T) {
	extra := append(rdmatest.Pair(2, rdmatest.IPv4GID("10.5.0.50"), "eth0"), rdmatest.Pair(4, rdmatest.IPv4GID("10.5.0.51"), "eth0")...)
	tr := newTestTracker(t, rdmatest.MLX5(t, rdmatest.MLX5Options{Netdev: "p0", Extra: extra}), Config{})
	if _, err := tr.Admit("e1", ipv4Request("10.5.0.2")); err != nil {
		t.Fatal(err)
	}
	if _, err := rdmatest.RemoveAddress(tr.root, "mlx5_0", 1, "10.5.0.50"); err != nil {
		t.Fatal(err)
	}
	if !tr.Watch("e1") || !tr.Watching("e1") {
		t.Fatal("no watch for a known endpoint")
	}
	time.Sleep(30 * time.Millisecond)
	select {
	case o := <-tr.outcomes:
		t.Fatalf("outcome %+v before the kernel added anything", o)
	default:
	}
	tr.addAddress(t, "mlx5_0", "10.5.0.2")
	o := tr.outcome(t, 2*time.Second)
	g := rdmatest.IPv4GID("10.5.0.2")
	want := []Entry{{Index: 2, Type: rdma.GIDTypeRoCEv1, GID: g}, {Index: 3, Type: rdma.GIDTypeRoCEv2, GID: g}}
	if o.ID != "e1" || o.Reason != "" || !slices.Equal(o.Found, want) || o.Port != mlx5Port {
		t.Fatalf("outcome %+v, want e1 ready with %+v", o, want)
	}
	if tr.Watching("e1") {
		t.Fatal("watch still running after its outcome")
	}
}

// A watch whose entries never come ends at its timeout with a reason that
// names the missing GID and the port.
func TestWatchTimesOut(t *testing.T) {
	tr := mlx5Tracker(t, 16, Config{Timeout: 100 * time.Millisecond})
	if _, err := tr.Admit("e1", ipv4Request("10.5.0.7")); err != nil {
		t.Fatal(err)
	}
	tr.Watch("e1")
	o := tr.outcome(t, 2*time.Second)
	for _, w := range []string{rdmatest.IPv4GID("10.5.0.7"), "did not appear in the table of mlx5_0 port 1", "(14 of 16 entries free)"} {
		if !strings.Contains(o.Reason, w) {
			t.Errorf("reason %q does not say %q", o.Reason, w)
		}
	}
	if o.Found != nil {
		t.Errorf("found %+v on a timeout", o.Found)
	}
}

// A stopped watch reports nothing and ends (Done closes); an outcome of a
// watch replaced by a newer one cannot be taken.
func TestStoppedWatchReportsNothing(t *testing.T) {
	tr := mlx5Tracker(t, 16, Config{})
	if _, err := tr.Admit("e1", ipv4Request("10.5.0.2")); err != nil {
		t.Fatal(err)
	}
	tr.Watch("e1")
	done := tr.Done("e1")
	tr.StopWatch("e1")
	select {
	case <-done:
	default:
		t.Fatal("Done not closed by StopWatch")
	}
	if tr.Done("e1") != nil || tr.Watching("e1") {
		t.Fatal("a stopped watch still counts as running")
	}
	tr.addAddress(t, "mlx5_0", "10.5.0.2")
	select {
	case o := <-tr.outcomes:
		t.Fatalf("a stopped watch reported %+v", o)
	case <-time.After(100 * time.Millisecond):
	}

	tr.Watch("e1")
	tr.mu.Lock()
	old := tr.watches["e1"]
	tr.mu.Unlock()
	stale := Outcome{ID: "e1", t: tr.Tracker, w: old}
	tr.StopWatch("e1")
	tr.Watch("e1")
	if stale.Current() || stale.Take() {
		t.Fatal("the outcome of a replaced watch was taken")
	}
	if o := tr.outcome(t, 2*time.Second); o.Reason != "" {
		t.Fatalf("the newer watch: %+v", o)
	}
}

// Endpoints waiting on one port share one poller (one table read per
// interval for all of them), which stops once none waits.
func TestOnePollerPerPort(t *testing.T) {
	root := t.TempDir()
	for i, nd := range []string{"p0", "p1"} {
		if err := rdmatest.BuildRXE(root, rdmatest.RXEOptions{HCA: fmt.Sprintf("rxe%d", i), Netdev: nd, TableSize: 64, Uverbs: i}); err != nil {
			t.Fatal(err)
		}
	}
	tr := newTestTracker(t, root, Config{})
	for i := range 20 {
		port := Port{HCA: fmt.Sprintf("rxe%d", i%2), Port: 1}
		tr.Add(id(i), Endpoint{Port: port, Want: Expect(fmt.Sprintf("10.5.0.%d/24", i+2), "", "", false), Need: 1, Types: 1})
		tr.Watch(id(i))
	}
	tr.mu.Lock()
	pollers, watches := len(tr.pollers), len(tr.watches)
	tr.mu.Unlock()
	if pollers != 2 || watches != 20 {
		t.Fatalf("%d pollers for %d watches on 2 ports: want one poller per port", pollers, watches)
	}
	for i := range 20 {
		tr.addAddress(t, fmt.Sprintf("rxe%d", i%2), fmt.Sprintf("10.5.0.%d", i+2))
	}
	for range 20 {
		if o := tr.outcome(t, 5*time.Second); o.Reason != "" || len(o.Found) != 1 {
			t.Fatalf("outcome %+v", o)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		tr.mu.Lock()
		pollers, watches = len(tr.pollers), len(tr.watches)
		tr.mu.Unlock()
		if pollers == 0 && watches == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d pollers and %d watches left after every entry appeared", pollers, watches)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Between full reads the watch reads only the lowest free slots it knows
// of. An entry the kernel puts in a slot that was freed behind the
// tracker's back is found by the full read of a watch that waits longer
// than a start takes (slowWatch polls), not only when it times out.
func TestWatchFindsEntryInSlotFreedUnseen(t *testing.T) {
	foreign := rdmatest.Entry{Index: 1, GID: rdmatest.IPv4GID("10.9.0.1"), Type: rdmatest.TypeV2, Ndev: "p0"}
	root := rdmatest.RXE(t, rdmatest.RXEOptions{Netdev: "p0", TableSize: 16, Extra: []rdmatest.Entry{foreign}})
	tr := newTestTracker(t, root, Config{Timeout: 10 * time.Second, MaxAge: time.Hour})
	port := Port{HCA: "rxe0", Port: 1}
	if _, err := tr.Admit("e0", Request{Port: port, Want: Expect("10.5.0.2/24", "", "", false), Types: 1}); err != nil {
		t.Fatal(err)
	}
	// The foreign address goes; the tracker's snapshot still shows slot 1
	// used.
	if _, err := rdmatest.RemoveAddress(root, "rxe0", 1, "10.9.0.1"); err != nil {
		t.Fatal(err)
	}
	tr.Watch("e0")
	slots, err := rdmatest.AddAddress(root, "rxe0", 1, "10.5.0.2", "eth0")
	if err != nil || len(slots) != 1 || slots[0] != 1 {
		t.Fatalf("entry in slots %v (%v), want the lowest free one, 1", slots, err)
	}
	o := tr.outcome(t, 3*time.Second) // a full read after 50 ms of waiting; the watch times out after 10 s
	if o.Reason != "" || len(o.Found) != 1 || o.Found[0].Index != 1 {
		t.Fatalf("outcome %+v, want the entry at index 1", o)
	}
}
