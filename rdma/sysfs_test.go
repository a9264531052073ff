package rdma_test

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rdma-macvlan/rdma-macvlan/internal/rdmaenv"
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

// The daemon and docker rdma read sysfs without blocking and within a
// page: a FIFO or a link to /dev/zero where an attribute should be is an
// error naming it (a port state) or an empty slot (a GID), at once.
func TestSysfsRefusesWhatIsNoAttribute(t *testing.T) {
	root := rdmatest.MLX5(t, rdmatest.MLX5Options{})
	if _, err := rdmatest.AddAddress(root, "mlx5_0", 1, "10.7.0.4", "eth0"); err != nil {
		t.Fatal(err)
	}
	port := filepath.Join(root, "sys/class/infiniband/mlx5_0/ports/1")
	for _, f := range []string{"state", "gids/200", "gid_attrs/types/2"} {
		if err := os.Remove(filepath.Join(port, f)); err != nil {
			t.Fatal(err)
		}
		if err := syscall.Mkfifo(filepath.Join(port, f), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Remove(filepath.Join(port, "phys_state")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/dev/zero", filepath.Join(port, "phys_state")); err != nil {
		t.Fatal(err)
	}
	s := rdma.NewSysfs(root)
	done := make(chan struct{})
	var portErr error
	var gids []rdmaenv.Entry
	var gidsErr, tableErr error
	var table rdma.GIDTable
	go func() {
		defer close(done)
		_, portErr = s.Port("mlx5_0", 1)
		gids, gidsErr = s.GIDs("mlx5_0", 1)
		table, tableErr = s.Table("mlx5_0", 1)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("reading a port with FIFOs in its sysfs directory still runs after 10s")
	}
	if want := filepath.Join(port, "state") + " is a FIFO, not a sysfs attribute"; portErr == nil || !strings.Contains(portErr.Error(), want) {
		t.Errorf("Port = %v, want an error saying %q", portErr, want)
	}
	// The default pair at 0 and 1, the container's at 2 and 3.
	if gidsErr != nil || len(gids) != 4 || gids[2].Index != 2 || gids[2].Type != "" || gids[3].Type != "RoCE v2" {
		t.Errorf("GIDs = %+v, %v; want the entries at 0 to 3, 2's type unreadable", gids, gidsErr)
	}
	if tableErr != nil || table.Used != 4 {
		t.Errorf("Table = %+v, %v; want 4 slots used", table, tableErr)
	}
	if err := os.Remove(filepath.Join(port, "state")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(port, "state"), []byte("4: ACTIVE\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Port("mlx5_0", 1); err == nil || !strings.Contains(err.Error(), filepath.Join(port, "phys_state")+" is a symbolic link, not a sysfs attribute") {
		t.Errorf("Port with phys_state a link to /dev/zero = %v", err)
	}
}
