package rdma_test

import (
	"testing"

	"github.com/rdma-macvlan/rdma-macvlan/rdma"
	"github.com/rdma-macvlan/rdma-macvlan/rdma/rdmatest"
)

// The kernel driver of an RDMA device is its device's (ConnectX: mlx5_core),
// except for Soft-RoCE, which names itself in node_desc whatever device an
// older kernel linked it to.
func TestKernelDriver(t *testing.T) {
	root := rdmatest.MLX5(t, rdmatest.MLX5Options{})
	if err := rdmatest.BuildRXE(root, rdmatest.RXEOptions{HCA: "rxe0", Netdev: "eth0", Uverbs: 2}); err != nil {
		t.Fatal(err)
	}
	port := []rdmatest.PortSpec{{TableSize: 16, DefaultTypes: []string{rdmatest.TypeV2}}}
	for _, h := range []rdmatest.HCASpec{
		// rxe on a ConnectX netdev, as kernels that gave rxe a parent
		// device showed it: its device link leads to mlx5_core.
		{Name: "rxe1", PCIDir: rdmatest.MLX5PCIBus + "/0000:03:00.0", NodeDesc: "rxe", Uverbs: 3, Ports: port},
		{Name: "siw0", NodeDesc: "siw", Uverbs: 4, Ports: port},
	} {
		if err := rdmatest.BuildHCA(root, h); err != nil {
			t.Fatal(err)
		}
	}
	s := rdma.NewSysfs(root)
	for hca, want := range map[string]string{
		"mlx5_0": "mlx5_core", "rxe0": rdma.DriverRXE, "rxe1": rdma.DriverRXE,
		"siw0": "", "mlx5_9": "", "../mlx5_0": "",
	} {
		if got := s.KernelDriver(hca); got != want {
			t.Errorf("KernelDriver(%q) = %q, want %q", hca, got, want)
		}
	}
}
