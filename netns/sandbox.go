package netns

import (
	"runtime"

	"fmt"
	vnetns "github.com/vishvananda/netns"
	"net"

	"github.com/vishvananda/netlink"
)

// CreateVeth adds a veth pair a <-> b, both up. Tests and benchmarks use one
// end as a stand-in for a RoCE parent (this kernel family has no dummy module).
// Equivalent to: ip link add $a type veth peer name $b && ip link set $a up && ip link set $b up
func (h *Handle) CreateVeth(a, b string, mtu int) error {
	attrs := netlink.NewLinkAttrs()
	attrs.Name = a
	attrs.MTU = mtu
	v := &netlink.Veth{LinkAttrs: attrs, PeerName: b}
	if err := h.nl.LinkAdd(v); err != nil {
		return fmt.Errorf("create veth %s/%s: %w", a, b, err)
	}
	for _, n := range []string{a, b} {
		if err := h.SetUp(n); err != nil {
			_ = h.DeleteLink(a)
			return err
		}
	}
	return nil
}

// SetMTU sets the MTU of the link called name, as an administrator raising
// a parent's MTU would.
// Equivalent to: ip link set dev $name mtu $mtu
func (h *Handle) SetMTU(name string, mtu int) error {
	l, err := h.nl.LinkByName(name)
	if err != nil {
		return fmt.Errorf("look up link %q: %w", name, err)
	}
	if err := h.nl.LinkSetMTU(l, mtu); err != nil {
		return fmt.Errorf("set mtu %d on %q: %w", mtu, name, err)
	}
	return nil
}

// MoveInto does what libnetwork does with the link Join names: it moves the
// link called name from h into the namespace of dst, renames it to newName,
// sets mac (when given) and the addresses, and brings it up there.
// Equivalent to: ip link set $name netns $dst; ip -n $dst link set $name name $newName address $mac up; ip -n $dst addr add ...
func (h *Handle) MoveInto(dst *Handle, name, newName string, mac net.HardwareAddr, addrs ...*net.IPNet) error {
	l, err := h.nl.LinkByName(name)
	if err != nil {
		return fmt.Errorf("look up %q: %w", name, err)
	}
	if err := h.nl.LinkSetNsFd(l, int(dst.ns)); err != nil {
		return fmt.Errorf("move %q into netns %s: %w", name, dst.ns, err)
	}
	l, err = dst.nl.LinkByName(name)
	if err != nil {
		return fmt.Errorf("look up %q in netns %s: %w", name, dst.ns, err)
	}
	if newName != "" && newName != name {
		if err := dst.nl.LinkSetName(l, newName); err != nil {
			return fmt.Errorf("rename %q to %q: %w", name, newName, err)
		}
	}
	if len(mac) > 0 {
		if err := dst.nl.LinkSetHardwareAddr(l, mac); err != nil {
			return fmt.Errorf("set mac %s on %q: %w", mac, newName, err)
		}
	}
	for _, a := range addrs {
		if err := dst.nl.AddrAdd(l, &netlink.Addr{IPNet: a}); err != nil {
			return fmt.Errorf("add %s to %q: %w", a, newName, err)
		}
	}
	if err := dst.nl.LinkSetUp(l); err != nil {
		return fmt.Errorf("bring up %q: %w", newName, err)
	}
	return nil
}

// MoveBack does what libnetwork does on Leave: it moves the link called name
// from h back into the namespace of dst under the name origName, down and
// without addresses.
// Equivalent to: ip link set $name down; ip addr flush dev $name; ip link set $name name $origName netns $dst
func (h *Handle) MoveBack(dst *Handle, name, origName string) error {
	l, err := h.nl.LinkByName(name)
	if err != nil {
		return fmt.Errorf("look up %q: %w", name, err)
	}
	if err := h.nl.LinkSetDown(l); err != nil {
		return fmt.Errorf("bring down %q: %w", name, err)
	}
	addrs, err := h.nl.AddrList(l, netlink.FAMILY_ALL)
	if err != nil {
		return fmt.Errorf("list addresses of %q: %w", name, err)
	}
	for i := range addrs {
		if err := h.nl.AddrDel(l, &addrs[i]); err != nil {
			return fmt.Errorf("delete %s from %q: %w", addrs[i].IPNet, name, err)
		}
	}
	if err := h.nl.LinkSetName(l, origName); err != nil {
		return fmt.Errorf("rename %q to %q: %w", name, origName, err)
	}
	if err := h.nl.LinkSetNsFd(l, int(dst.ns)); err != nil {
		return fmt.Errorf("move %q into netns %s: %w", origName, dst.ns, err)
	}
	return nil
}

// RdmaNetnsMode reports the RDMA subsystem's network namespace mode, "shared"
// or "exclusive", from RDMA netlink.
// Equivalent to: rdma system show netns
func (h *Handle) RdmaNetnsMode() (string, error) {
	mode, err := h.nl.RdmaSystemGetNetnsMode()
	if err != nil {
		return "", fmt.Errorf("rdma netlink: get netns mode: %w", err)
	}
	return mode, nil
}

// CreateTun adds a persistent layer-3 TUN device (not Ethernet); tests use it
// as a parent the driver must refuse.
// Equivalent to: ip tuntap add dev $name mode tun
func (h *Handle) CreateTun(name string) error {
	attrs := netlink.NewLinkAttrs()
	attrs.Name = name
	return h.do(func() error {
		// TUN devices are made with an ioctl on /dev/net/tun, which acts in
		// the calling thread's namespace.
		if err := netlink.LinkAdd(&netlink.Tuntap{LinkAttrs: attrs, Mode: netlink.TUNTAP_MODE_TUN}); err != nil {
			return fmt.Errorf("create tun %s: %w", name, err)
		}
		return nil
	})
}

// do runs fn on a locked thread switched into h's namespace. The thread is
// discarded if it cannot be switched back.
func (h *Handle) do(fn func() error) error {
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
		if err := vnetns.Set(h.ns); err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("enter netns %s: %w", h.ns, err)
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
