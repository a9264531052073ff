package rdmaenv

import (
	"fmt"
	"math/rand"
	"net/netip"
	"strconv"
	"strings"
	"testing"

	"github.com/rdma-macvlan/rdma-macvlan/rdma/rdmatest"
)

// NCCL's and UCX's own choices on the real mlx5 dump: the default pair at
// 0/1, the host's 11.0.0.72 at 2/3, a container's link-local pair at 4/5,
// 10.152.0.12 at 6/7 and 10.152.0.13 at 8/9.
func TestNCCLAndUCXPickOnRealMLX5Dump(t *testing.T) {
	root := rdmatest.MLX5(t, rdmatest.RealHostMLX5())
	table, size, err := ReadTable(root, "mlx5_0", 1)
	if err != nil {
		t.Fatal(err)
	}
	p := netip.MustParsePrefix
	for _, tc := range []struct {
		name string
		auto NCCLAuto
		want int
	}{
		{"defaults: the host's v2 entry", NCCLAuto{Version: 2}, 3},
		{"RoCE v1: the host's v1 entry", NCCLAuto{Version: 1}, 2},
		{"a /32 range: that container's v2 entry", NCCLAuto{Version: 2, Range: p("10.152.0.13/32")}, 9},
		{"a /24 range: the lowest container's entry in it", NCCLAuto{Version: 2, Range: p("10.152.0.0/24")}, 7},
		{"a range with no entry: index 0", NCCLAuto{Version: 2, Range: p("192.168.0.0/16")}, 0},
		{"IPv6 with only link-local entries: index 0", NCCLAuto{Version: 2, IPv6: true}, 0},
	} {
		if got := NCCLPick(table, size, tc.auto); got != tc.want {
			t.Errorf("NCCL, %s: index %d, want %d", tc.name, got, tc.want)
		}
	}
	if got := UCXPick(table, nil); got != 3 {
		t.Errorf("UCX: index %d, want 3 (the lowest RoCE v2 IPv4 entry)", got)
	}
}

// NCCL's walk switches to the first entry of the family asked whatever its
// version: on a port with only RoCE v1 entries (mlx4) asking for v2 still
// ends on the first IPv4 entry; UCX falls back to v1 IPv4 too.
func TestNCCLPickV1OnlyPort(t *testing.T) {
	a := netip.MustParseAddr
	table := []Entry{
		{Index: 0, GID: a("fe80::202:c9ff:fe00:1"), Type: TypeV1, Ndev: "eth2"},
		{Index: 1, GID: GIDOf(a("12.12.12.12")), Type: TypeV1, Ndev: "eth2"},
		{Index: 2, GID: GIDOf(a("10.10.10.2")), Type: TypeV1, Ndev: "eth2.10"},
	}
	if got := NCCLPick(table, 128, NCCLAuto{Version: 2}); got != 1 {
		t.Errorf("NCCL: index %d, want 1", got)
	}
	if got := NCCLPick(table, 128, NCCLAuto{Version: 2, Range: netip.MustParsePrefix("10.10.10.0/24")}); got != 2 {
		t.Errorf("NCCL with a range: index %d, want 2", got)
	}
	if got := UCXPick(table, nil); got != 1 {
		t.Errorf("UCX: index %d, want 1", got)
	}
}

// rails builds the tables of a container on n rails after churn: on each
// rail's port the default pair, sometimes the host's address, other
// containers' pairs (in the rail's subnet, in another rail's, or
// elsewhere), holes, and the container's own pair among them. IPv4 only,
// mlx5 pairs (v1 then v2).
func rails(r *rand.Rand, n int) []Port {
	ports := make([]Port, n)
	adjacent := r.Intn(3) == 0
	for k := range ports {
		subnet := func(rail int) string { return fmt.Sprintf("10.%d.%d", 10+r.Intn(2), rail) }
		own := netip.MustParseAddr(fmt.Sprintf("%s.%d", subnet(k), 100+r.Intn(50)))
		switch {
		case adjacent:
			// One subnet, the container's addresses side by side: a range
			// of its own addresses only exists for 1, 2, 4 and 8 rails.
			own = netip.MustParseAddr(fmt.Sprintf("10.10.0.%d", 16+k))
		case r.Intn(4) == 0:
			// Rails in one subnet (one L2 fabric, addresses per rail).
			own = netip.MustParseAddr(fmt.Sprintf("10.10.0.%d", 10+k*20+r.Intn(20)))
		}
		table := []Entry{
			{Index: 0, GID: netip.MustParseAddr("fe80::a288:c2ff:fe5b:3ec"), Type: TypeV1, Ndev: "ens" + strconv.Itoa(k)},
			{Index: 1, GID: netip.MustParseAddr("fe80::a288:c2ff:fe5b:3ec"), Type: TypeV2, Ndev: "ens" + strconv.Itoa(k)},
		}
		next := 2
		pair := func(ip netip.Addr, ndev string) int {
			table = append(table, Entry{Index: next, GID: GIDOf(ip), Type: TypeV1, Ndev: ndev}, Entry{Index: next + 1, GID: GIDOf(ip), Type: TypeV2, Ndev: ndev})
			next += 2
			return next - 1
		}
		if r.Intn(3) == 0 {
			pair(netip.MustParseAddr(fmt.Sprintf("%s.1", subnet(k))), "ens"+strconv.Itoa(k))
		}
		index := -1
		others := r.Intn(5)
		for i := 0; i <= others; i++ {
			if i == others/2 && index < 0 {
				index = pair(own, "eth"+strconv.Itoa(k))
				continue
			}
			if r.Intn(4) == 0 {
				next += 2 // a hole another container left
				continue
			}
			var ip netip.Addr
			switch r.Intn(3) {
			case 0:
				ip = netip.MustParseAddr(fmt.Sprintf("%s.%d", subnet(k), 2+r.Intn(90)))
			case 1:
				ip = netip.MustParseAddr(fmt.Sprintf("%s.%d", subnet(r.Intn(n)), 2+r.Intn(90)))
			default:
				ip = netip.MustParseAddr(fmt.Sprintf("192.168.%d.%d", r.Intn(4), 2+r.Intn(200)))
			}
			if ip == own {
				continue
			}
			pair(ip, "eth0")
		}
		if index < 0 {
			index = pair(own, "eth"+strconv.Itoa(k))
		}
		sub, _ := own.Prefix(24)
		ports[k] = Port{HCA: "mlx5_" + strconv.Itoa(k), Port: 1, Ifname: "eth" + strconv.Itoa(k), Index: index, Addr: own, Table: table, Slots: 255,
			Subnets: []netip.Prefix{sub}}
	}
	return ports
}

