package rdmatest

import (
	"fmt"
	"strconv"
)

// Fixtures taken from GID tables and port attributes published from real
// hosts (the issue threads are named on each). docs/fixtures.md lists them
// with what each reproduces. Values the dumps do not give (a PF's MAC, a
// netdev's name) are filled in and said so.

// HostViewMLX5 is a ConnectX host with no containers, as the host sees its
// table (NVIDIA/nccl#1131): mlx5_0 port 1 on ens3np0 (MAC
// a0:88:c2:5b:03:ec), the default GID from that MAC in the reserved slots
// 0 (IB/RoCE v1) and 1 (RoCE v2), the PF's own 11.0.0.72 at 2 and 3, and
// 251 empty slots of a 255-slot table.
func HostViewMLX5() MLX5Options {
	return MLX5Options{HostIPv4: "11.0.0.72"}
}

// SparseHostMLX5 is a host view with holes, pieced from two published pod
// views of the same shape (NVIDIA/nccl PR #1587 and
// k8snetworkplumbingwg/multus-cni#1100): after the default pair, slots 2-3
// are empty (an address that went), 4-5 hold a pod's 172.20.1.1 on its
// net1, 6-7 another pod's 11.0.4.1 and 8-9 that pod's link-local
// fe80::e4ea:71ff:feb9:4970, IPv4 before link-local as the kernel saw them
// come (both on a net1 of its own), 10-11 are empty again and 12-13 hold a
// third pod's 172.20.1.2. The kernel puts the next address at 2-3.
func SparseHostMLX5() MLX5Options {
	extra := Pair(4, IPv4GID("172.20.1.1"), "net1")
	extra = append(extra, Pair(6, IPv4GID("11.0.4.1"), "net1")...)
	extra = append(extra, Pair(8, "fe80:0000:0000:0000:e4ea:71ff:feb9:4970", "net1")...)
	extra = append(extra, Pair(12, IPv4GID("172.20.1.2"), "net1")...)
	return MLX5Options{Extra: extra}
}

// ContainersMLX5 is HostViewMLX5 with n containers started one after the
// other, each with one IPv4 address (10.152.0.12 on) on a net1 of its own:
// container k holds slots 4+2k (v1) and 5+2k (v2), as on the host
// RealHostMLX5 describes.
func ContainersMLX5(n int) MLX5Options {
	o := HostViewMLX5()
	for k := range n {
		ip := fmt.Sprintf("10.152.%d.%d", (12+k)/250, (12+k)%250)
		o.Extra = append(o.Extra, Pair(4+2*k, IPv4GID(ip), "net1")...)
	}
	return o
}

// PodRail is one HCA of BuildPodViewRails.
type PodRail struct {
	HCA, PF, MAC, PCIAddr string
	Netdev                string // the pod's macvlan on this rail
	Entries               []Entry
}

// PodViewRails are the three rails of a pod on an MLNX_OFED host
// (NVIDIA/nccl#1573): mlx5_0, mlx5_1 and mlx5_2, each with one macvlan of
// the pod (net1, net2, net3). The pod's entries sit at 4-7 on each HCA:
// link-local v1/v2 at 4/5, IPv4 v1/v2 at 6/7 (the dump shows no IPv4 on
// mlx5_2); slots 0-3 belong to the host and read empty in the pod, as
// MLNX_OFED hides other namespaces' rows. The PFs' names, MACs and PCI
// addresses are not in the dump: filled in.
func PodViewRails() []PodRail {
	rail := func(i int, ll, ip string) PodRail {
		nd := "net" + strconv.Itoa(i+1)
		r := PodRail{
			HCA: "mlx5_" + strconv.Itoa(i), PF: fmt.Sprintf("ens%df0np0", 1+i),
			MAC: fmt.Sprintf("a0:88:c2:00:00:%02x", i+1), PCIAddr: fmt.Sprintf("0000:%02x:00.0", 3+i), Netdev: nd,
			Entries: Pair(4, ll, nd),
		}
		if ip != "" {
			r.Entries = append(r.Entries, Pair(6, IPv4GID(ip), nd)...)
		}
		return r
	}
	return []PodRail{
		rail(0, "fe80:0000:0000:0000:a4ed:ccff:fe8b:1994", "10.152.0.12"),
		rail(1, "fe80:0000:0000:0000:9459:9bff:fe54:7704", "10.152.4.12"),
		rail(2, "fe80:0000:0000:0000:90ea:b5ff:fec5:3f24", ""),
	}
}

// BuildPodViewRails builds the rails of PodViewRails under root, uverbs0
// to uverbs2, 255 slots each: what a process in that pod reads.
func BuildPodViewRails(root string) error {
	for i, r := range PodViewRails() {
		pci := MLX5PCIBus + "/" + r.PCIAddr
		if err := buildPCIDevice(root, r.PCIAddr, pci, "mlx5_core", "0x15b3", "0x1017"); err != nil {
			return err
		}
		if err := AddNetdev(root, NetdevSpec{Name: r.PF, MAC: r.MAC, PCIDir: pci}); err != nil {
			return err
		}
		if err := BuildHCA(root, HCASpec{Name: r.HCA, PCIDir: pci, Driver: "mlx5_core", NodeGUID: nodeGUID(r.MAC), Uverbs: i,
			Ports: []PortSpec{{TableSize: 255, Entries: r.Entries, DefaultTypes: []string{TypeV1, TypeV2}}}}); err != nil {
			return err
		}
	}
	return hostWide(root, "", "10:57", false, "")
}

// BuildMLX4Host builds the ConnectX-3 port of a mixed host
// (tensorflow/tensorflow#22077): mlx4_0 port 1 on eth2, RoCE v1 only (one
// entry per address, one reserved default slot), 128 slots: the default
// GID at 0, eth2's 12.12.12.12 at 1 and 10.10.10.2 at 2 on eth2.10, a VLAN
// upper of eth2. eth2's MAC is not in the dump: filled in.
func BuildMLX4Host(root string) error {
	const mac = "00:02:c9:00:00:02"
	pci := MLX5PCIBus + "/0000:04:00.0"
	def, err := DefaultGID(mac)
	if err != nil {
		return err
	}
	if err := buildPCIDevice(root, "0000:04:00.0", pci, "mlx4_core", "0x15b3", "0x1007"); err != nil {
		return err
	}
	if err := AddNetdev(root, NetdevSpec{Name: "eth2", MAC: mac, PCIDir: pci}); err != nil {
		return err
	}
	if err := BuildHCA(root, HCASpec{Name: "mlx4_0", PCIDir: pci, Driver: "mlx4_core", NodeGUID: nodeGUID(mac),
		Ports: []PortSpec{{TableSize: 128, DefaultTypes: []string{TypeV1}, Entries: []Entry{
			{Index: 0, GID: def, Type: TypeV1, Ndev: "eth2"},
			{Index: 1, GID: IPv4GID("12.12.12.12"), Type: TypeV1, Ndev: "eth2"},
			{Index: 2, GID: IPv4GID("10.10.10.2"), Type: TypeV1, Ndev: "eth2.10"},
		}}}}); err != nil {
		return err
	}
	return hostWide(root, "", "10:57", false, "")
}
