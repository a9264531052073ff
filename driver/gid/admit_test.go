package gid

import (
	"errors"
	"fmt"
	"testing"
	"time"

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
