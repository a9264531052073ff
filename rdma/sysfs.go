// Package rdma discovers RDMA facts for rdma-macvlan: which HCA and port
// serve a RoCE netdev, the port's GID table, the device nodes a container
// needs, and the RDMA subsystem's netns mode. Everything is read from sysfs
// under an explicit root (Sysfs.Root), so tests and the managed plugin (which
// sees the host's /sys under /host) use the same code as a bare-metal daemon.
// The package makes no netlink calls and never opens /dev.
package rdma

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/Mellanox/rdmamap"
)

var (
	// ErrNoRDMADevice means a netdev has no RDMA device (HCA) behind it.
	ErrNoRDMADevice = errors.New("no RDMA device")
	// ErrAmbiguousRDMADevice means more than one HCA port could serve a
	// netdev and sysfs alone cannot tell which.
	ErrAmbiguousRDMADevice = errors.New("more than one RDMA device port matches")
	// ErrNoUverbs means an HCA has no uverbs character device.
	ErrNoUverbs = errors.New("no uverbs device")
	// ErrNoRdmaCM means /dev/infiniband/rdma_cm is not registered
	// (sys/class/misc/rdma_cm/dev is missing or unreadable).
	ErrNoRdmaCM = errors.New("no rdma_cm device")
	// ErrInvalidGID means a text is not a GID in kernel notation.
	ErrInvalidGID = errors.New("invalid GID")
	// ErrInvalidName means an HCA or netdev name cannot name a sysfs entry.
	ErrInvalidName = errors.New("invalid name")
)

// Sysfs reads RDMA facts under Root: "/" is the real host, tests pass a fake
// tree (see package rdmatest), the managed plugin passes "/host".
type Sysfs struct {
	Root string
}

// rdmamapMu guards rdmamap's package path variables (RdmaClassDir, ...):
// rdmamap v1.2.0 has no other way to be pointed at a root.
var rdmamapMu sync.Mutex

// NewSysfs returns a Sysfs reading under root ("" means "/") and points
// rdmamap's path variables at the same root, so that code calling rdmamap
// directly sees the same tree. Calling it again with the same root changes
// nothing. Sysfs methods re-point rdmamap under a lock before each use, so
// several roots in one process (parallel tests) stay correct; direct rdmamap
// callers see the root of the most recent NewSysfs.
func NewSysfs(root string) *Sysfs {
	s := &Sysfs{Root: root}
	rdmamapMu.Lock()
	defer rdmamapMu.Unlock()
	pointRdmamap(s.root())
	return s
}

// pointRdmamap is the one place that sets rdmamap's path variables. The
// caller holds rdmamapMu. RdmaDeviceDir and RdmaUcmDevice stay "/dev/...":
// they name device nodes as containers see them, which this package reports
// but never reads (the daemon needs no access to /dev).
func pointRdmamap(root string) {
	rdmamap.RdmaClassDir = filepath.Join(root, "sys/class/infiniband")
	rdmamap.RdmaIbUcmDir = filepath.Join(root, "sys/class/infiniband_cm")
	rdmamap.RdmaUmadDir = filepath.Join(root, "sys/class/infiniband_mad")
	rdmamap.RdmaUverbsDir = filepath.Join(root, "sys/class/infiniband_verbs")
	rdmamap.PciDevDir = filepath.Join(root, "sys/bus/pci/devices")
	rdmamap.AuxDevDir = filepath.Join(root, "sys/bus/auxiliary/devices")
}

// withRdmamap runs fn with rdmamap pointed at s.Root.
func (s *Sysfs) withRdmamap(fn func()) {
	rdmamapMu.Lock()
	defer rdmamapMu.Unlock()
	pointRdmamap(s.root())
	fn()
}

func (s *Sysfs) root() string {
	if s == nil || s.Root == "" {
		return "/"
	}
	return filepath.Clean(s.Root)
}

// path joins elem under the root.
func (s *Sysfs) path(elem ...string) string {
	return filepath.Join(append([]string{s.root()}, elem...)...)
}

func (s *Sysfs) portDir(hca string, port int) string {
	return s.path("sys/class/infiniband", hca, "ports", strconv.Itoa(port))
}

// checkName rejects names that would escape the directory they are looked
// up in (names can come from users, e.g. -o rdma_device=...).
func checkName(what, name string) error {
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\x00") {
		return fmt.Errorf("%s name %q: %w", what, name, ErrInvalidName)
	}
	return nil
}

