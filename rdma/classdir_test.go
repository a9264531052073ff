package rdma

import (
	"reflect"
	"testing"

	"github.com/rdma-macvlan/rdma-macvlan/rdma/rdmatest"
)

// Each root lists its own device, and a device's verbs nodes are those
// whose ibdev names it: never mlx5's umad0 or issm0, and none for a device
// the root does not have.
func TestClassDirs(t *testing.T) {
	mlx5 := rdmatest.MLX5(t, rdmatest.MLX5Options{})
	rxe := rdmatest.RXE(t, rdmatest.RXEOptions{Uverbs: 3})
	for _, h := range []struct{ root, hca, other, uverbs string }{
		{mlx5, "mlx5_0", "rxe0", "uverbs0"},
		{rxe, "rxe0", "mlx5_0", "uverbs3"},
	} {
		if devs := rdmaDeviceList(h.root); !reflect.DeepEqual(devs, []string{h.hca}) {
			t.Errorf("devices under %s: %q, want [%s]", h.root, devs, h.hca)
		}
		if names := uverbsNames(h.root, h.hca); !reflect.DeepEqual(names, []string{h.uverbs}) {
			t.Errorf("%s verbs nodes %q, want [%s]", h.hca, names, h.uverbs)
		}
		if names := uverbsNames(h.root, h.other); names != nil {
			t.Errorf("verbs nodes of %s, absent under %s: %q, want none", h.other, h.root, names)
		}
	}
}
