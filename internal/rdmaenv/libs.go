package rdmaenv

import (
	"net/netip"
	"strconv"
	"strings"
)

// This file restates, on a port's table as sysfs shows it, how NCCL and
// UCX pick a GID index when none is given, so that the environment exported
// can be checked against what those libraries will do with it.

// NCCLAuto says how NCCL (2.21 and later) is told to find an entry itself:
// NCCL_IB_ROCE_VERSION_NUM, NCCL_IB_ADDR_FAMILY and NCCL_IB_ADDR_RANGE.
type NCCLAuto struct {
	// Version is the RoCE version asked (NCCL's default 2).
	Version int
	// IPv6 asks for AF_INET6 entries (NCCL's default is AF_INET).
	IPv6 bool
	// Range is NCCL_IB_ADDR_RANGE; the zero Prefix when unset (or when
	// NCCL could not parse it: it then takes every address).
	Range netip.Prefix
}

// NCCLPick returns the index NCCL takes on a port whose table is entries
// (populated slots; slots is the table's size, 0 when not known) when
// NCCL_IB_GID_INDEX is not set. NCCL starts at index 0 and walks the
// table: a candidate of the family asked, inside the range, replaces the
// current one when the current one is of the other family; a candidate of
// the same family replaces it when it is a configured, non-link-local
// address of the version asked and the current one is of another version or
// not such an address. The result is the lowest-index entry of that
// version, family and range when there is one.
func NCCLPick(entries []Entry, slots int, a NCCLAuto) int {
	bySlot := map[int]Entry{}
	last := 0
	for _, e := range entries {
		bySlot[e.Index] = e
		last = max(last, e.Index)
	}
	if slots <= last {
		slots = last + 1
	}
	want := familyOf6(a.IPv6)
	cur := 0
	for i := 1; i < slots; i++ {
		c, g := bySlot[i], bySlot[cur]
		cf, gf := gidFamily(c.GID), gidFamily(g.GID)
		inRange := !a.Range.IsValid() || (cf == want && a.Range.Contains(c.GID.Unmap()))
		if cf != gf && cf == want && inRange {
			cur = i
			continue
		}
		if cf != want || !usableGID(c.GID) || !inRange {
			continue
		}
		if (versionOf(g.Type) != versionOf(c.Type) || !usableGID(g.GID)) && versionOf(c.Type) == a.Version {
			cur = i
		}
	}
	return cur
}

// UCXPick returns the index UCX takes on a port when UCX_IB_GID_INDEX is
// not set: the lowest-index RoCE v2 IPv4 entry, else RoCE v2 IPv6, else
// RoCE v1 IPv4, else RoCE v1 IPv6 (each also has to accept an address
// handle, which every populated entry does here), else index 0. Among the
// IPv6 entries of one version a global address goes before a link-local
// one, as UCX 1.21 does (older UCX takes the lowest index). subnets is
// UCX_IB_ROCE_SUBNETS (UCX 1.18 and later), nil when unset: an entry whose
// address is in none of them is passed over.
func UCXPick(entries []Entry, subnets []netip.Prefix) int {
	allowed := func(g netip.Addr) bool {
		if subnets == nil {
			return true
		}
		for _, s := range subnets {
			if s.Contains(g.Unmap()) {
				return true
			}
		}
		return false
	}
	for _, p := range []struct {
		version int
		ipv6    bool
	}{{2, false}, {2, true}, {1, false}, {1, true}} {
		best, bestLocal := -1, -1
		for _, e := range entries {
			if !e.GID.IsValid() || e.GID.IsUnspecified() || versionOf(e.Type) != p.version || gidFamily(e.GID) != familyOf6(p.ipv6) || !allowed(e.GID) {
				continue
			}
			if !usableGID(e.GID) {
				if bestLocal < 0 || e.Index < bestLocal {
					bestLocal = e.Index
				}
				continue
			}
			if best < 0 || e.Index < best {
				best = e.Index
			}
		}
		if best >= 0 {
			return best
		}
		if bestLocal >= 0 {
			return bestLocal
		}
	}
	return 0
}

// parseUCXSubnets reads UCX_IB_ROCE_SUBNETS as an allow-list of prefixes;
// ok is false for what this model does not follow (an exclude list, "^",
// or an entry that is not a prefix), which is then not checked.
func parseUCXSubnets(v string) (subnets []netip.Prefix, ok bool) {
	v = strings.TrimSpace(v)
	if strings.EqualFold(v, "all") {
		return nil, true
	}
	if v == "" || strings.HasPrefix(v, "^") {
		return nil, false
	}
	for _, f := range strings.Split(v, ",") {
		p, err := netip.ParsePrefix(strings.TrimSpace(f))
		if err != nil {
			return nil, false
		}
		subnets = append(subnets, p.Masked())
	}
	return subnets, true
}

const (
	afInet  = "AF_INET"
	afInet6 = "AF_INET6"
)

func familyOf6(ipv6 bool) string {
	if ipv6 {
		return afInet6
	}
	return afInet
}

// gidFamily is the address family NCCL and UCX see in a GID: AF_INET for
// a v4-mapped address, else AF_INET6 (an empty slot reads as ::, so
// AF_INET6).
func gidFamily(g netip.Addr) string {
	if g.Is4In6() || g.Is4() {
		return afInet
	}
	return afInet6
}

// usableGID is NCCL's test of an entry it may take: configured (neither
// :: nor fe80:: alone) and not link-local.
func usableGID(g netip.Addr) bool {
	if !g.IsValid() || g.IsUnspecified() {
		return false
	}
	b := g.As16()
	linkLocal := b[0] == 0xfe && b[1] == 0x80 && b[2] == 0 && b[3] == 0 && b[4] == 0 && b[5] == 0 && b[6] == 0 && b[7] == 0
	return !linkLocal
}

// versionOf is the RoCE version of a gid_attrs/types text; 0 when not known.
func versionOf(typ string) int {
	switch {
	case strings.HasPrefix(typ, "IB/RoCE v1"), strings.HasPrefix(typ, "RoCE v1"):
		return 1
	case strings.HasPrefix(typ, "RoCE v2"):
		return 2
	}
	return 0
}

// parseNCCLAuto reads NCCL's own variables as NCCL does: a version other
// than 1 or 2 and an unknown family fall back to NCCL's defaults, and a
// range that does not parse in the family is no range.
func parseNCCLAuto(version, family, rng string) NCCLAuto {
	a := NCCLAuto{Version: 2}
	if v, err := strconv.Atoi(strings.TrimSpace(version)); err == nil && (v == 1 || v == 2) {
		a.Version = v
	}
	a.IPv6 = strings.TrimSpace(family) == afInet6
	if p, err := netip.ParsePrefix(strings.TrimSpace(rng)); err == nil && p.Addr().Is6() == a.IPv6 {
		a.Range = p.Masked()
	}
	return a
}
