package rdma_test

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/rdma-macvlan/rdma-macvlan/rdma"
	"github.com/rdma-macvlan/rdma-macvlan/rdma/rdmatest"
)

// mixedHost is an mlx5 host that also runs Soft-RoCE on a veth.
func mixedHost(t *testing.T) string {
	t.Helper()
	root := rdmatest.MLX5(t, rdmatest.RealHostMLX5())
	if err := rdmatest.BuildRXE(root, rdmatest.RXEOptions{Netdev: "veth0", MAC: "02:00:00:00:00:01", Uverbs: 1}); err != nil {
		t.Fatal(err)
	}
	return root
}

func TestDevices(t *testing.T) {
	emptyClass := t.TempDir()
	if err := os.MkdirAll(filepath.Join(emptyClass, "sys/class/infiniband"), 0o755); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		root    string
		want    []string
		wantErr bool
	}{
		{name: "mlx5 and rxe", root: mixedHost(t), want: []string{"mlx5_0", "rxe0"}},
		{name: "no RDMA devices", root: emptyClass, want: nil},
		{name: "no RDMA stack", root: t.TempDir(), wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := rdma.NewSysfs(tt.root).Devices()
			if (err != nil) != tt.wantErr {
				t.Fatalf("Devices() error = %v, want error %v", err, tt.wantErr)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Devices() = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestPort(t *testing.T) {
	tests := []struct {
		name string
		root string
		hca  string
		want rdma.PortInfo
	}{
		{
			name: "mlx5 255 slots active",
			root: rdmatest.MLX5(t, rdmatest.MLX5Options{}),
			hca:  "mlx5_0",
			want: rdma.PortInfo{HCA: "mlx5_0", Port: 1, LinkLayer: "Ethernet", State: "ACTIVE", PhysState: "LinkUp", GIDTableSize: 255},
		},
		{
			name: "mlx5 256 slots",
			root: rdmatest.MLX5(t, rdmatest.MLX5Options{TableSize: 256}),
			hca:  "mlx5_0",
			want: rdma.PortInfo{HCA: "mlx5_0", Port: 1, LinkLayer: "Ethernet", State: "ACTIVE", PhysState: "LinkUp", GIDTableSize: 256},
		},
		{
			name: "mlx5 port down",
			root: rdmatest.MLX5(t, rdmatest.MLX5Options{State: "DOWN"}),
			hca:  "mlx5_0",
			want: rdma.PortInfo{HCA: "mlx5_0", Port: 1, LinkLayer: "Ethernet", State: "DOWN", PhysState: "Disabled", GIDTableSize: 255},
		},
		{
			name: "InfiniBand link layer",
			root: rdmatest.MLX5(t, rdmatest.MLX5Options{LinkLayer: "InfiniBand"}),
			hca:  "mlx5_0",
			want: rdma.PortInfo{HCA: "mlx5_0", Port: 1, LinkLayer: "InfiniBand", State: "ACTIVE", PhysState: "LinkUp", GIDTableSize: 255},
		},
		{
			name: "rxe 1024 slots",
			root: rdmatest.RXE(t, rdmatest.RXEOptions{}),
			hca:  "rxe0",
			want: rdma.PortInfo{HCA: "rxe0", Port: 1, LinkLayer: "Ethernet", State: "ACTIVE", PhysState: "LinkUp", GIDTableSize: 1024},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := rdma.NewSysfs(tt.root).Port(tt.hca, 1)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("Port() = %+v, want %+v", got, tt.want)
			}
			if got.Active() != (tt.want.State == "ACTIVE") {
				t.Errorf("Active() = %v for state %s", got.Active(), got.State)
			}
		})
	}
}

func TestPortErrors(t *testing.T) {
	s := rdma.NewSysfs(rdmatest.MLX5(t, rdmatest.MLX5Options{}))
	for _, c := range []struct {
		hca  string
		port int
	}{{"mlx5_0", 2}, {"mlx5_9", 1}, {"../mlx5_0", 1}, {"", 1}} {
		if _, err := s.Port(c.hca, c.port); err == nil {
			t.Errorf("Port(%q, %d) succeeded", c.hca, c.port)
		}
	}
	if ports, err := s.Ports("mlx5_0"); err != nil || !reflect.DeepEqual(ports, []int{1}) {
		t.Errorf("Ports(mlx5_0) = %v, %v; want [1]", ports, err)
	}
}
