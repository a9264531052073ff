// Package netnstest makes network namespaces (Make, New) and does in them what
// the tests, the benchmarks and the kernel test need around the daemon but
// the daemon itself never does: veth pairs standing in for a RoCE parent, a
// TUN device as a parent to refuse, an administrator's MTU change, and
// libnetwork's moves of an endpoint's link into a container's namespace and
// back. Everything needs CAP_NET_ADMIN in the namespaces involved and
// CAP_SYS_ADMIN to open netlink sockets in them.
package netnstest

import (
	"fmt"
	"net"
	"os"
	"runtime"

	"github.com/rdma-macvlan/rdma-macvlan/netns"
	"github.com/vishvananda/netlink"
	vnetns "github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// handle opens a route netlink socket in h's namespace; the caller closes it.
func handle(h *netns.Handle) (*netlink.Handle, error) {
	nl, err := netlink.NewHandleAt(h.NsHandle(), unix.NETLINK_ROUTE)
	if err != nil {
		return nil, fmt.Errorf("open netlink socket in netns %s: %w", h.NsHandle(), err)
	}
	return nl, nil
}

// CreateVeth adds a veth pair a <-> b in h, both up. Tests and benchmarks
// use one end as a stand-in for a RoCE parent (this kernel family has no
// dummy module).
// Equivalent to: ip link add $a type veth peer name $b && ip link set $a up && ip link set $b up
func CreateVeth(h *netns.Handle, a, b string, mtu int) error {
	nl, err := handle(h)
	if err != nil {
		return err
	}
	defer nl.Close()
	attrs := netlink.NewLinkAttrs()
	attrs.Name = a
	attrs.MTU = mtu
	v := &netlink.Veth{LinkAttrs: attrs, PeerName: b}
	if err := nl.LinkAdd(v); err != nil {
		return fmt.Errorf("create veth %s/%s: %w", a, b, err)
	}
	for _, n := range []string{a, b} {
		if err := setUp(nl, n); err != nil {
			_ = h.DeleteLink(a)
			return err
		}
	}
	return nil
}

// SetMTU sets the MTU of the link called name in h, as an administrator
// raising a parent's MTU would.
// Equivalent to: ip link set dev $name mtu $mtu
func SetMTU(h *netns.Handle, name string, mtu int) error {
	nl, err := handle(h)
	if err != nil {
		return err
	}
	defer nl.Close()
	l, err := nl.LinkByName(name)
	if err != nil {
		return fmt.Errorf("look up link %q: %w", name, err)
	}
	if err := nl.LinkSetMTU(l, mtu); err != nil {
		return fmt.Errorf("set mtu %d on %q: %w", mtu, name, err)
	}
	return nil
}

// MoveInto does what libnetwork does with the link Join names: it moves the
// link called name from src into the namespace of dst, renames it to
// newName, sets mac (when given) and the addresses (IPv6 ones without
// duplicate address detection, as libnetwork does), and brings it up there.
// Equivalent to: ip link set $name netns $dst; ip -n $dst link set $name name $newName address $mac up; ip -n $dst addr add ...
func MoveInto(src, dst *netns.Handle, name, newName string, mac net.HardwareAddr, addrs ...*net.IPNet) error {
	snl, err := handle(src)
	if err != nil {
		return err
	}
	defer snl.Close()
	dnl, err := handle(dst)
	if err != nil {
		return err
	}
	defer dnl.Close()
	l, err := snl.LinkByName(name)
	if err != nil {
		return fmt.Errorf("look up %q: %w", name, err)
	}
	if err := snl.LinkSetNsFd(l, int(dst.NsHandle())); err != nil {
		return fmt.Errorf("move %q into netns %s: %w", name, dst.NsHandle(), err)
	}
	l, err = dnl.LinkByName(name)
	if err != nil {
		return fmt.Errorf("look up %q in netns %s: %w", name, dst.NsHandle(), err)
	}
	if newName != "" && newName != name {
		if err := dnl.LinkSetName(l, newName); err != nil {
			return fmt.Errorf("rename %q to %q: %w", name, newName, err)
		}
	}
	if len(mac) > 0 {
		if err := dnl.LinkSetHardwareAddr(l, mac); err != nil {
			return fmt.Errorf("set mac %s on %q: %w", mac, newName, err)
		}
	}
	for _, a := range addrs {
		na := &netlink.Addr{IPNet: a}
		if a.IP.To4() == nil {
			na.Flags = unix.IFA_F_NODAD // as libnetwork sets a container's IPv6 address
		}
		if err := dnl.AddrAdd(l, na); err != nil {
			return fmt.Errorf("add %s to %q: %w", a, newName, err)
		}
	}
	if err := dnl.LinkSetUp(l); err != nil {
		return fmt.Errorf("bring up %q: %w", newName, err)
	}
	return nil
}

// MoveBack does what libnetwork does on Leave: it moves the link called name
// from src back into the namespace of dst under the name origName, down and
// without addresses.
// Equivalent to: ip link set $name down; ip addr flush dev $name; ip link set $name name $origName netns $dst
func MoveBack(src, dst *netns.Handle, name, origName string) error {
	nl, err := handle(src)
	if err != nil {
		return err
	}
	defer nl.Close()
	l, err := nl.LinkByName(name)
	if err != nil {
		return fmt.Errorf("look up %q: %w", name, err)
	}
	if err := nl.LinkSetDown(l); err != nil {
		return fmt.Errorf("bring down %q: %w", name, err)
	}
	addrs, err := nl.AddrList(l, netlink.FAMILY_ALL)
	if err != nil {
		return fmt.Errorf("list addresses of %q: %w", name, err)
	}
	for i := range addrs {
		if err := nl.AddrDel(l, &addrs[i]); err != nil {
			return fmt.Errorf("delete %s from %q: %w", addrs[i].IPNet, name, err)
		}
	}
	if err := nl.LinkSetName(l, origName); err != nil {
		return fmt.Errorf("rename %q to %q: %w", name, origName, err)
	}
	if err := nl.LinkSetNsFd(l, int(dst.NsHandle())); err != nil {
		return fmt.Errorf("move %q into netns %s: %w", origName, dst.NsHandle(), err)
	}
	return nil
}

// CreateBridge adds a Linux bridge called name in h, up; tests enslave a
// veth to it to make a parent the driver must refuse.
// Equivalent to: ip link add $name type bridge && ip link set $name up
func CreateBridge(h *netns.Handle, name string) error {
	nl, err := handle(h)
	if err != nil {
		return err
	}
	defer nl.Close()
	attrs := netlink.NewLinkAttrs()
	attrs.Name = name
	if err := nl.LinkAdd(&netlink.Bridge{LinkAttrs: attrs}); err != nil {
		return fmt.Errorf("create bridge %s: %w", name, err)
	}
	if err := setUp(nl, name); err != nil {
		_ = h.DeleteLink(name)
		return err
	}
	return nil
}

// SetMaster enslaves the link called name in h to master, or frees it from
// its master when master is "", as an administrator adding a port to a
// bridge or a bond would.
// Equivalent to: ip link set $name master $master (or: ip link set $name nomaster)
func SetMaster(h *netns.Handle, name, master string) error {
	nl, err := handle(h)
	if err != nil {
		return err
	}
	defer nl.Close()
	l, err := nl.LinkByName(name)
	if err != nil {
		return fmt.Errorf("look up link %q: %w", name, err)
	}
	if master == "" {
		if err := nl.LinkSetNoMaster(l); err != nil {
			return fmt.Errorf("free %q from its master: %w", name, err)
		}
		return nil
	}
	m, err := nl.LinkByName(master)
	if err != nil {
		return fmt.Errorf("look up master %q: %w", master, err)
	}
	if err := nl.LinkSetMasterByIndex(l, m.Attrs().Index); err != nil {
		return fmt.Errorf("enslave %q to %q: %w", name, master, err)
	}
	return nil
}

// CreateTun adds a persistent layer-3 TUN device (not Ethernet) in h; tests
// use it as a parent the driver must refuse.
// Equivalent to: ip tuntap add dev $name mode tun
func CreateTun(h *netns.Handle, name string) error {
	attrs := netlink.NewLinkAttrs()
	attrs.Name = name
	return in(h, func() error {
		// TUN devices are made with an ioctl on /dev/net/tun, which acts in
		// the calling thread's namespace.
		if err := netlink.LinkAdd(&netlink.Tuntap{LinkAttrs: attrs, Mode: netlink.TUNTAP_MODE_TUN}); err != nil {
			return fmt.Errorf("create tun %s: %w", name, err)
		}
		return nil
	})
}

// in runs fn on a locked thread switched into h's namespace. The thread is
// discarded if it cannot be switched back.
func in(h *netns.Handle, fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := vnetns.Get()
		if err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("get current netns: %w", err)
			return
		}
		defer orig.Close()
		if err := vnetns.Set(h.NsHandle()); err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("enter netns %s: %w", h.NsHandle(), err)
			return
		}
		ferr := fn()
		if err := vnetns.Set(orig); err == nil {
			runtime.UnlockOSThread()
		}
		errc <- ferr
	}()
	return <-errc
}

