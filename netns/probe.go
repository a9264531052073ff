package netns

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"runtime"
	"slices"
	"time"

	vnetns "github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// Probe bounds one address probe: Count probes Interval apart, then Wait
// for late answers. Answers on the link's own segment come within
// microseconds to a few milliseconds; the bounds are for a busy host.
type Probe struct {
	Count    int
	Interval time.Duration
	Wait     time.Duration
}

// DefaultProbe is what the daemon sends: three probes, 100 ms apart, and
// 200 ms more for answers: 400 ms in all. RFC 5227 spaces its probes 1-2 s
// apart for hosts that share a segment with slow or sleeping peers; a RoCE
// fabric's hosts answer at once, and a strict network's start waits for the
// whole probe.
var DefaultProbe = Probe{Count: 3, Interval: 100 * time.Millisecond, Wait: 200 * time.Millisecond}

// Duration is how long a probe takes when nothing cuts it short.
func (p Probe) Duration() time.Duration {
	return time.Duration(max(p.Count-1, 0))*p.Interval + p.Wait
}

// ProbeAddress asks the segment of the link called link (in h's namespace)
// whether another host holds addr, and returns the MAC addresses that
// claimed it, other than own (the endpoint's own MAC: on a hairpinning
// switch its own link may see the probe). IPv4 sends RFC 5227 ARP probes
// (sender address 0.0.0.0, so no neighbour learns anything from them);
// IPv6 sends the neighbour solicitation of duplicate address detection
// (RFC 4862: source ::, to the target's solicited-node group). Nothing is
// sent anywhere but that link, and a probe ends after p.Duration() or when
// ctx ends, whichever comes first.
//
// A frame the link itself sends never reaches its macvlan children, so a
// container on the link whose address is set does not answer for itself.
func (h *Handle) ProbeAddress(ctx context.Context, link string, addr netip.Addr, own net.HardwareAddr, p Probe) ([]net.HardwareAddr, error) {
	addr = addr.Unmap()
	if !addr.IsValid() || addr.IsUnspecified() || addr.IsMulticast() || addr.IsLoopback() {
		return nil, fmt.Errorf("probe %s: not a unicast address", addr)
	}
	l, err := h.LinkByName(link)
	if err != nil {
		return nil, err
	}
	if len(l.MAC) != 6 {
		return nil, fmt.Errorf("probe %s on %s: the link has no Ethernet address", addr, link)
	}
	proto := uint16(unix.ETH_P_ARP)
	if addr.Is6() {
		proto = unix.ETH_P_IPV6
	}
	f, err := h.packetSocket(l.Index, proto)
	if err != nil {
		return nil, fmt.Errorf("probe %s on %s: %w", addr, link, err)
	}
	defer f.Close()
	var frame []byte
	if addr.Is4() {
		frame = arpProbe(l.MAC, addr)
	} else {
		frame = dadSolicitation(l.MAC, addr)
		// The answer goes to the all-nodes group.
		mreq := unix.PacketMreq{Ifindex: int32(l.Index), Type: unix.PACKET_MR_MULTICAST, Alen: 6}
		copy(mreq.Address[:], allNodesMAC)
		if err := rawControl(f, func(fd int) error {
			return unix.SetsockoptPacketMreq(fd, unix.SOL_PACKET, unix.PACKET_ADD_MEMBERSHIP, &mreq)
		}); err != nil {
			return nil, fmt.Errorf("probe %s on %s: join the all-nodes group: %w", addr, link, err)
		}
	}
	end := time.Now().Add(p.Duration())
	if dl, ok := ctx.Deadline(); ok && dl.Before(end) {
		end = dl
	}
	var found []net.HardwareAddr
	buf := make([]byte, 2048)
	next := time.Now()
	for sent := 0; ; {
		if sent < p.Count && !time.Now().Before(next) {
			if _, err := f.Write(frame); err != nil {
				return found, fmt.Errorf("probe %s on %s: send: %w", addr, link, err)
			}
			sent++
			next = next.Add(p.Interval)
		}
		wake := end
		if sent < p.Count && next.Before(wake) {
			wake = next
		}
		if ctx.Err() != nil || !time.Now().Before(end) {
			return found, nil
		}
		_ = f.SetReadDeadline(wake)
		n, err := recvOn(f, buf, l.Index)
		if errors.Is(err, os.ErrDeadlineExceeded) {
			continue
		}
		if err != nil {
			return found, fmt.Errorf("probe %s on %s: receive: %w", addr, link, err)
		}
		mac := claimant(buf[:n], addr)
		if mac == nil || slices.Equal(mac, own) || slices.Equal(mac, l.MAC) ||
			slices.ContainsFunc(found, func(m net.HardwareAddr) bool { return slices.Equal(m, mac) }) {
			continue
		}
		found = append(found, mac)
	}
}

