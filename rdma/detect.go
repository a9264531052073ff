package rdma

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// HCAPort names one port of an HCA.
type HCAPort struct {
	HCA  string
	Port int
}

func (p HCAPort) String() string { return p.HCA + "/" + strconv.Itoa(p.Port) }

// HCAForNetdev maps a RoCE netdev to the HCA port behind it. netdev is a PF
// (or an SF, a bond, an rxe parent), never a VLAN: the caller resolves a VLAN
// to its real device first, as the kernel does for GID entries.
//
// It looks first at sys/class/net/<netdev>/device/infiniband/<hca> (PCI and
// auxiliary devices) and picks the port whose GID entries name netdev,
// falling back on the only port, then on the netdev's dev_port. Netdevs with
// no RDMA device under their device link (rxe, bonds) are found by scanning
// every HCA port for an entry whose ndev is netdev and, when netdev's MAC is
// readable, whose GID is the default GID derived from it (ndev names repeat
// across namespaces). Errors wrap ErrNoRDMADevice or
// ErrAmbiguousRDMADevice and say what to check.
// Equivalent to: rdma link show | grep "netdev <netdev>"
func (s *Sysfs) HCAForNetdev(netdev string) (hca string, port int, err error) {
	return OnePort(netdev, s.HCAPortsForNetdev)
}

// OnePort returns the only port find gives netdev, or an error wrapping
// ErrAmbiguousRDMADevice that lists them when it gives several (or find's
// own error).
func OnePort(netdev string, find func(netdev string) ([]HCAPort, error)) (hca string, port int, err error) {
	cands, err := find(netdev)
	if err != nil {
		return "", 0, err
	}
	if len(cands) > 1 {
		names := make([]string, len(cands))
		for i, c := range cands {
			names[i] = c.String()
		}
		return "", 0, fmt.Errorf("netdev %q: %w: %s (choose one with -o rdma_device=<hca>; check: rdma link show)",
			netdev, ErrAmbiguousRDMADevice, strings.Join(names, ", "))
	}
	return cands[0].HCA, cands[0].Port, nil
}

// HCAPortsForNetdev returns every HCA port that may serve netdev, best
// candidates only: usually exactly one. HCAForNetdev wants exactly one; a
// caller given an explicit HCA (-o rdma_device) picks from this list to check
// that the HCA belongs to the netdev. It never returns an empty list without
// an error wrapping ErrNoRDMADevice.
func (s *Sysfs) HCAPortsForNetdev(netdev string) ([]HCAPort, error) {
	if err := checkName("netdev", netdev); err != nil {
		return nil, err
	}
	linkDir := s.path("sys/class/net", netdev, "device", "infiniband")
	entries, err := os.ReadDir(linkDir)
	if err == nil && len(entries) > 0 {
		hcas := make([]string, 0, len(entries))
		for _, e := range entries {
			hcas = append(hcas, e.Name())
		}
		sort.Strings(hcas)
		return s.portsOfLinkedHCAs(netdev, hcas)
	}
	if err != nil && !isNotExist(err) {
		return nil, fmt.Errorf("netdev %q: read %s: %w", netdev, linkDir, err)
	}

	// No device link: rxe, siw, a bond over RoCE ports. Only the GID
	// table knows which port carries netdev.
	hcas, err := s.Devices()
	if err != nil {
		return nil, fmt.Errorf("netdev %q: %w (check: rdma link show): %w", netdev, ErrNoRDMADevice, err)
	}
	var matches []HCAPort
	for _, hca := range hcas {
		ports, err := s.Ports(hca)
		if err != nil {
			continue // a device going away while we scan
		}
		for _, p := range ports {
			matches = append(matches, HCAPort{hca, p})
		}
	}
	// A netdev whose MAC is known must hold its default GID: matching the
	// name alone would take a container's link of the same name (eth0)
	// on another HCA for the parent.
	named, withDefault, defKnown := s.matchNdev(netdev, matches)
	matches = named
	if defKnown {
		matches = withDefault
	}
	if len(matches) == 0 {
		return nil, fmt.Errorf("netdev %q: %w: no %s and no HCA port holds its GID entries (check: rdma link show; for Soft-RoCE: rdma link add rxe0 type rxe netdev %s)",
			netdev, ErrNoRDMADevice, linkDir, netdev)
	}
	return matches, nil
}

