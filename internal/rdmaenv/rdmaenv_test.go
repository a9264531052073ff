package rdmaenv

import (
	"net/netip"
	"reflect"
	"strings"
	"testing"

	"github.com/rdma-macvlan/rdma-macvlan/rdma/rdmatest"
)

func addrs(s ...string) []netip.Addr {
	out := make([]netip.Addr, len(s))
	for i, a := range s {
		out[i] = netip.MustParseAddr(a)
	}
	return out
}

// The real mlx5 dump: the default pair, the host's 11.0.0.72 pair at 2/3,
// two containers' net1 entries (a link-local pair at 4/5, 10.152.0.12 at
// 6/7, 10.152.0.13 at 8/9), all containers' netdevs called net1.
func TestReadTableAndPickOnRealMLX5Dump(t *testing.T) {
	root := rdmatest.MLX5(t, rdmatest.RealHostMLX5())
	table, size, err := ReadTable(root, "mlx5_0", 1)
	if err != nil {
		t.Fatal(err)
	}
	if size != 255 || len(table) != 10 {
		t.Fatalf("size %d, %d entries; want 255, 10", size, len(table))
	}
	if e := table[7]; e.Index != 7 || e.Type != TypeV2 || e.Ndev != "net1" || e.GID != GIDOf(netip.MustParseAddr("10.152.0.12")) {
		t.Fatalf("entry 7 = %+v", e)
	}
	tests := []struct {
		name   string
		addrs  []netip.Addr
		ifname string
		choice Choice
		want   int // -1: none
	}{
		{"v2 IPv4 of the second container", addrs("10.152.0.13", "fe80::1"), "net1", DefaultChoice, 9},
		{"v2 IPv4 of the first container", addrs("10.152.0.12"), "net1", DefaultChoice, 7},
		{"v1 when asked", addrs("10.152.0.12"), "net1", Choice{Version: 1}, 6},
		{"another netdev name does not match", addrs("10.152.0.12"), "eth0", DefaultChoice, -1},
		{"any netdev when ifname is empty", addrs("10.152.0.12"), "", DefaultChoice, 7},
		{"the link-local address is never chosen", addrs("fe80::a4ed:ccff:fe8b:1994"), "net1", DefaultChoice, -1},
		{"ipv6 family with no global IPv6 address", addrs("10.152.0.12"), "net1", Choice{Version: 2, Family: "ipv6"}, -1},
		{"an address not in the table", addrs("10.152.0.99"), "net1", DefaultChoice, -1},
	}
	for _, tc := range tests {
		e, _, ok := Pick(table, tc.addrs, tc.ifname, tc.choice)
		got := -1
		if ok {
			got = e.Index
		}
		if got != tc.want {
			t.Errorf("%s: index %d, want %d", tc.name, got, tc.want)
		}
	}
}

// Several containers with the same netdev name eth0 in one table: the
// address tells them apart.
func TestPickSeveralContainersSameNdev(t *testing.T) {
	var extra []rdmatest.Entry
	for i, ip := range []string{"10.0.0.2", "10.0.0.3", "10.0.0.4"} {
		extra = append(extra, rdmatest.Pair(2+2*i, rdmatest.IPv4GID(ip), "eth0")...)
	}
	root := rdmatest.MLX5(t, rdmatest.MLX5Options{Extra: extra})
	table, _, err := ReadTable(root, "mlx5_0", 1)
	if err != nil {
		t.Fatal(err)
	}
	for ip, want := range map[string]int{"10.0.0.2": 3, "10.0.0.3": 5, "10.0.0.4": 7} {
		e, _, ok := Pick(table, addrs(ip), "eth0", DefaultChoice)
		if !ok || e.Index != want {
			t.Errorf("%s: %+v %v, want index %d", ip, e, ok, want)
		}
	}
}

func TestPickIPv6AndRXE(t *testing.T) {
	root := rdmatest.RXE(t, rdmatest.RXEOptions{Extra: []rdmatest.Entry{
		{Index: 1, GID: rdmatest.IPv4GID("10.0.0.2"), Type: TypeV2, Ndev: "eth0"},
		{Index: 2, GID: "2001:0db8:0000:0000:0000:0000:0000:0002", Type: TypeV2, Ndev: "eth0"},
	}})
	table, size, err := ReadTable(root, "rxe0", 1)
	if err != nil || size != 1024 {
		t.Fatalf("size %d err %v", size, err)
	}
	both := addrs("2001:db8::2", "10.0.0.2")
	if e, _, ok := Pick(table, both, "eth0", DefaultChoice); !ok || e.Index != 1 {
		t.Errorf("auto: %+v %v, want IPv4 at 1", e, ok)
	}
	if e, _, ok := Pick(table, both, "eth0", Choice{Version: 2, Family: "ipv6"}); !ok || e.Index != 2 {
		t.Errorf("ipv6: %+v %v, want 2", e, ok)
	}
	if e, _, ok := Pick(table, addrs("2001:db8::2"), "eth0", DefaultChoice); !ok || e.Index != 2 {
		t.Errorf("IPv6-only interface: %+v %v, want 2", e, ok)
	}
	if _, _, ok := Pick(table, both, "eth0", Choice{Version: 1}); ok {
		t.Error("rxe has no RoCE v1 entries, yet one was picked")
	}
}

