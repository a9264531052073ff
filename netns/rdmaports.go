package netns

import (
	"errors"
	"fmt"

	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"
)

// RDMA netlink numbers of include/uapi/rdma/rdma_netlink.h that the
// vendored netlink package does not name: the port query and the ifindex
// of a port's netdev. A message's type is client<<10 | op.
const (
	rdmaNLDevClient       = 5  // RDMA_NL_NLDEV
	rdmaNLDevCmdPortGet   = 5  // RDMA_NLDEV_CMD_PORT_GET (can dump)
	rdmaNLDevAttrDevIndex = 1  // RDMA_NLDEV_ATTR_DEV_INDEX, u32
	rdmaNLDevAttrDevName  = 2  // RDMA_NLDEV_ATTR_DEV_NAME, string
	rdmaNLDevAttrPort     = 3  // RDMA_NLDEV_ATTR_PORT_INDEX, u32
	rdmaNLDevAttrNdevIdx  = 50 // RDMA_NLDEV_ATTR_NDEV_INDEX, u32
	rdmaNLDevAttrNdevName = 51 // RDMA_NLDEV_ATTR_NDEV_NAME, string
)

// ErrNoRdmaNetlink is returned (wrapped) when the kernel answers no RDMA
// netlink port query: no ib_core loaded (no RDMA at all), or a kernel older
// than the port query (4.16). Callers fall back on sysfs.
var ErrNoRdmaNetlink = errors.New("the kernel answers no RDMA netlink port query")

// RdmaPortNetdev is one port of an RDMA device and the netdev the kernel
// ties it to: the device a bond's RoCE LAG device (mlx5_bond_0) names is
// the bond, an rxe device's is the netdev it was added on.
type RdmaPortNetdev struct {
	HCA      string
	HCAIndex uint32
	Port     int
	// NetdevIndex and Netdev are the port's netdev in this namespace; 0
	// and "" when it has none here (an InfiniBand port, or its netdev is
	// in another namespace).
	NetdevIndex int
	Netdev      string
}

// RdmaPortNetdevs lists every port of every RDMA device with its netdev,
// as the kernel ties them (not by name, not by the GID tables). It works
// in the namespace the process runs in only: the kernel names a port's
// netdev only to a socket of the netdev's namespace. Errors wrap
// ErrNoRdmaNetlink when the kernel has no such query.
// Equivalent to: rdma -d link show (its "netdev" column)
func (h *Handle) RdmaPortNetdevs() ([]RdmaPortNetdev, error) {
	if !h.current {
		return nil, errors.New("rdma netlink: port netdevs are read in the namespace the daemon runs in only")
	}
	devs, err := h.nl.RdmaLinkList()
	if err != nil {
		if noRdmaNetlink(err) {
			return nil, fmt.Errorf("rdma netlink: list devices: %w (%w)", ErrNoRdmaNetlink, err)
		}
		return nil, fmt.Errorf("rdma netlink: list devices: %w", err)
	}
	var out []RdmaPortNetdev
	for _, dev := range devs {
		msgs, err := rdmaPortDump(dev.Attrs.Index)
		if errors.Is(err, unix.ENODEV) {
			continue // removed since the list
		}
		if err != nil {
			if noRdmaNetlink(err) || errors.Is(err, unix.EINVAL) {
				// A kernel without the port query answers EINVAL to an
				// op it does not know (and so does one whose device
				// index went away: either way sysfs is the answer).
				return nil, fmt.Errorf("rdma netlink: ports of %s: %w (%w)", dev.Attrs.Name, ErrNoRdmaNetlink, err)
			}
			return nil, fmt.Errorf("rdma netlink: ports of %s: %w", dev.Attrs.Name, err)
		}
		ports, err := ParseRdmaPortReplies(msgs)
		if err != nil {
			return nil, fmt.Errorf("rdma netlink: ports of %s: %w", dev.Attrs.Name, err)
		}
		out = append(out, ports...)
	}
	return out, nil
}