// Make creates a new, unnamed network namespace and returns a Handle for it.
// The namespace lives as long as the Handle (and any link or process in it).
// Equivalent to: unshare --net, on a thread of its own: the caller's thread
// never switches.
func Make() (*netns.Handle, error) {
	type result struct {
		ns  vnetns.NsHandle
		err error
	}
	ch := make(chan result, 1)
	go func() {
		// This goroutine's thread changes namespace; if it cannot be restored
		// the thread stays locked and dies with the goroutine.
		runtime.LockOSThread()
		orig, err := vnetns.Get()
		if err != nil {
			runtime.UnlockOSThread()
			ch <- result{err: fmt.Errorf("get current netns: %w", err)}
			return
		}
		defer orig.Close()
		ns, err := vnetns.New()
		if err != nil {
			ch <- result{err: fmt.Errorf("create netns: %w", err)}
			if vnetns.Set(orig) == nil {
				runtime.UnlockOSThread()
			}
			return
		}
		if err := vnetns.Set(orig); err != nil {
			ch <- result{ns: ns, err: fmt.Errorf("restore netns: %w", err)}
			return
		}
		runtime.UnlockOSThread()
		ch <- result{ns: ns}
	}()
	r := <-ch
	if r.ns.IsOpen() {
		defer r.ns.Close() // At keeps a duplicate
	}
	if r.err != nil {
		return nil, r.err
	}
	return netns.At(r.ns)
}