func TestParseChoice(t *testing.T) {
	for _, tc := range []struct {
		v, f string
		want Choice
		bad  bool
	}{
		{"", "", Choice{Version: 2}, false},
		{"1", "ipv6", Choice{Version: 1, Family: "ipv6"}, false},
		{"v2", "auto", Choice{Version: 2}, false},
		{"3", "", Choice{}, true},
		{"2", "inet", Choice{}, true},
	} {
		c, err := ParseChoice(tc.v, tc.f)
		if (err != nil) != tc.bad || (!tc.bad && c != tc.want) {
			t.Errorf("ParseChoice(%q, %q) = %+v, %v", tc.v, tc.f, c, err)
		}
	}
}

func names(vars []Var) []string {
	var s []string
	for _, v := range vars {
		s = append(s, v.String())
	}
	return s
}

func TestVars(t *testing.T) {
	a := netip.MustParseAddr
	one := []Port{{HCA: "mlx5_0", Port: 1, Ifname: "eth0", Index: 5, Addr: a("10.0.0.3")}}
	plan := Vars(one, DefaultChoice, nil)
	want := []string{"NCCL_IB_HCA==mlx5_0:1", "NCCL_IB_GID_INDEX=5", "NCCL_SOCKET_IFNAME==eth0", "UCX_NET_DEVICES=mlx5_0:1", "UCX_IB_GID_INDEX=5"}
	if !reflect.DeepEqual(names(plan.Vars), want) || len(plan.Notes) != 0 || len(plan.Mismatch) != 0 {
		t.Errorf("one port: %+v, want %q", plan, want)
	}

	same := append(one, Port{HCA: "mlx5_1", Port: 1, Ifname: "eth1", Index: 5, Addr: a("10.1.0.3")})
	plan = Vars(same, DefaultChoice, nil)
	want = []string{"NCCL_IB_HCA==mlx5_0:1,mlx5_1:1", "NCCL_IB_GID_INDEX=5", "NCCL_SOCKET_IFNAME==eth0,eth1", "UCX_NET_DEVICES=mlx5_0:1,mlx5_1:1", "UCX_IB_GID_INDEX=5"}
	if !reflect.DeepEqual(names(plan.Vars), want) {
		t.Errorf("two ports, same index: %q, want %q", names(plan.Vars), want)
	}

	unknown := []Port{{HCA: "mlx5_0", Port: 1, Ifname: "eth0", Index: -1}}
	plan = Vars(unknown, DefaultChoice, nil)
	if !reflect.DeepEqual(names(plan.Vars), []string{"NCCL_IB_HCA==mlx5_0:1", "NCCL_SOCKET_IFNAME==eth0", "UCX_NET_DEVICES=mlx5_0:1"}) || len(plan.Notes) != 1 || len(plan.Mismatch) != 0 {
		t.Errorf("unknown index: %+v", plan)
	}
}

