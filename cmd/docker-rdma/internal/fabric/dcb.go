// Package fabric checks what a lossless RoCE fabric needs of a parent netdev
// on the host: priority flow control (PFC) per priority, the trust mode and
// the DSCP-to-priority map (IEEE 802.1Qaz DCB, read through DCB netlink),
// ECN where the driver exposes it, and the RoCE path MTU the netdev's MTU
// gives. It builds and reads DCB netlink messages itself and leaves the
// socket to its caller (a Kernel), so it never talks to the kernel directly
// and its tests feed it recorded replies.
package fabric

import (
	"encoding/binary"
	"errors"
	"fmt"
	"syscall"
)

// The DCB netlink layout below is taken from the kernel's
// include/uapi/linux/dcbnl.h (the 802.1Qaz part, with the trust table added
// in 6.3): the enum values are positions in the kernel's enums and must not
// be renumbered.
const (
	afUnspec = 0

	// enum dcbnl_commands
	cmdIEEEGet = 21 // DCB_CMD_IEEE_GET

	// enum dcbnl_attrs
	attrIfname = 1  // DCB_ATTR_IFNAME, NLA_STRING
	attrIEEE   = 13 // DCB_ATTR_IEEE, nested enum ieee_attrs
	attrDCBX   = 14 // DCB_ATTR_DCBX, u8

	// enum ieee_attrs, inside DCB_ATTR_IEEE
	ieeeETS        = 1  // DCB_ATTR_IEEE_ETS, struct ieee_ets
	ieeePFC        = 2  // DCB_ATTR_IEEE_PFC, struct ieee_pfc
	ieeeAppTable   = 3  // DCB_ATTR_IEEE_APP_TABLE, nested
	ieeeTrustTable = 11 // DCB_ATTR_DCB_APP_TRUST_TABLE, nested

	// enum ieee_attrs_app, inside the APP and trust tables
	appIEEE = 1 // DCB_ATTR_IEEE_APP: struct dcb_app (table) or u8 selector (trust)
	appDCB  = 2 // DCB_ATTR_DCB_APP: the same for non-standard selectors

	// dcb_app selectors
	SelectorDSCP = 5   // IEEE_8021QAZ_APP_SEL_DSCP
	SelectorPCP  = 255 // DCB_APP_SEL_PCP

	// struct ieee_ets: willing, ets_cap, cbs, then 7 arrays of 8 bytes;
	// prio_tc is the fourth.
	etsLen       = 3 + 7*8
	etsPrioTCOff = 3 + 3*8
	// struct ieee_pfc: pfc_cap, pfc_en, mbc, a pad byte, u16 delay, pad to
	// 8, then requests[8] and indications[8], u64 each.
	pfcLen         = 8 + 2*8*8
	pfcCapOff      = 0
	pfcEnOff       = 1
	pfcDelayOff    = 4
	pfcRequestsOff = 8
	pfcIndicOff    = 8 + 8*8

	nlaFNested   = 0x8000
	nlaFByteOrd  = 0x4000
	nlaTypeMask  = ^uint16(nlaFNested | nlaFByteOrd)
	dcbmsgLen    = 4
	nlaHeaderLen = 4
)

// Priorities is the number of 802.1p priorities (IEEE_8021QAZ_MAX_TCS).
const Priorities = 8

// Kernel is what the checks need from the kernel, in one network namespace.
type Kernel interface {
	// GetDCB sends one RTM_GETDCB request body (struct dcbmsg and its
	// attributes) and returns the body of the answer; a kernel error
	// comes back as its syscall.Errno (wrapped).
	GetDCB(body []byte) ([]byte, error)
	// Link describes the netdev called name.
	Link(name string) (Link, error)
}

// Link is what the checks need to know about a netdev.
type Link struct {
	Name string
	Kind string // "vlan", "device", "veth", ...
	MTU  int
	// MaxMTU is the largest MTU the netdev accepts; 0 when unknown.
	MaxMTU int
	// Lower is the netdev a VLAN sits on (its DCB settings are the lower
	// device's); "" for others.
	Lower string
	// Ports are a bond's ports, sorted: a bond has no DCB of its own (no
	// dcbnl_ops), its ports' settings apply. nil for others.
	Ports []string
}

