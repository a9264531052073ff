package rdma_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/rdma-macvlan/rdma-macvlan/rdma"
	"github.com/rdma-macvlan/rdma-macvlan/rdma/rdmatest"
)

// dualPortHost has one PCI function with two ports (mlx4 style), one netdev
// per port: eth2 named by port 1's GID entries, eth3 not named yet (no
// entries), so only its dev_port tells.
func dualPortHost(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	pci := rdmatest.MLX5PCIBus + "/0000:04:00.0"
	def, _ := rdmatest.DefaultGID("00:02:c9:00:00:02")
	steps := []error{
		rdmatest.AddNetdev(root, rdmatest.NetdevSpec{Name: "eth2", MAC: "00:02:c9:00:00:02", PCIDir: pci, DevPort: 0}),
		rdmatest.AddNetdev(root, rdmatest.NetdevSpec{Name: "eth3", MAC: "00:02:c9:00:00:03", PCIDir: pci, DevPort: 1}),
		rdmatest.BuildHCA(root, rdmatest.HCASpec{
			Name: "mlx4_0", PCIDir: pci, Driver: "mlx4_core",
			Ports: []rdmatest.PortSpec{
				{Port: 1, TableSize: 128, Entries: []rdmatest.Entry{{Index: 0, GID: def, Type: rdmatest.TypeV1, Ndev: "eth2"}}},
				{Port: 2, TableSize: 128},
			},
		}),
	}
	for _, err := range steps {
		if err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func TestHCAForNetdev(t *testing.T) {
	mixed := mixedHost(t)
	// An rxe on host eth0, and an mlx5 whose container links are also
	// named eth0 in their own namespaces.
	clash := rdmatest.RXE(t, rdmatest.RXEOptions{Netdev: "eth0", MAC: "02:00:00:00:00:01", Uverbs: 1})
	if err := rdmatest.BuildMLX5(clash, rdmatest.MLX5Options{Extra: rdmatest.Pair(2, rdmatest.IPv4GID("192.168.7.2"), "eth0")}); err != nil {
		t.Fatal(err)
	}
	if err := rdmatest.AddNetdev(mixed, rdmatest.NetdevSpec{Name: "veth9", MAC: "02:00:00:00:00:09"}); err != nil {
		t.Fatal(err)
	}
	dual := dualPortHost(t)
	// A PCI NIC without RDMA named eth0 on the host, next to an mlx5 whose
	// containers' links are named eth0 too.
	plainNIC := rdmatest.MLX5(t, rdmatest.MLX5Options{Extra: rdmatest.Pair(2, rdmatest.IPv4GID("192.168.7.2"), "eth0")})
	if err := rdmatest.AddNetdev(plainNIC, rdmatest.NetdevSpec{Name: "eth0", MAC: "00:1b:21:00:00:01", PCIDir: rdmatest.MLX5PCIBus + "/0000:06:00.0"}); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name     string
		root     string
		netdev   string
		wantHCA  string
		wantPort int
		wantErr  error
	}{
		{name: "PF via PCI device link", root: mixed, netdev: "ens3np0", wantHCA: "mlx5_0", wantPort: 1},
		{name: "rxe via GID ndevs", root: mixed, netdev: "veth0", wantHCA: "rxe0", wantPort: 1},
		{name: "same name in a container on another HCA", root: clash, netdev: "eth0", wantHCA: "rxe0", wantPort: 1},
		{name: "dual port, port named by GID entries", root: dual, netdev: "eth2", wantHCA: "mlx4_0", wantPort: 1},
		{name: "dual port, port from dev_port", root: dual, netdev: "eth3", wantHCA: "mlx4_0", wantPort: 2},
		{name: "netdev without RDMA", root: mixed, netdev: "veth9", wantErr: rdma.ErrNoRDMADevice},
		{name: "netdev that does not exist", root: mixed, netdev: "nosuch0", wantErr: rdma.ErrNoRDMADevice},
		{name: "NIC without RDMA sharing a container link's name", root: plainNIC, netdev: "eth0", wantErr: rdma.ErrNoRDMADevice},
		{name: "no RDMA stack at all", root: t.TempDir(), netdev: "eth0", wantErr: rdma.ErrNoRDMADevice},
		{name: "name escaping sysfs", root: mixed, netdev: "../ens3np0", wantErr: rdma.ErrInvalidName},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hca, port, err := rdma.NewSysfs(tt.root).HCAForNetdev(tt.netdev)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("HCAForNetdev(%q) error = %v, want %v", tt.netdev, err, tt.wantErr)
				}
				// The user reads this: it names the netdev; for a missing
				// device it says what to check.
				if !strings.Contains(err.Error(), tt.netdev) {
					t.Errorf("error %q does not name %q", err, tt.netdev)
				}
				if tt.wantErr == rdma.ErrNoRDMADevice && !strings.Contains(err.Error(), "check: rdma link show") {
					t.Errorf("error %q does not say what to check", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("HCAForNetdev(%q): %v", tt.netdev, err)
			}
			if hca != tt.wantHCA || port != tt.wantPort {
				t.Errorf("HCAForNetdev(%q) = %s/%d, want %s/%d", tt.netdev, hca, port, tt.wantHCA, tt.wantPort)
			}
		})
	}
}

func TestHCAForNetdevAmbiguous(t *testing.T) {
	// Two rxe devices on netdevs with the same name and MAC (in different
	// namespaces): sysfs cannot tell them apart.
	root := rdmatest.RXE(t, rdmatest.RXEOptions{Netdev: "eth0"})
	if err := rdmatest.BuildRXE(root, rdmatest.RXEOptions{HCA: "rxe1", Netdev: "eth0", Uverbs: 1}); err != nil {
		t.Fatal(err)
	}
	s := rdma.NewSysfs(root)
	_, _, err := s.HCAForNetdev("eth0")
	if !errors.Is(err, rdma.ErrAmbiguousRDMADevice) || !strings.Contains(err.Error(), "rxe0/1, rxe1/1") || !strings.Contains(err.Error(), "rdma_device") {
		t.Fatalf("HCAForNetdev(eth0) error = %v, want both candidates and the override option", err)
	}
	cands, err := s.HCAPortsForNetdev("eth0")
	if err != nil || len(cands) != 2 {
		t.Fatalf("HCAPortsForNetdev(eth0) = %v, %v; want 2 candidates", cands, err)
	}
}

// Host: the running kernel's sysfs, at / or under another root (the
// managed plugin's /host/sys), and never a fake tree.
func TestHostSysfs(t *testing.T) {
	if !rdma.NewSysfs("/").Host() {
		t.Error(`root "/" is not taken for the host's sysfs`)
	}
	fake := t.TempDir()
	if err := os.MkdirAll(filepath.Join(fake, "sys/class/infiniband"), 0o755); err != nil {
		t.Fatal(err)
	}
	if rdma.NewSysfs(fake).Host() {
		t.Error("a fake tree is taken for the host's sysfs")
	}
	var st unix.Statfs_t
	if err := unix.Statfs("/sys", &st); err != nil || st.Type != unix.SYSFS_MAGIC {
		t.Logf("no sysfs at /sys here (%v): the other-root case is not checked", err)
		return
	}
	other := t.TempDir()
	if err := os.Symlink("/sys", filepath.Join(other, "sys")); err != nil {
		t.Fatal(err)
	}
	if !rdma.NewSysfs(other).Host() {
		t.Error("a root whose sys/ is the kernel's sysfs (as the managed plugin's /host) is not taken for the host's sysfs")
	}
}
