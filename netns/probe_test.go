package netns_test

import (
	"context"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/rdma-macvlan/rdma-macvlan/netns"
	"github.com/rdma-macvlan/rdma-macvlan/netns/netnstest"
)

func cidr(t *testing.T, s string) *net.IPNet {
	t.Helper()
	ip, n, err := net.ParseCIDR(s)
	if err != nil {
		t.Fatal(err)
	}
	n.IP = ip
	return n
}

func probe(t *testing.T, h *netns.Handle, addr string, own net.HardwareAddr) []string {
	t.Helper()
	macs, err := h.ProbeAddress(context.Background(), "p0", netip.MustParseAddr(addr), own, netns.DefaultProbe)
	if err != nil {
		t.Fatalf("probe %s: %v", addr, err)
	}
	var out []string
	for _, m := range macs {
		out = append(out, m.String())
	}
	return out
}

var (
	otherMAC = mustMAC("02:42:0a:09:00:05")
	childMAC = mustMAC("02:42:0a:09:00:07")
)

// segment is a parent p0 in a host namespace with, on its segment, another
// host (eth0, 10.9.0.5 and fd09::5, otherMAC) and a macvlan child of p0 in
// a namespace of its own (10.9.0.7 and fd09::7, childMAC).
func segment(t *testing.T) (host, other *netns.Handle) {
	t.Helper()
	host = netnstest.NewHost(t)
	other = netnstest.New(t)
	child := netnstest.New(t)
	if err := netnstest.MoveInto(host, other, "p0peer", "eth0", otherMAC, cidr(t, "10.9.0.5/24"), cidr(t, "fd09::5/64")); err != nil {
		t.Fatal(err)
	}
	if _, err := host.CreateMacvlan(netns.MacvlanSpec{Name: "mv0", Parent: "p0", Mode: "bridge", MAC: childMAC}); err != nil {
		t.Fatal(err)
	}
	if err := netnstest.MoveInto(host, child, "mv0", "eth0", nil, cidr(t, "10.9.0.7/24"), cidr(t, "fd09::7/64")); err != nil {
		t.Fatal(err)
	}
	return host, other
}

func mustMAC(s string) net.HardwareAddr {
	m, err := net.ParseMAC(s)
	if err != nil {
		panic(err)
	}
	return m
}

