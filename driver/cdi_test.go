package driver

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/rdma-macvlan/rdma-macvlan/cdi"
	"github.com/rdma-macvlan/rdma-macvlan/driver/drivertest"
	"github.com/rdma-macvlan/rdma-macvlan/rdma"
	"github.com/rdma-macvlan/rdma-macvlan/rdma/rdmatest"
)

func TestRDMACDISpecLifecycle(t *testing.T) {
	links := drivertest.NewLinks("p0")
	dir := t.TempDir()
	root := mlx5Root(t, rdmatest.MLX5Options{Uverbs: 2})
	d := newTestDriverAt(t, links, dir, root)
	for _, n := range []string{"n1", "n2"} {
		if err := d.CreateNetwork(netReq(n, "parent", "p0")); err != nil {
			t.Fatal(err)
		}
	}
	path := cdi.SpecPath(d.cdiDir, "mlx5_0")
	var spec cdi.Spec
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &spec); err != nil {
		t.Fatal(err)
	}
	if spec.Kind != "rdma-macvlan/hca" || len(spec.Devices) != 1 || spec.Devices[0].Name != "mlx5_0" {
		t.Fatalf("spec %+v", spec)
	}
	var nodes []string
	for _, n := range spec.Devices[0].ContainerEdits.DeviceNodes {
		nodes = append(nodes, fmt.Sprintf("%s %d:%d", n.Path, n.Major, n.Minor))
	}
	if !slices.Equal(nodes, []string{"/dev/infiniband/uverbs2 231:194", "/dev/infiniband/rdma_cm 10:57"}) {
		t.Fatalf("device nodes %v: want only the HCA's uverbs and rdma_cm, numbers from sysfs", nodes)
	}
	if !slices.Contains(spec.Devices[0].ContainerEdits.Env, "RDMA_MACVLAN_DEVICE_mlx5_0=mlx5_0:1") {
		t.Fatalf("env %v", spec.Devices[0].ContainerEdits.Env)
	}

	// Kept while a network uses the HCA.
	if err := d.DeleteNetwork("n1"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatal("spec removed while n2 still uses mlx5_0")
	}
	// Rewritten at start; stale specs of this daemon swept.
	d.Close()
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	stale, err := cdi.WriteSpec(d.cdiDir, cdi.Device{HCA: "mlx5_9", Port: 1, Owner: d.owner,
		Nodes: []rdma.DeviceNode{{Path: "/dev/infiniband/uverbs9", Major: 231, Minor: 201}}})
	if err != nil {
		t.Fatal(err)
	}
	foreign := filepath.Join(d.cdiDir, "vendor-gpu.json")
	if err := os.WriteFile(foreign, []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	d2 := newTestDriverAt(t, links, dir, root)
	if _, err := os.Stat(path); err != nil {
		t.Fatal("spec of a restored network not rewritten at start")
	}
	if _, err := os.Stat(stale); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("stale spec of an HCA no network uses not removed")
	}
	if _, err := os.Stat(foreign); err != nil {
		t.Fatal("removed another vendor's CDI spec")
	}
	if err := d2.DeleteNetwork("n2"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("spec left after the last network on the HCA")
	}
}
