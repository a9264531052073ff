package fabric

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// Finding statuses, as docker rdma doctor prints them.
const (
	StatusOK   = "ok"
	StatusInfo = "info"
	StatusWarn = "warn"
)

// Finding is one check's result.
type Finding struct {
	Name   string
	Status string
	Detail string
	Fix    string
}

// Options are what a parent is checked against.
type Options struct {
	// TrafficClass is the IP ToS byte RoCE v2 is sent with (0-255), as
	// NCCL_IB_TC and UCX_IB_TRAFFIC_CLASS set it; -1 when none is given.
	TrafficClass int
	// Root is the sysfs root the driver's ECN files are read under.
	Root string
}

// maxVLANDepth bounds the walk down a parent's VLANs to its real device.
const maxVLANDepth = 8

// Report is everything known about one parent's fabric settings.
type Report struct {
	Parent string `json:"parent"`
	// DCBNetdev is the netdev whose DCB settings apply: the parent, or
	// the real device under a VLAN parent's VLANs.
	DCBNetdev string `json:"dcb_netdev"`
	MTU       int    `json:"mtu"`
	MaxMTU    int    `json:"max_mtu,omitempty"`
	RoCEMTU   int    `json:"roce_mtu"`
	DCB       *DCB   `json:"dcb,omitempty"`
	// DCBNotReported is set when the NIC does not implement DCB.
	DCBNotReported bool   `json:"dcb_not_reported,omitempty"`
	DCBError       string `json:"dcb_error,omitempty"`
	// Driver is the kernel driver of DCBNetdev's device (mlx5_core for
	// ConnectX); "" for a virtual netdev.
	Driver string `json:"driver,omitempty"`
	// QoSTrust is the trust state MLNX_OFED's mlx5 shows in
	// sys/class/net/DCBNetdev/qos/trust ("pcp" or "dscp"); "" without it.
	QoSTrust string `json:"qos_trust,omitempty"`
	ECN      *ECN   `json:"ecn,omitempty"`
	// Bond is set when DCBNetdev is a bond (RoCE LAG: mlx5_bond_0): the
	// settings are its ports', each in Ports, and they should agree.
	Bond     bool      `json:"bond,omitempty"`
	Ports    []Report  `json:"ports,omitempty"`
	Findings []Finding `json:"-"`
	// name is what the findings are named after: the parent, or "PARENT
	// port PORT" for a bond's port.
	name string
}

func (r *Report) add(what, status, detail, fix string) {
	if r.name == "" {
		r.name = r.Parent
	}
	r.Findings = append(r.Findings, Finding{Name: what + " " + r.name, Status: status, Detail: detail, Fix: fix})
}

// Check reads parent's MTU, DCB and ECN settings through k (and sysfs under
// o.Root) and judges them.
func Check(k Kernel, parent string, o Options) Report {
	r := Report{Parent: parent, DCBNetdev: parent}
	l, err := k.Link(parent)
	if err != nil {
		r.add("MTU", StatusWarn, fmt.Sprintf("cannot read netdev %s: %v", parent, err), "check the network's -o parent: ip link show "+parent)
		return r
	}
	// The real device under every VLAN (a VLAN on a VLAN: QinQ) carries
	// the DCB settings and bounds the MTU.
	maxMTU, real := l.MaxMTU, l
	for low, depth := l, 0; low.Lower != "" && depth < maxVLANDepth; depth++ {
		r.DCBNetdev = low.Lower
		next, err := k.Link(low.Lower)
		if err != nil {
			break
		}
		maxMTU, low, real = next.MaxMTU, next, next
	}
	r.MTU, r.MaxMTU, r.RoCEMTU = l.MTU, maxMTU, RoCEMTU(l.MTU)
	r.checkMTU()
	if real.Name == r.DCBNetdev && len(real.Ports) > 0 {
		r.checkBond(k, real.Ports, o)
		return r
	}
	r.checkDCB(k, o)
	return r
}