// noRdmaNetlink reports whether err says the kernel has no RDMA netlink.
func noRdmaNetlink(err error) bool {
	return errors.Is(err, unix.EPROTONOSUPPORT) || errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.ENOENT)
}

// rdmaPortDump asks the kernel for the ports of the RDMA device with index
// dev. The kernel's dump needs the device index in the request. A dump the
// kernel interrupted (a device or netdev changed meanwhile) is tried again
// (see redump).
func rdmaPortDump(dev uint32) ([][]byte, error) {
	return redump(fmt.Sprintf("the port list of RDMA device index %d", dev), func() ([][]byte, error) {
		req := nl.NewNetlinkRequest(rdmaNLDevClient<<nl.RDMA_NL_GET_CLIENT_SHIFT|rdmaNLDevCmdPortGet, unix.NLM_F_DUMP)
		b := make([]byte, 4)
		nl.NativeEndian().PutUint32(b, dev)
		req.AddData(nl.NewRtAttr(rdmaNLDevAttrDevIndex, b))
		return req.Execute(unix.NETLINK_RDMA, 0)
	})
}

// ParseRdmaPortReplies parses the payloads (after the netlink header) of
// the kernel's replies to a port query: each is a flat list of attributes
// (u16 length counting its 4-byte header, u16 type, value padded to 4
// bytes), with no family header. Attributes it does not need are
// skipped; a reply without device name or port is an error, as is an
// attribute that runs past its message.
func ParseRdmaPortReplies(msgs [][]byte) ([]RdmaPortNetdev, error) {
	out := make([]RdmaPortNetdev, 0, len(msgs))
	for i, m := range msgs {
		var p RdmaPortNetdev
		hasPort := false
		for off := 0; off < len(m); {
			if len(m)-off < 4 {
				return nil, fmt.Errorf("reply %d: %d stray bytes at offset %d", i, len(m)-off, off)
			}
			alen := int(nl.NativeEndian().Uint16(m[off:]))
			typ := nl.NativeEndian().Uint16(m[off+2:]) &^ (unix.NLA_F_NESTED | unix.NLA_F_NET_BYTEORDER)
			if alen < 4 || off+alen > len(m) {
				return nil, fmt.Errorf("reply %d: attribute %d at offset %d has length %d, past the reply's %d bytes", i, typ, off, alen, len(m))
			}
			v := m[off+4 : off+alen]
			var err error
			switch typ {
			case rdmaNLDevAttrDevIndex:
				var n uint32
				n, err = u32Attr(v)
				p.HCAIndex = n
			case rdmaNLDevAttrDevName:
				p.HCA, err = stringAttr(v)
			case rdmaNLDevAttrPort:
				var n uint32
				n, err = u32Attr(v)
				p.Port, hasPort = int(n), true
			case rdmaNLDevAttrNdevIdx:
				var n uint32
				n, err = u32Attr(v)
				p.NetdevIndex = int(n)
			case rdmaNLDevAttrNdevName:
				p.Netdev, err = stringAttr(v)
			}
			if err != nil {
				return nil, fmt.Errorf("reply %d: attribute %d: %w", i, typ, err)
			}
			off += (alen + unix.NLA_ALIGNTO - 1) &^ (unix.NLA_ALIGNTO - 1)
		}
		if p.HCA == "" || !hasPort {
			return nil, fmt.Errorf("reply %d: no device name or port index (%+v)", i, p)
		}
		out = append(out, p)
	}
	return out, nil
}

func u32Attr(v []byte) (uint32, error) {
	if len(v) != 4 {
		return 0, fmt.Errorf("u32 of %d bytes", len(v))
	}
	return nl.NativeEndian().Uint32(v), nil
}

// stringAttr reads a NUL-terminated string attribute.
func stringAttr(v []byte) (string, error) {
	for i, c := range v {
		if c == 0 {
			return string(v[:i]), nil
		}
	}
	return "", fmt.Errorf("string %q without its NUL", v)
}
