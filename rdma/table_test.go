package rdma_test

import (
	"slices"
	"testing"

	"github.com/rdma-macvlan/rdma-macvlan/rdma"
	"github.com/rdma-macvlan/rdma-macvlan/rdma/rdmatest"
)

func TestTable(t *testing.T) {
	root := rdmatest.MLX5(t, rdmatest.RealHostMLX5())
	tb, err := rdma.NewSysfs(root).Table("mlx5_0", 1)
	if err != nil {
		t.Fatal(err)
	}
	// RealHostMLX5: 255 slots, 0-9 populated.
	if tb.Size != 255 || tb.Used != 10 {
		t.Fatalf("size %d used %d, want 255 and 10", tb.Size, tb.Used)
	}
	if got := tb.ByGID[rdmatest.IPv4GID("10.152.0.12")]; !slices.Equal(got, []int{6, 7}) {
		t.Fatalf("10.152.0.12 at %v, want [6 7]", got)
	}
	if got := tb.ByGID["fe80:0000:0000:0000:a288:c2ff:fe5b:03ec"]; !slices.Equal(got, []int{0, 1}) {
		t.Fatalf("default GID at %v, want [0 1]", got)
	}
	if _, err := rdma.NewSysfs(root).Table("../x", 1); err == nil {
		t.Fatal("path-like device name accepted")
	}
	s := rdma.NewSysfs(root)
	if s.GIDType("mlx5_0", 1, 7) != rdma.GIDTypeRoCEv2 || s.GIDType("mlx5_0", 1, 100) != "" {
		t.Fatal("GIDType")
	}
}