// checkBond checks each port of bond r.DCBNetdev as a parent's real device,
// and whether the ports agree: RoCE LAG sends on either port, so a setting
// one port lacks makes half the traffic lossy or unmarked.
func (r *Report) checkBond(k Kernel, ports []string, o Options) {
	r.Bond = true
	for _, p := range ports {
		pr := Report{Parent: r.Parent, DCBNetdev: p, name: r.Parent + " port " + p}
		pr.checkDCB(k, o)
		r.Findings = append(r.Findings, pr.Findings...)
		pr.Findings = nil
		r.Ports = append(r.Ports, pr)
	}
	var differ []string
	for _, s := range []struct {
		what string
		of   func(Report) string
	}{
		{"PFC", func(p Report) string {
			if p.DCB == nil || p.DCB.PFC == nil {
				return "not reported"
			}
			return "on for priority " + joinIntsOrNone(p.DCB.PFC.EnabledPriorities())
		}},
		{"trust", func(p Report) string {
			if p.DCB == nil {
				return "not reported"
			}
			if dscp, _ := p.trustsDSCP(); dscp {
				return "dscp"
			}
			return "pcp"
		}},
		{"DSCP map", func(p Report) string {
			if p.DCB == nil || len(p.DCB.DSCP) == 0 {
				return "none"
			}
			return dscpMap(p.DCB.DSCP)
		}},
		{"ECN", func(p Report) string {
			if p.ECN == nil {
				return "not exposed"
			}
			return fmt.Sprintf("roce_np %s, roce_rp %s", ecnPrios(p.ECN.NP), ecnPrios(p.ECN.RP))
		}},
	} {
		var vals []string
		seen := map[string]bool{}
		for _, p := range r.Ports {
			v := s.of(p)
			seen[v] = true
			vals = append(vals, p.DCBNetdev+": "+v)
		}
		if len(seen) > 1 {
			differ = append(differ, s.what+" ("+strings.Join(vals, "; ")+")")
		}
	}
	what := fmt.Sprintf("bond %s (ports %s): a bond has no DCB of its own, its ports' settings apply", r.DCBNetdev, strings.Join(ports, ", "))
	if len(differ) > 0 {
		r.add("bond ports", StatusWarn, what+"; they disagree on "+strings.Join(differ, ", ")+": RoCE LAG sends on either port, so part of the traffic gets the other settings",
			"set every port of "+r.DCBNetdev+" alike (dcb pfc/app, ecn), and the switch ports too")
		return
	}
	r.add("bond ports", StatusOK, what+"; they agree", "")
}

func ecnPrios(on *[Priorities]bool) string {
	if on == nil {
		return "not exposed"
	}
	return joinIntsOrNone(onPriorities(on))
}

// checkDCB reads and judges r.DCBNetdev's DCB and ECN settings.
func (r *Report) checkDCB(k Kernel, o Options) {
	// The ECN switches are read first: the traffic class doctor suggests
	// sets ECT(0) where ECN is on for its priority.
	e, ecnErr := ReadECN(o.Root, r.DCBNetdev)
	if ecnErr == nil {
		r.ECN = e
	}
	d, err := ReadDCB(k, r.DCBNetdev)
	switch {
	case errors.Is(err, ErrNotReported):
		r.DCBNotReported = true
		r.add("DCB", StatusInfo, fmt.Sprintf("PFC, trust mode and the DSCP map: %v; its driver has no DCB support", err),
			"nothing to do on a NIC without DCB (veth, Soft-RoCE); a lossless fabric needs a NIC whose driver reports DCB, e.g. ConnectX (mlx5)")
	case err != nil:
		r.DCBError = err.Error()
		r.add("DCB", StatusWarn, err.Error(), "check: dcb pfc show dev "+r.DCBNetdev)
	default:
		r.DCB = d
		r.Driver = readNetdevDriver(o.Root, r.DCBNetdev)
		r.QoSTrust = readQoSTrust(o.Root, r.DCBNetdev)
		r.checkPFC()
		r.checkTrust(o.TrafficClass)
		r.checkTrafficClass(o.TrafficClass)
	}

	switch {
	case ecnErr != nil:
		r.add("ECN", StatusWarn, fmt.Sprintf("cannot read the ECN switches of %s: %v", r.DCBNetdev, ecnErr), "")
	case e == nil:
		r.add("ECN", StatusInfo, fmt.Sprintf("not exposed by the driver of %s (no sys/class/net/%s/ecn)", r.DCBNetdev, r.DCBNetdev), "")
	default:
		r.checkECN()
	}
}

func (r *Report) checkMTU() {
	detail := fmt.Sprintf("netdev MTU %d gives RoCE MTU %d (MTU - %d, rounded down to 4096/2048/1024)", r.MTU, r.RoCEMTU, RoCEHeaders)
	raise := fmt.Sprintf("ip link set %s mtu 9000 (the switch ports and peers need as much); containers started afterwards take it", r.Parent)
	switch {
	case r.RoCEMTU == 4096:
		r.add("RoCE MTU", StatusOK, detail, "")
	case r.RoCEMTU == 0:
		r.add("RoCE MTU", StatusWarn, detail+": too small for RoCE", raise)
	case r.MaxMTU >= JumboMTU:
		r.add("RoCE MTU", StatusWarn, fmt.Sprintf("%s; %s takes MTUs up to %d, and %d or more gives RoCE MTU 4096", detail, r.DCBNetdev, r.MaxMTU, JumboMTU), raise)
	case r.MaxMTU > 0:
		r.add("RoCE MTU", StatusInfo, fmt.Sprintf("%s; %s takes no MTU above %d, so no jumbo frames", detail, r.DCBNetdev, r.MaxMTU), "")
	default:
		r.add("RoCE MTU", StatusInfo, detail+"; the largest MTU the netdev takes is not reported", "")
	}
}