// ErrNotReported says the netdev's driver does not implement DCB (veth,
// Soft-RoCE's parents, most virtual devices): the kernel answers EOPNOTSUPP.
var ErrNotReported = errors.New("not reported by this NIC")

// DCB is a netdev's IEEE 802.1Qaz configuration as the kernel reports it.
type DCB struct {
	Netdev string `json:"netdev"`
	// PFC is nil when the driver reports no PFC object.
	PFC *PFC `json:"pfc,omitempty"`
	// PrioTC maps each priority to a hardware traffic class (ETS); nil
	// when the driver reports no ETS object.
	PrioTC []int `json:"prio_tc,omitempty"`
	// Trust is the trust table, most trusted selector first ("dscp",
	// "pcp"); nil when the driver does not report one (before 6.3, or a
	// driver without the call).
	Trust []string `json:"trust,omitempty"`
	// DSCP maps DSCP values to priorities (the APP table's DSCP entries).
	DSCP map[int]int `json:"dscp_prio,omitempty"`
	// DCBX is the DCBX mode bits (DCB_CAP_DCBX_*), -1 when not reported.
	DCBX int `json:"dcbx"`
}

// PFC is struct ieee_pfc.
type PFC struct {
	// Cap is how many priorities can have PFC at once.
	Cap int `json:"cap"`
	// Enabled[p] is whether priority p is lossless.
	Enabled [Priorities]bool `json:"enabled"`
	// Delay is the round-trip allowance in bits.
	Delay int `json:"delay"`
	// Requests and Indications count the pause frames sent and received
	// per priority.
	Requests    [Priorities]uint64 `json:"requests"`
	Indications [Priorities]uint64 `json:"indications"`
}

// EnabledPriorities lists the priorities with PFC on.
func (p *PFC) EnabledPriorities() []int { return onPriorities(&p.Enabled) }

// onPriorities lists the priorities that are true in on.
func onPriorities(on *[Priorities]bool) []int {
	var out []int
	for i, v := range on {
		if v {
			out = append(out, i)
		}
	}
	return out
}

// IEEEGetRequest is the body of a DCB_CMD_IEEE_GET request for ifname.
func IEEEGetRequest(ifname string) []byte {
	b := []byte{afUnspec, cmdIEEEGet, 0, 0}
	return appendAttr(b, attrIfname, append([]byte(ifname), 0))
}

func appendAttr(b []byte, typ uint16, payload []byte) []byte {
	var h [nlaHeaderLen]byte
	binary.NativeEndian.PutUint16(h[0:], uint16(nlaHeaderLen+len(payload)))
	binary.NativeEndian.PutUint16(h[2:], typ)
	b = append(b, h[:]...)
	b = append(b, payload...)
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	return b
}

// ReadDCB asks k for the IEEE 802.1Qaz configuration of ifname.
// Equivalent to: dcb pfc show dev IFNAME; dcb ets show dev IFNAME;
// dcb app show dev IFNAME; dcb apptrust show dev IFNAME
func ReadDCB(k Kernel, ifname string) (*DCB, error) {
	reply, err := k.GetDCB(IEEEGetRequest(ifname))
	if errors.Is(err, syscall.EOPNOTSUPP) {
		return nil, fmt.Errorf("DCB of %s: %w (the kernel answers: %w)", ifname, ErrNotReported, err)
	}
	if err != nil {
		return nil, fmt.Errorf("DCB of %s: %w", ifname, err)
	}
	d, err := ParseIEEE(reply)
	if err != nil {
		return nil, fmt.Errorf("DCB of %s: %w", ifname, err)
	}
	if d.Netdev == "" {
		d.Netdev = ifname
	}
	return d, nil
}

// ParseIEEE reads the body of the kernel's answer to DCB_CMD_IEEE_GET.
func ParseIEEE(body []byte) (*DCB, error) {
	if len(body) < dcbmsgLen {
		return nil, fmt.Errorf("DCB answer of %d bytes, shorter than struct dcbmsg", len(body))
	}
	if body[1] != cmdIEEEGet {
		return nil, fmt.Errorf("DCB answer to command %d, want DCB_CMD_IEEE_GET (%d)", body[1], cmdIEEEGet)
	}
	top, err := parseAttrs(body[dcbmsgLen:])
	if err != nil {
		return nil, err
	}
	d := &DCB{DCBX: -1}
	for _, a := range top {
		switch a.typ {
		case attrIfname:
			d.Netdev = cString(a.val)
		case attrDCBX:
			if len(a.val) >= 1 {
				d.DCBX = int(a.val[0])
			}
		case attrIEEE:
			if err := d.parseIEEENest(a.val); err != nil {
				return nil, err
			}
		}
	}
	return d, nil
}

