package rdmatest

import (
	"path/filepath"
	"reflect"
	"strconv"
	"testing"
)

// slotsOf reads slots 0..n-1 of a port as [gid, type, ndev].
func slotsOf(t *testing.T, root, hca string, n int) [][3]string {
	t.Helper()
	port := filepath.Join(root, "sys/class/infiniband", hca, "ports/1")
	out := make([][3]string, n)
	for i := range out {
		s := strconv.Itoa(i)
		out[i] = [3]string{readFile(t, filepath.Join(port, "gids", s)), readFile(t, filepath.Join(port, "gid_attrs/types", s)),
			readFile(t, filepath.Join(port, "gid_attrs/ndevs", s))}
	}
	return out
}

var empty = [3]string{ZeroGID, "", ""}

func TestHostViewMLX5(t *testing.T) {
	root := MLX5(t, HostViewMLX5())
	want := [][3]string{
		{"fe80:0000:0000:0000:a288:c2ff:fe5b:03ec", TypeV1, "ens3np0"},
		{"fe80:0000:0000:0000:a288:c2ff:fe5b:03ec", TypeV2, "ens3np0"},
		{"0000:0000:0000:0000:0000:ffff:0b00:0048", TypeV1, "ens3np0"},
		{"0000:0000:0000:0000:0000:ffff:0b00:0048", TypeV2, "ens3np0"},
		empty,
	}
	if got := slotsOf(t, root, "mlx5_0", 5); !reflect.DeepEqual(got, want) {
		t.Errorf("slots 0-4 = %q, want %q", got, want)
	}
}

// The sparse table's holes take the next addresses, lowest first.
func TestSparseHostMLX5(t *testing.T) {
	root := MLX5(t, SparseHostMLX5())
	got := slotsOf(t, root, "mlx5_0", 15)
	for i, w := range map[int][3]string{
		2:  empty,
		3:  empty,
		4:  {"0000:0000:0000:0000:0000:ffff:ac14:0101", TypeV1, "net1"},
		7:  {"0000:0000:0000:0000:0000:ffff:0b00:0401", TypeV2, "net1"},
		8:  {"fe80:0000:0000:0000:e4ea:71ff:feb9:4970", TypeV1, "net1"},
		10: empty,
		13: {"0000:0000:0000:0000:0000:ffff:ac14:0102", TypeV2, "net1"},
		14: empty,
	} {
		if got[i] != w {
			t.Errorf("slot %d = %q, want %q", i, got[i], w)
		}
	}
	for _, want := range [][]int{{2, 3}, {10, 11}, {14, 15}} {
		if idx, err := AddAddress(root, "mlx5_0", 1, "192.168.9."+strconv.Itoa(want[0]), "eth0"); err != nil || !reflect.DeepEqual(idx, want) {
			t.Fatalf("add: %v, %v; want %v", idx, err, want)
		}
	}
}

func TestContainersMLX5(t *testing.T) {
	root := MLX5(t, ContainersMLX5(3))
	got := slotsOf(t, root, "mlx5_0", 11)
	if got[4] != [3]string{IPv4GID("10.152.0.12"), TypeV1, "net1"} || got[9] != [3]string{IPv4GID("10.152.0.14"), TypeV2, "net1"} || got[10] != empty {
		t.Errorf("three containers: slots 4, 9, 10 = %q, %q, %q", got[4], got[9], got[10])
	}
}

// What a pod on an MLNX_OFED host reads: its own rows on each rail, the
// host's rows hidden.
func TestPodViewRails(t *testing.T) {
	root := t.TempDir()
	if err := BuildPodViewRails(root); err != nil {
		t.Fatal(err)
	}
	for i, r := range PodViewRails() {
		got := slotsOf(t, root, r.HCA, 9)
		for j := range 4 {
			if got[j] != empty {
				t.Errorf("%s slot %d = %q, want hidden (empty)", r.HCA, j, got[j])
			}
		}
		if got[5][1] != TypeV2 || got[5][2] != r.Netdev {
			t.Errorf("%s slot 5 = %q, want RoCE v2 on %s", r.HCA, got[5], r.Netdev)
		}
		if uv, err := UverbsOf(root, r.HCA); err != nil || uv != i {
			t.Errorf("%s: uverbs%d (%v), want uverbs%d", r.HCA, uv, err, i)
		}
	}
	if got := slotsOf(t, root, "mlx5_1", 8)[6]; got != [3]string{"0000:0000:0000:0000:0000:ffff:0a98:040c", TypeV1, "net2"} {
		t.Errorf("mlx5_1 slot 6 = %q", got)
	}
}

// mlx4 with RoCE v1 only: one entry per address, one reserved slot, and an
// entry of a VLAN upper.
func TestMLX4Host(t *testing.T) {
	root := t.TempDir()
	if err := BuildMLX4Host(root); err != nil {
		t.Fatal(err)
	}
	got := slotsOf(t, root, "mlx4_0", 3)
	if got[2] != [3]string{IPv4GID("10.10.10.2"), TypeV1, "eth2.10"} || got[0][1] != TypeV1 {
		t.Errorf("mlx4_0 slots = %q", got)
	}
	if idx, err := AddAddress(root, "mlx4_0", 1, "10.0.0.2", "eth0"); err != nil || !reflect.DeepEqual(idx, []int{3}) {
		t.Errorf("mlx4 add: %v, %v; want one v1 entry at 3", idx, err)
	}
	if n := countFiles(t, filepath.Join(root, "sys/class/infiniband/mlx4_0/ports/1/gids")); n != 128 {
		t.Errorf("mlx4 table holds %d slots, want 128", n)
	}
}
