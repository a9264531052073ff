package gid

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/rdma-macvlan/rdma-macvlan/rdma"
	"github.com/rdma-macvlan/rdma-macvlan/rdma/rdmatest"
)

// Admission counts free slots minus what unsettled endpoints will take:
// endpoints are admitted exactly up to the table's capacity, and a
// forgotten one makes room for exactly one more.
func TestAdmitUpToCapacity(t *testing.T) {
	for _, c := range []struct {
		size, admitted int
	}{
		{12, 5}, // 10 free: exactly five pairs
		{11, 4}, // 9 free: the fifth pair misses by one entry
	} {
		tr := mlx5Tracker(t, c.size, Config{})
		n := 0
		var err error
		for i := range 10 {
			if _, err = tr.Admit(id(i), ipv4Request(fmt.Sprintf("10.5.0.%d", i+2))); err != nil {
				break
			}
			n++
		}
		if n != c.admitted {
			t.Fatalf("%d slots: admitted %d, want %d (last error %v)", c.size, n, c.admitted, err)
		}
		var full *FullError
		if !errors.As(err, &full) || full.Need != 2 || full.Addresses != 1 || full.Free != c.size-2 || full.Size != c.size ||
			full.Held != 2*c.admitted || full.Starting != c.admitted {
			t.Fatalf("%d slots: refusal %#v (%v)", c.size, full, err)
		}
		tr.Forget(id(0))
		if _, err := tr.Admit("x1", ipv4Request("10.5.1.1")); err != nil {
			t.Fatalf("%d slots: no room after Forget: %v", c.size, err)
		}
		if _, err := tr.Admit("x2", ipv4Request("10.5.1.2")); err == nil {
			t.Fatalf("%d slots: admitted past the capacity after Forget", c.size)
		}
	}
}

// The entries of an endpoint that are in the table are counted there, not
// also as held, whether or not its watch has seen them yet.
func TestAdmitCountsEntriesOnce(t *testing.T) {
	tr := mlx5Tracker(t, 8, Config{})
	for i, ip := range []string{"10.5.0.2", "10.5.0.3"} {
		if _, err := tr.Admit(id(i), ipv4Request(ip)); err != nil {
			t.Fatal(err)
		}
		tr.addAddress(t, "mlx5_0", ip)
	}
	// 8 slots: default pair + two endpoints' pairs: room for one more.
	if _, err := tr.Admit(id(2), ipv4Request("10.5.0.4")); err != nil {
		t.Fatalf("room for one more (6 of 8 used): %v", err)
	}
	if _, err := tr.Admit(id(3), ipv4Request("10.5.0.5")); err == nil {
		t.Fatal("admitted past the table's capacity")
	}
}

// With a table snapshot (MaxAge), admission may admit on the snapshot, but
// a refusal is decided on a read of every slot: entries removed since the
// snapshot never cause a refusal, however young the snapshot is.
func TestAdmitRefusesOnlyOnAFullRead(t *testing.T) {
	const maxAge = time.Hour // the snapshot never ages during the test
	tr := mlx5Tracker(t, 8, Config{MaxAge: maxAge})
	// 6 free: three IPv4 endpoints; the kernel adds their entries after
	// the snapshot was taken.
	for i, ip := range []string{"10.5.0.2", "10.5.0.3", "10.5.0.4"} {
		if _, err := tr.Admit(id(i), ipv4Request(ip)); err != nil {
			t.Fatal(err)
		}
		tr.addAddress(t, "mlx5_0", ip)
	}
	var full *FullError
	if _, err := tr.Admit(id(3), ipv4Request("10.5.0.5")); !errors.As(err, &full) {
		t.Fatalf("admitted into a full table: %v", err)
	}
	// The snapshot the refusal left shows e00's entries. e00 goes; the
	// snapshot still counts them, yet the next endpoint is admitted at
	// once: the snapshot says too full, the read of every slot does not.
	tr.Going(id(0))
	tr.Forget(id(0))
	if _, err := rdmatest.RemoveAddress(tr.root, "mlx5_0", 1, "10.5.0.2"); err != nil {
		t.Fatal(err)
	}
	tr.mu.Lock()
	snap := tr.tables[mlx5Port]
	tr.mu.Unlock()
	if len(snap.table.ByGID[rdmatest.IPv4GID("10.5.0.2")]) == 0 || time.Since(snap.at) >= maxAge {
		t.Fatalf("the snapshot does not show e00's entries, or has aged: the test proves nothing (%+v)", snap)
	}
	if _, err := tr.Admit(id(3), ipv4Request("10.5.0.5")); err != nil {
		t.Fatalf("refused on a snapshot holding entries since removed: %v", err)
	}
}

