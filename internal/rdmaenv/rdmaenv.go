// Package rdmaenv holds what the rdma-exec helper and `docker rdma inspect`
// must agree on: which GID entry of a container is its own (Pick), and the
// environment NCCL and UCX need to use it (Vars). It also reads a port's GID
// table from sysfs (ReadTable: the one reader of whole entries, which the
// daemon and docker rdma use through rdma.Sysfs.GIDs) and refuses what
// cannot be an RDMA device name (CheckDeviceName). It uses only small parts of the standard library,
// so that the static helper built from it stays small.
package rdmaenv

import (
	"cmp"
	"errors"
	"fmt"
	"net/netip"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/rdma-macvlan/rdma-macvlan/internal/sysattr"
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
	// Table is the port's whole table when known (nil otherwise), and
	// Slots its size (0 when not known): they tell which entry NCCL and UCX
	// take when no index is given.
	Table []Entry
	Slots int
	// QoS is what the port's network asks workloads to send with.
	QoS QoS
	// Subnets are the subnets of the port's network; nil when not known.
	// Every address another container (or the host) may bring to the
	// port's table later is taken to be in one of them.
	Subnets []netip.Prefix
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
	UCXRoCESubnets  = "UCX_IB_ROCE_SUBNETS"
)

// Lookup reads a variable already in the container's environment (set
// with docker run -e, --env-file or the image's ENV); nil means none is.
type Lookup func(name string) (string, bool)

func (l Lookup) get(name string) (string, bool) {
	if l == nil {
		return "", false
	}
	return l(name)
}

// Plan is the environment RDMA software needs to use a container's own
// entries on its ports.
type Plan struct {
	// Vars are the variables to export; a caller keeps any already set.
	Vars []Var
	// Notes say what the variables cannot express.
	Notes []string
	// Mismatch is not empty when NCCL or UCX, with the environment the
	// workload gets (the variables already set, then Vars), would take
	// another entry than the container's own on some port: one line per
	// library, naming the ports, the indexes and what it would take.
	Mismatch []string
	// QoSConflict is not empty when the ports' networks ask for different
	// traffic classes or service levels (see QoSVars).
	QoSConflict []string
}

