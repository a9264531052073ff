package driver

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/rdma-macvlan/rdma-macvlan/cdi"
	"github.com/rdma-macvlan/rdma-macvlan/driver/drivertest"
	"github.com/rdma-macvlan/rdma-macvlan/rdma"
	"github.com/rdma-macvlan/rdma-macvlan/rdma/rdmatest"
)

// -o rdma_device where detection cannot decide: a parent with two RDMA
// devices (Soft-RoCE devices on netdevs of one name in two namespaces look
// the same in sysfs) takes the one named, and only one of them; a parent
// with no RDMA device takes none. A refusal names the option, the parent
// and what to pass, and leaves no state or CDI spec behind.
func TestRDMADeviceOverride(t *testing.T) {
	// rxe0 and rxe1 both on p0 (ambiguous); mlx5_0 on q0 only.
	root := buildRoot(t, func(r string) error {
		if err := rdmatest.BuildRXE(r, rdmatest.RXEOptions{HCA: "rxe0", Netdev: "p0", Uverbs: 0}); err != nil {
			return err
		}
		if err := rdmatest.BuildRXE(r, rdmatest.RXEOptions{HCA: "rxe1", Netdev: "p0", Uverbs: 1}); err != nil {
			return err
		}
		if err := rdmatest.BuildMLX5(r, rdmatest.MLX5Options{Netdev: "q0", Uverbs: 2}); err != nil {
			return err
		}
		return rdmatest.AddNetdev(r, rdmatest.NetdevSpec{Name: "r0", MAC: "02:00:00:00:00:09"})
	})
	tests := []struct {
		name    string
		req     CreateNetworkRequest
		wantHCA string   // created on this HCA
		want    []string // or refused with these
	}{
		{name: "ambiguous parent without override", req: netReq("n1", "parent", "p0"),
			want: []string{`parent "p0"`, "rxe0/1, rxe1/1", "pass -o rdma_device=<one of them>"}},
		{name: "ambiguous parent, first device named", req: netReq("n1", "parent", "p0", "rdma_device", "rxe0"), wantHCA: "rxe0"},
		{name: "ambiguous parent, second device named", req: netReq("n1", "parent", "p0", "rdma_device", "rxe1"), wantHCA: "rxe1"},
		{name: "ambiguous parent, VLAN on it", req: netReq("n1", "parent", "p0.10", "rdma_device", "rxe1"), wantHCA: "rxe1"},
		{name: "ambiguous parent, device of another parent named", req: netReq("n1", "parent", "p0", "rdma_device", "mlx5_0"),
			want: []string{`rdma_device "mlx5_0" does not belong to parent "p0"`, "whose RDMA devices are rxe0/1, rxe1/1", "pass one of them"}},
		{name: "ambiguous parent, VLAN on it, unknown device named", req: netReq("n1", "parent", "p0.10", "rdma_device", "rxe7"),
			want: []string{`rdma_device "rxe7" does not belong to parent "p0.10"`, "rxe0/1, rxe1/1"}},
		{name: "ambiguous parent, unknown device named", req: netReq("n1", "parent", "p0", "rdma_device", "rxe7"),
			want: []string{`rdma_device "rxe7" does not belong to parent "p0"`, "rxe0/1, rxe1/1"}},
		{name: "parent without RDMA device, existing device named", req: netReq("n1", "parent", "r0", "rdma_device", "mlx5_0"),
			want: []string{`rdma_device "mlx5_0" does not belong to parent "r0"`, "which has no RDMA device", "rdma link show", "pass the parent of mlx5_0"}},
		{name: "parent without RDMA device, unknown device named", req: netReq("n1", "parent", "r0", "rdma_device", "rxe7"),
			want: []string{`rdma_device "rxe7" does not belong to parent "r0"`, "which has no RDMA device"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			links := drivertest.NewLinks("p0", "q0", "r0")
			dir, cdiDir := t.TempDir(), t.TempDir()
			d, err := New(Config{StateDir: dir, Links: links, Log: quietLog(), Sysfs: rdma.NewSysfs(root), CDIDir: cdiDir})
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			before := links.Names()
			err = d.CreateNetwork(tt.req)
			if tt.wantHCA != "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				d.mu.Lock()
				n := d.networks["n1"]
				d.mu.Unlock()
				if n == nil || n.RDMA == nil || n.RDMA.HCA != tt.wantHCA || n.RDMA.Port != 1 || n.RDMA.Netdev != "p0" {
					t.Fatalf("network %+v, want it on %s port 1 behind p0", n, tt.wantHCA)
				}
				if got := dirNames(t, cdiDir); !slices.Equal(got, []string{filepath.Base(cdi.SpecPath(cdiDir, tt.wantHCA))}) {
					t.Fatalf("CDI specs %v, want only %s's", got, tt.wantHCA)
				}
				return
			}
			if err == nil {
				t.Fatal("network created")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			if ents, _ := os.ReadDir(cdiDir); len(ents) != 0 {
				t.Errorf("CDI files left: %v", ents)
			}
			if ents, _ := os.ReadDir(filepath.Join(dir, networksDir)); len(ents) != 0 {
				t.Errorf("state left: %v", ents)
			}
			if got := links.Names(); !slices.Equal(got, before) {
				t.Errorf("links changed: %v", got)
			}
		})
	}
}
