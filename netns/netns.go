// Package netns is the only package of the daemon that talks netlink, locks
// OS threads or switches network namespaces. Callers get a Handle bound to
// one namespace and never a switched thread. What only tests and benchmarks
// do to namespaces (make them, veth and TUN devices, libnetwork's moves) is in
// netns/netnstest.
package netns

import (
	"errors"
	"fmt"

	"github.com/vishvananda/netlink"
	vnetns "github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// Handle performs link operations in one network namespace.
type Handle struct {
	nl routeNetlink
	ns vnetns.NsHandle // owned by the Handle
	// current: ns is the namespace the process runs in, where sockets are
	// opened without switching threads (and without CAP_SYS_ADMIN).
	current bool
}

// routeNetlink is what a Handle asks of its netlink socket (a
// *netlink.Handle); tests put in its place one that answers as a busy
// kernel does.
type routeNetlink interface {
	LinkByName(name string) (netlink.Link, error)
	LinkByIndex(idx int) (netlink.Link, error)
	LinkList() ([]netlink.Link, error)
	LinkAdd(l netlink.Link) error
	LinkDel(l netlink.Link) error
	LinkSetAlias(l netlink.Link, alias string) error
	LinkSetUp(l netlink.Link) error
	RdmaLinkList() ([]*netlink.RdmaLink, error)
	RdmaSystemGetNetnsMode() (string, error)
	Close()
}

// Current returns a Handle for the namespace the daemon runs in (the host
// namespace when it runs as a Docker plugin).
func Current() (*Handle, error) {
	ns, err := vnetns.Get()
	if err != nil {
		return nil, fmt.Errorf("get current netns: %w", err)
	}
	// NewHandle, not NewHandleAt: the latter calls setns even into the
	// current namespace, which needs CAP_SYS_ADMIN; the managed plugin has
	// only CAP_NET_ADMIN. Route sockets only: without a family list the
	// library also opens XFRM and netfilter sockets, which makes the kernel
	// load xfrm_user and nfnetlink (and fails where it cannot). RDMA netlink
	// requests open their own socket.
	nl, err := netlink.NewHandle(unix.NETLINK_ROUTE)
	if err != nil {
		_ = ns.Close()
		return nil, fmt.Errorf("open netlink socket: %w", err)
	}
	return &Handle{nl: nl, ns: ns, current: true}, nil
}

// At returns a Handle for the namespace of ns. The Handle keeps its own
// duplicate of ns; the caller still owns ns.
func At(ns vnetns.NsHandle) (*Handle, error) {
	fd, err := unix.FcntlInt(uintptr(ns), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("duplicate netns handle %s: %w", ns, err)
	}
	dup := vnetns.NsHandle(fd)
	nl, err := netlink.NewHandleAt(dup, unix.NETLINK_ROUTE)
	if err != nil {
		_ = dup.Close()
		return nil, fmt.Errorf("open netlink socket in namespace %s: %w", ns, err)
	}
	return &Handle{nl: nl, ns: dup}, nil
}

// NsHandle returns the namespace of h. The Handle keeps ownership.
func (h *Handle) NsHandle() vnetns.NsHandle { return h.ns }

// Close releases the netlink socket and the Handle's namespace reference.
func (h *Handle) Close() {
	h.nl.Close()
	if h.ns.IsOpen() {
		_ = h.ns.Close()
	}
}

// ErrLinkNotFound is returned (wrapped) when a named link does not exist.
var ErrLinkNotFound = errors.New("link not found")

func isNotFound(err error) bool {
	var lnf netlink.LinkNotFoundError
	return errors.As(err, &lnf)
}