// Vars returns the environment RDMA software needs to use the container's
// own entries on ports, given the variables already set (kept as they are):
//
//   - NCCL_IB_HCA==hca:port[,...] (the leading "=" makes NCCL match names
//     exactly: mlx5_1 is not mlx5_10) and UCX_NET_DEVICES=hca:port[,...],
//     every port of the container;
//   - NCCL_SOCKET_IFNAME==ifname[,...] (exact names too);
//   - NCCL_IB_GID_INDEX and UCX_IB_GID_INDEX when every port's index is the
//     same: both take one index for all devices;
//   - NCCL_IB_TC, UCX_IB_TRAFFIC_CLASS, NCCL_IB_SL and UCX_IB_SL from the
//     ports' networks (see QoSVars).
//
// When the indexes differ (or NCCL_IB_GID_INDEX=-1 is given: find it
// yourself), NCCL (2.21 and later) is told how to find each device's entry
// itself: NCCL_IB_ROCE_VERSION_NUM, NCCL_IB_ADDR_FAMILY and
// NCCL_IB_ADDR_RANGE, the most specific prefix holding the container's
// addresses with which NCCL's own rule (NCCLPick) takes the container's
// entry on every port. NCCL applies that rule on every connection, for the
// job's whole life, so a range is taken only when it holds no address of
// the ports' subnets but the container's own: an entry a neighbour brings
// later cannot be taken instead. UCX gets no index when its own rule
// (UCXPick) already takes the container's entries, else UCX_IB_ROCE_SUBNETS
// with the container's addresses (UCX 1.18 and later; UCX refuses it next
// to UCX_IB_GID_INDEX). When no setting does, Plan.Mismatch says so. A
// library whose GID index variable is already set is the user's choice and
// is not checked.
func Vars(ports []Port, c Choice, given Lookup) Plan {
	var plan Plan
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
		return plan
	}
	list := strings.Join(hcas, ",")
	plan.Vars = append(plan.Vars, Var{NCCLHCA, "=" + list})
	_, ncclGiven := givenIndex(given, NCCLGIDIndex)
	ncclSelf := findsItself(given)
	_, ucxGiven := givenIndex(given, UCXGIDIndex)
	switch {
	case !known:
		plan.Notes = append(plan.Notes, NCCLGIDIndex+" not known: the container's own GID entry is not in the table (yet: look again once it is RDMA-ready)")
	case same && !ncclSelf:
		plan.Vars = append(plan.Vars, Var{NCCLGIDIndex, strconv.Itoa(index)})
	case ncclGiven:
		plan.Notes = append(plan.Notes, fmt.Sprintf("the GID indexes differ per device (%s): NCCL uses the %s given", indexes(ports), NCCLGIDIndex))
	default:
		auto, found, tried := ncclSetting(ports, c, given)
		if found {
			plan.Vars = append(plan.Vars, Var{NCCLRoCEVersion, strconv.Itoa(auto.Version)}, Var{NCCLAddrFamily, familyOf6(auto.IPv6)})
			if auto.Range.IsValid() {
				plan.Vars = append(plan.Vars, Var{NCCLAddrRange, auto.Range.String()})
			}
			why := fmt.Sprintf("the GID indexes differ per device (%s)", indexes(ports))
			if same {
				why = NCCLGIDIndex + "=-1 given"
			}
			plan.Notes = append(plan.Notes, fmt.Sprintf("%s: NCCL (2.21 or later) finds each device's own entry itself, on every connection, with %s, and follows it when the kernel moves it (a bond failover, a device reset); NCCL 2.20 and older do not read these and need %s", why, describeAuto(auto), NCCLGIDIndex))
		} else {
			plan.Mismatch = append(plan.Mismatch, fmt.Sprintf("NCCL: %s takes one index for every device, and its own choice (2.21 or later) %s",
				NCCLGIDIndex, tried))
		}
	}
	if len(ifnames) > 0 {
		plan.Vars = append(plan.Vars, Var{NCCLSocketIf, "=" + strings.Join(ifnames, ",")})
	}
	plan.Vars = append(plan.Vars, Var{UCXNetDevices, list})
	subnets, subnetsGiven := given.get(UCXRoCESubnets)
	switch {
	case !known:
	case subnetsGiven:
		// UCX refuses UCX_IB_GID_INDEX next to it: its own choice, within
		// the subnets given, is checked.
		if ucxGiven {
			plan.Mismatch = append(plan.Mismatch, fmt.Sprintf("UCX: %s and %s are both given, and UCX refuses to start with both (set one)", UCXGIDIndex, UCXRoCESubnets))
		} else if subs, ok := parseUCXSubnets(subnets); !ok {
			plan.Notes = append(plan.Notes, fmt.Sprintf("%s=%s given: not checked (only a list of prefixes is)", UCXRoCESubnets, subnets))
		} else if wrong := ucxWrong(ports, subs); wrong != "" {
			plan.Mismatch = append(plan.Mismatch, fmt.Sprintf("UCX: with %s=%s (given) its own choice takes %s", UCXRoCESubnets, subnets, wrong))
		}
	case same:
		plan.Vars = append(plan.Vars, Var{UCXGIDIndex, strconv.Itoa(index)})
	case ucxGiven:
	default:
		own := ownPrefixes(ports)
		switch wrong, wrongOwn := ucxWrong(ports, nil), ucxWrong(ports, own); {
		case wrong == "":
			plan.Notes = append(plan.Notes, UCXGIDIndex+" left out: UCX's own choice is this container's entry on every device")
		case wrongOwn == "":
			plan.Vars = append(plan.Vars, Var{UCXRoCESubnets, prefixList(own)})
			plan.Notes = append(plan.Notes, fmt.Sprintf("the GID indexes differ per device (%s): UCX (1.18 or later) takes this container's own entry on every device with %s=%s; older UCX does not read it and takes %s",
				indexes(ports), UCXRoCESubnets, prefixList(own), wrong))
		default:
			plan.Mismatch = append(plan.Mismatch, fmt.Sprintf("UCX: %s takes one index for every device, and its own choice takes %s, even within %s=%s: %s",
				UCXGIDIndex, wrong, UCXRoCESubnets, prefixList(own), wrongOwn))
		}
	}
	qos := make([]QoS, 0, len(ports))
	for _, p := range ports {
		qos = append(qos, p.QoS)
	}
	q := QoSVars(qos, given)
	plan.Vars = append(plan.Vars, q.Vars...)
	plan.Notes = append(plan.Notes, q.Notes...)
	plan.QoSConflict = q.Conflict
	return plan
}

