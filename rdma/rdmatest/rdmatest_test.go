package rdmatest

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSuffix(string(b), "\n")
}

func countFiles(t *testing.T, dir string) int {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

func TestBuildMLX5MatchesRealDump(t *testing.T) {
	root := MLX5(t, RealHostMLX5())
	port := filepath.Join(root, "sys/class/infiniband/mlx5_0/ports/1")
	// The published table RealHostMLX5 describes, slots 0-10.
	want := []struct{ gid, typ, ndev string }{
		{"fe80:0000:0000:0000:a288:c2ff:fe5b:03ec", TypeV1, "ens3np0"},
		{"fe80:0000:0000:0000:a288:c2ff:fe5b:03ec", TypeV2, "ens3np0"},
		{"0000:0000:0000:0000:0000:ffff:0b00:0048", TypeV1, "ens3np0"},
		{"0000:0000:0000:0000:0000:ffff:0b00:0048", TypeV2, "ens3np0"},
		{"fe80:0000:0000:0000:a4ed:ccff:fe8b:1994", TypeV1, "net1"},
		{"fe80:0000:0000:0000:a4ed:ccff:fe8b:1994", TypeV2, "net1"},
		{"0000:0000:0000:0000:0000:ffff:0a98:000c", TypeV1, "net1"},
		{"0000:0000:0000:0000:0000:ffff:0a98:000c", TypeV2, "net1"},
		{"0000:0000:0000:0000:0000:ffff:0a98:000d", TypeV1, "net1"},
		{"0000:0000:0000:0000:0000:ffff:0a98:000d", TypeV2, "net1"},
		{ZeroGID, "", ""},
	}
	for i, w := range want {
		n := strconv.Itoa(i)
		got := []string{
			readFile(t, filepath.Join(port, "gids", n)),
			readFile(t, filepath.Join(port, "gid_attrs/types", n)),
			readFile(t, filepath.Join(port, "gid_attrs/ndevs", n)),
		}
		if !reflect.DeepEqual(got, []string{w.gid, w.typ, w.ndev}) {
			t.Errorf("slot %d = %q, want %q", i, got, []string{w.gid, w.typ, w.ndev})
		}
	}
	for _, sub := range []string{"gids", "gid_attrs/types", "gid_attrs/ndevs"} {
		if n := countFiles(t, filepath.Join(port, sub)); n != 255 {
			t.Errorf("%s holds %d files, want 255", sub, n)
		}
	}
	for file, want := range map[string]string{
		"state": "4: ACTIVE", "phys_state": "5: LinkUp", "link_layer": "Ethernet",
	} {
		if got := readFile(t, filepath.Join(port, file)); got != want {
			t.Errorf("%s = %q, want %q", file, got, want)
		}
	}
	for rel, want := range map[string]string{
		"sys/class/infiniband/mlx5_0":               "../../devices/pci0000:00/0000:00:02.0/0000:03:00.0/infiniband/mlx5_0",
		"sys/class/net/ens3np0/device":              "../../../0000:03:00.0",
		"sys/class/infiniband/mlx5_0/device":        "../../../0000:03:00.0",
		"sys/class/infiniband/mlx5_0/device/driver": "../../../../bus/pci/drivers/mlx5_core",
		"sys/class/infiniband_verbs/uverbs0":        "../../devices/pci0000:00/0000:00:02.0/0000:03:00.0/infiniband_verbs/uverbs0",
	} {
		got, err := os.Readlink(filepath.Join(root, rel))
		if err != nil || got != want {
			t.Errorf("link %s -> %q (%v), want %q", rel, got, err, want)
		}
	}
	for rel, want := range map[string]string{
		"sys/class/net/ens3np0/device/infiniband/mlx5_0/node_type": "1: CA",
		"sys/class/infiniband_verbs/uverbs0/dev":                   "231:192",
		"sys/class/infiniband_verbs/uverbs0/ibdev":                 "mlx5_0",
		"sys/class/infiniband_mad/umad0/dev":                       "231:0",
		"sys/class/infiniband_mad/issm0/dev":                       "231:64",
		"sys/class/misc/rdma_cm/dev":                               "10:57",
		"sys/module/ib_core/parameters/netns_mode":                 "Y",
	} {
		if got := readFile(t, filepath.Join(root, rel)); got != want {
			t.Errorf("%s = %q, want %q", rel, got, want)
		}
	}
}

func TestBuildRXE(t *testing.T) {
	root := RXE(t, RXEOptions{Netdev: "veth0", MAC: "02:00:00:00:00:01"})
	port := filepath.Join(root, "sys/class/infiniband/rxe0/ports/1")
	if n := countFiles(t, filepath.Join(port, "gids")); n != 1024 {
		t.Errorf("rxe table holds %d slots, want 1024", n)
	}
	if got := readFile(t, filepath.Join(port, "gids/0")); got != "fe80:0000:0000:0000:0000:00ff:fe00:0001" {
		t.Errorf("default GID = %q", got)
	}
	if got := readFile(t, filepath.Join(port, "gid_attrs/types/0")); got != TypeV2 {
		t.Errorf("default GID type = %q, want %q", got, TypeV2)
	}
	if _, err := os.Lstat(filepath.Join(root, "sys/class/infiniband/rxe0/device")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("rxe0 has a device link (%v); a virtual device has none", err)
	}
	if _, err := os.Lstat(filepath.Join(root, "sys/class/net/veth0/device")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("veth0 has a device link (%v)", err)
	}
}

func TestAddRemoveAddress(t *testing.T) {
	tests := []struct {
		name      string
		build     func(t *testing.T) string
		hca       string
		ips       []string
		wantIdx   [][]int
		wantErrAt int // index into ips of the add that fills the table; -1 none
	}{
		{
			name:      "mlx5 pairs after the host address",
			build:     func(t *testing.T) string { return MLX5(t, MLX5Options{HostIPv4: "11.0.0.72"}) },
			hca:       "mlx5_0",
			ips:       []string{"192.168.7.2", "192.168.7.3"},
			wantIdx:   [][]int{{4, 5}, {6, 7}},
			wantErrAt: -1,
		},
		{
			name:      "rxe one entry each after the default",
			build:     func(t *testing.T) string { return RXE(t, RXEOptions{}) },
			hca:       "rxe0",
			ips:       []string{"192.168.7.2", "fe80::1"},
			wantIdx:   [][]int{{1}, {2}},
			wantErrAt: -1,
		},
		{
			name:      "mlx5 with one slot left gets v1 only",
			build:     func(t *testing.T) string { return MLX5(t, MLX5Options{TableSize: 5}) },
			hca:       "mlx5_0",
			ips:       []string{"192.168.7.2", "192.168.7.3"},
			wantIdx:   [][]int{{2, 3}, {4}},
			wantErrAt: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := tt.build(t)
			for i, ip := range tt.ips {
				idx, err := AddAddress(root, tt.hca, 1, ip, "eth0")
				if (i == tt.wantErrAt) != errors.Is(err, ErrTableFull) {
					t.Fatalf("add %s: err = %v", ip, err)
				}
				if !reflect.DeepEqual(idx, tt.wantIdx[i]) {
					t.Fatalf("add %s: indices %v, want %v", ip, idx, tt.wantIdx[i])
				}
			}
			cleared, err := RemoveAddress(root, tt.hca, 1, tt.ips[0])
			if err != nil || !reflect.DeepEqual(cleared, tt.wantIdx[0]) {
				t.Fatalf("remove %s: %v, %v; want %v", tt.ips[0], cleared, err, tt.wantIdx[0])
			}
			port := filepath.Join(root, "sys/class/infiniband", tt.hca, "ports/1")
			for _, i := range cleared {
				n := strconv.Itoa(i)
				if g := readFile(t, filepath.Join(port, "gids", n)); g != ZeroGID {
					t.Errorf("slot %d after remove = %q", i, g)
				}
				if ty := readFile(t, filepath.Join(port, "gid_attrs/types", n)); ty != "" {
					t.Errorf("slot %d type after remove = %q, want empty", i, ty)
				}
			}
			// Freed slots are reused, lowest first.
			idx, _ := AddAddress(root, tt.hca, 1, "10.0.0.9", "eth1")
			if len(idx) == 0 || idx[0] != tt.wantIdx[0][0] {
				t.Errorf("re-add took %v, want to start at %d", idx, tt.wantIdx[0][0])
			}
		})
	}
}