func (r *Report) checkPFC() {
	d := r.DCB
	if d.PFC == nil {
		r.add("PFC", StatusInfo, "not reported by this NIC (its DCB answer has no PFC object)", "")
		return
	}
	on := d.PFC.EnabledPriorities()
	if len(on) == 0 {
		r.add("PFC", StatusWarn, fmt.Sprintf("off on every priority of %s: RoCE on it is lossy (fine only with ECN congestion control doing all the work)", r.DCBNetdev),
			fmt.Sprintf("enable PFC on the priority RoCE uses, here and on the switch: dcb pfc set dev %s prio-pfc 3:on", r.DCBNetdev))
		return
	}
	var counts []string
	for _, p := range on {
		counts = append(counts, fmt.Sprintf("priority %d: %d pause frames sent, %d received", p, d.PFC.Requests[p], d.PFC.Indications[p]))
	}
	r.add("PFC", StatusOK, fmt.Sprintf("on for priority %s of %s (%s)", joinInts(on), r.DCBNetdev, strings.Join(counts, "; ")), "")
}

// trustsDSCP reports whether the NIC classifies by DSCP first, and how that
// is known.
func (r *Report) trustsDSCP() (bool, string) {
	d := r.DCB
	if d.Trust != nil {
		if len(d.Trust) == 0 {
			return false, "the trust table is empty"
		}
		return d.Trust[0] == "dscp", "trust table: " + strings.Join(d.Trust, ", ")
	}
	if r.QoSTrust != "" {
		return r.QoSTrust == "dscp", fmt.Sprintf("no trust table reported; read from sys/class/net/%s/qos/trust (MLNX_OFED)", r.DCBNetdev)
	}
	if len(d.DSCP) > 0 {
		return true, fmt.Sprintf("no trust table reported; inferred from the %d DSCP entries of the APP table", len(d.DSCP))
	}
	return false, "no trust table reported; inferred from an APP table without DSCP entries"
}

func (r *Report) checkTrust(tc int) {
	dscp, how := r.trustsDSCP()
	mode := "pcp"
	if dscp {
		mode = "dscp"
	}
	detail := fmt.Sprintf("%s trusts %s (%s)", r.DCBNetdev, mode, how)
	if len(r.DCB.DSCP) > 0 {
		detail += "; DSCP to priority: " + dscpMap(r.DCB.DSCP)
	}
	fix := ""
	if !dscp {
		code := roceDSCP
		if tc >= 0 {
			code = tc >> 2
		}
		fix = "RoCE v2 is routed and usually untagged: trust DSCP so the traffic class picks the priority: " + r.trustDSCPFix(code)
	}
	r.add("trust", StatusInfo, detail, fix)
}

func (r *Report) checkTrafficClass(tc int) {
	d := r.DCB
	dscp, _ := r.trustsDSCP()
	var pfcOn []int
	if d.PFC != nil {
		pfcOn = d.PFC.EnabledPriorities()
	}
	if tc < 0 {
		detail := "no traffic class set on the network (-o traffic_class) or given (--traffic-class)"
		if len(pfcOn) > 0 {
			detail += fmt.Sprintf("; RoCE is lossless here when sent on priority %s", joinInts(pfcOn))
			if ex, text, ok := r.exampleTC(pfcOn); dscp && ok {
				detail += fmt.Sprintf(", e.g. traffic class %s: docker network create -o traffic_class=%d", text, ex)
			}
		}
		r.add("traffic class", StatusInfo, detail, "")
		return
	}
	if !dscp {
		r.add("traffic class", StatusInfo, fmt.Sprintf("%s trusts PCP: the priority comes from the VLAN tag's PCP (for RoCE, the service level), not from traffic class %d", r.DCBNetdev, tc),
			"to let the traffic class pick the priority: "+r.trustDSCPFix(tc>>2))
		return
	}
	code := tc >> 2
	prio, ok := d.DSCP[code]
	if !ok {
		r.add("traffic class", StatusWarn, fmt.Sprintf("traffic class %d (DSCP %d) has no entry in the DSCP map of %s: the NIC sends it on its default priority", tc, code, r.DCBNetdev),
			fmt.Sprintf("map it to a PFC priority: dcb app add dev %s dscp-prio %d:PRIO", r.DCBNetdev, code))
		return
	}
	switch {
	case d.PFC == nil:
		r.add("traffic class", StatusInfo, fmt.Sprintf("traffic class %d (DSCP %d) lands on priority %d; PFC is not reported by this NIC", tc, code, prio), "")
	case d.PFC.Enabled[prio]:
		r.add("traffic class", StatusOK, fmt.Sprintf("traffic class %d (DSCP %d) lands on priority %d, which has PFC", tc, code, prio), "")
	default:
		fix := fmt.Sprintf("enable PFC on it: dcb pfc set dev %s prio-pfc %d:on (and on the switch)", r.DCBNetdev, prio)
		if _, text, ok := r.exampleTC(pfcOn); ok {
			fix += ", or send with a traffic class whose DSCP maps to a PFC priority, e.g. " + text
		}
		r.add("traffic class", StatusWarn, fmt.Sprintf("traffic class %d (DSCP %d) lands on priority %d, which has no PFC (PFC on: %s): RoCE sent with it is lossy", tc, code, prio, joinIntsOrNone(pfcOn)), fix)
	}
}

