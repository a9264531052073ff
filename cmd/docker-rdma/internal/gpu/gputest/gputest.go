// Package gputest builds fake sysfs and procfs trees of GPU hosts for tests:
// NVIDIA GPUs and ConnectX HCAs placed on a PCIe tree of host bridges, root
// ports and switches, as the kernel lays them out under sys/devices, with
// the driver facts GPUDirect RDMA depends on.
package gputest

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rdma-macvlan/rdma-macvlan/rdma/rdmatest"
)

// Options are the driver facts of the host.
type Options struct {
	// Kernel is proc/sys/kernel/osrelease (default 6.1.0-18-amd64).
	Kernel string
	// Driver is the nvidia module's version; "none" leaves it unloaded
	// (default 535.104.05).
	Driver string
	// OpenModule makes the nvidia module NVIDIA's open kernel module.
	OpenModule bool
	// PeerMem loads nvidia_peermem.
	PeerMem bool
}

// GPU and HCA are the devices of the DGX-like host Build8x8 makes.
type GPU struct{ BDF, UUID string }

// HCA is one ConnectX port of the host: its RDMA device and netdev.
type HCA struct{ Name, Netdev, BDF string }

// Each socket has two PCIe host bridges. Socket 0: the first bridge has a
// two-level switch, with GPU0 and mlx5_0 on one second-level switch and
// GPU1 and mlx5_1 on the other; the second has one switch with GPU2, GPU3
// and mlx5_2, and mlx5_3 on a root port of its own. Socket 1: a flat switch
// per host bridge, each with two GPUs and two HCAs.
var (
	GPUs = []GPU{
		{"0000:1a:00.0", "GPU-0a000000-0000-0000-0000-000000000000"},
		{"0000:1e:00.0", "GPU-1e000000-0000-0000-0000-000000000000"},
		{"0000:39:00.0", "GPU-39000000-0000-0000-0000-000000000000"},
		{"0000:3a:00.0", "GPU-3a000000-0000-0000-0000-000000000000"},
		{"0000:9a:00.0", "GPU-9a000000-0000-0000-0000-000000000000"},
		{"0000:9b:00.0", "GPU-9b000000-0000-0000-0000-000000000000"},
		{"0000:bb:00.0", "GPU-bb000000-0000-0000-0000-000000000000"},
		{"0000:bc:00.0", "GPU-bc000000-0000-0000-0000-000000000000"},
	}
	HCAs = []HCA{
		{"mlx5_0", "ens10np0", "0000:1b:00.0"},
		{"mlx5_1", "ens11np0", "0000:1f:00.0"},
		{"mlx5_2", "ens12np0", "0000:3b:00.0"},
		{"mlx5_3", "ens13np0", "0000:3c:00.0"},
		{"mlx5_4", "ens14np0", "0000:9c:00.0"},
		{"mlx5_5", "ens15np0", "0000:9d:00.0"},
		{"mlx5_6", "ens16np0", "0000:bd:00.0"},
		{"mlx5_7", "ens17np0", "0000:be:00.0"},
	}
	// parents are the bridge directories each device sits in, keyed by
	// its PCI address, and numa the NUMA node of each host bridge.
	parents = map[string]string{
		"0000:1a:00.0": "pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:00.0/0000:18:00.0/0000:19:00.0",
		"0000:1b:00.0": "pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:00.0/0000:18:00.0/0000:19:01.0",
		"0000:1e:00.0": "pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:01.0/0000:1c:00.0/0000:1d:00.0",
		"0000:1f:00.0": "pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:01.0/0000:1c:00.0/0000:1d:01.0",
		"0000:39:00.0": "pci0000:36/0000:36:01.0/0000:37:00.0/0000:38:00.0",
		"0000:3a:00.0": "pci0000:36/0000:36:01.0/0000:37:00.0/0000:38:01.0",
		"0000:3b:00.0": "pci0000:36/0000:36:01.0/0000:37:00.0/0000:38:02.0",
		"0000:3c:00.0": "pci0000:36/0000:36:02.0",
		"0000:9a:00.0": "pci0000:97/0000:97:01.0/0000:98:00.0/0000:99:00.0",
		"0000:9b:00.0": "pci0000:97/0000:97:01.0/0000:98:00.0/0000:99:01.0",
		"0000:9c:00.0": "pci0000:97/0000:97:01.0/0000:98:00.0/0000:99:02.0",
		"0000:9d:00.0": "pci0000:97/0000:97:01.0/0000:98:00.0/0000:99:03.0",
		"0000:bb:00.0": "pci0000:b8/0000:b8:01.0/0000:b9:00.0/0000:ba:00.0",
		"0000:bc:00.0": "pci0000:b8/0000:b8:01.0/0000:b9:00.0/0000:ba:01.0",
		"0000:bd:00.0": "pci0000:b8/0000:b8:01.0/0000:b9:00.0/0000:ba:02.0",
		"0000:be:00.0": "pci0000:b8/0000:b8:01.0/0000:b9:00.0/0000:ba:03.0",
	}
	numa = map[string]string{"pci0000:15": "0", "pci0000:36": "0", "pci0000:97": "1", "pci0000:b8": "1"}
)

