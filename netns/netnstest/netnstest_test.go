package netnstest_test

import (
	"errors"
	"net"
	"testing"

	"github.com/rdma-macvlan/rdma-macvlan/netns"
	"github.com/rdma-macvlan/rdma-macvlan/netns/netnstest"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// addrs lists the global addresses of name in h.
func addrs(t *testing.T, h *netns.Handle, name string) []string {
	t.Helper()
	nl, err := netlink.NewHandleAt(h.NsHandle(), unix.NETLINK_ROUTE)
	if err != nil {
		t.Fatal(err)
	}
	defer nl.Close()
	l, err := nl.LinkByName(name)
	if err != nil {
		t.Fatal(err)
	}
	as, err := nl.AddrList(l, netlink.FAMILY_V4)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, a := range as {
		out = append(out, a.IPNet.String())
	}
	return out
}

// MoveInto and MoveBack do to a link what libnetwork does at Join and
// Leave: into the container renamed, with its MAC and addresses, up; back
// under its own name.
func TestPrivilegedMoveIntoAndBack(t *testing.T) {
	host, ctr := netnstest.New(t), netnstest.New(t)
	if err := netnstest.CreateVeth(host, "p0", "p0peer", 1500); err != nil {
		t.Fatal(err)
	}
	if _, err := host.CreateMacvlan(netns.MacvlanSpec{Name: "mvmove", Parent: "p0", Mode: "bridge"}); err != nil {
		t.Fatal(err)
	}
	mac, _ := net.ParseMAC("02:42:0a:00:00:09")
	_, ipnet, _ := net.ParseCIDR("10.66.0.9/24")
	ipnet.IP = net.ParseIP("10.66.0.9").To4()
	if err := netnstest.MoveInto(host, ctr, "mvmove", "eth0", mac, ipnet); err != nil {
		t.Fatal(err)
	}
	if _, err := host.LinkByName("mvmove"); !errors.Is(err, netns.ErrLinkNotFound) {
		t.Fatalf("mvmove still in the host: %v", err)
	}
	in, err := ctr.LinkByName("eth0")
	if err != nil || !in.Up || in.MAC.String() != mac.String() {
		t.Fatalf("eth0 in the container: %+v, %v; want up with MAC %s", in, err, mac)
	}
	if got := addrs(t, ctr, "eth0"); len(got) != 1 || got[0] != "10.66.0.9/24" {
		t.Fatalf("eth0 addresses %v, want [10.66.0.9/24]", got)
	}

	if err := netnstest.MoveBack(ctr, host, "eth0", "mvmove"); err != nil {
		t.Fatal(err)
	}
	// Back under its own name (that it is down and without addresses the
	// kernel sees to: a move between namespaces closes the link and
	// flushes its addresses).
	if _, err := host.LinkByName("mvmove"); err != nil {
		t.Fatalf("mvmove back in the host: %v", err)
	}
	if _, err := ctr.LinkByName("eth0"); !errors.Is(err, netns.ErrLinkNotFound) {
		t.Fatalf("eth0 still in the container: %v", err)
	}
}

// SetMTU changes a link's MTU; CreateTun makes a layer-3 device (not
// Ethernet) where it is asked.
func TestPrivilegedSetMTUAndTun(t *testing.T) {
	h := netnstest.New(t)
	if err := netnstest.CreateVeth(h, "p0", "p0peer", 1500); err != nil {
		t.Fatal(err)
	}
	if err := netnstest.SetMTU(h, "p0", 1600); err != nil {
		t.Fatal(err)
	}
	if l, err := h.LinkByName("p0"); err != nil || l.MTU != 1600 {
		t.Fatalf("p0 after SetMTU 1600: %+v, %v", l, err)
	}
	err := netnstest.CreateTun(h, "tunx")
	if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENODEV) {
		t.Skipf("SKIP the TUN half: no /dev/net/tun here (%v)", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	l, err := h.LinkByName("tunx")
	if err != nil || l.Ethernet() || l.Kind != "tuntap" {
		t.Fatalf("tunx: %+v, %v; want a tuntap link that is not Ethernet", l, err)
	}
	cur, err := netns.Current()
	if err != nil {
		t.Fatal(err)
	}
	defer cur.Close()
	if _, err := cur.LinkByName("tunx"); !errors.Is(err, netns.ErrLinkNotFound) {
		t.Fatalf("tunx appeared in the test's own namespace: %v", err)
	}
}