// envOf is the environment the workload gets: given, then plan's variables
// not given.
func envOf(plan Plan, given map[string]string) map[string]string {
	env := map[string]string{}
	for _, v := range plan.Vars {
		env[v.Name] = v.Value
	}
	for k, v := range given {
		env[k] = v
	}
	return env
}

// ncclIndexes is what NCCL takes on each port with env.
func ncclIndexes(ports []Port, env map[string]string) []int {
	out := make([]int, len(ports))
	for i, p := range ports {
		if v, ok := env[NCCLGIDIndex]; ok {
			out[i], _ = strconv.Atoi(v)
			continue
		}
		out[i] = NCCLPick(p.Table, p.Slots, parseNCCLAuto(env[NCCLRoCEVersion], env[NCCLAddrFamily], env[NCCLAddrRange]))
	}
	return out
}

// holdsOther reports whether rng holds an address of a port's subnet that
// is none of the ports' own: counted, not listed.
func holdsOther(rng netip.Prefix, ports []Port) bool {
	for _, p := range ports {
		for _, s := range p.Subnets {
			if !s.Overlaps(rng) {
				continue
			}
			inner := rng
			if s.Bits() > rng.Bits() {
				inner = s
			}
			own := map[netip.Addr]bool{}
			for _, q := range ports {
				if inner.Contains(q.Addr) {
					own[q.Addr] = true
				}
			}
			if 1<<(32-inner.Bits()) > len(own) {
				return true
			}
		}
	}
	return false
}

// ucxSubnets is UCX_IB_ROCE_SUBNETS of env as prefixes; nil when unset.
func ucxSubnets(t *testing.T, env map[string]string) []netip.Prefix {
	v, ok := env[UCXRoCESubnets]
	if !ok {
		return nil
	}
	var out []netip.Prefix
	for _, f := range strings.Split(v, ",") {
		out = append(out, netip.MustParsePrefix(f))
	}
	return out
}