// findsItself reports whether NCCL_IB_GID_INDEX=-1 is given: NCCL (2.21
// and later) is asked to find the entry itself.
func findsItself(given Lookup) bool {
	v, ok := given.get(NCCLGIDIndex)
	return ok && strings.TrimSpace(v) == "-1"
}

// givenIndex reports whether a GID index variable is set to an index (-1
// is NCCL's "find it yourself", as if unset).
func givenIndex(given Lookup, name string) (string, bool) {
	v, ok := given.get(name)
	if !ok || strings.TrimSpace(v) == "" || strings.TrimSpace(v) == "-1" {
		return "", false
	}
	return v, true
}

// ncclSetting searches the settings of NCCL's own choice for one that
// takes the container's entry on every port: the RoCE version and family
// given (else the choice's and the ports' addresses'), and the range given,
// else each prefix holding every port's address, most specific first. When
// none does, tried says what NCCL would take with the most specific one.
func ncclSetting(ports []Port, c Choice, given Lookup) (auto NCCLAuto, found bool, tried string) {
	version, hasVersion := given.get(NCCLRoCEVersion)
	family, hasFamily := given.get(NCCLAddrFamily)
	rng, hasRange := given.get(NCCLAddrRange)
	if !hasVersion {
		version = strconv.Itoa(max(c.Version, 1))
	}
	if !hasFamily {
		family = familyOf6(ports[0].Addr.IsValid() && !ports[0].Addr.Unmap().Is4())
	}
	base := parseNCCLAuto(version, family, "")
	var candidates []NCCLAuto
	switch {
	case hasRange:
		candidates = append(candidates, parseNCCLAuto(version, family, rng))
	default:
		// No range holds every address (NCCL's default): not a candidate.
		var unsafe string
		for _, r := range coveringPrefixes(ports) {
			if why := holdsOthers(r, ports); why != "" {
				unsafe = cmp.Or(unsafe, why)
				continue
			}
			a := base
			a.Range = r
			candidates = append(candidates, a)
		}
		if len(candidates) == 0 {
			return base, false, fmt.Sprintf("has no %s holding this container's addresses and no other one: %s (NCCL picks a GID on every connection, so it would take a neighbour's entry that comes before this container's)",
				NCCLAddrRange, cmp.Or(unsafe, "the rails' addresses are of two families"))
		}
	}
	for _, p := range ports {
		if p.Table == nil {
			return base, false, "cannot be checked: the GID tables were not read"
		}
	}
	for _, a := range candidates {
		if wrong := ncclWrong(ports, a); wrong == "" {
			return a, true, ""
		}
	}
	first := candidates[0]
	var set []string
	for _, n := range []string{NCCLRoCEVersion, NCCLAddrFamily, NCCLAddrRange} {
		if v, ok := given.get(n); ok {
			set = append(set, n+"="+v+" (given)")
		}
	}
	how := describeAuto(first)
	if len(set) > 0 {
		how += "; " + strings.Join(set, ", ")
	}
	return base, false, fmt.Sprintf("with %s takes %s", how, ncclWrong(ports, first))
}

