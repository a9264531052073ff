// Package rdmaenv holds what the rdma-exec helper and `docker rdma inspect`
// must agree on: which GID entry of a container is its own (Pick), and the
// environment NCCL and UCX need to use it (Vars). It also reads a port's GID
// table from sysfs (ReadTable). It uses only small parts of the standard
// library, so that the static helper built from it stays small.
package rdmaenv

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// GID types as the kernel writes them in gid_attrs/types/<i>.
const (
	TypeV1 = "IB/RoCE v1"
	TypeV2 = "RoCE v2"
)

// Entry is one populated slot of a port's GID table.
type Entry struct {
	Index int
	// GID is the entry's value as a 16-byte address (an IPv4 address is
	// v4-mapped, as in the table).
	GID netip.Addr
	// Type is TypeV1 or TypeV2; "" when the kernel would not say.
	Type string
	// Ndev is the netdev's name in its own network namespace ("eth0"
	// repeats across containers); "" when unreadable.
	Ndev string
}

// Choice says which of a container's entries is its own: the RoCE version
// (2 by default) and the address family ("" picks IPv4 when the interface
// has an IPv4 address, else its global IPv6 address).
type Choice struct {
	Version int
	Family  string // "", "ipv4" or "ipv6"
}

// DefaultChoice is RoCE v2 over IPv4 (IPv6 when there is no IPv4 address):
// routable, and what NCCL and UCX pick by default on RoCE.
var DefaultChoice = Choice{Version: 2}

// ErrChoice marks an invalid --roce-version or --gid-family.
var ErrChoice = errors.New("invalid GID choice")

// ParseChoice reads --roce-version (1 or 2, "" means 2) and --gid-family
// (auto, ipv4 or ipv6, "" means auto).
func ParseChoice(version, family string) (Choice, error) {
	c := DefaultChoice
	switch version {
	case "", "2", "v2":
	case "1", "v1":
		c.Version = 1
	default:
		return c, fmt.Errorf("%w: --roce-version %q: want 1 or 2", ErrChoice, version)
	}
	switch family {
	case "", "auto":
	case "ipv4", "ipv6":
		c.Family = family
	default:
		return c, fmt.Errorf("%w: --gid-family %q: want auto, ipv4 or ipv6", ErrChoice, family)
	}
	return c, nil
}

// Type returns the kernel's name of the chosen RoCE version.
func (c Choice) Type() string {
	if c.Version == 1 {
		return TypeV1
	}
	return TypeV2
}

// String is the choice as the helper's flags spell it.
func (c Choice) String() string {
	f := c.Family
	if f == "" {
		f = "auto"
	}
	return fmt.Sprintf("RoCE v%d, %s", max(c.Version, 1), f)
}

// Candidates returns the addresses of addrs the choice looks for, in order
// of preference: IPv4 first, then global IPv6 (link-local addresses are not
// routable and never chosen), filtered by the family.
func (c Choice) Candidates(addrs []netip.Addr) []netip.Addr {
	var v4, v6 []netip.Addr
	for _, a := range addrs {
		a = a.Unmap()
		switch {
		case a.Is4():
			v4 = append(v4, a)
		case a.Is6() && !a.IsLinkLocalUnicast() && !a.IsLoopback() && !a.IsUnspecified():
			v6 = append(v6, a)
		}
	}
	switch c.Family {
	case "ipv4":
		return v4
	case "ipv6":
		return v6
	}
	return append(v4, v6...)
}

// GIDOf returns the GID the kernel adds for addr: a 16-byte address,
// v4-mapped for IPv4.
func GIDOf(addr netip.Addr) netip.Addr {
	return netip.AddrFrom16(addr.As16())
}

// Pick returns the container's own entry among entries: the lowest index
// whose GID is the first candidate address (see Choice.Candidates) that
// has one, whose type is the chosen version and, when ifname is not "",
// whose netdev is ifname. ok is false when there is none.
func Pick(entries []Entry, addrs []netip.Addr, ifname string, c Choice) (e Entry, addr netip.Addr, ok bool) {
	for _, a := range c.Candidates(addrs) {
		g := GIDOf(a)
		for _, en := range entries {
			if en.GID == g && en.Type == c.Type() && (ifname == "" || en.Ndev == ifname) {
				return en, a, true
			}
		}
	}
	return Entry{}, netip.Addr{}, false
}