// readTrimmed reads a sysfs attribute and trims the trailing newline.
func readTrimmed(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}

// readAttr reads an attribute that the kernel may refuse to show: the
// gid_attrs of an empty GID slot fail with EINVAL. A fake tree cannot make a
// plain file fail with EINVAL, so an empty or absent file means the same
// (see package rdmatest). ok is false in all three cases.
func readAttr(path string) (value string, ok bool) {
	v, err := readTrimmed(path)
	if err != nil || v == "" {
		return "", false
	}
	return v, true
}

// Devices lists the HCAs under sys/class/infiniband, sorted.
// Equivalent to: rdma dev show
func (s *Sysfs) Devices() ([]string, error) {
	var devs []string
	s.withRdmamap(func() { devs = rdmamap.GetRdmaDeviceList() })
	if len(devs) == 0 {
		// rdmamap hides why the list is empty; tell a missing class
		// directory (no RDMA stack) apart from no devices.
		dir := s.path("sys/class/infiniband")
		if _, err := os.Stat(dir); err != nil {
			return nil, fmt.Errorf("list RDMA devices in %s: %w (is ib_core loaded? check: rdma dev show)", dir, err)
		}
		return nil, nil
	}
	sort.Strings(devs)
	return devs, nil
}

// Ports lists the port numbers of an HCA, sorted.
func (s *Sysfs) Ports(hca string) ([]int, error) {
	if err := checkName("RDMA device", hca); err != nil {
		return nil, err
	}
	dir := s.path("sys/class/infiniband", hca, "ports")
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("list ports of RDMA device %s: %w (check: rdma link show)", hca, err)
	}
	ports := make([]int, 0, len(entries))
	for _, e := range entries {
		if n, err := strconv.Atoi(e.Name()); err == nil && n > 0 {
			ports = append(ports, n)
		}
	}
	sort.Ints(ports)
	return ports, nil
}

// PortInfo is what sysfs says about one HCA port.
type PortInfo struct {
	HCA  string
	Port int
	// LinkLayer is "Ethernet" for RoCE, "InfiniBand" for IB.
	LinkLayer string
	// State is the logical state without its number: "ACTIVE", "DOWN", ...
	State string
	// PhysState is the physical state without its number: "LinkUp", "Disabled", ...
	PhysState string
	// GIDTableSize is the number of GID slots (files in gids/): mlx5 255
	// or 256, mlx4 128, rxe 1024.
	GIDTableSize int
}

// Active reports whether the port can carry traffic.
func (p PortInfo) Active() bool { return p.State == "ACTIVE" }

// Port reads the state, link layer and GID table size of an HCA port.
// Equivalent to: rdma link show <hca>/<port>; ibv_devinfo -d <hca> -i <port>
func (s *Sysfs) Port(hca string, port int) (PortInfo, error) {
	if err := checkName("RDMA device", hca); err != nil {
		return PortInfo{}, err
	}
	dir := s.portDir(hca, port)
	info := PortInfo{HCA: hca, Port: port}
	for _, a := range []struct {
		file string
		dst  *string
	}{
		{"link_layer", &info.LinkLayer},
		{"state", &info.State},
		{"phys_state", &info.PhysState},
	} {
		v, err := readTrimmed(filepath.Join(dir, a.file))
		if err != nil {
			return PortInfo{}, fmt.Errorf("read RDMA device %s port %d: %w (check: rdma link show %s/%d)", hca, port, err, hca, port)
		}
		*a.dst = stripStateNumber(v)
	}
	entries, err := os.ReadDir(filepath.Join(dir, "gids"))
	if err != nil {
		return PortInfo{}, fmt.Errorf("read GID table of RDMA device %s port %d: %w", hca, port, err)
	}
	for _, e := range entries {
		// Count slots only: a writer's temporary file is not one.
		if _, err := strconv.Atoi(e.Name()); err == nil {
			info.GIDTableSize++
		}
	}
	return info, nil
}

// stripStateNumber turns "4: ACTIVE" into "ACTIVE" and "5: LinkUp" into
// "LinkUp"; text without a number is returned as is.
func stripStateNumber(v string) string {
	if i := strings.Index(v, ": "); i >= 0 {
		if _, err := strconv.Atoi(v[:i]); err == nil {
			return strings.TrimSpace(v[i+2:])
		}
	}
	return v
}

// isNotExist reports whether err says a sysfs entry does not exist.
func isNotExist(err error) bool { return errors.Is(err, fs.ErrNotExist) }
