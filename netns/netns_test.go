package netns_test

import (
	"errors"
	"net"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/rdma-macvlan/rdma-macvlan/netns"
	"github.com/rdma-macvlan/rdma-macvlan/netns/netnstest"
	"golang.org/x/sys/unix"
)

func mustLink(t *testing.T, h *netns.Handle, name string) netns.Link {
	t.Helper()
	l, err := h.LinkByName(name)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// nsIno returns the inode of the network namespace at path (a /proc link).
func nsIno(t *testing.T, path string) uint64 {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	return st.Ino
}

// New makes a namespace of its own: only a loopback in it, links made in it
// invisible elsewhere, and the caller's threads left where they were.
func TestPrivilegedNew(t *testing.T) {
	a := netnstest.NewHost(t)
	b, err := netnstest.Make()
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	var ia, ib unix.Stat_t
	if err := unix.Fstat(int(a.NsHandle()), &ia); err != nil {
		t.Fatal(err)
	}
	if err := unix.Fstat(int(b.NsHandle()), &ib); err != nil {
		t.Fatal(err)
	}
	if ia.Ino == ib.Ino || ia.Ino == nsIno(t, "/proc/self/ns/net") {
		t.Fatalf("namespaces %d, %d and the test's %d are not distinct", ia.Ino, ib.Ino, nsIno(t, "/proc/self/ns/net"))
	}
	ls, err := b.Links()
	if err != nil {
		t.Fatal(err)
	}
	if len(ls) != 1 || !ls[0].Loopback() || ls[0].Ethernet() {
		t.Fatalf("a new namespace has %+v, want only its loopback", ls)
	}
	if _, err := b.LinkByName("p0"); !errors.Is(err, netns.ErrLinkNotFound) {
		t.Fatalf("p0 of another namespace: %v, want ErrLinkNotFound", err)
	}
}

// No thread of the process is left in a namespace New made: every thread
// the scheduler hands out is still in the test's namespace.
func TestPrivilegedNewLeavesNoThreadSwitched(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("SKIP (needs root): creates network namespaces; run: sudo make test-root")
	}
	want := nsIno(t, "/proc/self/ns/net")
	for range 20 {
		h, err := netnstest.Make()
		if err != nil {
			t.Fatal(err)
		}
		h.Close()
	}
	var wg sync.WaitGroup
	bad := make(chan uint64, 64)
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			var st unix.Stat_t
			if err := unix.Stat("/proc/thread-self/ns/net", &st); err == nil && st.Ino != want {
				bad <- st.Ino
			}
		}()
	}
	wg.Wait()
	close(bad)
	for ino := range bad {
		t.Errorf("a thread is in namespace %d, not the test's %d", ino, want)
	}
}

// At works in the namespace it was given, on its own copy of the handle:
// closing either Handle leaves the other working.
func TestPrivilegedAt(t *testing.T) {
	orig, err := netnstest.Make()
	if err != nil {
		if os.Geteuid() != 0 {
			t.Skip("SKIP (needs root): creates network namespaces; run: sudo make test-root")
		}
		t.Fatal(err)
	}
	defer orig.Close()
	if err := netnstest.CreateVeth(orig, "p0", "p0peer", 1500); err != nil {
		t.Fatal(err)
	}
	at, err := netns.At(orig.NsHandle())
	if err != nil {
		t.Fatal(err)
	}
	if at.NsHandle() == orig.NsHandle() {
		t.Fatalf("At kept the caller's handle %d instead of its own copy", at.NsHandle())
	}
	if l, err := at.LinkByName("p0"); err != nil || l.Kind != "veth" {
		t.Fatalf("p0 through At: %+v, %v", l, err)
	}
	at.Close()
	if _, err := orig.LinkByName("p0"); err != nil {
		t.Fatalf("after the At handle closed, the original: %v", err)
	}
	at2, err := netns.At(orig.NsHandle())
	if err != nil {
		t.Fatal(err)
	}
	defer at2.Close()
	orig.Close()
	if _, err := at2.LinkByName("p0"); err != nil {
		t.Fatalf("after the original closed, the At handle: %v", err)
	}
}