func TestSetClearGIDRejectsMissingSlot(t *testing.T) {
	root := MLX5(t, MLX5Options{TableSize: 8})
	if err := SetGID(root, "mlx5_0", 1, 8, IPv4GID("10.0.0.1"), TypeV2, "eth0"); err == nil {
		t.Error("SetGID past the table succeeded")
	}
	if err := ClearGID(root, "mlx5_9", 1, 0); err == nil {
		t.Error("ClearGID on a missing HCA succeeded")
	}
}

func TestGIDHelpers(t *testing.T) {
	if got := IPv4GID("172.20.1.1"); got != "0000:0000:0000:0000:0000:ffff:ac14:0101" {
		t.Errorf("IPv4GID = %q", got)
	}
	// A container's macvlan MAC from a published dump (NVIDIA/nccl#1573).
	if got, _ := DefaultGID("a6:ed:cc:8b:19:94"); got != "fe80:0000:0000:0000:a4ed:ccff:fe8b:1994" {
		t.Errorf("DefaultGID = %q", got)
	}
}

func TestSlotChangesLeaveOtherEmptySlotsAlone(t *testing.T) {
	root := MLX5(t, MLX5Options{TableSize: 16})
	port := filepath.Join(root, "sys/class/infiniband/mlx5_0/ports/1")
	if err := SetGID(root, "mlx5_0", 1, 5, IPv4GID("10.0.0.5"), TypeV2, "eth0"); err != nil {
		t.Fatal(err)
	}
	if err := ClearGID(root, "mlx5_0", 1, 0); err != nil {
		t.Fatal(err)
	}
	for i, want := range map[int][3]string{
		0: {ZeroGID, "", ""},
		4: {ZeroGID, "", ""},
		5: {IPv4GID("10.0.0.5"), TypeV2, "eth0"},
		6: {ZeroGID, "", ""},
	} {
		n := strconv.Itoa(i)
		got := [3]string{
			readFile(t, filepath.Join(port, "gids", n)),
			readFile(t, filepath.Join(port, "gid_attrs/types", n)),
			readFile(t, filepath.Join(port, "gid_attrs/ndevs", n)),
		}
		if got != want {
			t.Errorf("slot %d = %q, want %q", i, got, want)
		}
	}
	for _, sub := range []string{"gids", "gid_attrs/types", "gid_attrs/ndevs"} {
		if n := countFiles(t, filepath.Join(port, sub)); n != 16 {
			t.Errorf("%s holds %d files after changes, want 16 (no temporary files left)", sub, n)
		}
	}
}