// Two devices with different indexes. NCCL picks a GID on every
// connection, so a range is exported only when it holds no address of the
// rails' subnets but the container's own; UCX is given the container's
// addresses as UCX_IB_ROCE_SUBNETS when its own choice is another entry.
func TestVarsDifferentIndexes(t *testing.T) {
	a := netip.MustParseAddr
	sub := netip.MustParsePrefix
	e := func(i int, ip, typ string) Entry { return Entry{Index: i, GID: GIDOf(a(ip)), Type: typ, Ndev: "eth0"} }
	t0 := []Entry{e(2, "10.0.0.3", TypeV1), e(3, "10.0.0.3", TypeV2)}
	t1 := []Entry{e(2, "192.168.9.9", TypeV1), e(3, "192.168.9.9", TypeV2), e(4, "10.0.1.3", TypeV1), e(5, "10.0.1.3", TypeV2)}
	ports := []Port{
		{HCA: "mlx5_0", Port: 1, Ifname: "eth0", Index: 3, Addr: a("10.0.0.3"), Table: t0, Subnets: []netip.Prefix{sub("10.0.0.0/24")}},
		{HCA: "mlx5_1", Port: 1, Ifname: "eth1", Index: 5, Addr: a("10.0.1.3"), Table: t1, Subnets: []netip.Prefix{sub("10.0.1.0/24")}},
	}
	// 10.0.0.0/23 takes the container's entries on both tables today, but
	// holds every neighbour of both rails: a mismatch, naming one.
	plan := Vars(ports, DefaultChoice, nil)
	want := []string{"NCCL_IB_HCA==mlx5_0:1,mlx5_1:1", "NCCL_SOCKET_IFNAME==eth0,eth1", "UCX_NET_DEVICES=mlx5_0:1,mlx5_1:1", "UCX_IB_ROCE_SUBNETS=10.0.0.3/32,10.0.1.3/32"}
	if !reflect.DeepEqual(names(plan.Vars), want) || len(plan.Mismatch) != 1 ||
		!strings.Contains(plan.Mismatch[0], "NCCL: NCCL_IB_GID_INDEX takes one index for every device, and its own choice (2.21 or later) has no NCCL_IB_ADDR_RANGE holding this container's addresses and no other one: 10.0.0.0/23 also holds 10.0.0.0, an address of subnet 10.0.0.0/24") {
		t.Errorf("a range over two rails' subnets: %q %q, want %q and NCCL's mismatch", names(plan.Vars), plan.Mismatch, want)
	}
	// UCX's own choice on mlx5_1 is 192.168.9.9's entry; the note says what
	// UCX older than 1.18 takes.
	if !strings.Contains(strings.Join(plan.Notes, "\n"), "older UCX does not read it and takes index 3 (192.168.9.9 on eth0) on mlx5_1:1 (this container's: index 5)") {
		t.Errorf("UCX note: %q", plan.Notes)
	}
	// Subnets not known: no range of two addresses can be trusted.
	ports[0].Subnets, ports[1].Subnets = nil, nil
	if plan := Vars(ports, DefaultChoice, nil); len(plan.Mismatch) != 1 || !strings.Contains(plan.Mismatch[0], "the subnets of the network on mlx5_0:1 are not known") {
		t.Errorf("subnets unknown: %q", plan.Mismatch)
	}
	// Two rails in one subnet, the container's addresses side by side:
	// 10.0.0.2/31 holds them and nothing else.
	ports[0].Addr, ports[1].Addr = a("10.0.0.2"), a("10.0.0.3")
	ports[0].Subnets = []netip.Prefix{sub("10.0.0.0/24")}
	ports[1].Subnets = ports[0].Subnets
	ll := func(i int, typ string) Entry { return Entry{Index: i, GID: a("fe80::1"), Type: typ, Ndev: "ens1"} }
	ports[0].Table = []Entry{ll(0, TypeV1), ll(1, TypeV2), e(2, "10.0.0.9", TypeV2), e(3, "10.0.0.2", TypeV2)}
	ports[1].Table = []Entry{ll(0, TypeV1), ll(1, TypeV2), e(2, "10.0.0.9", TypeV2), e(4, "10.0.0.3", TypeV1), e(5, "10.0.0.3", TypeV2)}
	plan = Vars(ports, DefaultChoice, nil)
	if !strings.Contains(strings.Join(names(plan.Vars), " "), "NCCL_IB_ADDR_RANGE=10.0.0.2/31") || len(plan.Mismatch) != 0 {
		t.Errorf("a range of the container's addresses only: %q %q", names(plan.Vars), plan.Mismatch)
	}
	// The user's own UCX_IB_GID_INDEX is theirs: not checked, and no
	// UCX_IB_ROCE_SUBNETS next to it (UCX refuses both).
	given := func(n string) (string, bool) { return "3", n == UCXGIDIndex }
	if plan := Vars(ports, DefaultChoice, given); len(plan.Mismatch) != 0 || strings.Contains(strings.Join(names(plan.Vars), " "), UCXRoCESubnets) {
		t.Errorf("UCX index given: %q %q", names(plan.Vars), plan.Mismatch)
	}
	// The user's UCX_IB_ROCE_SUBNETS: no UCX_IB_GID_INDEX next to it even
	// when the indexes agree, and its choice within them is checked.
	one := ports[:1]
	given = func(n string) (string, bool) { return "10.0.0.0/24", n == UCXRoCESubnets }
	plan = Vars(one, DefaultChoice, given)
	if strings.Contains(strings.Join(names(plan.Vars), " "), UCXGIDIndex) || len(plan.Mismatch) != 1 ||
		!strings.Contains(plan.Mismatch[0], "UCX: with UCX_IB_ROCE_SUBNETS=10.0.0.0/24 (given) its own choice takes index 2 (10.0.0.9 on eth0) on mlx5_0:1 (this container's: index 3)") {
		t.Errorf("UCX subnets given: %q %q", names(plan.Vars), plan.Mismatch)
	}

	// The container's other address has an entry below its own on mlx5_1
	// (both parents on one device): the /31 takes it there, a mismatch.
	ports[1].Table = append([]Entry{e(3, "10.0.0.2", TypeV2)}, ports[1].Table...)
	plan = Vars(ports, DefaultChoice, nil)
	if strings.Contains(strings.Join(names(plan.Vars), " "), NCCLAddrRange) || len(plan.Mismatch) == 0 ||
		!strings.Contains(strings.Join(plan.Mismatch, "\n"), "NCCL_IB_ADDR_RANGE=10.0.0.2/31 takes index 3 (10.0.0.2 on eth0) on mlx5_1:1 (this container's: index 5)") {
		t.Errorf("no range: %q %q", names(plan.Vars), plan.Mismatch)
	}
	// Without the tables nothing tells a range works.
	ports[0].Table, ports[1].Table = nil, nil
	plan = Vars(ports, DefaultChoice, nil)
	if strings.Contains(strings.Join(names(plan.Vars), " "), NCCLAddrRange) || len(plan.Mismatch) == 0 {
		t.Errorf("range without tables: %q %q", names(plan.Vars), plan.Mismatch)
	}
}

