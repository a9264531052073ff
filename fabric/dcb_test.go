package fabric

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strings"
	"syscall"
	"testing"
)

// The replies below are what the kernel's dcbnl_ieee_fill (net/dcb/dcbnl.c)
// sends for DCB_CMD_IEEE_GET, laid out by hand from the structures and enums
// of include/uapi/linux/dcbnl.h: struct dcbmsg, then DCB_ATTR_IFNAME,
// DCB_ATTR_IEEE (ETS, PFC, the APP table, on 6.3+ the trust table) and
// DCB_ATTR_DCBX, in host byte order. The values are those of a ConnectX-6
// port in DSCP trust with PFC on priority 3 (mlx5's default DSCP map: DSCP
// d on priority d/8). They are built with their own small encoder, not
// with the code under test.

// nla is one netlink attribute, padded to 4 bytes.
func nla(typ uint16, payload ...[]byte) []byte {
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

type replyOpts struct {
	ifname string
	pfcEn  byte
	// dscp maps DSCP values to priorities; nil: mlx5's default map.
	dscp  map[int]int
	trust []byte // selectors; nil: no trust table (before 6.3)
	noPFC bool
}

func mlx5Reply(o replyOpts) []byte {
	if o.ifname == "" {
		o.ifname = "ens1f0np0"
	}
	ieee := [][]byte{nla(1, etsStruct([8]byte{1, 0, 2, 3, 4, 5, 6, 7}))}
	if !o.noPFC {
		ieee = append(ieee, nla(2, pfcStruct(8, o.pfcEn, 52000, [8]uint64{3: 17}, [8]uint64{3: 42})))
	}
	var apps [][]byte
	for d := range 64 {
		p, ok := d>>3, true
		if o.dscp != nil {
			p, ok = o.dscp[d]
		}
		if ok {
			apps = append(apps, nla(1, dcbApp(5, byte(p), uint16(d))))
		}
	}
	apps = append(apps, nla(1, dcbApp(1, 4, 0x8906))) // an ethertype entry (FCoE)
	ieee = append(ieee, nla(3|0x8000, apps...))
	if o.trust != nil {
		var sels [][]byte
		for _, s := range o.trust {
			typ := uint16(1)
			if s == 255 {
				typ = 2
			}
			sels = append(sels, nla(typ, []byte{s}))
		}
		ieee = append(ieee, nla(11, sels...))
	}
	b := []byte{0, 21, 0, 0}
	b = append(b, nla(1, append([]byte(o.ifname), 0))...)
	b = append(b, nla(13, ieee...)...)
	return append(b, nla(14, []byte{0x0a})...)
}

// fakeKernel answers DCB requests with recorded replies or errors, per
// netdev, and records the requests.
type fakeKernel struct {
	links    map[string]Link
	replies  map[string][]byte
	errs     map[string]error
	requests [][]byte
}

func (k *fakeKernel) GetDCB(body []byte) ([]byte, error) {
	k.requests = append(k.requests, append([]byte(nil), body...))
	// The name sits after dcbmsg and the attribute header.
	name := strings.TrimRight(string(body[8:]), "\x00")
	if err := k.errs[name]; err != nil {
		return nil, fmt.Errorf("dcb netlink: %w", err)
	}
	if r, ok := k.replies[name]; ok {
		return r, nil
	}
	return nil, fmt.Errorf("dcb netlink: %w", syscall.ENODEV)
}

func (k *fakeKernel) Link(name string) (Link, error) {
	l, ok := k.links[name]
	if !ok {
		return Link{}, fmt.Errorf("link %s: not found", name)
	}
	return l, nil
}

func TestIEEEGetRequest(t *testing.T) {
	got := IEEEGetRequest("ens1f0np0")
	want := []byte{0 /*AF_UNSPEC*/, 21 /*DCB_CMD_IEEE_GET*/, 0, 0, 0, 0, 1, 0 /*DCB_ATTR_IFNAME*/}
	binary.NativeEndian.PutUint16(want[4:], 4+10)
	want = append(want, "ens1f0np0\x00\x00\x00"...)
	if !bytes.Equal(got, want) {
		t.Errorf("request\n got %x\nwant %x", got, want)
	}
}

func TestParseIEEE(t *testing.T) {
	d, err := ParseIEEE(mlx5Reply(replyOpts{pfcEn: 1 << 3, trust: []byte{5, 255}}))
	if err != nil {
		t.Fatal(err)
	}
	if d.Netdev != "ens1f0np0" || d.DCBX != 0x0a {
		t.Errorf("netdev %q dcbx %#x", d.Netdev, d.DCBX)
	}
	if d.PFC == nil || d.PFC.Cap != 8 || d.PFC.Delay != 52000 || fmt.Sprint(d.PFC.EnabledPriorities()) != "[3]" ||
		d.PFC.Requests[3] != 17 || d.PFC.Indications[3] != 42 || d.PFC.Requests[2] != 0 {
		t.Errorf("PFC %+v", d.PFC)
	}
	if fmt.Sprint(d.PrioTC) != "[1 0 2 3 4 5 6 7]" {
		t.Errorf("prio_tc %v", d.PrioTC)
	}
	if len(d.DSCP) != 64 || d.DSCP[26] != 3 || d.DSCP[63] != 7 || d.DSCP[0] != 0 {
		t.Errorf("DSCP map %v", d.DSCP)
	}
	if strings.Join(d.Trust, ",") != "dscp,pcp" {
		t.Errorf("trust %v", d.Trust)
	}

	old, err := ParseIEEE(mlx5Reply(replyOpts{pfcEn: 1 << 3}))
	if err != nil || old.Trust != nil {
		t.Errorf("no trust table: %v %v", old.Trust, err)
	}
}

func TestParseIEEEMalformed(t *testing.T) {
	good := mlx5Reply(replyOpts{pfcEn: 8})
	short := append([]byte(nil), good[:40]...)
	binary.NativeEndian.PutUint16(short[20:], 4000) // the IEEE nest claims more than there is
	for name, body := range map[string][]byte{
		"no dcbmsg":          {0, 21},
		"another command":    append([]byte{0, 20, 0, 0}, good[4:]...),
		"attribute too long": short,
		"truncated PFC":      append([]byte{0, 21, 0, 0}, nla(13, nla(2, make([]byte, 100)))...),
		"truncated ETS":      append([]byte{0, 21, 0, 0}, nla(13, nla(1, make([]byte, 20)))...),
	} {
		if _, err := ParseIEEE(body); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestRoCEMTU(t *testing.T) {
	for mtu, want := range map[int]int{
		9000: 4096, 4200: 4096, 4192: 4096, 4191: 2048, 2144: 2048, 2143: 1024,
		1500: 1024, 1120: 1024, 1119: 512, 608: 512, 607: 256, 352: 256, 351: 0, 68: 0,
	} {
		if got := RoCEMTU(mtu); got != want {
			t.Errorf("RoCEMTU(%d) = %d, want %d", mtu, got, want)
		}
	}
}