func TestRebuildResizesTable(t *testing.T) {
	root := MLX5(t, MLX5Options{TableSize: 256})
	if err := BuildMLX5(root, MLX5Options{TableSize: 255, State: "DOWN"}); err != nil {
		t.Fatal(err)
	}
	port := filepath.Join(root, "sys/class/infiniband/mlx5_0/ports/1")
	if n := countFiles(t, filepath.Join(port, "gids")); n != 255 {
		t.Errorf("rebuilt table holds %d slots, want 255", n)
	}
	if got := readFile(t, filepath.Join(port, "state")); got != "1: DOWN" {
		t.Errorf("state = %q, want 1: DOWN", got)
	}
	if got := readFile(t, filepath.Join(port, "phys_state")); got != "3: Disabled" {
		t.Errorf("phys_state = %q, want 3: Disabled", got)
	}
}

func TestSecondDeviceKeepsHostWideFiles(t *testing.T) {
	root := MLX5(t, MLX5Options{NetnsMode: "exclusive"})
	if err := BuildRXE(root, RXEOptions{Uverbs: 1}); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, filepath.Join(root, "sys/class/misc/rdma_cm/dev")); got != "10:57" {
		t.Errorf("rdma_cm dev = %q after adding rxe0, want the first build's 10:57", got)
	}
	if got := readFile(t, filepath.Join(root, netnsModeFile)); got != "N" {
		t.Errorf("netns_mode = %q after adding rxe0, want N", got)
	}
	if err := BuildRXE(root, RXEOptions{Uverbs: 1, NoRdmaCM: true, NetnsMode: "shared"}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "sys/class/misc/rdma_cm")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("rdma_cm still there with NoRdmaCM (%v)", err)
	}
	if got := readFile(t, filepath.Join(root, netnsModeFile)); got != "Y" {
		t.Errorf("netns_mode = %q after an explicit shared, want Y", got)
	}
}
