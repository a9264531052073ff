package rdmaexec

import (
	"fmt"
	"net/netip"
	"syscall"
	"unsafe"
)

// SystemIfaces lists the interfaces of the calling process's network
// namespace and their addresses through rtnetlink (RTM_GETLINK and
// RTM_GETADDR), as `ip addr` does, without the net package's resolver.
func SystemIfaces() ([]Iface, error) {
	names := map[int32]string{}
	var order []int32
	links, err := dump(syscall.RTM_GETLINK)
	if err != nil {
		return nil, err
	}
	for _, m := range links {
		if m.Header.Type != syscall.RTM_NEWLINK || len(m.Data) < syscall.SizeofIfInfomsg {
			continue
		}
		info := (*syscall.IfInfomsg)(unsafe.Pointer(&m.Data[0]))
		attrs, err := syscall.ParseNetlinkRouteAttr(&m)
		if err != nil {
			return nil, fmt.Errorf("decode a link: %w", err)
		}
		for _, a := range attrs {
			if a.Attr.Type == syscall.IFLA_IFNAME {
				names[info.Index] = cString(a.Value)
				order = append(order, info.Index)
			}
		}
	}
	addrs := map[int32][]netip.Prefix{}
	msgs, err := dump(syscall.RTM_GETADDR)
	if err != nil {
		return nil, err
	}
	for _, m := range msgs {
		if m.Header.Type != syscall.RTM_NEWADDR || len(m.Data) < syscall.SizeofIfAddrmsg {
			continue
		}
		am := (*syscall.IfAddrmsg)(unsafe.Pointer(&m.Data[0]))
		attrs, err := syscall.ParseNetlinkRouteAttr(&m)
		if err != nil {
			return nil, fmt.Errorf("decode an address: %w", err)
		}
		var local, address netip.Addr
		for _, a := range attrs {
			ip, ok := netip.AddrFromSlice(a.Value)
			if !ok {
				continue
			}
			switch a.Attr.Type {
			case syscall.IFA_LOCAL:
				local = ip
			case syscall.IFA_ADDRESS:
				address = ip
			}
		}
		// IFA_LOCAL is the interface's own address where both are given
		// (point-to-point links); IFA_ADDRESS otherwise.
		ip := address
		if local.IsValid() {
			ip = local
		}
		if ip.IsValid() {
			addrs[int32(am.Index)] = append(addrs[int32(am.Index)], netip.PrefixFrom(ip.Unmap(), int(am.Prefixlen)))
		}
	}
	out := make([]Iface, 0, len(order))
	for _, i := range order {
		out = append(out, Iface{Name: names[i], Addrs: addrs[i]})
	}
	return out, nil
}

func dump(typ int) ([]syscall.NetlinkMessage, error) {
	b, err := syscall.NetlinkRIB(typ, syscall.AF_UNSPEC)
	if err != nil {
		return nil, fmt.Errorf("netlink dump %d: %w", typ, err)
	}
	msgs, err := syscall.ParseNetlinkMessage(b)
	if err != nil {
		return nil, fmt.Errorf("netlink dump %d: %w", typ, err)
	}
	return msgs, nil
}

func cString(b []byte) string {
	for i, c := range b {
		if c == 0 {
			return string(b[:i])
		}
	}
	return string(b)
}