// A refusal on a full read first asks the request's Collect; what it
// forgets makes room at once, on the same read.
func TestAdmitCollectsBeforeRefusing(t *testing.T) {
	tr := mlx5Tracker(t, 6, Config{})
	for i, ip := range []string{"10.5.0.2", "10.5.0.3"} {
		if _, err := tr.Admit(id(i), ipv4Request(ip)); err != nil {
			t.Fatal(err)
		}
	}
	asked := 0
	req := ipv4Request("10.5.0.4")
	req.Collect = func() int { asked++; return 0 }
	if _, err := tr.Admit(id(2), req); err == nil || asked != 1 {
		t.Fatalf("admitted (%v) or Collect asked %d times, want a refusal after one ask", err, asked)
	}
	req.Collect = func() int { asked++; tr.Forget(id(1)); return 1 }
	if _, err := tr.Admit(id(2), req); err != nil || asked != 2 {
		t.Fatalf("refused after Collect forgot an endpoint (asked %d times): %v", asked, err)
	}
}

// On an IPv6 network, an endpoint whose MAC is not chosen yet holds an
// entry per type for its link-local address too.
func TestAdmitCountsThePendingLinkLocal(t *testing.T) {
	tr := mlx5Tracker(t, 8, Config{})
	req := Request{Port: mlx5Port, Want: Expect("10.5.0.2/24", "", "", true), Types: 2}
	need, err := tr.Admit(id(0), req)
	if err != nil || need != 4 {
		t.Fatalf("need %d, %v: want 4 (IPv4 and link-local, two types)", need, err)
	}
}

// edgeTracker is an mlx5 port of size slots (default pair at 0-1) whose
// kernel side the test drives: start adds an endpoint's entries after its
// admission, as the kernel does when libnetwork sets its address.
type edgeTracker struct {
	*testTracker
	t *testing.T
}

func (e edgeTracker) admit(i int, ip string) error {
	_, err := e.Admit(id(i), ipv4Request(ip))
	return err
}

func (e edgeTracker) start(i int, ip string) {
	e.t.Helper()
	if err := e.admit(i, ip); err != nil {
		e.t.Fatalf("admit %s: %v", ip, err)
	}
	e.addAddress(e.t, "mlx5_0", ip)
}

