package rdma

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// GID types as the kernel writes them in gid_attrs/types/<i>.
const (
	GIDTypeRoCEv1 = "IB/RoCE v1"
	GIDTypeRoCEv2 = "RoCE v2"
)

// GID is one populated entry of a port's GID table.
type GID struct {
	Index int
	// GID is the kernel text: 8 groups of 4 lower-case hex digits.
	GID string
	// IP is the decoded address: a 4-byte IPv4 for a v4-mapped GID,
	// otherwise a 16-byte IPv6.
	IP net.IP
	// Type is GIDTypeRoCEv1 or GIDTypeRoCEv2; "" when the kernel would not
	// say (the entry is being added or removed).
	Type string
	// Ndev is the netdev name as seen in that netdev's own namespace
	// ("eth0" can repeat across containers); "" when unreadable.
	Ndev string
}

// GIDs returns the populated entries of a port's GID table, sorted by index.
// An empty slot reads all zeros (and its attributes fail with EINVAL): it is
// skipped. An entry with a non-zero GID whose attributes cannot be read is
// still returned, with Type or Ndev "".
// Equivalent to: show_gids <hca> <port>
func (s *Sysfs) GIDs(hca string, port int) ([]GID, error) {
	if err := checkName("RDMA device", hca); err != nil {
		return nil, err
	}
	dir := s.portDir(hca, port)
	entries, err := os.ReadDir(filepath.Join(dir, "gids"))
	if err != nil {
		return nil, fmt.Errorf("read GID table of RDMA device %s port %d: %w (check: rdma link show %s/%d)", hca, port, err, hca, port)
	}
	indices := make([]int, 0, len(entries))
	for _, e := range entries {
		if i, err := strconv.Atoi(e.Name()); err == nil && i >= 0 {
			indices = append(indices, i)
		}
	}
	sort.Ints(indices)

	var gids []GID
	for _, i := range indices {
		name := strconv.Itoa(i)
		text, err := readTrimmed(filepath.Join(dir, "gids", name))
		if err != nil || text == "" {
			// The slot vanished or the kernel refused it: treat as empty,
			// like a slot that reads all zeros.
			continue
		}
		ip, err := ParseGID(text)
		if err != nil {
			return nil, fmt.Errorf("read GID %d of RDMA device %s port %d: %w", i, hca, port, err)
		}
		if ip.IsUnspecified() {
			continue
		}
		g := GID{Index: i, GID: strings.ToLower(text), IP: ip}
		g.Type, _ = readAttr(filepath.Join(dir, "gid_attrs", "types", name))
		g.Ndev, _ = readAttr(filepath.Join(dir, "gid_attrs", "ndevs", name))
		gids = append(gids, g)
	}
	return gids, nil
}

// GIDsWithIP returns the entries of gids whose address is ip, in table
// order: one per RoCE type once the kernel has added them all.
func GIDsWithIP(gids []GID, ip net.IP) []GID {
	var out []GID
	for _, g := range gids {
		if g.IP.Equal(ip) {
			out = append(out, g)
		}
	}
	return out
}

// RoCETypesPerAddress returns how many GID entries the kernel adds for each
// IP address on this port: 2 where the table shows both "IB/RoCE v1" and
// "RoCE v2" entries (mlx5), 1 where it shows one type (rxe, irdma, mlx4
// without RoCE v2). With no typed entry at all it falls back on the HCA's
// kernel driver (mlx5_core: 2) or name prefix (mlx5_: 2), else 1.
func (s *Sysfs) RoCETypesPerAddress(hca string, port int) int {
	gids, _ := s.GIDs(hca, port) // no table: decide from the driver below
	types := map[string]bool{}
	for _, g := range gids {
		if g.Type != "" {
			types[g.Type] = true
		}
	}
	switch {
	case len(types) >= 2:
		return 2
	case len(types) == 1:
		return 1
	}
	if checkName("RDMA device", hca) != nil {
		return 1
	}
	if target, err := os.Readlink(s.path("sys/class/infiniband", hca, "device", "driver")); err == nil {
		if filepath.Base(target) == "mlx5_core" {
			return 2
		}
		return 1
	}
	if strings.HasPrefix(hca, "mlx5_") {
		return 2
	}
	return 1
}

// ParseGID decodes a GID in kernel text ("fe80:0000:...:03ec") or any other
// IPv6 notation. A v4-mapped GID decodes to a 4-byte IPv4 address.
func ParseGID(s string) (net.IP, error) {
	t := strings.TrimSpace(s)
	if !strings.Contains(t, ":") || strings.Contains(t, "%") {
		return nil, fmt.Errorf("parse GID %q: %w", s, ErrInvalidGID)
	}
	ip := net.ParseIP(t)
	if ip == nil {
		return nil, fmt.Errorf("parse GID %q: %w", s, ErrInvalidGID)
	}
	if v4 := ip.To4(); v4 != nil {
		return v4, nil
	}
	return ip, nil
}

// GIDFromIP returns the GID the kernel adds for ip, in kernel text: 8 groups
// of 4 lower-case hex digits; an IPv4 address becomes v4-mapped
// (0000:...:ffff:AABB:CCDD). It returns "" for an invalid ip.
func GIDFromIP(ip net.IP) string {
	b := ip.To16()
	if b == nil {
		return ""
	}
	var sb strings.Builder
	for i := 0; i < 16; i += 2 {
		if i > 0 {
			sb.WriteByte(':')
		}
		fmt.Fprintf(&sb, "%02x%02x", b[i], b[i+1])
	}
	return sb.String()
}

// IPv4ToGID returns the v4-mapped GID of an IPv4 address in kernel text, or
// "" when ip is not IPv4.
func IPv4ToGID(ip net.IP) string {
	v4 := ip.To4()
	if v4 == nil {
		return ""
	}
	return GIDFromIP(v4)
}

// DefaultGID returns the default GID the kernel derives from a port
// netdev's MAC address: fe80::/64 with the modified EUI-64 interface ID.
// It returns "" for a MAC that is not 6 bytes long.
func DefaultGID(mac net.HardwareAddr) string {
	if len(mac) != 6 {
		return ""
	}
	ip := make(net.IP, 16)
	ip[0], ip[1] = 0xfe, 0x80
	ip[8], ip[9], ip[10] = mac[0]^0x02, mac[1], mac[2]
	ip[11], ip[12] = 0xff, 0xfe
	ip[13], ip[14], ip[15] = mac[3], mac[4], mac[5]
	return GIDFromIP(ip)
}