var (
	broadcastMAC = net.HardwareAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
	allNodesMAC  = net.HardwareAddr{0x33, 0x33, 0, 0, 0, 1}
)

// arpProbe is the Ethernet frame of an RFC 5227 ARP probe for addr from
// mac: a broadcast request with sender address 0.0.0.0.
func arpProbe(mac net.HardwareAddr, addr netip.Addr) []byte {
	b := make([]byte, 0, 42)
	b = append(b, broadcastMAC...)
	b = append(b, mac...)
	b = binary.BigEndian.AppendUint16(b, unix.ETH_P_ARP)
	b = binary.BigEndian.AppendUint16(b, 1)             // hardware type: Ethernet
	b = binary.BigEndian.AppendUint16(b, unix.ETH_P_IP) // protocol type
	b = append(b, 6, 4)
	b = binary.BigEndian.AppendUint16(b, 1) // request
	b = append(b, mac...)
	b = append(b, 0, 0, 0, 0) // sender address: none yet
	b = append(b, 0, 0, 0, 0, 0, 0)
	a := addr.As4()
	return append(b, a[:]...)
}

// dadSolicitation is the Ethernet frame of a duplicate address detection
// neighbour solicitation for addr from mac.
func dadSolicitation(mac net.HardwareAddr, addr netip.Addr) []byte {
	t := addr.As16()
	group := [16]byte{0xff, 0x02, 10: 0, 11: 1, 12: 0xff, 13: t[13], 14: t[14], 15: t[15]}
	icmp := make([]byte, 24)
	icmp[0] = 135 // neighbour solicitation
	copy(icmp[8:], t[:])
	var src [16]byte
	binary.BigEndian.PutUint16(icmp[2:], icmpv6Checksum(src, group, icmp))
	b := make([]byte, 0, 14+40+len(icmp))
	b = append(b, 0x33, 0x33, group[12], group[13], group[14], group[15])
	b = append(b, mac...)
	b = binary.BigEndian.AppendUint16(b, unix.ETH_P_IPV6)
	b = append(b, 0x60, 0, 0, 0)
	b = binary.BigEndian.AppendUint16(b, uint16(len(icmp)))
	b = append(b, unix.IPPROTO_ICMPV6, 255)
	b = append(b, src[:]...)
	b = append(b, group[:]...)
	return append(b, icmp...)
}

func icmpv6Checksum(src, dst [16]byte, msg []byte) uint16 {
	var sum uint32
	add := func(b []byte) {
		for i := 0; i+1 < len(b); i += 2 {
			sum += uint32(binary.BigEndian.Uint16(b[i:]))
		}
		if len(b)%2 == 1 {
			sum += uint32(b[len(b)-1]) << 8
		}
	}
	add(src[:])
	add(dst[:])
	var l [8]byte
	binary.BigEndian.PutUint32(l[:4], uint32(len(msg)))
	l[7] = unix.IPPROTO_ICMPV6
	add(l[:])
	add(msg)
	for sum > 0xffff {
		sum = sum>>16 + sum&0xffff
	}
	return ^uint16(sum)
}

// packetSocket opens a nonblocking AF_PACKET socket for proto bound to the
// link with index ifindex, in h's namespace.
func (h *Handle) packetSocket(ifindex int, proto uint16) (*os.File, error) {
	open := func() (int, error) {
		return unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, int(htons(proto)))
	}
	var fd int
	var err error
	if h.current {
		fd, err = open()
	} else {
		fd, err = inNamespace(h.ns, open)
	}
	if err != nil {
		return nil, fmt.Errorf("open a packet socket: %w", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(proto), Ifindex: ifindex}); err != nil {
		_ = unix.Close(fd)
		return nil, fmt.Errorf("bind a packet socket to link %d: %w", ifindex, err)
	}
	return os.NewFile(uintptr(fd), "packet"), nil
}

func rawControl(f *os.File, do func(fd int) error) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var inner error
	if err := rc.Control(func(fd uintptr) { inner = do(int(fd)) }); err != nil {
		return err
	}
	return inner
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// inNamespace runs open on a thread switched to ns and back; a thread that
// cannot be switched back stays locked and ends with its goroutine.
func inNamespace(ns vnetns.NsHandle, open func() (int, error)) (int, error) {
	type result struct {
		fd  int
		err error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := vnetns.Get()
		if err != nil {
			runtime.UnlockOSThread()
			ch <- result{-1, fmt.Errorf("get current netns: %w", err)}
			return
		}
		defer orig.Close()
		if err := vnetns.Set(ns); err != nil {
			runtime.UnlockOSThread()
			ch <- result{-1, fmt.Errorf("enter netns %s: %w", ns, err)}
			return
		}
		fd, err := open()
		if rerr := vnetns.Set(orig); rerr == nil {
			runtime.UnlockOSThread()
		}
		ch <- result{fd, err}
	}()
	r := <-ch
	return r.fd, r.err
}
