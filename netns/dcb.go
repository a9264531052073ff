package netns

import (
	"errors"
	"fmt"

	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"
)

// GetDCB sends one DCB netlink request (RTM_GETDCB) in h's namespace and
// returns the body of the kernel's answer: the struct dcbmsg and its
// attributes, as the request body was. Building and reading those bodies is
// the fabric package's job; this only carries them. A kernel error comes
// back as its errno (errors.Is(err, unix.EOPNOTSUPP) for a netdev without
// DCB support). Reading needs no capability.
// Equivalent to: dcb ... show dev IFNAME (the request iproute2's dcb sends)
func (h *Handle) GetDCB(body []byte) ([]byte, error) {
	s, err := h.routeSocket()
	if err != nil {
		return nil, err
	}
	defer s.Close()
	req := nl.NewNetlinkRequest(unix.RTM_GETDCB, unix.NLM_F_REQUEST)
	req.AddRawData(body)
	req.Sockets = map[int]*nl.SocketHandle{unix.NETLINK_ROUTE: s}
	msgs, err := req.Execute(unix.NETLINK_ROUTE, unix.RTM_GETDCB)
	if err != nil {
		return nil, fmt.Errorf("dcb netlink: %w", err)
	}
	if len(msgs) == 0 {
		return nil, errors.New("dcb netlink: no answer")
	}
	return msgs[0], nil
}

// LinkMaxMTU returns the largest MTU the link called name accepts
// (IFLA_MAX_MTU), or 0 when the kernel does not say.
// Equivalent to: ip -d link show dev $name (its maxmtu)
func (h *Handle) LinkMaxMTU(name string) (int, error) {
	s, err := h.routeSocket()
	if err != nil {
		return 0, err
	}
	defer s.Close()
	req := nl.NewNetlinkRequest(unix.RTM_GETLINK, unix.NLM_F_REQUEST)
	req.AddData(nl.NewIfInfomsg(unix.AF_UNSPEC))
	req.AddData(nl.NewRtAttr(unix.IFLA_IFNAME, nl.ZeroTerminated(name)))
	req.Sockets = map[int]*nl.SocketHandle{unix.NETLINK_ROUTE: s}
	msgs, err := req.Execute(unix.NETLINK_ROUTE, unix.RTM_NEWLINK)
	if errors.Is(err, unix.ENODEV) {
		return 0, fmt.Errorf("link %s: %w", name, ErrLinkNotFound)
	}
	if err != nil {
		return 0, fmt.Errorf("link %s: %w", name, err)
	}
	for _, m := range msgs {
		if len(m) < unix.SizeofIfInfomsg {
			continue
		}
		attrs, err := nl.ParseRouteAttr(m[unix.SizeofIfInfomsg:])
		if err != nil {
			return 0, fmt.Errorf("link %s: %w", name, err)
		}
		for _, a := range attrs {
			if a.Attr.Type == unix.IFLA_MAX_MTU && len(a.Value) >= 4 {
				return int(nl.NativeEndian().Uint32(a.Value)), nil
			}
		}
	}
	return 0, nil
}