// CheckTrafficClass judges one more traffic class sent through the parent
// (networks on one parent may ask for different ones), as Check judges
// Options.TrafficClass, and returns its finding, also added to r.Findings.
// ok is false when Check did not read the parent's DCB settings: it said
// why, and there is nothing to judge the class against.
func (r *Report) CheckTrafficClass(tc int) (fs []Finding, ok bool) {
	if r.Bond {
		for i := range r.Ports {
			f, ok := r.Ports[i].CheckTrafficClass(tc)
			fs = append(fs, f...)
			if ok {
				r.Findings = append(r.Findings, f...)
			}
		}
		return fs, len(fs) > 0
	}
	if r.DCB == nil || tc < 0 {
		return nil, false
	}
	n := len(r.Findings)
	r.checkTrafficClass(tc)
	return r.Findings[n:], true
}

func (r *Report) checkECN() {
	e := r.ECN
	var parts []string
	any := false
	for _, side := range []struct {
		name string
		on   *[Priorities]bool
	}{{"notification point (roce_np)", e.NP}, {"reaction point (roce_rp)", e.RP}} {
		if side.on == nil {
			continue
		}
		prios := onPriorities(side.on)
		any = any || len(prios) > 0
		parts = append(parts, fmt.Sprintf("%s on for priority %s", side.name, joinIntsOrNone(prios)))
	}
	if !any {
		r.add("ECN", StatusWarn, fmt.Sprintf("off on every priority of %s: no congestion control for RoCE", r.DCBNetdev),
			fmt.Sprintf("echo 1 > /sys/class/net/%s/ecn/roce_np/enable/PRIO and .../roce_rp/enable/PRIO for the RoCE priority", r.DCBNetdev))
		return
	}
	r.add("ECN", StatusOK, strings.Join(parts, "; "), "")
}

// exampleTC returns a traffic class whose DSCP maps to one of prios, and
// how to say it ("104 (DSCP 26)"): DSCP 26 where it does, else the
// smallest DSCP that does. The DSCP is the upper six bits of the class;
// where the driver shows ECN on for the priority the DSCP lands on, the
// ECN bits are ECT(0) (106 for DSCP 26), which marks the packets ECN
// capable on a NIC that sends the whole byte (rxe; mlx5 takes the DSCP
// only). ok is false when no DSCP maps to prios.
func (r *Report) exampleTC(prios []int) (tc int, text string, ok bool) {
	m := r.DCB.DSCP
	best := -1
	for code, p := range m {
		if !slices.Contains(prios, p) {
			continue
		}
		if code == roceDSCP {
			best = code
			break
		}
		if best < 0 || code < best {
			best = code
		}
	}
	if best < 0 {
		return -1, "", false
	}
	prio := m[best]
	if r.ECN != nil && (r.ECN.NP != nil && r.ECN.NP[prio] || r.ECN.RP != nil && r.ECN.RP[prio]) {
		tc = best<<2 | ectZero
		return tc, fmt.Sprintf("%d (DSCP %d with ECT(0) in the ECN bits: ECN is on for priority %d)", tc, best, prio), true
	}
	tc = best << 2
	return tc, fmt.Sprintf("%d (DSCP %d)", tc, best), true
}

// dscpMap prints a DSCP map by priority, in ranges: "0-7>0 24-31>3".
func dscpMap(m map[int]int) string {
	codes := slices.Sorted(maps.Keys(m))
	var out []string
	for i := 0; i < len(codes); {
		j := i
		for j+1 < len(codes) && codes[j+1] == codes[j]+1 && m[codes[j+1]] == m[codes[i]] {
			j++
		}
		r := strconv.Itoa(codes[i])
		if j > i {
			r += "-" + strconv.Itoa(codes[j])
		}
		out = append(out, fmt.Sprintf("%s>%d", r, m[codes[i]]))
		i = j + 1
	}
	return strings.Join(out, " ")
}

func joinInts(v []int) string {
	s := make([]string, len(v))
	for i, n := range v {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ",")
}

func joinIntsOrNone(v []int) string {
	if len(v) == 0 {
		return "none"
	}
	return joinInts(v)
}
