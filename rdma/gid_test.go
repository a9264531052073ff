package rdma_test

import (
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/rdma-macvlan/rdma-macvlan/internal/rdmaenv"
	"github.com/rdma-macvlan/rdma-macvlan/rdma"
	"github.com/rdma-macvlan/rdma-macvlan/rdma/rdmatest"
)

// gidRow is what a test expects of one GID entry.
type gidRow struct {
	index int
	ip    string
	typ   string
	ndev  string
}

func rowsOf(gids []rdmaenv.Entry) []gidRow {
	rows := make([]gidRow, 0, len(gids))
	for _, g := range gids {
		rows = append(rows, gidRow{g.Index, g.GID.Unmap().String(), g.Type, g.Ndev})
	}
	return rows
}

func TestGIDs(t *testing.T) {
	v1, v2 := rdma.GIDTypeRoCEv1, rdma.GIDTypeRoCEv2
	tests := []struct {
		name  string
		root  func(t *testing.T) string
		hca   string
		want  []gidRow
		check func(t *testing.T, gids []rdmaenv.Entry)
	}{
		{
			name: "real mlx5 host table",
			root: func(t *testing.T) string { return rdmatest.MLX5(t, rdmatest.RealHostMLX5()) },
			hca:  "mlx5_0",
			want: []gidRow{
				{0, "fe80::a288:c2ff:fe5b:3ec", v1, "ens3np0"},
				{1, "fe80::a288:c2ff:fe5b:3ec", v2, "ens3np0"},
				{2, "11.0.0.72", v1, "ens3np0"},
				{3, "11.0.0.72", v2, "ens3np0"},
				{4, "fe80::a4ed:ccff:fe8b:1994", v1, "net1"},
				{5, "fe80::a4ed:ccff:fe8b:1994", v2, "net1"},
				{6, "10.152.0.12", v1, "net1"},
				{7, "10.152.0.12", v2, "net1"},
				{8, "10.152.0.13", v1, "net1"},
				{9, "10.152.0.13", v2, "net1"},
			},
			check: func(t *testing.T, gids []rdmaenv.Entry) {
				// 16-byte addresses, v4-mapped for IPv4, as in the table; the
				// kernel's text comes back from them.
				if g := gids[2]; !g.GID.Is4In6() || rdma.GIDFromIP(g.GID.AsSlice()) != "0000:0000:0000:0000:0000:ffff:0b00:0048" {
					t.Errorf("host IPv4 entry = %v, want v4-mapped 0000:0000:0000:0000:0000:ffff:0b00:0048", g.GID)
				}
				if g := gids[0]; !g.GID.Is6() || g.GID.Is4In6() || rdma.GIDFromIP(g.GID.AsSlice()) != "fe80:0000:0000:0000:a288:c2ff:fe5b:03ec" {
					t.Errorf("default entry = %v, want fe80:0000:0000:0000:a288:c2ff:fe5b:03ec", g.GID)
				}
			},
		},
		{
			name: "index hole left by a removed address",
			root: func(t *testing.T) string {
				extra := append(rdmatest.Pair(4, rdmatest.IPv4GID("192.168.7.2"), "eth0"),
					rdmatest.Pair(8, rdmatest.IPv4GID("192.168.7.4"), "eth0")...)
				return rdmatest.MLX5(t, rdmatest.MLX5Options{Extra: extra})
			},
			hca: "mlx5_0",
			want: []gidRow{
				{0, "fe80::a288:c2ff:fe5b:3ec", v1, "ens3np0"},
				{1, "fe80::a288:c2ff:fe5b:3ec", v2, "ens3np0"},
				{4, "192.168.7.2", v1, "eth0"},
				{5, "192.168.7.2", v2, "eth0"},
				{8, "192.168.7.4", v1, "eth0"},
				{9, "192.168.7.4", v2, "eth0"},
			},
		},
		{
			name: "non-zero GID whose attributes are unreadable",
			root: func(t *testing.T) string {
				root := rdmatest.RXE(t, rdmatest.RXEOptions{})
				// Empty attribute files (the fixture's EINVAL) ...
				if err := rdmatest.SetGID(root, "rxe0", 1, 3, rdmatest.IPv4GID("10.0.0.3"), "", ""); err != nil {
					t.Fatal(err)
				}
				// ... and an absent one count alike.
				if err := rdmatest.SetGID(root, "rxe0", 1, 4, rdmatest.IPv4GID("10.0.0.4"), rdmatest.TypeV2, "eth0"); err != nil {
					t.Fatal(err)
				}
				if err := os.Remove(filepath.Join(root, "sys/class/infiniband/rxe0/ports/1/gid_attrs/types/4")); err != nil {
					t.Fatal(err)
				}
				return root
			},
			hca: "rxe0",
			want: []gidRow{
				{0, "fe80::5054:ff:fe12:3456", v2, "eth0"},
				{3, "10.0.0.3", "", ""},
				{4, "10.0.0.4", "", "eth0"},
			},
		},
		{
			name: "every slot empty",
			root: func(t *testing.T) string {
				root := rdmatest.RXE(t, rdmatest.RXEOptions{})
				if err := rdmatest.ClearGID(root, "rxe0", 1, 0); err != nil {
					t.Fatal(err)
				}
				return root
			},
			hca:  "rxe0",
			want: []gidRow{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			gids, err := rdma.NewSysfs(tt.root(t)).GIDs(tt.hca, 1)
			if err != nil {
				t.Fatal(err)
			}
			if got := rowsOf(gids); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("GIDs() =\n%v\nwant\n%v", got, tt.want)
			}
			if tt.check != nil {
				tt.check(t, gids)
			}
		})
	}
}

