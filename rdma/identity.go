package rdma

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Identity is what tells one RDMA device from another across reboots: its
// name (mlx5_N) follows probe order and udev renames, these do not.
type Identity struct {
	// NodeGUID is sys/class/infiniband/<hca>/node_guid ("a088:c203:005b:03ec");
	// "" when it reads all zeros (VFs often have none).
	NodeGUID string
	// PCI is the device's PCI function (the last element of its device
	// link, "0000:03:00.0"); "" for a virtual device (rxe, siw).
	PCI string
}

// Known reports whether id holds anything to compare.
func (id Identity) Known() bool { return id.NodeGUID != "" || id.PCI != "" }

// Same reports whether id and o name the same device: every field both
// know must agree, and they must share at least one.
func (id Identity) Same(o Identity) bool {
	shared := false
	for _, f := range [][2]string{{id.NodeGUID, o.NodeGUID}, {id.PCI, o.PCI}} {
		if f[0] == "" || f[1] == "" {
			continue
		}
		if f[0] != f[1] {
			return false
		}
		shared = true
	}
	return shared
}

func (id Identity) String() string {
	var parts []string
	if id.NodeGUID != "" {
		parts = append(parts, "node GUID "+id.NodeGUID)
	}
	if id.PCI != "" {
		parts = append(parts, "PCI "+id.PCI)
	}
	if len(parts) == 0 {
		return "no node GUID nor PCI function"
	}
	return strings.Join(parts, ", ")
}

// zeroGUID is the node_guid of a device that has none.
const zeroGUID = "0000:0000:0000:0000"

// Identity reads the node GUID and the PCI function of hca.
// Equivalent to: cat /sys/class/infiniband/<hca>/node_guid; readlink /sys/class/infiniband/<hca>/device
func (s *Sysfs) Identity(hca string) (Identity, error) {
	if err := checkName("RDMA device", hca); err != nil {
		return Identity{}, err
	}
	dir := s.path("sys/class/infiniband", hca)
	if _, err := os.Stat(dir); err != nil {
		return Identity{}, fmt.Errorf("RDMA device %s: %w (check: rdma dev show)", hca, err)
	}
	var id Identity
	if v, err := readTrimmed(filepath.Join(dir, "node_guid")); err == nil && v != zeroGUID {
		id.NodeGUID = strings.ToLower(v)
	}
	if target, err := os.Readlink(filepath.Join(dir, "device")); err == nil {
		id.PCI = filepath.Base(target)
	}
	return id, nil
}
