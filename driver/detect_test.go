package driver

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/rdma-macvlan/rdma-macvlan/api"
	"github.com/rdma-macvlan/rdma-macvlan/driver/drivertest"
	"github.com/rdma-macvlan/rdma-macvlan/rdma"
	"github.com/rdma-macvlan/rdma-macvlan/rdma/rdmatest"
)

func TestRDMADetection(t *testing.T) {
	links := drivertest.NewLinks("p0")
	d := newTestDriverAt(t, links, t.TempDir(), mlx5Root(t, rdmatest.MLX5Options{HostIPv4: "11.0.0.72"}))
	if err := d.CreateNetwork(netReq("n1", "parent", "p0")); err != nil {
		t.Fatal(err)
	}
	st := d.Status().Networks[0]
	if st.HCA != "mlx5_0" || st.Port != 1 || st.NetnsMode != "shared" || st.PortState != "ACTIVE" || st.LinkLayer != "Ethernet" ||
		st.RoCETypes != 2 || st.CDIDevice != "rdma-macvlan/hca=mlx5_0" {
		t.Fatalf("network status %+v", st)
	}
	if g := st.GIDTable; g.Size != 255 || g.Used != 4 || g.Free != 251 || g.Room == nil || *g.Room != 251 {
		t.Fatalf("gid table %+v: want 255 slots, 4 used (default pair, host IPv4 pair)", *st.GIDTable)
	}
	want := []api.Device{{Path: "/dev/infiniband/uverbs0", Major: 231, Minor: 192}, {Path: "/dev/infiniband/rdma_cm", Major: 10, Minor: 57}}
	if !slices.Equal(st.Devices, want) {
		t.Fatalf("devices %+v, want %+v", st.Devices, want)
	}
}

func TestRDMAVLANParentUsesLowerDevice(t *testing.T) {
	links := drivertest.NewLinks("p0")
	d := newTestDriverAt(t, links, t.TempDir(), mlx5Root(t, rdmatest.MLX5Options{}))
	if err := d.CreateNetwork(netReq("n1", "parent", "p0.10")); err != nil {
		t.Fatal(err)
	}
	if st := d.Status().Networks[0]; st.HCA != "mlx5_0" {
		t.Fatalf("VLAN parent not mapped to its lower device's HCA: %+v", st)
	}
}

// Refusals name the parent or HCA, say how to check and fix, and leave no
// VLAN, state or CDI spec behind.
func TestRDMARefusals(t *testing.T) {
	two := func(t *testing.T) string {
		return buildRoot(t, func(r string) error {
			if err := rdmatest.BuildMLX5(r, rdmatest.MLX5Options{Netdev: "p0"}); err != nil {
				return err
			}
			return rdmatest.BuildMLX5(r, rdmatest.MLX5Options{HCA: "mlx5_1", Netdev: "q0", PCIAddr: "0000:04:00.0", Uverbs: 1, MAC: "a0:88:c2:5b:03:ed"})
		})
	}
	tests := []struct {
		name      string
		root      func(t *testing.T) string
		netnsMode func() (string, error)
		req       CreateNetworkRequest
		want      []string
	}{
		{name: "no RDMA device", root: func(t *testing.T) string {
			return buildRoot(t, func(r string) error {
				if err := rdmatest.BuildMLX5(r, rdmatest.MLX5Options{Netdev: "q0"}); err != nil {
					return err
				}
				return rdmatest.AddNetdev(r, rdmatest.NetdevSpec{Name: "p0", MAC: "02:00:00:00:00:09"})
			})
		}, req: netReq("n1", "parent", "p0.10"), want: []string{`parent "p0.10" has no RDMA device`, "rdma link show", "rdma link add rxe0 type rxe netdev p0"}},
		{name: "override mismatch", root: two, req: netReq("n1", "parent", "p0.10", "rdma_device", "mlx5_1"),
			want: []string{`rdma_device "mlx5_1" does not belong to parent "p0.10"`, "mlx5_0 port 1"}},
		{name: "override of an unknown device", root: two, req: netReq("n1", "parent", "p0", "rdma_device", "mlx5_7"),
			want: []string{`rdma_device "mlx5_7" does not belong to parent "p0"`}},
		{name: "exclusive netns mode from sysfs", root: func(t *testing.T) string {
			return mlx5Root(t, rdmatest.MLX5Options{NetnsMode: "exclusive"})
		}, req: netReq("n1", "parent", "p0.10"), want: []string{"exclusive netns mode (read from sysfs)", "rdma system set netns shared"}},
		{name: "exclusive netns mode from netlink", root: func(t *testing.T) string { return mlx5Root(t, rdmatest.MLX5Options{}) },
			netnsMode: func() (string, error) { return "exclusive", nil },
			req:       netReq("n1", "parent", "p0"), want: []string{"exclusive netns mode (read from netlink)"}},
		{name: "InfiniBand port", root: func(t *testing.T) string { return mlx5Root(t, rdmatest.MLX5Options{LinkLayer: "InfiniBand"}) },
			req: netReq("n1", "parent", "p0.10"), want: []string{"link layer InfiniBand", "needs RoCE"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			links := drivertest.NewLinks("p0", "q0")
			dir := t.TempDir()
			cdi := t.TempDir()
			d, err := New(Config{StateDir: dir, Links: links, Log: quietLog(), Sysfs: rdma.NewSysfs(tt.root(t)), CDIDir: cdi, NetnsMode: tt.netnsMode})
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			before := links.Names()
			err = d.CreateNetwork(tt.req)
			if err == nil {
				t.Fatal("network created")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			if got := links.Names(); !slices.Equal(got, before) {
				t.Errorf("links changed: %v", got)
			}
			if ents, _ := os.ReadDir(cdi); len(ents) != 0 {
				t.Errorf("CDI files left: %v", ents)
			}
			if ents, _ := os.ReadDir(filepath.Join(dir, networksDir)); len(ents) != 0 {
				t.Errorf("state left: %v", ents)
			}
		})
	}
}

func TestRDMAPortDownIsOnlyAWarning(t *testing.T) {
	links := drivertest.NewLinks("p0")
	d := newTestDriverAt(t, links, t.TempDir(), mlx5Root(t, rdmatest.MLX5Options{State: "DOWN"}))
	if err := d.CreateNetwork(netReq("n1", "parent", "p0")); err != nil {
		t.Fatalf("a down port refused the network: %v", err)
	}
	if st := d.Status().Networks[0]; st.PortState != "DOWN" {
		t.Fatalf("status port state %q", st.PortState)
	}
}