// coveringPrefixes returns the prefixes that hold every port's address,
// most specific first; none when the addresses are of two families.
func coveringPrefixes(ports []Port) []netip.Prefix {
	var r netip.Prefix
	for i, p := range ports {
		a := p.Addr.Unmap()
		if !a.IsValid() {
			return nil
		}
		if i == 0 {
			r = netip.PrefixFrom(a, a.BitLen())
			continue
		}
		if a.BitLen() != r.Addr().BitLen() {
			return nil
		}
		for bits := r.Bits(); bits >= 0; bits-- {
			if q, err := r.Addr().Prefix(bits); err == nil && q.Contains(a) {
				r = q
				break
			}
		}
	}
	var out []netip.Prefix
	for bits := r.Bits(); bits >= 0; bits-- {
		q, _ := r.Addr().Prefix(bits)
		out = append(out, q)
	}
	return out
}

// holdsOthers says why range r holds an address of the ports' subnets
// other than the container's own ones (ports' Addr); "" when it holds none.
// A port whose subnets are not known makes every range of more than one
// address suspect.
func holdsOthers(r netip.Prefix, ports []Port) string {
	own := map[netip.Addr]bool{}
	for _, p := range ports {
		own[p.Addr.Unmap()] = true
	}
	if _, ok := otherIn(r, own); !ok {
		return ""
	}
	for _, p := range ports {
		if p.Subnets == nil {
			return fmt.Sprintf("%s holds more than this container's addresses, and the subnets of the network on %s:%d are not known", r, p.HCA, max(p.Port, 1))
		}
		for _, s := range p.Subnets {
			s = s.Masked()
			if s.Addr().BitLen() != r.Addr().BitLen() || !s.Overlaps(r) {
				continue
			}
			inner := r
			if s.Bits() > r.Bits() {
				inner = s
			}
			if x, ok := otherIn(inner, own); ok {
				return fmt.Sprintf("%s also holds %s, an address of subnet %s", r, x, s)
			}
		}
	}
	return ""
}

// otherIn returns an address of p that is not in own, if p has one. Of
// p's first len(own)+1 addresses one is not in own, if p has that many.
func otherIn(p netip.Prefix, own map[netip.Addr]bool) (netip.Addr, bool) {
	a := p.Masked().Addr()
	for range len(own) + 1 {
		if !a.IsValid() || !p.Contains(a) {
			return netip.Addr{}, false
		}
		if !own[a] {
			return a, true
		}
		a = a.Next()
	}
	return netip.Addr{}, false
}

// ownPrefixes are the ports' addresses as single-address prefixes, once
// each: UCX_IB_ROCE_SUBNETS that allows the container's own entries only.
func ownPrefixes(ports []Port) []netip.Prefix {
	var out []netip.Prefix
	for _, p := range ports {
		a := p.Addr.Unmap()
		if !a.IsValid() {
			continue
		}
		if q := netip.PrefixFrom(a, a.BitLen()); !slices.Contains(out, q) {
			out = append(out, q)
		}
	}
	return out
}

func prefixList(ps []netip.Prefix) string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = p.String()
	}
	return strings.Join(s, ",")
}

// ncclWrong names the ports where NCCL's own choice with a is not the
// container's entry, and what it takes there; "" when it is on every port.
func ncclWrong(ports []Port, a NCCLAuto) string {
	var wrong []string
	for _, p := range ports {
		if got := NCCLPick(p.Table, p.Slots, a); got != p.Index {
			wrong = append(wrong, fmt.Sprintf("%s on %s:%d (this container's: index %d)", describeEntry(p.Table, got), p.HCA, max(p.Port, 1), p.Index))
		}
	}
	return strings.Join(wrong, ", ")
}

