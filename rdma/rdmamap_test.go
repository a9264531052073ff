package rdma

import (
	"fmt"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"reflect"
	"strconv"
	"sync"
	"testing"

	"github.com/rdma-macvlan/rdma-macvlan/rdma/rdmatest"
)

// rdmamap keeps its sysfs paths in package variables: calls for different
// roots at the same time must each read their own tree.
func TestRdmamapRootsKeptApart(t *testing.T) {
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

// Only rdmamap.go knows rdmamap: no other file of the module imports it.
func TestRdmamapImportedOnlyByItsAdapter(t *testing.T) {
	const pkg = "github.com/Mellanox/rdmamap"
	self, err := filepath.Abs("rdmamap.go")
	if err != nil {
		t.Fatal(err)
	}
	var importers []string
	err = filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || d.Name() == "build" || (d.Name() != ".." && d.Name()[0] == '.')) {
			return filepath.SkipDir
		}
		if d.IsDir() || filepath.Ext(path) != ".go" {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		for _, imp := range f.Imports {
			if p, _ := strconv.Unquote(imp.Path.Value); p == pkg {
				if abs, _ := filepath.Abs(path); abs != self {
					importers = append(importers, path)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(importers) != 0 {
		t.Errorf("%s is imported by %v: only rdma/rdmamap.go may use it (it points rdmamap at a root under a lock)", pkg, importers)
	}
}