// portsOfLinkedHCAs picks the ports of the HCAs found under the netdev's
// device link. Several ports (mlx4 dual-port, switchdev) are told apart by
// the GID entries that name netdev, then by the netdev's dev_port.
func (s *Sysfs) portsOfLinkedHCAs(netdev string, hcas []string) ([]HCAPort, error) {
	var all []HCAPort
	var lastErr error
	for _, hca := range hcas {
		ports, err := s.Ports(hca)
		if err != nil {
			lastErr = err
			continue
		}
		for _, p := range ports {
			all = append(all, HCAPort{hca, p})
		}
	}
	if len(all) == 0 {
		return nil, fmt.Errorf("netdev %q: %w: RDMA device %s has no ports: %w (check: rdma link show)",
			netdev, ErrNoRDMADevice, strings.Join(hcas, ","), lastErr)
	}
	if len(all) == 1 {
		return all, nil
	}
	named, withDefault, _ := s.matchNdev(netdev, all)
	if len(withDefault) > 0 {
		return withDefault, nil
	}
	if len(named) > 0 {
		return named, nil
	}
	// No GID entry names netdev yet (e.g. InfiniBand, or link down):
	// dev_port is the 0-based port of the netdev on its device.
	if v, err := readTrimmed(s.path("sys/class/net", netdev, "dev_port")); err == nil {
		if n, err := strconv.Atoi(v); err == nil {
			var m []HCAPort
			for _, c := range all {
				if c.Port == n+1 {
					m = append(m, c)
				}
			}
			if len(m) > 0 {
				return m, nil
			}
		}
	}
	return all, nil
}

// matchNdev returns the candidate ports with a GID entry whose ndev is
// netdev (named) and, among those, the ports where such an entry holds the
// default GID derived from netdev's MAC (withDefault): only the port's own
// netdev has it, while names repeat across namespaces. defKnown is false
// when netdev's MAC cannot be read, so withDefault means nothing.
func (s *Sysfs) matchNdev(netdev string, cands []HCAPort) (named, withDefault []HCAPort, defKnown bool) {
	var defGID netip.Addr
	if v, err := readTrimmed(s.path("sys/class/net", netdev, "address")); err == nil {
		if mac, err := net.ParseMAC(v); err == nil {
			defGID, _ = netip.ParseAddr(DefaultGID(mac))
		}
	}
	for _, c := range cands {
		if defGID.IsValid() && s.defaultSlotHolds(c, netdev, defGID) {
			// The whole table would say the same: the entry names netdev.
			named = append(named, c)
			withDefault = append(withDefault, c)
			continue
		}
		gids, err := s.GIDs(c.HCA, c.Port)
		if err != nil {
			continue
		}
		isNamed, isDefault := false, false
		for _, g := range gids {
			if g.Ndev != netdev {
				continue
			}
			isNamed = true
			if defGID.IsValid() && g.GID == defGID {
				isDefault = true
			}
		}
		if isNamed {
			named = append(named, c)
		}
		if isDefault {
			withDefault = append(withDefault, c)
		}
	}
	return named, withDefault, defGID.IsValid()
}

// defaultSlots is how many slots at the start of a RoCE port's GID table
// may be reserved for the default GIDs of the port's own netdev: one per
// RoCE type, 0 and 1 on mlx5, 0 alone on rxe (where slot 1 is an ordinary
// one, read here for nothing). No other entry takes a reserved slot, and a
// default GID is in no other slot.
const defaultSlots = 2

// defaultSlotHolds reports whether a reserved default slot of port c holds
// gid with ndev netdev: two slots read instead of the whole table (1024
// files on rxe, at every start and CreateNetwork on a host whose RDMA
// devices have no device link). false says nothing: the caller reads the
// table.
func (s *Sysfs) defaultSlotHolds(c HCAPort, netdev string, gid netip.Addr) bool {
	if checkName("RDMA device", c.HCA) != nil {
		return false
	}
	dir := s.portDir(c.HCA, c.Port)
	for i := range defaultSlots {
		name := strconv.Itoa(i)
		text, ok := readAttr(filepath.Join(dir, "gids", name))
		if !ok {
			continue
		}
		if g, err := netip.ParseAddr(text); err != nil || g != gid {
			continue
		}
		if nd, ok := readAttr(filepath.Join(dir, "gid_attrs", "ndevs", name)); ok && nd == netdev {
			return true
		}
	}
	return false
}

// PortNetdev is the netdev a port's default GID names (slot 0, which the
// kernel reserves for the default GID of the port's own netdev): the
// port's netdev as sysfs shows it, "" when unreadable (an InfiniBand port,
// an empty slot). A bond's RoCE LAG device (mlx5_bond_0) names the bond.
// It is a guess where the kernel's RDMA netlink view is not to be had: on
// the test VM's kernel (6.1), both ports of a bond without LAG, each with
// its own Soft-RoCE device, held the bond's default GID in slot 0, so the
// slot took the bond for their netdev.
func (s *Sysfs) PortNetdev(hca string, port int) string {
	if checkName("RDMA device", hca) != nil {
		return ""
	}
	v, ok := readAttr(filepath.Join(s.portDir(hca, port), "gid_attrs", "ndevs", "0"))
	if !ok {
		return ""
	}
	return v
}

// Host reports whether s reads the running kernel's sysfs, so that what
// the kernel says through netlink describes the same devices: root "/",
// or a root whose sys/ is a sysfs mount (the managed plugin reads the
// host's /sys bind-mounted at /host/sys). A fake tree (tests, e2e suites)
// is a plain directory.
func (s *Sysfs) Host() bool {
	if s.root() == "/" {
		return true
	}
	var st unix.Statfs_t
	return unix.Statfs(s.path("sys"), &st) == nil && st.Type == unix.SYSFS_MAGIC
}
