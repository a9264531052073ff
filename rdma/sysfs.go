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

	"github.com/rdma-macvlan/rdma-macvlan/internal/sysattr"
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
	// ErrInvalidName means an HCA or netdev name cannot name a sysfs entry.
	ErrInvalidName = errors.New("invalid name")
)

// Sysfs reads RDMA facts under Root: "/" is the real host, tests pass a fake
// tree (see package rdmatest), the managed plugin passes "/host".
type Sysfs struct {
	Root string
	// Log takes the package's debug lines (where a fact was read from);
	// nil discards them.
	Log Logger
}

// Logger takes rdma's debug lines. The daemon's logrus logger satisfies
// it; the package does not import a logging library, so that docker rdma,
// which reads sysfs through it, does not link one.
type Logger interface {
	Debugf(format string, args ...any)
}

// NewSysfs returns a Sysfs reading under root ("" means "/").
func NewSysfs(root string) *Sysfs {
	return &Sysfs{Root: root}
}

// WithLog returns a copy of s that logs to log.
func (s *Sysfs) WithLog(log Logger) *Sysfs {
	c := Sysfs{Log: log}
	if s != nil {
		c.Root = s.Root
	}
	return &c
}

// discard is the logger of a Sysfs without one.
type discard struct{}

func (discard) Debugf(string, ...any) {}

func (s *Sysfs) log() Logger {
	if s == nil || s.Log == nil {
		return discard{}
	}
	return s.Log
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

// readTrimmed reads a sysfs attribute and trims the trailing newline. What
// is not an attribute (a FIFO, a device, a link, more than a page) is
// refused without blocking (see sysattr.Read).
func readTrimmed(path string) (string, error) {
	return sysattr.Read(path, nil)
}

// readAttr reads an attribute that the kernel may refuse to show: the
// gid_attrs of an empty GID slot fail with EINVAL. A fake tree cannot make a
// plain file fail with EINVAL, so an empty or absent file means the same
// (see package rdmatest). ok is false in all three cases.
func readAttr(path string) (value string, ok bool) { return readSmall(path, nil) }

// Devices lists the HCAs under sys/class/infiniband, sorted.
// Equivalent to: rdma dev show
func (s *Sysfs) Devices() ([]string, error) {
	devs := rdmaDeviceList(s.root())
	if len(devs) == 0 {
		// The listing hides why it is empty; tell a missing class
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
