package rdma

import (
	"fmt"
	"reflect"
	"sync"
	"testing"

	"github.com/rdma-macvlan/rdma-macvlan/rdma/rdmatest"
)

// Calls for different roots at the same time each read their own tree,
// and list only the verbs nodes of the device asked for.
func TestClassDirsRootsKeptApart(t *testing.T) {
	mlx5 := rdmatest.MLX5(t, rdmatest.MLX5Options{})
	rxe := rdmatest.RXE(t, rdmatest.RXEOptions{Uverbs: 3})
	hosts := []struct {
		root, hca, uverbs string
	}{{mlx5, "mlx5_0", "uverbs0"}, {rxe, "rxe0", "uverbs3"}}
	var wg sync.WaitGroup
	errs := make(chan string, 100)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				h := hosts[(g+i)%2]
				if devs := rdmaDeviceList(h.root); !reflect.DeepEqual(devs, []string{h.hca}) {
					errs <- fmt.Sprintf("devices under %s: %q, want [%s]", h.root, devs, h.hca)
					return
				}
				// mlx5's umad0 and issm0 are dropped.
				if names := uverbsNames(h.root, h.hca); !reflect.DeepEqual(names, []string{h.uverbs}) {
					errs <- fmt.Sprintf("%s verbs nodes %q, want [%s]", h.hca, names, h.uverbs)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}