func TestGIDsErrors(t *testing.T) {
	root := rdmatest.MLX5(t, rdmatest.MLX5Options{TableSize: 8})
	s := rdma.NewSysfs(root)
	if _, err := s.GIDs("mlx5_0", 2); err == nil {
		t.Error("GIDs of a missing port succeeded")
	}
	if err := rdmatest.SetGID(root, "mlx5_0", 1, 7, "garbage", rdmatest.TypeV2, "eth0"); err != nil {
		t.Fatal(err)
	}
	// A slot that does not read as a GID is passed over, as rdma-exec does:
	// the others are still there.
	gids, err := s.GIDs("mlx5_0", 1)
	if err != nil {
		t.Fatalf("GIDs with a malformed entry: %v, want the other entries", err)
	}
	for _, g := range gids {
		if g.Index == 7 {
			t.Errorf("GIDs with a malformed entry in slot 7 returned %+v for it", g)
		}
	}
	if len(gids) == 0 {
		t.Error("GIDs with a malformed entry in slot 7 returned no entry, want the default ones")
	}
}

func TestGIDsFollowKernelChanges(t *testing.T) {
	root := rdmatest.MLX5(t, rdmatest.MLX5Options{})
	s := rdma.NewSysfs(root)
	ip := netip.MustParseAddr("192.168.7.2")
	idx, err := rdmatest.AddAddress(root, "mlx5_0", 1, ip.String(), "eth0")
	if err != nil {
		t.Fatal(err)
	}
	gids, err := s.GIDs("mlx5_0", 1)
	if err != nil {
		t.Fatal(err)
	}
	got := rdma.GIDsWithIP(gids, ip)
	if len(got) != 2 || got[0].Index != idx[0] || got[1].Index != idx[1] || got[0].Type != rdma.GIDTypeRoCEv1 || got[1].Type != rdma.GIDTypeRoCEv2 {
		t.Fatalf("GIDsWithIP after add = %+v, want v1+v2 at %v", got, idx)
	}
	if _, err := rdmatest.RemoveAddress(root, "mlx5_0", 1, ip.String()); err != nil {
		t.Fatal(err)
	}
	gids, _ = s.GIDs("mlx5_0", 1)
	if got := rdma.GIDsWithIP(gids, ip); len(got) != 0 {
		t.Errorf("GIDsWithIP after remove = %+v, want none", got)
	}
}