// ProbeAddress finds, through the real kernel, another host on the parent's
// segment that holds an address (it answers the ARP probe or the duplicate
// address detection), and only that: not an address nobody holds, not the
// endpoint's own MAC, not a macvlan child of the parent itself, which never
// sees what its parent sends.
func TestPrivilegedProbeAddress(t *testing.T) {
	host, _ := segment(t)

	if got := probe(t, host, "10.9.0.5", nil); len(got) != 1 || got[0] != otherMAC.String() {
		t.Errorf("probe of an address the other host holds: %v, want [%s]", got, otherMAC)
	}
	if got := probe(t, host, "10.9.0.5", otherMAC); len(got) != 0 {
		t.Errorf("probe answered by the endpoint's own MAC: %v, want none", got)
	}
	if got := probe(t, host, "10.9.0.6", nil); len(got) != 0 {
		t.Errorf("probe of an address no one holds: %v, want none", got)
	}
	if got := probe(t, host, "10.9.0.7", nil); len(got) != 0 {
		t.Errorf("probe of the parent's own macvlan child's address: %v, want none", got)
	}
	// (The other side's address skipped duplicate address detection, as a
	// container's does: a probe during it would make it give the address
	// up.)
	if got := probe(t, host, "fd09::5", nil); len(got) != 1 || got[0] != otherMAC.String() {
		t.Errorf("IPv6 probe of an address the other host holds: %v, want [%s]", got, otherMAC)
	}
	if got := probe(t, host, "fd09::6", nil); len(got) != 0 {
		t.Errorf("IPv6 probe of an address no one holds: %v, want none", got)
	}
	if got := probe(t, host, "fd09::7", nil); len(got) != 0 {
		t.Errorf("IPv6 probe of the parent's own macvlan child's address: %v, want none", got)
	}

	start := time.Now()
	probe(t, host, "10.9.0.6", nil)
	if took := time.Since(start); took < netns.DefaultProbe.Duration() {
		t.Errorf("a probe nobody answers took %v, less than its %v", took, netns.DefaultProbe.Duration())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start = time.Now()
	if _, err := host.ProbeAddress(ctx, "p0", netip.MustParseAddr("10.9.0.6"), nil, netns.DefaultProbe); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > netns.DefaultProbe.Duration() {
		t.Errorf("a probe whose context ends after 50ms took %v", took)
	}
	if _, err := host.ProbeAddress(context.Background(), "nope", netip.MustParseAddr("10.9.0.6"), nil, netns.DefaultProbe); err == nil {
		t.Error("probe on a missing link: no error")
	}
}

// WatchClaims sees, through the real kernel, another host's probes for the
// address of a macvlan child of the watched parent (ARP, and IPv6 duplicate
// address detection to the child's solicited-node group) and its
// broadcasts, and not frames naming the parent's own MAC nor frames to a
// device on top of the parent.
func TestPrivilegedWatchClaims(t *testing.T) {
	host, other := segment(t)
	claims := make(chan netns.Claim, 64)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- host.WatchClaims(ctx, "p0", func(c netns.Claim) { claims <- c }) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("WatchClaims: %v", err)
		}
	}()
	time.Sleep(50 * time.Millisecond) // the sockets are bound

	// A frame naming the parent's own MAC (a switch that reflects what the
	// parent sent) is not a claim. (The parent's own probes never come
	// back to its sockets on their own.)
	p0, err := host.LinkByName("p0")
	if err != nil {
		t.Fatal(err)
	}
	if err := other.SendFrame("eth0", arpFrame(broadcast, p0.MAC, "10.9.0.79")); err != nil {
		t.Fatal(err)
	}
	// A frame to a device on top of the parent is that device's, not the
	// parent's: the kernel shows it to the parent's packet sockets under
	// the upper device's index when that device is in the parent's
	// namespace (a VLAN device; here a macvlan child left there), and it is
	// no claim on the parent's segment. A broadcast is.
	upperMAC, _ := net.ParseMAC("02:42:0a:09:00:08")
	if _, err := host.CreateMacvlan(netns.MacvlanSpec{Name: "mv1", Parent: "p0", Mode: "bridge", MAC: upperMAC}); err != nil {
		t.Fatal(err)
	}
	if err := netnstest.SetUp(host, "mv1"); err != nil {
		t.Fatal(err)
	}
	if err := other.SendFrame("eth0", arpFrame(upperMAC, otherMAC, "10.9.0.77")); err != nil {
		t.Fatal(err)
	}
	if err := other.SendFrame("eth0", arpFrame(broadcast, otherMAC, "10.9.0.78")); err != nil {
		t.Fatal(err)
	}
	for seen := false; !seen; {
		select {
		case c := <-claims:
			switch c.Addr.String() {
			case "10.9.0.77":
				t.Errorf("claim %+v of a frame to an upper device's MAC, which the parent did not receive", c)
			case "10.9.0.79":
				t.Errorf("claim %+v in a frame that names the parent's own MAC", c)
			case "10.9.0.78":
				seen = true
			}
		case <-time.After(2 * time.Second):
			t.Fatal("the other host's broadcast announcement of 10.9.0.78: no claim seen on p0")
		}
	}

	fast := netns.Probe{Count: 1, Wait: 50 * time.Millisecond}
	for _, addr := range []string{"10.9.0.7", "fd09::7"} {
		if _, err := other.ProbeAddress(context.Background(), "eth0", netip.MustParseAddr(addr), nil, fast); err != nil {
			t.Fatal(err)
		}
		want := netns.Claim{Addr: netip.MustParseAddr(addr), MAC: otherMAC, Probe: true}
		for seen := false; !seen; {
			select {
			case c := <-claims:
				if c.Probe && c.Addr == want.Addr {
					if c.MAC.String() != otherMAC.String() {
						t.Errorf("probe for %s from %s claimed by %s", addr, otherMAC, c.MAC)
					}
					seen = true
				} else if c.MAC.String() != otherMAC.String() && c.MAC.String() != childMAC.String() {
					t.Errorf("claim %+v from neither the other host nor the child", c)
				}
			case <-time.After(2 * time.Second):
				t.Fatalf("the other host's probe for %s: no claim seen on p0", addr)
			}
		}
	}
}

var broadcast = net.HardwareAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}

// arpFrame is an ARP announcement of addr by src, sent to dst.
func arpFrame(dst, src net.HardwareAddr, addr string) []byte {
	a := netip.MustParseAddr(addr).As4()
	b := append(append([]byte{}, dst...), src...)
	b = append(b, 0x08, 0x06, 0, 1, 0x08, 0, 6, 4, 0, 1)
	b = append(append(b, src...), a[:]...)
	b = append(append(b, 0, 0, 0, 0, 0, 0), a[:]...)
	return b
}