// SetUp brings the link called name in h up.
// Equivalent to: ip link set dev $name up
func SetUp(h *netns.Handle, name string) error {
	nl, err := handle(h)
	if err != nil {
		return err
	}
	defer nl.Close()
	return setUp(nl, name)
}

// setUp is SetUp through nl, a socket its caller has open in the namespace.
func setUp(nl *netlink.Handle, name string) error {
	l, err := nl.LinkByName(name)
	if err != nil {
		return fmt.Errorf("look up link %q: %w", name, err)
	}
	if err := nl.LinkSetUp(l); err != nil {
		return fmt.Errorf("bring up %q: %w", name, err)
	}
	return nil
}

// T is the part of testing.TB that New uses (this package is also linked
// into programs that are not tests).
type T interface {
	Helper()
	Skip(args ...any)
	Fatal(args ...any)
	Cleanup(func())
}

// New makes a network namespace that goes with the test, skipping the test,
// saying why, when not root.
func New(t T) *netns.Handle {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("SKIP (needs root): creates network namespaces and links; run: sudo make test-root")
	}
	h, err := Make()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	return h
}

// NewHost is New with a veth pair p0 <-> p0peer (MTU 1500) in it: the
// stand-in for a host with a RoCE parent p0 that most privileged tests use.
func NewHost(t T) *netns.Handle {
	t.Helper()
	h := New(t)
	if err := CreateVeth(h, "p0", "p0peer", 1500); err != nil {
		t.Fatal(err)
	}
	return h
}