// Host8x8 builds the 8-GPU, 8-HCA host in a temporary directory and
// returns its root.
func Host8x8(t testing.TB, o Options) string {
	t.Helper()
	root := t.TempDir()
	if err := Build8x8(root, o); err != nil {
		t.Fatal(err)
	}
	return root
}

// Build8x8 builds the 8-GPU, 8-HCA host under root.
func Build8x8(root string, o Options) error {
	for i, h := range HCAs {
		if err := rdmatest.BuildMLX5(root, rdmatest.MLX5Options{
			HCA: h.Name, Netdev: h.Netdev, MAC: fmt.Sprintf("b8:3f:d2:00:00:%02x", i),
			PCIAddr: h.BDF, PCIBus: "sys/devices/" + parents[h.BDF], Uverbs: i, HostIPv4: fmt.Sprintf("10.%d.0.1", i),
		}); err != nil {
			return err
		}
		if err := numaNode(root, h.BDF); err != nil {
			return err
		}
	}
	for _, g := range GPUs {
		dir := filepath.Join("sys/devices", parents[g.BDF], g.BDF)
		for name, v := range map[string]string{"vendor": "0x10de", "device": "0x20b0", "class": "0x030200"} {
			if err := write(root, filepath.Join(dir, name), v); err != nil {
				return err
			}
		}
		if err := numaNode(root, g.BDF); err != nil {
			return err
		}
		if err := link(root, dir, filepath.Join("sys/bus/pci/devices", g.BDF)); err != nil {
			return err
		}
		if o.Driver != "none" {
			info := "Model:           NVIDIA A100-SXM4-80GB\nIRQ:             150\nGPU UUID:        " + g.UUID + "\nBus Location:    " + g.BDF + "\n"
			if err := write(root, filepath.Join("proc/driver/nvidia/gpus", g.BDF, "information"), info); err != nil {
				return err
			}
		}
	}
	// Not a GPU: an NVIDIA audio function and a non-NVIDIA display.
	for _, d := range []struct{ bdf, vendor, class string }{{"0000:3a:00.1", "0x10de", "0x040300"}, {"0000:03:00.0", "0x1a03", "0x030000"}} {
		dir := filepath.Join("sys/devices/pci0000:00/0000:00:1c.0", d.bdf)
		for name, v := range map[string]string{"vendor": d.vendor, "class": d.class} {
			if err := write(root, filepath.Join(dir, name), v); err != nil {
				return err
			}
		}
		if err := link(root, dir, filepath.Join("sys/bus/pci/devices", d.bdf)); err != nil {
			return err
		}
	}
	return Driver(root, o)
}

// Driver writes the kernel release and the nvidia modules' facts.
func Driver(root string, o Options) error {
	kernel := o.Kernel
	if kernel == "" {
		kernel = "6.1.0-18-amd64"
	}
	if err := write(root, "proc/sys/kernel/osrelease", kernel); err != nil {
		return err
	}
	if o.Driver == "none" {
		return nil
	}
	driver := o.Driver
	if driver == "" {
		driver = "535.104.05"
	}
	if err := write(root, "sys/module/nvidia/version", driver); err != nil {
		return err
	}
	kind := "NVIDIA UNIX x86_64 Kernel Module"
	if o.OpenModule {
		kind = "NVIDIA UNIX Open Kernel Module for x86_64"
	}
	if err := write(root, "proc/driver/nvidia/version", "NVRM version: "+kind+"  "+driver+"  Sat Aug 19 01:13:12 UTC 2023\nGCC version:  gcc version 12.2.0 (Debian 12.2.0-14)\n"); err != nil {
		return err
	}
	if o.PeerMem {
		return write(root, "sys/module/nvidia_peermem/refcnt", "0")
	}
	return nil
}

func numaNode(root, bdf string) error {
	host := strings.SplitN(parents[bdf], "/", 2)[0]
	return write(root, filepath.Join("sys/devices", parents[bdf], bdf, "numa_node"), numa[host])
}

func write(root, rel, v string) error {
	p := filepath.Join(root, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	return os.WriteFile(p, []byte(v+"\n"), 0o644)
}

// link makes root/l a relative symlink to root/target.
func link(root, target, l string) error {
	p := filepath.Join(root, l)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	rel, err := filepath.Rel(filepath.Dir(p), filepath.Join(root, target))
	if err != nil {
		return err
	}
	return os.Symlink(rel, p)
}