// The environment exported for 1 to 8 rails after churn, applied to NCCL's
// and UCX's own rules on every rail's table: each rail takes the
// container's own entry, or the plan says which library does not (and then
// no NCCL_IB_ADDR_RANGE that holds no neighbour's address would make NCCL
// take them on every rail). A range exported holds no address of the
// rails' subnets but the container's own: NCCL picks on every connection,
// and a neighbour may come later.
func TestVarsEveryRailTakesItsOwnEntry(t *testing.T) {
	r := rand.New(rand.NewSource(22))
	var ok, refused, viaRange, viaSubnets int
	for iter := 0; iter < 3000; iter++ {
		ports := rails(r, 1+iter%8)
		plan := Vars(ports, DefaultChoice, nil)
		env := envOf(plan, nil)
		ncclBad, ucxBad := false, false
		for _, m := range plan.Mismatch {
			ncclBad = ncclBad || strings.HasPrefix(m, "NCCL: ")
			ucxBad = ucxBad || strings.HasPrefix(m, "UCX: ")
		}
		got := ncclIndexes(ports, env)
		for i, p := range ports {
			if !ncclBad && got[i] != p.Index {
				t.Fatalf("iteration %d: NCCL with %q takes index %d on %s, not the container's %d (table %v)", iter, names(plan.Vars), got[i], p.HCA, p.Index, p.Table)
			}
			ucx := UCXPick(p.Table, ucxSubnets(t, env))
			if v, set := env[UCXGIDIndex]; set {
				ucx, _ = strconv.Atoi(v)
			}
			if !ucxBad && ucx != p.Index {
				t.Fatalf("iteration %d: UCX with %q takes index %d on %s, not the container's %d", iter, names(plan.Vars), ucx, p.HCA, p.Index)
			}
		}
		if ncclBad {
			// No range holding the container's addresses and no other
			// one would have done.
			for bits := 0; bits <= 32; bits++ {
				rng, _ := ports[0].Addr.Prefix(bits)
				if holdsOther(rng, ports) {
					continue
				}
				all := true
				for _, p := range ports {
					all = all && rng.Contains(p.Addr) && NCCLPick(p.Table, p.Slots, NCCLAuto{Version: 2, Range: rng}) == p.Index
				}
				if all {
					t.Fatalf("iteration %d: refused, yet %s takes the container's entry on every rail and holds no other address", iter, rng)
				}
			}
		}
		if v, set := env[NCCLAddrRange]; set && !ncclBad {
			if holdsOther(netip.MustParsePrefix(v), ports) {
				t.Fatalf("iteration %d: %s=%s holds a neighbour's address", iter, NCCLAddrRange, v)
			}
			viaRange++
		}
		if _, set := env[UCXRoCESubnets]; set && !ucxBad {
			viaSubnets++
		}
		if len(plan.Mismatch) == 0 {
			ok++
		} else {
			refused++
		}
	}
	// The generator must produce each case, or the test shows nothing.
	if ok < 100 || refused < 100 || viaRange < 100 || viaSubnets < 100 {
		t.Fatalf("cases: %d accepted, %d refused, %d through a range, %d through UCX's subnets: too few of one kind", ok, refused, viaRange, viaSubnets)
	}
	t.Logf("%d accepted, %d refused, %d through NCCL_IB_ADDR_RANGE, %d through UCX_IB_ROCE_SUBNETS", ok, refused, viaRange, viaSubnets)
}

// The user's own NCCL variables are kept: the search works within them,
// and a range given that misses a rail is a mismatch.
func TestVarsKeepsTheUsersNCCLVariables(t *testing.T) {
	a := netip.MustParseAddr
	e := func(i int, ip, typ string) Entry { return Entry{Index: i, GID: GIDOf(a(ip)), Type: typ, Ndev: "eth0"} }
	ports := []Port{
		{HCA: "mlx5_0", Port: 1, Ifname: "eth0", Index: 3, Addr: a("10.0.0.3"), Table: []Entry{e(2, "10.0.0.3", TypeV1), e(3, "10.0.0.3", TypeV2)},
			Subnets: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/24")}},
		{HCA: "mlx5_1", Port: 1, Ifname: "eth1", Index: 5, Addr: a("10.0.1.3"), Table: []Entry{e(4, "10.0.1.3", TypeV1), e(5, "10.0.1.3", TypeV2)},
			Subnets: []netip.Prefix{netip.MustParsePrefix("10.0.1.0/24")}},
	}
	given := map[string]string{NCCLAddrRange: "10.0.0.0/24"}
	plan := Vars(ports, DefaultChoice, func(n string) (string, bool) { v, ok := given[n]; return v, ok })
	if len(plan.Mismatch) != 1 || !strings.Contains(plan.Mismatch[0], "NCCL_IB_ADDR_RANGE=10.0.0.0/24 (given)") || !strings.Contains(plan.Mismatch[0], "on mlx5_1:1 (this container's: index 5)") {
		t.Errorf("a range given that misses mlx5_1: %q", plan.Mismatch)
	}
	// Without the range given, the one that takes both today (the /23)
	// holds every neighbour: not exported.
	if plan := Vars(ports, DefaultChoice, nil); len(plan.Mismatch) != 1 || strings.Contains(strings.Join(names(plan.Vars), " "), NCCLAddrRange) {
		t.Errorf("no range given: %q %q", names(plan.Vars), plan.Mismatch)
	}
	// NCCL_IB_GID_INDEX given: NCCL is the user's choice; UCX is still
	// checked: its own choice is 10.9.9.9's entry on mlx5_1, so it gets the
	// container's addresses as UCX_IB_ROCE_SUBNETS.
	ports[1].Table = append([]Entry{e(2, "10.9.9.9", TypeV1), e(3, "10.9.9.9", TypeV2)}, ports[1].Table...)
	given = map[string]string{NCCLGIDIndex: "7"}
	if plan := Vars(ports, DefaultChoice, func(n string) (string, bool) { v, ok := given[n]; return v, ok }); len(plan.Mismatch) != 0 ||
		!strings.Contains(strings.Join(names(plan.Vars), " "), "UCX_IB_ROCE_SUBNETS=10.0.0.3/32,10.0.1.3/32") {
		t.Errorf("NCCL_IB_GID_INDEX given: NCCL is the user's choice, UCX is set: %q %q", names(plan.Vars), plan.Mismatch)
	}
}
