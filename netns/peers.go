package netns

import (
	"errors"
	"fmt"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	vnetns "github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// PeerLinks returns the links, in every other network namespace that has an
// ID in h's namespace, whose ifalias is alias. Moving a link out of a
// namespace gives the target namespace an ID there (the kernel announces it
// with the move), so a container's namespace has one in the namespace its
// link came from for as long as it exists. It reads other namespaces through
// netlink alone: no setns, only CAP_NET_ADMIN.
// Equivalent to: ip netns list-id, then for each id N: ip link show
// target-netnsid N (iproute2 6.x: ip -target-netnsid N link show).
func (h *Handle) PeerLinks(alias string) ([]Link, error) {
	s, err := h.routeSocket()
	if err != nil {
		return nil, err
	}
	defer s.Close()
	// Reading another namespace's macvlan makes the kernel give the
	// namespace of its lower device, this one, an ID here too: skip it.
	// Asked first on this socket: a receive with a large buffer makes the
	// kernel fill later dump messages to 32 KiB (see nsids).
	self, err := selfID(s, h.ns)
	if err != nil {
		return nil, fmt.Errorf("network namespace id of this namespace: %w", err)
	}
	ids, err := nsids(s)
	if err != nil {
		return nil, err
	}
	var out []Link
	for _, id := range ids {
		if int(id) == self {
			continue
		}
		links, err := linksIn(s, id)
		if errors.Is(err, unix.EINVAL) {
			continue // the namespace went while we looked
		}
		if err != nil {
			return nil, fmt.Errorf("list links of network namespace id %d: %w", id, err)
		}
		for _, l := range links {
			if l.Alias == alias {
				out = append(out, l)
			}
		}
	}
	return out, nil
}

// routeSocket opens a route netlink socket in h's namespace; in the
// daemon's own namespace without switching threads.
func (h *Handle) routeSocket() (*nl.SocketHandle, error) {
	target := h.ns
	if h.current {
		target = vnetns.None()
	}
	s, err := nl.GetNetlinkSocketAt(target, vnetns.None(), unix.NETLINK_ROUTE)
	if err != nil {
		return nil, fmt.Errorf("open route netlink socket: %w", err)
	}
	if err := s.SetReceiveTimeout(&nl.SocketTimeoutTv); err != nil {
		s.Close()
		return nil, fmt.Errorf("route netlink socket: %w", err)
	}
	return &nl.SocketHandle{Socket: s}, nil
}

// dump runs a dump request of table, tried again while the kernel reports
// it interrupted (see redump).
func dump(s *nl.SocketHandle, table string, build func() *nl.NetlinkRequest, resType uint16) ([][]byte, error) {
	return redump(table, func() ([][]byte, error) {
		req := build()
		req.Sockets = map[int]*nl.SocketHandle{unix.NETLINK_ROUTE: s}
		return req.Execute(unix.NETLINK_ROUTE, resType)
	})
}

// selfID returns the ID ns has in itself, or -1.
// Equivalent to: ip netns list-id (the line of the current namespace)
func selfID(s *nl.SocketHandle, ns vnetns.NsHandle) (int, error) {
	req := nl.NewNetlinkRequest(unix.RTM_GETNSID, unix.NLM_F_REQUEST)
	req.AddData(nl.NewRtGenMsg())
	req.AddData(nl.NewRtAttr(unix.NETNSA_FD, nl.Uint32Attr(uint32(ns))))
	req.Sockets = map[int]*nl.SocketHandle{unix.NETLINK_ROUTE: s}
	msgs, err := req.Execute(unix.NETLINK_ROUTE, unix.RTM_NEWNSID)
	if err != nil {
		return 0, err
	}
	for _, m := range msgs {
		if len(m) < unix.SizeofRtGenmsg {
			continue
		}
		attrs, err := nl.ParseRouteAttr(m[(unix.SizeofRtGenmsg+unix.NLMSG_ALIGNTO-1)&^(unix.NLMSG_ALIGNTO-1):])
		if err != nil {
			return 0, err
		}
		for _, a := range attrs {
			if a.Attr.Type == unix.NETNSA_NSID && len(a.Value) >= 4 {
				return int(int32(nl.NativeEndian().Uint32(a.Value))), nil
			}
		}
	}
	return -1, nil
}

// The kernels this runs on (Debian's 6.1 among them; ip netns list-id
// shows the same) end the RTM_GETNSID dump after its first batch, however
// many IDs there are: 134 IDs in a batch of one page, 1,158 in one of
// 32 KiB, which is what the kernel sends once the socket has received with
// a large buffer (selfID does that first). A dump is trusted as complete
// only when it is well short of a batch of either size; otherwise nothing
// is concluded from it.
const (
	smallBatchLow, smallBatchHigh = 120, 150
	maxNsidDump                   = 1000
)

// ErrTooManyNamespaces says the namespace IDs could not all be read.
var ErrTooManyNamespaces = errors.New("cannot list every network namespace that has an ID here")

// nsids lists the IDs of the other network namespaces that have one in the
// socket's namespace.
// Equivalent to: ip netns list-id
func nsids(s *nl.SocketHandle) ([]int32, error) {
	msgs, err := dump(s, "the list of network namespace ids", func() *nl.NetlinkRequest {
		req := nl.NewNetlinkRequest(unix.RTM_GETNSID, unix.NLM_F_DUMP)
		req.AddData(nl.NewRtGenMsg())
		return req
	}, unix.RTM_NEWNSID)
	if err != nil {
		return nil, fmt.Errorf("list network namespace ids: %w", err)
	}
	var ids []int32
	for _, m := range msgs {
		// struct rtgenmsg, padded to 4 bytes, then the attributes.
		if len(m) < unix.SizeofRtGenmsg {
			continue
		}
		attrs, err := nl.ParseRouteAttr(m[(unix.SizeofRtGenmsg+unix.NLMSG_ALIGNTO-1)&^(unix.NLMSG_ALIGNTO-1):])
		if err != nil {
			return nil, fmt.Errorf("parse network namespace id: %w", err)
		}
		for _, a := range attrs {
			if a.Attr.Type == unix.NETNSA_NSID && len(a.Value) >= 4 {
				if id := int32(nl.NativeEndian().Uint32(a.Value)); id >= 0 {
					ids = append(ids, id)
				}
			}
		}
	}
	if n := len(ids); n >= maxNsidDump || (n >= smallBatchLow && n <= smallBatchHigh) {
		return nil, fmt.Errorf("%w (the kernel's list of %d may be cut short)", ErrTooManyNamespaces, n)
	}
	return ids, nil
}

// linksIn lists the links of the namespace with ID id.
// Equivalent to: ip -target-netnsid $id link show
func linksIn(s *nl.SocketHandle, id int32) ([]Link, error) {
	msgs, err := dump(s, fmt.Sprintf("the link table of network namespace id %d", id), func() *nl.NetlinkRequest {
		req := nl.NewNetlinkRequest(unix.RTM_GETLINK, unix.NLM_F_DUMP)
		req.AddData(nl.NewIfInfomsg(unix.AF_UNSPEC))
		req.AddData(nl.NewRtAttr(unix.IFLA_TARGET_NETNSID, nl.Uint32Attr(uint32(id))))
		return req
	}, unix.RTM_NEWLINK)
	if err != nil {
		return nil, err
	}
	out := make([]Link, 0, len(msgs))
	for _, m := range msgs {
		l, err := netlink.LinkDeserialize(nil, m)
		if err != nil {
			return nil, fmt.Errorf("parse link: %w", err)
		}
		out = append(out, toLink(l))
	}
	return out, nil
}