func TestGIDFromIP(t *testing.T) {
	tests := []struct {
		ip       string
		wantGID  string
		wantIPv4 string // what the fixture's encoder gives (IPv4 only)
	}{
		{"11.0.0.72", "0000:0000:0000:0000:0000:ffff:0b00:0048", "0000:0000:0000:0000:0000:ffff:0b00:0048"},
		{"172.20.1.2", "0000:0000:0000:0000:0000:ffff:ac14:0102", "0000:0000:0000:0000:0000:ffff:ac14:0102"},
		{"fe80::a288:c2ff:fe5b:3ec", "fe80:0000:0000:0000:a288:c2ff:fe5b:03ec", ""},
		{"2001:db8::1", "2001:0db8:0000:0000:0000:0000:0000:0001", ""},
	}
	for _, tt := range tests {
		ip := net.ParseIP(tt.ip)
		if got := rdma.GIDFromIP(ip); got != tt.wantGID {
			t.Errorf("GIDFromIP(%s) = %q, want %q", tt.ip, got, tt.wantGID)
		}
		back, err := netip.ParseAddr(rdma.GIDFromIP(ip))
		if err != nil || back != rdmaenv.GIDOf(netip.MustParseAddr(tt.ip)) {
			t.Errorf("GIDFromIP(%s) read back = %v, %v", tt.ip, back, err)
		}
		// The fixture's independent encoder agrees.
		if v4 := rdmatest.IPv4GID(tt.ip); v4 != tt.wantIPv4 {
			t.Errorf("rdmatest.IPv4GID(%s) = %q, want %q", tt.ip, v4, tt.wantIPv4)
		}
	}
	if got := rdma.GIDFromIP(nil); got != "" {
		t.Errorf("GIDFromIP(nil) = %q, want empty", got)
	}
	mac, _ := net.ParseMAC("a0:88:c2:5b:03:ec")
	if got := rdma.DefaultGID(mac); got != "fe80:0000:0000:0000:a288:c2ff:fe5b:03ec" {
		t.Errorf("DefaultGID = %q", got)
	}
}

func TestRoCETypesPerAddress(t *testing.T) {
	clearAll := func(t *testing.T, root, hca string, n int) {
		t.Helper()
		for i := 0; i < n; i++ {
			if err := rdmatest.ClearGID(root, hca, 1, i); err != nil {
				t.Fatal(err)
			}
		}
	}
	tests := []struct {
		name string
		root func(t *testing.T) string
		hca  string
		want int
	}{
		{"mlx5 with v1 and v2 entries", func(t *testing.T) string { return rdmatest.MLX5(t, rdmatest.MLX5Options{}) }, "mlx5_0", 2},
		{"rxe with v2 entries", func(t *testing.T) string { return rdmatest.RXE(t, rdmatest.RXEOptions{}) }, "rxe0", 1},
		{"mlx4 with v1 entries only", func(t *testing.T) string {
			return dualPortHost(t)
		}, "mlx4_0", 1},
		{"mlx5 with an empty table: driver mlx5_core", func(t *testing.T) string {
			root := rdmatest.MLX5(t, rdmatest.MLX5Options{HCA: "roce_a", TableSize: 4})
			clearAll(t, root, "roce_a", 4)
			return root
		}, "roce_a", 2},
		{"irdma with an empty table", func(t *testing.T) string {
			root := t.TempDir()
			pci := rdmatest.MLX5PCIBus + "/0000:05:00.0"
			if err := rdmatest.BuildHCA(root, rdmatest.HCASpec{Name: "irdma0", PCIDir: pci, Ports: []rdmatest.PortSpec{{TableSize: 32}}}); err != nil {
				t.Fatal(err)
			}
			return root
		}, "irdma0", 1},
		{"mlx5_ name, no driver link, empty table", func(t *testing.T) string {
			root := t.TempDir()
			if err := rdmatest.BuildHCA(root, rdmatest.HCASpec{Name: "mlx5_3", Ports: []rdmatest.PortSpec{{TableSize: 8}}}); err != nil {
				t.Fatal(err)
			}
			return root
		}, "mlx5_3", 2},
		{"missing device", func(t *testing.T) string { return t.TempDir() }, "rxe9", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := rdma.NewSysfs(tt.root(t)).RoCETypesPerAddress(tt.hca, 1); got != tt.want {
				t.Errorf("RoCETypesPerAddress(%s) = %d, want %d", tt.hca, got, tt.want)
			}
		})
	}
}
