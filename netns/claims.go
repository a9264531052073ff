package netns

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"slices"
	"sync"

	"golang.org/x/sys/unix"
)

// Claim is what one ARP or neighbour discovery frame says about an
// address: MAC holds it, or (Probe) probes for it, about to take it.
type Claim struct {
	Addr  netip.Addr
	MAC   net.HardwareAddr
	Probe bool
}

// WatchClaims calls claim for each address an ARP or neighbour discovery
// frame reaching the link called link (in h's namespace) claims, until ctx
// ends; it sends nothing. ARP requests and replies claim their sender's
// address (an RFC 5227 probe, sender 0.0.0.0, the target it probes for);
// neighbour advertisements their target; solicitations their source, or
// for duplicate address detection (source ::) the target they probe for.
// Frames from the link's own MAC are not claims.
//
// Only what the link itself receives counts (see recvOn): broadcasts, the
// multicast groups its macvlan children joined (each address's
// solicited-node group among them) and frames to the link's own MAC. So
// another host's probe for a child's address, or its announcement of it,
// is seen here; frames the kernel hands on to a child or to a VLAN device
// on the link are not (another VLAN may use the same addresses).
//
// claim runs on one goroutine per address family, so calls may overlap.
func (h *Handle) WatchClaims(ctx context.Context, link string, claim func(Claim)) error {
	l, err := h.LinkByName(link)
	if err != nil {
		return err
	}
	arp, err := h.packetSocket(l.Index, unix.ETH_P_ARP)
	if err != nil {
		return fmt.Errorf("watch %s: %w", link, err)
	}
	nd, err := h.packetSocket(l.Index, unix.ETH_P_IPV6)
	if err == nil {
		err = rawControl(nd, attachNDFilter)
	}
	if err != nil {
		arp.Close()
		if nd != nil {
			nd.Close()
		}
		return fmt.Errorf("watch %s: %w", link, err)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make(chan error, 2)
	var wg sync.WaitGroup
	for _, f := range []*os.File{arp, nd} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 2048)
			for {
				n, err := recvOn(f, buf, l.Index)
				if err != nil {
					if ctx.Err() == nil {
						errs <- fmt.Errorf("watch %s: receive: %w", link, err)
					}
					return
				}
				if c, ok := parseClaim(buf[:n]); ok && !slices.Equal(c.MAC, l.MAC) {
					claim(c)
				}
			}
		}()
	}
	select {
	case <-ctx.Done():
		err = nil
	case err = <-errs:
	}
	cancel()
	// Closing the files ends the reads.
	arp.Close()
	nd.Close()
	wg.Wait()
	return err
}

// recvOn reads from f, a packet socket bound to the link with index
// ifindex, the next frame that link itself received: not one the kernel
// handed on to a device on top of it (a macvlan child, a VLAN: packet
// sockets of the lower link see those too, under the upper device's index)
// nor one addressed to another host's MAC, nor one that reached the socket
// before it was bound. It honours f's read deadline; closing f ends it.
func recvOn(f *os.File, buf []byte, ifindex int) (int, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return 0, err
	}
	for {
		var (
			n    int
			from unix.Sockaddr
			rerr error
		)
		if err := rc.Read(func(fd uintptr) bool {
			n, from, rerr = unix.Recvfrom(int(fd), buf, 0)
			return !errors.Is(rerr, unix.EAGAIN)
		}); err != nil {
			return 0, err
		}
		if rerr != nil {
			return 0, rerr
		}
		if ll, ok := from.(*unix.SockaddrLinklayer); ok && ll.Ifindex == ifindex && ll.Pkttype != unix.PACKET_OTHERHOST {
			return n, nil
		}
	}
}

