package netns_test

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/rdma-macvlan/rdma-macvlan/netns"
	"github.com/vishvananda/netlink/nl"
)

// The replies below are built from the attribute layout of
// include/uapi/rdma/rdma_netlink.h (struct nlattr: u16 length counting its
// 4-byte header, u16 type, the value padded to 4 bytes; u32 values in host
// order, strings NUL-terminated), not captured from a kernel: this machine
// has no RDMA device.

func rdmaAttr(typ uint16, v []byte) []byte {
	b := make([]byte, 4, 4+len(v)+3)
	nl.NativeEndian().PutUint16(b, uint16(4+len(v)))
	nl.NativeEndian().PutUint16(b[2:], typ)
	b = append(b, v...)
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	return b
}

func rdmaU32(typ uint16, n uint32) []byte {
	v := make([]byte, 4)
	nl.NativeEndian().PutUint32(v, n)
	return rdmaAttr(typ, v)
}

func rdmaStr(typ uint16, s string) []byte { return rdmaAttr(typ, append([]byte(s), 0)) }

// portReply is one port's reply as fill_port_info writes it: device index
// and name, port, then attributes the parser skips (capability flags, u64;
// port state, u8), then the netdev's ifindex and name when it has one.
func portReply(dev uint32, hca string, port uint32, ndevIdx uint32, ndev string) []byte {
	var m []byte
	m = append(m, rdmaU32(1, dev)...)
	m = append(m, rdmaStr(2, hca)...)
	m = append(m, rdmaU32(3, port)...)
	m = append(m, rdmaAttr(4, make([]byte, 8))...) // RDMA_NLDEV_ATTR_CAP_FLAGS
	m = append(m, rdmaAttr(12, []byte{4})...)      // RDMA_NLDEV_ATTR_PORT_STATE, padded
	if ndev != "" {
		m = append(m, rdmaU32(50, ndevIdx)...)
		m = append(m, rdmaStr(51, ndev)...)
	}
	return m
}

func TestParseRdmaPortReplies(t *testing.T) {
	got, err := netns.ParseRdmaPortReplies([][]byte{
		portReply(3, "mlx5_bond_0", 1, 7, "bond0"),
		portReply(4, "mlx4_0", 1, 9, "eth2"),
		portReply(4, "mlx4_0", 2, 0, ""), // an InfiniBand port: no netdev
		portReply(5, "rxe_p0.100", 1, 12, "p0.100.200"),
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []netns.RdmaPortNetdev{
		{HCA: "mlx5_bond_0", HCAIndex: 3, Port: 1, NetdevIndex: 7, Netdev: "bond0"},
		{HCA: "mlx4_0", HCAIndex: 4, Port: 1, NetdevIndex: 9, Netdev: "eth2"},
		{HCA: "mlx4_0", HCAIndex: 4, Port: 2},
		{HCA: "rxe_p0.100", HCAIndex: 5, Port: 1, NetdevIndex: 12, Netdev: "p0.100.200"},
	}
	if len(got) != len(want) {
		t.Fatalf("parsed %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("port %d: %+v, want %+v", i, got[i], want[i])
		}
	}

	good := portReply(3, "mlx5_bond_0", 1, 7, "bond0")
	for _, c := range []struct {
		name string
		msg  []byte
		says string
	}{
		{"truncated attribute", good[:len(good)-4], "past the reply"},
		{"stray bytes", append(append([]byte{}, good...), 1, 2), "stray bytes"},
		{"zero length", append(append([]byte{}, good...), 0, 0, 0, 0), "has length 0"},
		{"no port", append(rdmaU32(1, 3), rdmaStr(2, "mlx5_0")...), "no device name or port"},
		{"short u32", append(append([]byte{}, good...), rdmaAttr(50, []byte{1, 2})...), "u32 of 2 bytes"},
		{"string without NUL", append(append([]byte{}, good...), rdmaAttr(51, []byte("bond"))...), "without its NUL"},
	} {
		if _, err := netns.ParseRdmaPortReplies([][]byte{c.msg}); err == nil || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s: error %v, want one saying %q", c.name, err, c.says)
		}
	}
}

// On the running kernel: either it has no RDMA netlink (the sentinel, for
// the driver to fall back on sysfs), or every port it names a netdev of
// names one that exists here by that ifindex and name.
func TestRdmaPortNetdevsOfThisKernel(t *testing.T) {
	h, err := netns.Current()
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	ports, err := h.RdmaPortNetdevs()
	// The kernel test's VM has RDMA devices: there the view must be real.
	required := os.Getenv("RDMA_MACVLAN_TEST_RDMA_NETLINK") == "required"
	if errors.Is(err, netns.ErrNoRdmaNetlink) && !required {
		t.Logf("no RDMA netlink on this kernel: %v", err)
		return
	}
	if required && len(ports) == 0 {
		t.Fatalf("RDMA_MACVLAN_TEST_RDMA_NETLINK=required: no RDMA port in the kernel's view (%v)", err)
	}
	if err != nil {
		t.Fatalf("RdmaPortNetdevs: %v (want a list, or an error wrapping ErrNoRdmaNetlink)", err)
	}
	for _, p := range ports {
		if p.NetdevIndex == 0 {
			continue
		}
		l, err := h.LinkByIndex(p.NetdevIndex)
		if err != nil || l.Name != p.Netdev {
			t.Errorf("%s port %d names netdev %s (ifindex %d), but that ifindex is %+v (%v)", p.HCA, p.Port, p.Netdev, p.NetdevIndex, l.Name, err)
		}
	}
	t.Logf("%d RDMA ports: %+v", len(ports), ports)
}
