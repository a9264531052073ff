package rdma

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"

	"github.com/rdma-macvlan/rdma-macvlan/internal/rdmaenv"
)

// GID types as the kernel writes them in gid_attrs/types/<i>.
const (
	GIDTypeRoCEv1 = rdmaenv.TypeV1
	GIDTypeRoCEv2 = rdmaenv.TypeV2
)

// GIDs returns the populated entries of a port's GID table, sorted by index,
// as rdma-exec reads them (rdmaenv.ReadTable, the one reader of whole
// entries). An empty slot reads all zeros (and its attributes fail with
// EINVAL), and is skipped, as is a slot that does not read as a GID. An
// entry whose attributes cannot be read is still returned, with Type or
// Ndev "".
// Equivalent to: show_gids <hca> <port>
func (s *Sysfs) GIDs(hca string, port int) ([]rdmaenv.Entry, error) {
	if err := checkName("RDMA device", hca); err != nil {
		return nil, err
	}
	gids, _, err := rdmaenv.ReadTable(s.root(), hca, port)
	if err != nil {
		return nil, fmt.Errorf("read GID table of RDMA device %s port %d: %w (check: rdma link show %s/%d)", hca, port, err, hca, port)
	}
	return gids, nil
}

// GIDsWithIP returns the entries of gids whose address is ip, in table
// order: one per RoCE type once the kernel has added them all.
func GIDsWithIP(gids []rdmaenv.Entry, ip netip.Addr) []rdmaenv.Entry {
	want := rdmaenv.GIDOf(ip)
	var out []rdmaenv.Entry
	for _, g := range gids {
		if g.GID == want {
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