// ucxWrong is ncclWrong for UCX's own choice within subnets (nil: all).
func ucxWrong(ports []Port, subnets []netip.Prefix) string {
	var wrong []string
	for _, p := range ports {
		if p.Table == nil {
			return "an entry that cannot be checked (the GID tables were not read)"
		}
		if got := UCXPick(p.Table, subnets); got != p.Index {
			wrong = append(wrong, fmt.Sprintf("%s on %s:%d (this container's: index %d)", describeEntry(p.Table, got), p.HCA, max(p.Port, 1), p.Index))
		}
	}
	return strings.Join(wrong, ", ")
}

// describeEntry names an entry of a table: its index, address and netdev.
func describeEntry(table []Entry, index int) string {
	for _, e := range table {
		if e.Index == index {
			s := fmt.Sprintf("index %d (%s", index, e.GID.Unmap())
			if e.Ndev != "" {
				s += " on " + e.Ndev
			}
			return s + ")"
		}
	}
	return fmt.Sprintf("index %d (empty)", index)
}

func describeAuto(a NCCLAuto) string {
	s := fmt.Sprintf("%s=%d %s=%s", NCCLRoCEVersion, a.Version, NCCLAddrFamily, familyOf6(a.IPv6))
	if a.Range.IsValid() {
		s += " " + NCCLAddrRange + "=" + a.Range.String()
	}
	return s
}

func indexes(ports []Port) string {
	var s []string
	for _, p := range ports {
		s = append(s, fmt.Sprintf("%s:%d index %d", p.HCA, max(p.Port, 1), p.Index))
	}
	return strings.Join(s, ", ")
}

// ReadTable reads the populated entries of a port's GID table under root
// (root/sys/class/infiniband/HCA/ports/PORT), sorted by index, and the
// number of slots. A slot reading all zeros is empty; a slot whose
// attributes cannot be read (the kernel answers EINVAL while it changes, a
// fake tree has empty files) has Type or Ndev "".
func ReadTable(root, hca string, port int) (entries []Entry, size int, err error) {
	if err := CheckDeviceName(hca); err != nil {
		return nil, 0, err
	}
	dir := PortDir(root, hca, port)
	names, err := sysattr.ReadDir(filepath.Join(dir, "gids"))
	if err != nil {
		return nil, 0, err
	}
	buf := make([]byte, 64)
	for _, name := range names {
		i, err := strconv.Atoi(name)
		if err != nil || i < 0 {
			continue
		}
		size++
		text := readSmall(filepath.Join(dir, "gids", name), buf)
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
			Type:  readSmall(filepath.Join(dir, "gid_attrs", "types", name), buf),
			Ndev:  readSmall(filepath.Join(dir, "gid_attrs", "ndevs", name), buf),
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

// readSmall reads a short sysfs attribute into buf, trimmed; "" when it
// cannot be read or is not an attribute (see sysattr.Read).
func readSmall(path string, buf []byte) string {
	v, err := sysattr.Read(path, buf)
	if err != nil {
		return ""
	}
	return v
}

// MaxDeviceNameLen is the longest RDMA device name the kernel takes
// (IB_DEVICE_NAME_MAX, 64, less the terminating NUL).
const MaxDeviceNameLen = 63

// CheckDeviceName refuses what cannot be an RDMA device name, before it is
// joined to a sysfs path: a name is 1 to 63 bytes of printable characters,
// without "/", and not "." or "..".
func CheckDeviceName(name string) error {
	ok := name != "" && len(name) <= MaxDeviceNameLen && name != "." && name != ".." &&
		!strings.Contains(name, "/") && utf8.ValidString(name)
	for _, r := range name {
		ok = ok && unicode.IsPrint(r)
	}
	if !ok {
		return fmt.Errorf("RDMA device name %q is not valid: a name is 1 to %d bytes of printable characters, without \"/\", and not \".\" or \"..\" (the names are listed by: rdma dev)",
			name, MaxDeviceNameLen)
	}
	return nil
}
