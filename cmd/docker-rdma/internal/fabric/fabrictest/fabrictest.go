// Package fabrictest holds DCB netlink replies as the kernel sends them and a
// fake fabric.Kernel that answers with them, for the tests of fabric and of
// docker rdma doctor.
package fabrictest

import (
	"encoding/binary"
	"fmt"
	"strings"
	"syscall"

	"github.com/rdma-macvlan/rdma-macvlan/cmd/docker-rdma/internal/fabric"
)

// The replies below are what the kernel's dcbnl_ieee_fill (net/dcb/dcbnl.c)
// sends for DCB_CMD_IEEE_GET, laid out by hand from the structures and enums
// of include/uapi/linux/dcbnl.h: struct dcbmsg, then DCB_ATTR_IFNAME,
// DCB_ATTR_IEEE (ETS, PFC, the APP table, on 6.3+ the trust table) and
// DCB_ATTR_DCBX, in host byte order. The values are those of a ConnectX-6
// port in DSCP trust with PFC on priority 3 (mlx5's default DSCP map: DSCP
// d on priority d/8). They are built with their own small encoder, not
// with the code under test.

// NLA is one netlink attribute, padded to 4 bytes.
func NLA(typ uint16, payload ...[]byte) []byte {
	var body []byte
	for _, p := range payload {
		body = append(body, p...)
	}
	b := make([]byte, 4, 4+len(body)+3)
	binary.NativeEndian.PutUint16(b[0:], uint16(4+len(body)))
	binary.NativeEndian.PutUint16(b[2:], typ)
	b = append(b, body...)
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	return b
}

func u64s(v [8]uint64) []byte {
	b := make([]byte, 64)
	for i, x := range v {
		binary.NativeEndian.PutUint64(b[8*i:], x)
	}
	return b
}

// etsStruct is struct ieee_ets (59 bytes) with prio_tc set.
func etsStruct(prioTC [8]byte) []byte {
	b := []byte{0 /*willing*/, 8 /*ets_cap*/, 0 /*cbs*/}
	b = append(b, 0, 0, 0, 0, 0, 0, 0, 0) // tc_tx_bw
	b = append(b, 0, 0, 0, 0, 0, 0, 0, 0) // tc_rx_bw
	b = append(b, 2, 2, 2, 2, 2, 2, 2, 2) // tc_tsa: ETS
	b = append(b, prioTC[:]...)           // prio_tc
	b = append(b, make([]byte, 3*8)...)   // reco_*
	return b
}

// pfcStruct is struct ieee_pfc (136 bytes).
func pfcStruct(cap, en byte, delay uint16, req, ind [8]uint64) []byte {
	b := []byte{cap, en, 0 /*mbc*/, 0 /*pad*/, 0, 0 /*delay*/, 0, 0 /*pad to u64*/}
	binary.NativeEndian.PutUint16(b[4:], delay)
	b = append(b, u64s(req)...)
	return append(b, u64s(ind)...)
}

// dcbApp is struct dcb_app.
func dcbApp(selector, prio byte, protocol uint16) []byte {
	b := []byte{selector, prio, 0, 0}
	binary.NativeEndian.PutUint16(b[2:], protocol)
	return b
}

// ReplyOpts choose the port's settings.
type ReplyOpts struct {
	Ifname string
	PFCEn  byte
	// dscp maps DSCP values to priorities; nil: mlx5's default map.
	DSCP  map[int]int
	Trust []byte // selectors; nil: no trust table (before 6.3)
	NoPFC bool
}

// MLX5Reply is the kernel's answer to DCB_CMD_IEEE_GET for a ConnectX port
// with the settings o.
func MLX5Reply(o ReplyOpts) []byte {
	if o.Ifname == "" {
		o.Ifname = "ens1f0np0"
	}
	ieee := [][]byte{NLA(1, etsStruct([8]byte{1, 0, 2, 3, 4, 5, 6, 7}))}
	if !o.NoPFC {
		ieee = append(ieee, NLA(2, pfcStruct(8, o.PFCEn, 52000, [8]uint64{3: 17}, [8]uint64{3: 42})))
	}
	var apps [][]byte
	for d := range 64 {
		p, ok := d>>3, true
		if o.DSCP != nil {
			p, ok = o.DSCP[d]
		}
		if ok {
			apps = append(apps, NLA(1, dcbApp(5, byte(p), uint16(d))))
		}
	}
	apps = append(apps, NLA(1, dcbApp(1, 4, 0x8906))) // an ethertype entry (FCoE)
	ieee = append(ieee, NLA(3|0x8000, apps...))
	if o.Trust != nil {
		var sels [][]byte
		for _, s := range o.Trust {
			typ := uint16(1)
			if s == 255 {
				typ = 2
			}
			sels = append(sels, NLA(typ, []byte{s}))
		}
		ieee = append(ieee, NLA(11, sels...))
	}
	b := []byte{0, 21, 0, 0}
	b = append(b, NLA(1, append([]byte(o.Ifname), 0))...)
	b = append(b, NLA(13, ieee...)...)
	return append(b, NLA(14, []byte{0x0a})...)
}

// Kernel answers DCB requests with recorded replies or errors, per netdev,
// and records the requests.
type Kernel struct {
	Links    map[string]fabric.Link
	Replies  map[string][]byte
	Errs     map[string]error
	Requests [][]byte
}

// GetDCB answers from Replies and Errs; other netdevs do not exist.
func (k *Kernel) GetDCB(body []byte) ([]byte, error) {
	k.Requests = append(k.Requests, append([]byte(nil), body...))
	// The name sits after dcbmsg and the attribute header.
	name := strings.TrimRight(string(body[8:]), "\x00")
	if err := k.Errs[name]; err != nil {
		return nil, fmt.Errorf("dcb netlink: %w", err)
	}
	if r, ok := k.Replies[name]; ok {
		return r, nil
	}
	return nil, fmt.Errorf("dcb netlink: %w", syscall.ENODEV)
}

// Link answers from Links.
func (k *Kernel) Link(name string) (fabric.Link, error) {
	l, ok := k.Links[name]
	if !ok {
		return fabric.Link{}, fmt.Errorf("link %s: not found", name)
	}
	return l, nil
}