// Port is one HCA port a container uses, and its own entry there.
type Port struct {
	HCA  string
	Port int
	// Ifname is the container's interface on the port's network.
	Ifname string
	// Index is the index of the container's own entry; -1 when unknown.
	Index int
	// Addr is the address of that entry.
	Addr netip.Addr
	// Table is the port's whole table when known (nil otherwise): it tells
	// whether NCCL_IB_ADDR_RANGE picks the container's entry on every port.
	Table []Entry
}

// Var is one environment variable.
type Var struct{ Name, Value string }

func (v Var) String() string { return v.Name + "=" + v.Value }

// Names of the variables Vars may set.
const (
	NCCLHCA         = "NCCL_IB_HCA"
	NCCLGIDIndex    = "NCCL_IB_GID_INDEX"
	NCCLRoCEVersion = "NCCL_IB_ROCE_VERSION_NUM"
	NCCLAddrFamily  = "NCCL_IB_ADDR_FAMILY"
	NCCLAddrRange   = "NCCL_IB_ADDR_RANGE"
	NCCLSocketIf    = "NCCL_SOCKET_IFNAME"
	UCXNetDevices   = "UCX_NET_DEVICES"
	UCXGIDIndex     = "UCX_IB_GID_INDEX"
)

// Vars returns the environment RDMA software needs to use the container's
// own entries on ports, with notes on what could not be expressed:
//
//   - NCCL_IB_HCA==hca:port[,...] (the leading "=" makes NCCL match names
//     exactly: mlx5_1 is not mlx5_10) and UCX_NET_DEVICES=hca:port[,...];
//   - NCCL_SOCKET_IFNAME==ifname[,...] (exact names too);
//   - NCCL_IB_GID_INDEX and UCX_IB_GID_INDEX when every port's index is the
//     same. Both take one index for all devices. When the indexes differ,
//     NCCL is told how to find each device's entry itself instead:
//     NCCL_IB_ROCE_VERSION_NUM, NCCL_IB_ADDR_FAMILY and NCCL_IB_ADDR_RANGE,
//     the smallest prefix holding the container's addresses, set only when
//     on every port the lowest-index entry of that version in that range is
//     the container's (NCCL takes that one); UCX_IB_GID_INDEX is left out.
func Vars(ports []Port, c Choice) (vars []Var, notes []string) {
	var hcas, ifnames []string
	seenHCA, seenIf := map[string]bool{}, map[string]bool{}
	index, same, known := -1, true, len(ports) > 0
	for _, p := range ports {
		hp := p.HCA + ":" + strconv.Itoa(max(p.Port, 1))
		if p.HCA != "" && !seenHCA[hp] {
			seenHCA[hp] = true
			hcas = append(hcas, hp)
		}
		if p.Ifname != "" && !seenIf[p.Ifname] {
			seenIf[p.Ifname] = true
			ifnames = append(ifnames, p.Ifname)
		}
		switch {
		case p.Index < 0:
			known = false
		case index < 0:
			index = p.Index
		case p.Index != index:
			same = false
		}
	}
	if len(hcas) == 0 {
		return nil, nil
	}
	list := strings.Join(hcas, ",")
	vars = append(vars, Var{NCCLHCA, "=" + list})
	switch {
	case !known:
		notes = append(notes, NCCLGIDIndex+" not known: the container's own GID entry is not in the table (yet: look again once it is RDMA-ready)")
	case same:
		vars = append(vars, Var{NCCLGIDIndex, strconv.Itoa(index)})
	default:
		fam := "AF_INET"
		if !ports[0].Addr.Unmap().Is4() {
			fam = "AF_INET6"
		}
		vars = append(vars, Var{NCCLRoCEVersion, strconv.Itoa(max(c.Version, 1))}, Var{NCCLAddrFamily, fam})
		if r, ok := safeRange(ports, c); ok {
			vars = append(vars, Var{NCCLAddrRange, r.String()})
			notes = append(notes, fmt.Sprintf("the GID indexes differ per device (%s): NCCL finds each device's own entry through %s=%s", indexes(ports), NCCLAddrRange, r))
		} else {
			notes = append(notes, fmt.Sprintf("the GID indexes differ per device (%s) and no %s picks this container's entry on every device: NCCL may pick another container's entry (set %s yourself per process)", indexes(ports), NCCLAddrRange, NCCLGIDIndex))
		}
	}
	if len(ifnames) > 0 {
		vars = append(vars, Var{NCCLSocketIf, "=" + strings.Join(ifnames, ",")})
	}
	vars = append(vars, Var{UCXNetDevices, list})
	if known && same {
		vars = append(vars, Var{UCXGIDIndex, strconv.Itoa(index)})
	} else if known {
		notes = append(notes, UCXGIDIndex+" left out: UCX takes one GID index for every device")
	}
	return vars, notes
}