// attachNDFilter lets only ICMPv6 neighbour solicitations and
// advertisements through an IPv6 packet socket (no extension headers: there
// are none before neighbour discovery's ICMPv6), so the watch wakes for
// nothing else the parent receives.
func attachNDFilter(fd int) error {
	const (
		ldb = unix.BPF_LD | unix.BPF_B | unix.BPF_ABS
		jeq = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
		ret = unix.BPF_RET | unix.BPF_K
	)
	prog := []unix.SockFilter{
		{Code: ldb, K: 14 + 6},     // next header
		{Code: jeq, Jf: 4, K: 58},  // ICMPv6, else drop
		{Code: ldb, K: 14 + 40},    // ICMPv6 type
		{Code: jeq, Jt: 1, K: 135}, // solicitation
		{Code: jeq, Jf: 1, K: 136}, // advertisement, else drop
		{Code: ret, K: 0xffff},     // keep
		{Code: ret, K: 0},          // drop
	}
	return unix.SetsockoptSockFprog(fd, unix.SOL_SOCKET, unix.SO_ATTACH_FILTER,
		&unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]})
}

// parseClaim is the claim of an ARP packet or an ICMPv6 neighbour discovery
// message (Ethernet frames), if frame is one.
func parseClaim(frame []byte) (Claim, bool) {
	if len(frame) < 14 {
		return Claim{}, false
	}
	eth, body := frame[:14], frame[14:]
	switch binary.BigEndian.Uint16(eth[12:]) {
	case unix.ETH_P_ARP:
		if len(body) < 28 || binary.BigEndian.Uint16(body[0:]) != 1 || binary.BigEndian.Uint16(body[2:]) != unix.ETH_P_IP ||
			body[4] != 6 || body[5] != 4 {
			return Claim{}, false
		}
		if op := binary.BigEndian.Uint16(body[6:]); op != 1 && op != 2 {
			return Claim{}, false
		}
		mac := slices.Clone(net.HardwareAddr(body[8:14]))
		if sender := netip.AddrFrom4([4]byte(body[14:18])); !sender.IsUnspecified() {
			return Claim{Addr: sender, MAC: mac}, true
		}
		return Claim{Addr: netip.AddrFrom4([4]byte(body[24:28])), MAC: mac, Probe: true}, true
	case unix.ETH_P_IPV6:
		// Neighbour discovery is sent with hop limit 255 and checked for
		// it (RFC 4861 7.1.1): anything else was routed, not on the link.
		if len(body) < 40+24 || body[0]>>4 != 6 || body[6] != unix.IPPROTO_ICMPV6 || body[7] != 255 {
			return Claim{}, false
		}
		src, icmp := netip.AddrFrom16([16]byte(body[8:24])), body[40:]
		target := netip.AddrFrom16([16]byte(icmp[8:24]))
		if icmp[1] != 0 || target.IsMulticast() {
			return Claim{}, false
		}
		// The link-layer address option (source in a solicitation, target
		// in an advertisement) names the holder; without it, the frame's
		// source does.
		mac, opt := slices.Clone(net.HardwareAddr(eth[6:12])), byte(2)
		switch {
		case icmp[0] == 136:
		case icmp[0] == 135 && src.IsUnspecified():
			return Claim{Addr: target, MAC: mac, Probe: true}, true
		case icmp[0] == 135:
			target, opt = src, 1
		default:
			return Claim{}, false
		}
		for o := icmp[24:]; len(o) >= 8 && o[1] != 0 && int(o[1])*8 <= len(o); o = o[int(o[1])*8:] {
			if o[0] == opt && o[1] == 1 {
				mac = slices.Clone(net.HardwareAddr(o[2:8]))
				break
			}
		}
		return Claim{Addr: target, MAC: mac}, true
	}
	return Claim{}, false
}

// claimant is the MAC address of the host that frame says holds addr, or
// nil (RFC 5227 2.1.1: any ARP packet whose sender is the address, not
// only an answer; for IPv6 any neighbour discovery message of its holder).
func claimant(frame []byte, addr netip.Addr) net.HardwareAddr {
	if c, ok := parseClaim(frame); ok && !c.Probe && c.Addr == addr {
		return c.MAC
	}
	return nil
}
