package rdma_test

import (
	"slices"
	"testing"

	"github.com/rdma-macvlan/rdma-macvlan/rdma"
	"github.com/rdma-macvlan/rdma-macvlan/rdma/rdmatest"
)

// A partial read sees what changed in the slots it reads, and only there;
// the table it starts from is left as it was.
func TestRefresh(t *testing.T) {
	root := t.TempDir()
	if err := rdmatest.BuildRXE(root, rdmatest.RXEOptions{HCA: "rxe0", TableSize: 16}); err != nil {
		t.Fatal(err)
	}
	s := rdma.NewSysfs(root)
	t0, err := s.Table("rxe0", 1)
	if err != nil {
		t.Fatal(err)
	}
	if t0.Used != 1 || len(t0.Slots) != 16 || !slices.Equal(t0.FreeSlots(3), []int{1, 2, 3}) {
		t.Fatalf("table %+v: want the default GID in slot 0 and 15 free", t0)
	}
	a := rdmatest.IPv4GID("10.1.0.2")
	b := rdmatest.IPv4GID("10.1.0.3")
	for _, ip := range []string{"10.1.0.2", "10.1.0.3"} {
		if _, err := rdmatest.AddAddress(root, "rxe0", 1, ip, "eth0"); err != nil {
			t.Fatal(err)
		}
	}
	// Only slot 1 read: b, in slot 2, is not seen yet.
	t1, err := s.Refresh("rxe0", 1, t0, []int{1})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(t1.ByGID[a], []int{1}) || t1.ByGID[b] != nil || t1.Used != 2 {
		t.Fatalf("after reading slot 1: %v used %d", t1.ByGID, t1.Used)
	}
	if t0.Used != 1 || t0.ByGID[a] != nil || t0.Slots[1] != "" {
		t.Fatal("Refresh changed the table it started from")
	}
	t2, err := s.Refresh("rxe0", 1, t1, t1.FreeSlots(4))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(t2.ByGID[b], []int{2}) || t2.Used != 3 {
		t.Fatalf("after reading the free slots: %v used %d", t2.ByGID, t2.Used)
	}
	// a goes; its slot read again shows it empty, and the same GID coming
	// back in another slot moves it.
	if _, err := rdmatest.RemoveAddress(root, "rxe0", 1, "10.1.0.2"); err != nil {
		t.Fatal(err)
	}
	t3, err := s.Refresh("rxe0", 1, t2, []int{1})
	if err != nil {
		t.Fatal(err)
	}
	if t3.ByGID[a] != nil || t3.Used != 2 || !slices.Equal(t3.FreeSlots(1), []int{1}) {
		t.Fatalf("after a went: %v used %d", t3.ByGID, t3.Used)
	}
	if !slices.Equal(t2.ByGID[a], []int{1}) {
		t.Fatal("Refresh changed the table it started from")
	}
	full, err := s.Table("rxe0", 1)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(full.Slots, t3.Slots) || full.Used != t3.Used {
		t.Fatalf("partial reads %v differ from a full read %v", t3.Slots, full.Slots)
	}
}
