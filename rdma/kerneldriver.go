package rdma

import (
	"os"
	"path/filepath"
)

// DriverRXE is what KernelDriver names Soft-RoCE: a device that sends
// through its netdev's stack, so every VLAN of the netdev tags its frames.
const DriverRXE = "rxe"

// KernelDriver names the kernel driver behind RDMA device hca: DriverRXE
// for Soft-RoCE, which sets its node_desc to "rxe" (older kernels also
// linked an rxe device to its netdev's device, whose driver is the NIC's,
// so the node_desc is looked at first); else the driver of the device it
// sits on (mlx5_core for ConnectX, mlx4_core, bnxt_en, ...); "" when sysfs
// names neither (a virtual device that is no rxe, or one going away).
// Equivalent to: cat /sys/class/infiniband/<hca>/node_desc; readlink /sys/class/infiniband/<hca>/device/driver
func (s *Sysfs) KernelDriver(hca string) string {
	if checkName("RDMA device", hca) != nil {
		return ""
	}
	dir := s.path("sys/class/infiniband", hca)
	if v, ok := readAttr(filepath.Join(dir, "node_desc")); ok && v == DriverRXE {
		return DriverRXE
	}
	if target, err := os.Readlink(filepath.Join(dir, "device", "driver")); err == nil {
		return filepath.Base(target)
	}
	return ""
}