// Current works in the test's own namespace; only read here.
func TestCurrentReadsOwnNamespace(t *testing.T) {
	h, err := netns.Current()
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	var st unix.Stat_t
	if err := unix.Fstat(int(h.NsHandle()), &st); err != nil {
		t.Fatal(err)
	}
	if want := nsIno(t, "/proc/self/ns/net"); st.Ino != want {
		t.Fatalf("Current is namespace %d, the process is in %d", st.Ino, want)
	}
	lo, err := h.LinkByName("lo")
	if err != nil || !lo.Loopback() || lo.Index != 1 {
		t.Fatalf("lo: %+v, %v", lo, err)
	}
	if byIdx, err := h.LinkByIndex(lo.Index); err != nil || byIdx.Name != "lo" {
		t.Fatalf("link index %d: %+v, %v", lo.Index, byIdx, err)
	}
	if _, err := h.LinkByIndex(1 << 30); !errors.Is(err, netns.ErrLinkNotFound) {
		t.Fatalf("a link index nobody has: %v, want ErrLinkNotFound", err)
	}
}

// CreateMacvlan makes the child as asked (mode, MTU, MAC, alias), down, on
// its parent; it refuses an unknown mode or a missing parent and leaves
// nothing behind.
func TestPrivilegedCreateMacvlan(t *testing.T) {
	h := netnstest.NewHost(t)
	p0 := mustLink(t, h, "p0")
	mac, _ := net.ParseMAC("02:42:0a:00:00:07")
	for _, mode := range []string{"bridge", "private", "vepa"} {
		spec := netns.MacvlanSpec{Name: "mv" + mode, Parent: "p0", Mode: mode, MTU: 1400, Alias: "rdma-macvlan test " + mode}
		if mode == "bridge" {
			spec.MAC = mac
		}
		got, err := h.CreateMacvlan(spec)
		if err != nil {
			t.Fatalf("%s: %v", mode, err)
		}
		for _, l := range []netns.Link{got, mustLink(t, h, spec.Name)} {
			if l.Kind != "macvlan" || l.MacvlanMode != mode || l.MTU != 1400 || l.ParentIndex != p0.Index ||
				l.Alias != spec.Alias || l.Up || !l.Ethernet() {
				t.Errorf("%s: %+v, want a macvlan of p0 (index %d) in mode %s, MTU 1400, alias %q, down", mode, l, p0.Index, mode, spec.Alias)
			}
		}
		if mode == "bridge" && got.MAC.String() != mac.String() {
			t.Errorf("MAC %s, want %s", got.MAC, mac)
		}
	}
	// MTU 0 inherits the parent's; passthru takes the parent alone.
	pt, err := h.CreateMacvlan(netns.MacvlanSpec{Name: "mvpt", Parent: "p0peer", Mode: "passthru"})
	if err != nil {
		t.Fatal(err)
	}
	if pt.MacvlanMode != "passthru" || pt.MTU != 1500 || pt.Alias != "" {
		t.Errorf("passthru child %+v, want mode passthru, the parent's MTU 1500, no alias", pt)
	}

	if _, err := h.CreateMacvlan(netns.MacvlanSpec{Name: "mvbad", Parent: "p0", Mode: "source"}); err == nil || !strings.Contains(err.Error(), `unknown mode "source"`) {
		t.Errorf("mode source: %v, want unknown mode", err)
	}
	if _, err := h.CreateMacvlan(netns.MacvlanSpec{Name: "mvbad", Parent: "nope", Mode: "bridge"}); !errors.Is(err, netns.ErrLinkNotFound) {
		t.Errorf("missing parent: %v, want ErrLinkNotFound", err)
	}
	if _, err := h.CreateMacvlan(netns.MacvlanSpec{Name: "mvbridge", Parent: "p0", Mode: "bridge"}); err == nil {
		t.Error("a second link with the name mvbridge was created")
	}
	if _, err := h.LinkByName("mvbad"); !errors.Is(err, netns.ErrLinkNotFound) {
		t.Errorf("a refused child is left: %v", err)
	}
	ls, err := h.Links()
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]string{}
	for _, l := range ls {
		kinds[l.Name] = l.Kind
	}
	want := map[string]string{"lo": "device", "p0": "veth", "p0peer": "veth", "mvbridge": "macvlan", "mvprivate": "macvlan", "mvvepa": "macvlan", "mvpt": "macvlan"}
	if len(kinds) != len(want) {
		t.Errorf("links %v, want %v", kinds, want)
	}
	for name, kind := range want {
		if kinds[name] != kind {
			t.Errorf("link %s is %q, want %q (all: %v)", name, kinds[name], kind, kinds)
		}
	}
}