// Admission right at the table edge, against what the (fake) kernel will
// really hand out: exactly full, one free pair, empty reserved default
// slots, and a pair of slots that read empty because their entries were
// deleted while a QP still held them. Each admission is checked against the
// kernel: what admission admits, the kernel has room for; what it refuses,
// the kernel has none for.
func TestAdmitAtTheTableEdge(t *testing.T) {
	newEdge := func(t *testing.T, size int) edgeTracker {
		return edgeTracker{mlx5Tracker(t, size, Config{}), t}
	}
	kernelRoom := func(t *testing.T, e edgeTracker, ip string) bool {
		t.Helper()
		idx, err := rdmatest.AddAddress(e.root, "mlx5_0", 1, ip, "eth0")
		if err != nil && !errors.Is(err, rdmatest.ErrTableFull) {
			t.Fatal(err)
		}
		return err == nil && len(idx) == 2
	}
	room := func(t *testing.T, e edgeTracker, want int) {
		t.Helper()
		if _, got, err := e.Room(mlx5Port, 2); err != nil || got != want {
			t.Fatalf("Room: %d, %v; want %d (what admission gives)", got, err, want)
		}
	}
	refusal := func(t *testing.T, e edgeTracker, err error, free, passed int) {
		t.Helper()
		room(t, e, 0)
		var full *FullError
		if !errors.As(err, &full) || full.Free != free || full.PassedOver != passed {
			t.Fatalf("admission: %v (%#v), want a refusal with %d free, %d passed over", err, full, free, passed)
		}
		if note := fmt.Sprintf("%d more slots read empty but the kernel passed over them", passed); passed > 0 && !strings.Contains(err.Error(), note) {
			t.Fatalf("refusal %q does not say %q", err, note)
		}
	}

	t.Run("exactly full", func(t *testing.T) {
		e := newEdge(t, 8)
		for i, ip := range []string{"10.5.0.2", "10.5.0.3", "10.5.0.4"} {
			e.start(i, ip)
		}
		refusal(t, e, e.admit(3, "10.5.0.5"), 0, 0)
		if kernelRoom(t, e, "10.5.0.5") {
			t.Fatal("the kernel had room: the test table is not full")
		}
	})

	t.Run("one free pair", func(t *testing.T) {
		e := newEdge(t, 8)
		e.start(0, "10.5.0.2")
		e.start(1, "10.5.0.3")
		room(t, e, 2)
		if err := e.admit(2, "10.5.0.4"); err != nil {
			t.Fatalf("refused with one pair free: %v", err)
		}
		refusal(t, e, e.admit(3, "10.5.0.5"), 2, 0) // the pair is reserved for e02
		if !kernelRoom(t, e, "10.5.0.4") {
			t.Fatal("admitted, yet the kernel had no room")
		}
	})

	t.Run("empty reserved default slots", func(t *testing.T) {
		// The port's netdev lost its default GIDs: slots 0-1 read empty,
		// yet never take an address's entry.
		e := newEdge(t, 6)
		for _, i := range []int{0, 1} {
			if err := rdmatest.ClearGID(e.root, "mlx5_0", 1, i); err != nil {
				t.Fatal(err)
			}
		}
		e.start(0, "10.5.0.2")
		e.start(1, "10.5.0.3")
		refusal(t, e, e.admit(2, "10.5.0.4"), 0, 0)
		if kernelRoom(t, e, "10.5.0.4") {
			t.Fatal("the kernel had room: the reserved slots took an address")
		}
	})

	t.Run("one pending-delete pair", func(t *testing.T) {
		e := newEdge(t, 8)
		e.start(0, "10.5.0.2") // 2-3
		e.start(1, "10.5.0.3") // 4-5
		// e00 is disconnected while its workload holds a QP on its
		// entries: they read empty, their slots stay taken.
		e.Going(id(0))
		e.Forget(id(0))
		if held, err := rdmatest.RemoveAddressHeld(e.root, "mlx5_0", 1, "10.5.0.2"); err != nil || len(held) != 2 {
			t.Fatalf("hold: %v, %v", held, err)
		}
		// Four slots read empty: admission cannot know yet that two are
		// held, and admits e02; the kernel passes over 2-3 and puts it
		// at 6-7.
		e.start(2, "10.5.0.4")
		// Now the table shows the kernel passed over 2-3: no room, as the
		// kernel agrees.
		refusal(t, e, e.admit(3, "10.5.0.5"), 0, 2)
		if kernelRoom(t, e, "10.5.0.5") {
			t.Fatal("the kernel had room in the pending-delete slots")
		}
		// The workload lets go, and e02 stops: 6-7 are free, 2-3 still
		// count as taken (nothing shows they were freed), so one pair
		// fits and the kernel puts it at 2-3, the lowest free slots.
		if _, err := rdmatest.ReleasePending(e.root, "mlx5_0", 1); err != nil {
			t.Fatal(err)
		}
		e.Going(id(2))
		e.Forget(id(2))
		if _, err := rdmatest.RemoveAddress(e.root, "mlx5_0", 1, "10.5.0.4"); err != nil {
			t.Fatal(err)
		}
		e.start(3, "10.5.0.5")
		if got, err := e.Read(mlx5Port); err != nil || len(got.ByGID[rdmatest.IPv4GID("10.5.0.5")]) != 2 || got.Slots[2] == "" {
			t.Fatalf("e03's entries are not at 2-3: %v, %v", got.ByGID, err)
		}
		// The kernel filled 2-3: they are no longer passed over, and 6-7
		// take one more.
		if err := e.admit(4, "10.5.0.6"); err != nil {
			t.Fatalf("refused with 6-7 free: %v", err)
		}
		refusal(t, e, e.admit(5, "10.5.0.7"), 2, 0) // 6-7 are e04's reservation
		if !kernelRoom(t, e, "10.5.0.6") {
			t.Fatal("admitted e04, yet the kernel had no room")
		}
	})
}

// The kernel passes over a slot: it counts as taken until it is filled or
// the evidence is skipMemory old; tables of another size teach nothing.
func TestPassedOver(t *testing.T) {
	now := time.Now()
	e := ""
	g := "g"
	got := passedOver([]string{g, g, e, e, e, e}, []string{g, g, e, e, g, e}, nil, now)
	if len(got) != 2 || !got[2].Equal(now) || !got[3].Equal(now) {
		// 0-1 are populated; 2-3 were passed over for 4; 5 is above.
		t.Fatalf("passed over %v, want 2 and 3", got)
	}
	got = passedOver([]string{g, g, e, e, g, e}, []string{g, g, g, e, g, e}, map[int]time.Time{2: now, 3: now.Add(-skipMemory)}, now)
	if len(got) != 0 {
		t.Fatalf("kept %v: 2 was filled and 3's evidence is too old", got)
	}
	if got := passedOver([]string{e, e}, []string{e, e, g}, nil, now); len(got) != 0 {
		t.Fatalf("learned %v from a table that changed size", got)
	}
	table := rdma.GIDTable{Size: 6, Used: 3, Slots: []string{g, e, e, e, g, e}}
	free, passed := freeFor(table, 2, map[int]time.Time{2: now, 3: now.Add(-skipMemory)}, now)
	if free != 2 || passed != 1 {
		t.Fatalf("free %d, passed %d: want 3 and 5 free (1 reserved, 3's evidence too old), 2 passed over", free, passed)
	}
}
