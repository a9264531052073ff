package rdma_test

import (
	"testing"

	"github.com/rdma-macvlan/rdma-macvlan/rdma"
	"github.com/rdma-macvlan/rdma-macvlan/rdma/rdmatest"
)

// twoNICs builds mlx5_0 on ens3np0 (PCI 0000:03:00.0, uverbs0) and mlx5_1
// on ens4np0 (PCI 0000:04:00.0, uverbs1).
func twoNICs(t *testing.T) string {
	t.Helper()
	root := rdmatest.MLX5(t, rdmatest.MLX5Options{})
	if err := rdmatest.BuildMLX5(root, rdmatest.MLX5Options{HCA: "mlx5_1", Netdev: "ens4np0", MAC: "a0:88:c2:5b:03:ed", PCIAddr: "0000:04:00.0", Uverbs: 1}); err != nil {
		t.Fatal(err)
	}
	return root
}

func TestIdentityFollowsTheNICAcrossASwap(t *testing.T) {
	root := twoNICs(t)
	s := rdma.NewSysfs(root)
	id0, err := s.Identity("mlx5_0")
	if err != nil {
		t.Fatal(err)
	}
	if id0.PCI != "0000:03:00.0" || id0.NodeGUID != "a088:c203:005b:03ec" {
		t.Fatalf("identity of mlx5_0 = %+v, want PCI 0000:03:00.0 and node GUID a088:c203:005b:03ec", id0)
	}
	id1, _ := s.Identity("mlx5_1")
	if id0.Same(id1) {
		t.Fatalf("two NICs have the same identity: %v and %v", id0, id1)
	}
	if err := rdmatest.SwapHCAs(root, "mlx5_0", "mlx5_1"); err != nil {
		t.Fatal(err)
	}
	hca, port, err := s.HCAForNetdev("ens3np0")
	if err != nil || hca != "mlx5_1" || port != 1 {
		t.Fatalf("after the swap ens3np0 is on %s/%d (%v), want mlx5_1/1", hca, port, err)
	}
	now, err := s.Identity("mlx5_1")
	if err != nil || !now.Same(id0) {
		t.Fatalf("after the swap mlx5_1 is %v (%v), want the NIC that was mlx5_0: %v", now, err, id0)
	}
	nodes, err := s.DeviceNodes("mlx5_1")
	if err != nil || len(nodes) == 0 || nodes[0].Path != "/dev/infiniband/uverbs1" || nodes[0].Minor != 193 {
		t.Fatalf("after the swap mlx5_1 has nodes %+v (%v), want uverbs1 231:193 first", nodes, err)
	}
	// The GID table travels with the NIC: ens3np0's default GID is in the
	// table now named mlx5_1.
	gids, err := s.GIDs("mlx5_1", 1)
	if err != nil || len(gids) == 0 || gids[0].Ndev != "ens3np0" {
		t.Fatalf("after the swap the table of mlx5_1 is %+v (%v), want ens3np0's entries", gids, err)
	}
}

func TestIdentitySame(t *testing.T) {
	a := rdma.Identity{NodeGUID: "a088:c203:005b:03ec", PCI: "0000:03:00.0"}
	for _, tt := range []struct {
		name string
		o    rdma.Identity
		want bool
	}{
		{"equal", a, true},
		{"same PCI, GUID unknown (a VF)", rdma.Identity{PCI: a.PCI}, true},
		{"same GUID, no PCI (rxe)", rdma.Identity{NodeGUID: a.NodeGUID}, true},
		{"other PCI", rdma.Identity{NodeGUID: a.NodeGUID, PCI: "0000:04:00.0"}, false},
		{"other GUID", rdma.Identity{NodeGUID: "a088:c203:005b:03ed", PCI: a.PCI}, false},
		{"nothing known", rdma.Identity{}, false},
	} {
		if got := a.Same(tt.o); got != tt.want {
			t.Errorf("%s: Same(%v) = %v, want %v", tt.name, tt.o, got, tt.want)
		}
	}
}

func TestIdentityOfAGoneDevice(t *testing.T) {
	root := twoNICs(t)
	if err := rdmatest.RemoveHCA(root, "mlx5_1"); err != nil {
		t.Fatal(err)
	}
	s := rdma.NewSysfs(root)
	if _, err := s.Identity("mlx5_1"); err == nil {
		t.Fatal("Identity of a removed device: no error")
	}
	if _, _, err := s.HCAForNetdev("ens4np0"); err == nil {
		t.Fatal("the netdev of a removed device still has an RDMA device")
	}
}