// SetUp brings a link up; DeleteLink removes it and is idempotent.
func TestPrivilegedSetUpAndDeleteLink(t *testing.T) {
	h := netnstest.NewHost(t)
	if _, err := h.CreateMacvlan(netns.MacvlanSpec{Name: "mv0", Parent: "p0", Mode: "bridge"}); err != nil {
		t.Fatal(err)
	}
	if err := netnstest.SetUp(h, "mv0"); err != nil {
		t.Fatal(err)
	}
	if l := mustLink(t, h, "mv0"); !l.Up {
		t.Fatalf("mv0 is down after SetUp: %+v", l)
	}
	if err := netnstest.SetUp(h, "nope"); err == nil {
		t.Error("SetUp of a missing link succeeded")
	}
	for i := range 2 {
		if err := h.DeleteLink("mv0"); err != nil {
			t.Fatalf("delete %d: %v", i+1, err)
		}
		if _, err := h.LinkByName("mv0"); !errors.Is(err, netns.ErrLinkNotFound) {
			t.Fatalf("after delete %d: %v, want ErrLinkNotFound", i+1, err)
		}
	}
	// Deleting one end of a veth pair takes the other: p0peer's delete
	// finds nothing, which is not an error.
	if err := h.DeleteLink("p0"); err != nil {
		t.Fatal(err)
	}
	if err := h.DeleteLink("p0peer"); err != nil {
		t.Fatalf("delete of a link already gone: %v", err)
	}
}

// CreateVLAN makes an 802.1Q sub-interface, up, with its ID and lower link.
func TestPrivilegedCreateVLAN(t *testing.T) {
	h := netnstest.NewHost(t)
	p0 := mustLink(t, h, "p0")
	v, err := h.CreateVLAN("p0.42", "p0", 42, "rdma-macvlan test")
	if errors.Is(err, unix.EOPNOTSUPP) {
		t.Skip("SKIP: this kernel has no 802.1Q VLAN support (CONFIG_VLAN_8021Q); make test-kernel runs this test in its VM, where it must pass")
	}
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range []netns.Link{v, mustLink(t, h, "p0.42")} {
		if l.Kind != "vlan" || l.VLANID != 42 || l.ParentIndex != p0.Index || !l.Up || l.Alias != "rdma-macvlan test" {
			t.Errorf("%+v, want VLAN 42 on p0 (index %d), up, ifalias \"rdma-macvlan test\"", l, p0.Index)
		}
	}
	if _, err := h.CreateVLAN("nope.1", "nope", 1, ""); !errors.Is(err, netns.ErrLinkNotFound) {
		t.Errorf("missing lower link: %v, want ErrLinkNotFound", err)
	}
}

// RdmaNetnsMode answers from RDMA netlink: the mode sysfs shows where the
// RDMA core is loaded, an error naming RDMA netlink where it is not.
func TestRdmaNetnsMode(t *testing.T) {
	h, err := netns.Current()
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	mode, err := h.RdmaNetnsMode()
	param, perr := os.ReadFile("/sys/module/ib_core/parameters/netns_mode")
	if perr != nil {
		t.Logf("no RDMA core here (%v): checking the error path only", perr)
		if err == nil || !strings.Contains(err.Error(), "rdma netlink") {
			t.Fatalf("without ib_core: mode %q, error %v; want an error naming rdma netlink", mode, err)
		}
		return
	}
	want := map[string]string{"Y": "shared", "N": "exclusive"}[strings.TrimSpace(string(param))]
	if err != nil || mode != want {
		t.Fatalf("RdmaNetnsMode = %q, %v; ib_core's netns_mode %q says %q", mode, err, param, want)
	}
}