func indexes(ports []Port) string {
	var s []string
	for _, p := range ports {
		s = append(s, fmt.Sprintf("%s:%d index %d", p.HCA, max(p.Port, 1), p.Index))
	}
	return strings.Join(s, ", ")
}

// safeRange returns the smallest prefix holding every port's address, when
// on every port (whose table is known) the lowest-index entry of the chosen
// version whose address lies in it is the container's own.
func safeRange(ports []Port, c Choice) (netip.Prefix, bool) {
	var r netip.Prefix
	for i, p := range ports {
		a := p.Addr.Unmap()
		if !a.IsValid() || p.Table == nil {
			return r, false
		}
		if i == 0 {
			r = netip.PrefixFrom(a, a.BitLen())
			continue
		}
		if a.BitLen() != r.Addr().BitLen() {
			return r, false
		}
		for bits := r.Bits(); bits >= 0; bits-- {
			if q, err := r.Addr().Prefix(bits); err == nil && q.Contains(a) {
				r = q
				break
			}
		}
	}
	for _, p := range ports {
		first := -1
		for _, e := range p.Table {
			if e.Type == c.Type() && r.Contains(e.GID.Unmap()) && (first < 0 || e.Index < first) {
				first = e.Index
			}
		}
		if first != p.Index {
			return r, false
		}
	}
	return r, true
}

// ReadTable reads the populated entries of a port's GID table under root
// (root/sys/class/infiniband/HCA/ports/PORT), sorted by index, and the
// number of slots. A slot reading all zeros is empty; a slot whose
// attributes cannot be read (the kernel answers EINVAL while it changes, a
// fake tree has empty files) has Type or Ndev "".
func ReadTable(root, hca string, port int) (entries []Entry, size int, err error) {
	if hca == "" || strings.ContainsAny(hca, "/\x00") || hca == "." || hca == ".." {
		return nil, 0, fmt.Errorf("RDMA device name %q is not valid", hca)
	}
	dir := PortDir(root, hca, port)
	names, err := os.ReadDir(filepath.Join(dir, "gids"))
	if err != nil {
		return nil, 0, err
	}
	buf := make([]byte, 64)
	for _, n := range names {
		i, err := strconv.Atoi(n.Name())
		if err != nil || i < 0 {
			continue
		}
		size++
		text := readSmall(filepath.Join(dir, "gids", n.Name()), buf)
		if text == "" {
			continue
		}
		g, err := netip.ParseAddr(text)
		if err != nil || g.IsUnspecified() || !g.Is6() {
			continue
		}
		entries = append(entries, Entry{
			Index: i,
			GID:   g,
			Type:  readSmall(filepath.Join(dir, "gid_attrs", "types", n.Name()), buf),
			Ndev:  readSmall(filepath.Join(dir, "gid_attrs", "ndevs", n.Name()), buf),
		})
	}
	sort.Slice(entries, func(a, b int) bool { return entries[a].Index < entries[b].Index })
	return entries, size, nil
}

// PortDir is the sysfs directory of an HCA port under root.
func PortDir(root, hca string, port int) string {
	if root == "" {
		root = "/"
	}
	return filepath.Join(root, "sys/class/infiniband", hca, "ports", strconv.Itoa(port))
}

// readSmall reads a short sysfs file, trimmed; "" when it cannot be read.
func readSmall(path string, buf []byte) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	n, err := f.Read(buf)
	if err != nil || n == 0 {
		return ""
	}
	return strings.TrimSpace(string(buf[:n]))
}
