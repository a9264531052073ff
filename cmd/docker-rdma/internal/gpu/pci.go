// Package gpu answers, from sysfs and procfs alone (no GPU library is
// linked), the two questions GPUDirect RDMA raises on a host: where each
// NVIDIA GPU sits on the PCIe tree relative to each RDMA device (the matrix
// nvidia-smi topo -m prints), and whether the kernel and the NVIDIA driver
// let an HCA reach GPU memory at all (nvidia_peermem, or dma-buf).
package gpu

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// NVIDIA's PCI vendor ID and the device classes of its GPUs: 3D controller
// (0x0302, data-centre GPUs) and VGA controller (0x0300).
const (
	nvidiaVendor = "0x10de"
	class3D      = "0x0302"
	classVGA     = "0x0300"
)

// Device is a PCI function placed on the host's PCIe tree.
type Device struct {
	// Name is GPU<index> for a GPU, the RDMA device name for an HCA.
	Name string `json:"name"`
	// BDF is the PCI address, e.g. 0000:17:00.0.
	BDF string `json:"pci"`
	// HostBridge is the PCIe root complex the device hangs off (the
	// sysfs directory pciDDDD:BB and whatever platform device holds it).
	HostBridge string `json:"host_bridge"`
	// Path lists the PCI functions from the root port down to the
	// device itself: each bridge is a root port or a switch port.
	Path []string `json:"path"`
	// NUMA is the device's NUMA node, -1 when the platform gives none.
	NUMA int `json:"numa_node"`
}

var (
	bdfRE = regexp.MustCompile(`^[0-9a-f]{4,}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$`)
	// auxRE is an auxiliary device's name, MODULE.DEVICE.ID: an mlx5
	// sub-function's RDMA device hangs off mlx5_core.sf.N below its PCI
	// function.
	auxRE    = regexp.MustCompile(`^[a-z0-9_]+\.[a-z0-9_]+\.[0-9]+$`)
	pciBusRE = regexp.MustCompile(`^pci[0-9a-f]{4,}:[0-9a-f]{2}$`)
)

// place follows the sysfs link link (a class or bus entry of a PCI
// function) into sys/devices under root and splits its path into the host
// bridge and the PCI functions below it.
func place(root, name, link string) (Device, error) {
	real, err := filepath.EvalSymlinks(link)
	if err != nil {
		return Device{}, fmt.Errorf("%s: follow %s: %w", name, link, err)
	}
	devices, err := filepath.EvalSymlinks(filepath.Join(root, "sys/devices"))
	if err != nil {
		return Device{}, fmt.Errorf("%s: %w", name, err)
	}
	rel, err := filepath.Rel(devices, real)
	if err != nil || strings.HasPrefix(rel, "..") {
		return Device{}, fmt.Errorf("%s: %s is not under %s", name, real, devices)
	}
	parts := strings.Split(rel, string(filepath.Separator))
	host := -1
	for i, p := range parts {
		if pciBusRE.MatchString(p) {
			host = i
		}
	}
	if host < 0 || host == len(parts)-1 {
		return Device{}, fmt.Errorf("%s: %s is not below a PCI host bridge (pciDDDD:BB)", name, real)
	}
	d := Device{Name: name, HostBridge: strings.Join(parts[:host+1], "/"), NUMA: -1}
	fn := real
	for i, p := range parts[host+1:] {
		if !bdfRE.MatchString(p) {
			if len(d.Path) > 0 && auxRE.MatchString(p) && i == len(parts)-host-2 {
				// A sub-function: it shares its PCI function's link.
				fn = filepath.Dir(real)
				break
			}
			return Device{}, fmt.Errorf("%s: %q in %s is not a PCI address", name, p, real)
		}
		d.Path = append(d.Path, p)
	}
	d.BDF = d.Path[len(d.Path)-1]
	if b, err := os.ReadFile(filepath.Join(fn, "numa_node")); err == nil {
		if n, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
			d.NUMA = n
		}
	}
	return d, nil
}

// GPUs returns the NVIDIA GPUs under root/sys/bus/pci/devices in PCI
// address order, named GPU0, GPU1, ...: the order nvidia-smi, NVML and the
// NVIDIA container runtime number them in (docker run --gpus device=N).
func GPUs(root string) ([]Device, error) {
	dir := filepath.Join(root, "sys/bus/pci/devices")
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var bdfs []string
	for _, e := range ents {
		p := filepath.Join(dir, e.Name())
		if readAttr(filepath.Join(p, "vendor")) != nvidiaVendor {
			continue
		}
		class := readAttr(filepath.Join(p, "class"))
		if !strings.HasPrefix(class, class3D) && !strings.HasPrefix(class, classVGA) {
			continue
		}
		bdfs = append(bdfs, e.Name())
	}
	sort.Strings(bdfs)
	out := make([]Device, 0, len(bdfs))
	for i, b := range bdfs {
		d, err := place(root, "GPU"+strconv.Itoa(i), filepath.Join(dir, b))
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, nil
}

// HCA places the RDMA device name (its sys/class/infiniband entry's device
// link); an mlx5 sub-function (an auxiliary device below its PCI function)
// is placed at that function. A virtual device (Soft-RoCE) has no PCI
// function: ErrVirtual.
func HCA(root, name string) (Device, error) {
	link := filepath.Join(root, "sys/class/infiniband", name, "device")
	if _, err := os.Lstat(link); errors.Is(err, os.ErrNotExist) {
		return Device{}, fmt.Errorf("%s: %w", name, ErrVirtual)
	}
	return place(root, name, link)
}

// ErrVirtual says an RDMA device has no PCI function (rxe, siw).
var ErrVirtual = errors.New("a virtual RDMA device, not on PCIe")

func readAttr(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return strings.ToLower(strings.TrimSpace(string(b)))
}