// NCCL_IB_GID_INDEX=-1 asks NCCL (2.21 and later) to find the entry itself,
// on one rail too: it gets the container's own address as a /32 range,
// which follows the entry when the kernel moves it; without it, the index.
func TestVarsNCCLFindsItselfOnOneRail(t *testing.T) {
	a := netip.MustParseAddr
	e := func(i int, ip, typ string) Entry { return Entry{Index: i, GID: GIDOf(a(ip)), Type: typ, Ndev: "eth0"} }
	ports := []Port{{HCA: "mlx5_0", Port: 1, Ifname: "eth0", Index: 5, Addr: a("10.0.0.3"), Subnets: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/24")},
		Table: []Entry{e(2, "10.0.0.2", TypeV1), e(3, "10.0.0.2", TypeV2), e(4, "10.0.0.3", TypeV1), e(5, "10.0.0.3", TypeV2)}}}
	plan := Vars(ports, DefaultChoice, nil)
	if got := strings.Join(names(plan.Vars), " "); !strings.Contains(got, "NCCL_IB_GID_INDEX=5") || strings.Contains(got, NCCLAddrRange) {
		t.Errorf("one rail: %s", got)
	}
	given := func(n string) (string, bool) { return "-1", n == NCCLGIDIndex }
	plan = Vars(ports, DefaultChoice, given)
	got := strings.Join(names(plan.Vars), " ")
	for _, w := range []string{"NCCL_IB_ROCE_VERSION_NUM=2", "NCCL_IB_ADDR_FAMILY=AF_INET", "NCCL_IB_ADDR_RANGE=10.0.0.3/32"} {
		if !strings.Contains(got, w) {
			t.Errorf("NCCL_IB_GID_INDEX=-1: %s lacks %s", got, w)
		}
	}
	if strings.Contains(got, "NCCL_IB_GID_INDEX=") || len(plan.Mismatch) != 0 || !strings.Contains(strings.Join(plan.Notes, " "), "NCCL 2.20 and older do not read these") {
		t.Errorf("NCCL_IB_GID_INDEX=-1: %s %q %q", got, plan.Notes, plan.Mismatch)
	}
}

// UCX 1.21 takes a global RoCE v2 IPv6 entry before a link-local one of
// the same version, whatever their order.
func TestUCXPickPrefersGlobalIPv6(t *testing.T) {
	table := []Entry{
		{Index: 0, GID: netip.MustParseAddr("fe80::1"), Type: TypeV1},
		{Index: 1, GID: netip.MustParseAddr("fe80::1"), Type: TypeV2},
		{Index: 2, GID: netip.MustParseAddr("2001:db8::5"), Type: TypeV1},
		{Index: 3, GID: netip.MustParseAddr("2001:db8::5"), Type: TypeV2},
	}
	if got := UCXPick(table, nil); got != 3 {
		t.Errorf("UCX: index %d, want 3 (the global RoCE v2 entry)", got)
	}
	if got := UCXPick(table[:2], nil); got != 1 {
		t.Errorf("UCX with link-local entries only: index %d, want 1", got)
	}
	if got := UCXPick(table, []netip.Prefix{netip.MustParsePrefix("fe80::/64")}); got != 1 {
		t.Errorf("UCX within fe80::/64: index %d, want 1", got)
	}
}
