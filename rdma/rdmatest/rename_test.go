package rdmatest

import (
	"os"
	"path/filepath"
	"testing"
)

// Two NICs' names and uverbs nodes swap under the same PCI functions, node
// GUIDs, netdevs and GID tables.
func TestSwapHCAs(t *testing.T) {
	root := MLX5(t, MLX5Options{Netdev: "p1", MAC: "02:00:00:00:00:01", HostIPv4: "10.0.0.1"})
	if err := BuildMLX5(root, MLX5Options{HCA: "mlx5_1", Netdev: "p2", MAC: "02:00:00:00:00:02", PCIAddr: "0000:04:00.0", Uverbs: 1,
		PendingDelete: []int{2}}); err != nil {
		t.Fatal(err)
	}
	guid := func(hca string) string {
		return readFile(t, filepath.Join(root, "sys/class/infiniband", hca, "node_guid"))
	}
	g0, g1 := guid("mlx5_0"), guid("mlx5_1")
	if err := SwapHCAs(root, "mlx5_0", "mlx5_1"); err != nil {
		t.Fatal(err)
	}
	for rel, want := range map[string]string{
		"sys/class/net/p1/device/infiniband/mlx5_1/node_guid":                             g0,
		"sys/class/net/p2/device/infiniband/mlx5_0/node_guid":                             g1,
		"sys/class/infiniband/mlx5_1/ports/1/gids/2":                                      IPv4GID("10.0.0.1"),
		"sys/class/infiniband_verbs/uverbs1/ibdev":                                        "mlx5_1",
		"sys/class/infiniband_verbs/uverbs1/dev":                                          "231:193",
		"sys/class/infiniband_verbs/uverbs0/ibdev":                                        "mlx5_0",
		"sys/class/infiniband_mad/umad0/ibdev":                                            "mlx5_0",
		"sys/class/infiniband_mad/issm1/dev":                                              "231:65",
		"sys/devices/pci0000:00/0000:00:02.0/0000:03:00.0/infiniband_verbs/uverbs1/ibdev": "mlx5_1",
	} {
		if got := readFile(t, filepath.Join(root, rel)); got != want {
			t.Errorf("%s = %q after the swap, want %q", rel, got, want)
		}
	}
	for _, gone := range []string{
		"sys/class/net/p1/device/infiniband/mlx5_0",
		"sys/devices/pci0000:00/0000:00:02.0/0000:03:00.0/infiniband_verbs/uverbs0",
	} {
		if _, err := os.Lstat(filepath.Join(root, gone)); !os.IsNotExist(err) {
			t.Errorf("%s still there after the swap (%v)", gone, err)
		}
	}
	// The pending delete stays with the NIC, now mlx5_0.
	if p, err := Pending(root, "mlx5_0", 1); err != nil || len(p) != 1 || p[0] != 2 {
		t.Errorf("pending of the renamed mlx5_0: %v, %v; want [2]", p, err)
	}
	if err := RenameHCAs(root, Rename{From: "mlx5_0", To: "mlx5_1", Uverbs: -1}); err == nil {
		t.Error("renamed onto a name another HCA keeps")
	}
	if err := RenameHCAs(root, Rename{From: "mlx5_0", To: "mlx5_7", Uverbs: 1}); err == nil {
		t.Error("renamed onto a uverbs node another HCA keeps")
	}
	if err := RenameHCAs(root, Rename{From: "mlx5_9", To: "mlx5_8", Uverbs: -1}); err == nil {
		t.Error("renamed a missing HCA")
	}
	if err := RenameHCAs(root, Rename{From: "mlx5_0", To: "mlx5_7", Uverbs: -1}); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, filepath.Join(root, "sys/class/infiniband_verbs/uverbs0/ibdev")); got != "mlx5_7" {
		t.Errorf("uverbs0 names %q after a rename keeping it, want mlx5_7", got)
	}
}