func (d *DCB) parseIEEENest(b []byte) error {
	attrs, err := parseAttrs(b)
	if err != nil {
		return fmt.Errorf("DCB_ATTR_IEEE: %w", err)
	}
	for _, a := range attrs {
		switch a.typ {
		case ieeeETS:
			if len(a.val) < etsLen {
				return fmt.Errorf("DCB_ATTR_IEEE_ETS of %d bytes, want %d", len(a.val), etsLen)
			}
			d.PrioTC = make([]int, Priorities)
			for p := range Priorities {
				d.PrioTC[p] = int(a.val[etsPrioTCOff+p])
			}
		case ieeePFC:
			if len(a.val) < pfcLen {
				return fmt.Errorf("DCB_ATTR_IEEE_PFC of %d bytes, want %d", len(a.val), pfcLen)
			}
			pfc := &PFC{Cap: int(a.val[pfcCapOff]), Delay: int(binary.NativeEndian.Uint16(a.val[pfcDelayOff:]))}
			for p := range Priorities {
				pfc.Enabled[p] = a.val[pfcEnOff]&(1<<p) != 0
				pfc.Requests[p] = binary.NativeEndian.Uint64(a.val[pfcRequestsOff+8*p:])
				pfc.Indications[p] = binary.NativeEndian.Uint64(a.val[pfcIndicOff+8*p:])
			}
			d.PFC = pfc
		case ieeeAppTable:
			apps, err := parseAttrs(a.val)
			if err != nil {
				return fmt.Errorf("DCB_ATTR_IEEE_APP_TABLE: %w", err)
			}
			for _, app := range apps {
				// struct dcb_app: selector, priority, u16 protocol.
				if (app.typ != appIEEE && app.typ != appDCB) || len(app.val) < 4 {
					continue
				}
				if app.val[0] != SelectorDSCP {
					continue
				}
				if d.DSCP == nil {
					d.DSCP = map[int]int{}
				}
				d.DSCP[int(binary.NativeEndian.Uint16(app.val[2:]))] = int(app.val[1])
			}
		case ieeeTrustTable:
			sels, err := parseAttrs(a.val)
			if err != nil {
				return fmt.Errorf("DCB_ATTR_DCB_APP_TRUST_TABLE: %w", err)
			}
			d.Trust = []string{}
			for _, s := range sels {
				if (s.typ != appIEEE && s.typ != appDCB) || len(s.val) < 1 {
					continue
				}
				d.Trust = append(d.Trust, selectorName(s.val[0]))
			}
		}
	}
	return nil
}

func selectorName(sel byte) string {
	switch sel {
	case SelectorDSCP:
		return "dscp"
	case SelectorPCP:
		return "pcp"
	}
	return fmt.Sprintf("selector %d", sel)
}

type attr struct {
	typ uint16
	val []byte
}

// parseAttrs splits a run of netlink attributes, refusing one that claims
// more bytes than there are.
func parseAttrs(b []byte) ([]attr, error) {
	var out []attr
	for len(b) >= nlaHeaderLen {
		n := int(binary.NativeEndian.Uint16(b[0:]))
		typ := binary.NativeEndian.Uint16(b[2:]) & nlaTypeMask
		if n < nlaHeaderLen || n > len(b) {
			return nil, fmt.Errorf("netlink attribute %d claims %d bytes of %d", typ, n, len(b))
		}
		out = append(out, attr{typ: typ, val: b[nlaHeaderLen:n]})
		n = (n + 3) &^ 3
		if n > len(b) {
			n = len(b)
		}
		b = b[n:]
	}
	return out, nil
}

func cString(b []byte) string {
	for i, c := range b {
		if c == 0 {
			return string(b[:i])
		}
	}
	return string(b)
}
