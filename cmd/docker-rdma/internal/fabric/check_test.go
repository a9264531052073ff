package fabric_test

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/rdma-macvlan/rdma-macvlan/cmd/docker-rdma/internal/fabric"
	"github.com/rdma-macvlan/rdma-macvlan/cmd/docker-rdma/internal/fabric/fabrictest"
)

func findingOf(r fabric.Report, name string) (fabric.Finding, bool) {
	for _, f := range r.Findings {
		if f.Name == name {
			return f, true
		}
	}
	return fabric.Finding{}, false
}

func mlx5Kernel(o fabrictest.ReplyOpts) *fabrictest.Kernel {
	return &fabrictest.Kernel{
		Links: map[string]fabric.Link{
			"ens1f0np0":    {Name: "ens1f0np0", Kind: "device", MTU: 9000, MaxMTU: 9978},
			"ens1f0np0.10": {Name: "ens1f0np0.10", Kind: "vlan", MTU: 1500, MaxMTU: 65535, Lower: "ens1f0np0"},
		},
		Replies: map[string][]byte{"ens1f0np0": fabrictest.MLX5Reply(o)},
	}
}

func TestCheck(t *testing.T) {
	veth := &fabrictest.Kernel{
		Links: map[string]fabric.Link{"veth0": {Name: "veth0", Kind: "veth", MTU: 1500, MaxMTU: 65535}},
		Errs:  map[string]error{"veth0": syscall.EOPNOTSUPP},
	}
	for _, tc := range []struct {
		name   string
		k      *fabrictest.Kernel
		parent string
		tc     int
		check  string
		status string
		detail string
		fix    string
	}{
		{name: "veth: DCB not reported", k: veth, parent: "veth0", tc: -1, check: "DCB veth0", status: fabric.StatusInfo,
			detail: "PFC, trust mode and the DSCP map: DCB of veth0: not reported by this NIC (the kernel answers: dcb netlink: operation not supported)"},
		{name: "veth: MTU 1500 on a netdev that takes jumbo frames", k: veth, parent: "veth0", tc: -1, check: "RoCE MTU veth0", status: fabric.StatusWarn,
			detail: "netdev MTU 1500 gives RoCE MTU 1024 (MTU - 96, rounded down to 4096/2048/1024); veth0 takes MTUs up to 65535, and 4192 or more gives RoCE MTU 4096", fix: "ip link set veth0 mtu 9000"},
		{name: "veth: traffic class cannot be judged", k: veth, parent: "veth0", tc: 106, check: "DCB veth0", status: fabric.StatusInfo, detail: "not reported by this NIC"},
		{name: "jumbo MTU", k: mlx5Kernel(fabrictest.ReplyOpts{PFCEn: 8}), parent: "ens1f0np0", tc: -1, check: "RoCE MTU ens1f0np0", status: fabric.StatusOK, detail: "netdev MTU 9000 gives RoCE MTU 4096"},
		{name: "VLAN parent: MTU its own, jumbo limit and DCB the lower device's", k: mlx5Kernel(fabrictest.ReplyOpts{PFCEn: 8}), parent: "ens1f0np0.10", tc: 106,
			check: "RoCE MTU ens1f0np0.10", status: fabric.StatusWarn, detail: "ens1f0np0 takes MTUs up to 9978"},
		{name: "VLAN parent: traffic class", k: mlx5Kernel(fabrictest.ReplyOpts{PFCEn: 8}), parent: "ens1f0np0.10", tc: 106,
			check: "traffic class ens1f0np0.10", status: fabric.StatusOK, detail: "traffic class 106 (DSCP 26) lands on priority 3, which has PFC"},
		{name: "PFC on priority 3", k: mlx5Kernel(fabrictest.ReplyOpts{PFCEn: 8}), parent: "ens1f0np0", tc: -1, check: "PFC ens1f0np0", status: fabric.StatusOK,
			detail: "on for priority 3 of ens1f0np0 (priority 3: 17 pause frames sent, 42 received)"},
		{name: "PFC off", k: mlx5Kernel(fabrictest.ReplyOpts{}), parent: "ens1f0np0", tc: -1, check: "PFC ens1f0np0", status: fabric.StatusWarn,
			detail: "off on every priority", fix: "dcb pfc set dev ens1f0np0 prio-pfc 3:on"},
		{name: "no PFC object", k: mlx5Kernel(fabrictest.ReplyOpts{NoPFC: true}), parent: "ens1f0np0", tc: 106, check: "traffic class ens1f0np0", status: fabric.StatusInfo,
			detail: "lands on priority 3; PFC is not reported by this NIC"},
		{name: "no traffic class: which priorities are lossless", k: mlx5Kernel(fabrictest.ReplyOpts{PFCEn: 8}), parent: "ens1f0np0", tc: -1, check: "traffic class ens1f0np0", status: fabric.StatusInfo,
			detail: "no traffic class set on the network (-o traffic_class) or given (--traffic-class); RoCE is lossless here when sent on priority 3, e.g. traffic class 104 (DSCP 26): docker network create -o traffic_class=104"},
		{name: "traffic class on a lossy priority", k: mlx5Kernel(fabrictest.ReplyOpts{PFCEn: 8}), parent: "ens1f0np0", tc: 0, check: "traffic class ens1f0np0", status: fabric.StatusWarn,
			detail: "traffic class 0 (DSCP 0) lands on priority 0, which has no PFC (PFC on: 3): RoCE sent with it is lossy", fix: "dcb pfc set dev ens1f0np0 prio-pfc 0:on (and on the switch), or send with a traffic class whose DSCP maps to a PFC priority, e.g. 104 (DSCP 26)"},
		{name: "traffic class 106 and a DSCP map that sends DSCP 26 to 5", k: mlx5Kernel(fabrictest.ReplyOpts{PFCEn: 8, DSCP: map[int]int{26: 5, 24: 3}}), parent: "ens1f0np0", tc: 106,
			check: "traffic class ens1f0np0", status: fabric.StatusWarn, detail: "lands on priority 5, which has no PFC"},
		{name: "DSCP not in the map", k: mlx5Kernel(fabrictest.ReplyOpts{PFCEn: 8, DSCP: map[int]int{24: 3}}), parent: "ens1f0np0", tc: 106,
			check: "traffic class ens1f0np0", status: fabric.StatusWarn, detail: "traffic class 106 (DSCP 26) has no entry in the DSCP map of ens1f0np0", fix: "dcb app add dev ens1f0np0 dscp-prio 26:PRIO"},
		{name: "trust table dscp, pcp", k: mlx5Kernel(fabrictest.ReplyOpts{PFCEn: 8, Trust: []byte{5, 255}}), parent: "ens1f0np0", tc: -1, check: "trust ens1f0np0", status: fabric.StatusInfo,
			detail: "ens1f0np0 trusts dscp (trust table: dscp, pcp); DSCP to priority: 0-7>0 8-15>1 16-23>2 24-31>3 32-39>4 40-47>5 48-55>6 56-63>7"},
		{name: "trust inferred from the DSCP map", k: mlx5Kernel(fabrictest.ReplyOpts{PFCEn: 8}), parent: "ens1f0np0", tc: -1, check: "trust ens1f0np0", status: fabric.StatusInfo,
			detail: "trusts dscp (no trust table reported; inferred from the 64 DSCP entries of the APP table)"},
		{name: "PCP trust", k: mlx5Kernel(fabrictest.ReplyOpts{PFCEn: 8, Trust: []byte{255}, DSCP: map[int]int{}}), parent: "ens1f0np0", tc: 106, check: "traffic class ens1f0np0", status: fabric.StatusInfo,
			detail: "ens1f0np0 trusts PCP: the priority comes from the VLAN tag's PCP (for RoCE, the service level), not from traffic class 106", fix: "dcb apptrust set dev ens1f0np0 order dscp pcp"},
		{name: "PCP trust, inferred", k: mlx5Kernel(fabrictest.ReplyOpts{PFCEn: 8, DSCP: map[int]int{}}), parent: "ens1f0np0", tc: -1, check: "trust ens1f0np0", status: fabric.StatusInfo,
			detail: "trusts pcp (no trust table reported; inferred from an APP table without DSCP entries)", fix: "dcb apptrust set dev ens1f0np0 order dscp pcp"},
		{name: "missing parent", k: veth, parent: "ens9", tc: -1, check: "MTU ens9", status: fabric.StatusWarn, detail: "cannot read netdev ens9", fix: "ip link show ens9"},
		{name: "no ECN switches", k: veth, parent: "veth0", tc: -1, check: "ECN veth0", status: fabric.StatusInfo, detail: "not exposed by the driver of veth0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := fabric.Check(tc.k, tc.parent, fabric.Options{TrafficClass: tc.tc, Root: t.TempDir()})
			f, ok := findingOf(r, tc.check)
			if !ok {
				t.Fatalf("no finding %q in %+v", tc.check, r.Findings)
			}
			if f.Status != tc.status || !strings.Contains(f.Detail, tc.detail) || !strings.Contains(f.Fix, tc.fix) {
				t.Errorf("%s = %+v\nwant status %s, detail ~%q, fix ~%q", tc.check, f, tc.status, tc.detail, tc.fix)
			}
		})
	}
}

// TestCheckAsksTheLowerDevice: a VLAN's DCB settings are its lower
// device's, so that is the netdev named in the request.
func TestCheckAsksTheLowerDevice(t *testing.T) {
	k := mlx5Kernel(fabrictest.ReplyOpts{PFCEn: 8})
	r := fabric.Check(k, "ens1f0np0.10", fabric.Options{TrafficClass: -1, Root: t.TempDir()})
	if len(k.Requests) != 1 || string(k.Requests[0][8:17]) != "ens1f0np0" || r.DCBNetdev != "ens1f0np0" || r.DCB == nil {
		t.Errorf("requests %q, report %+v", k.Requests, r)
	}
	// A VLAN on that VLAN (QinQ): still the real device, two levels down.
	k.Links["ens1f0np0.10.20"] = fabric.Link{Name: "ens1f0np0.10.20", Kind: "vlan", MTU: 1500, MaxMTU: 65535, Lower: "ens1f0np0.10"}
	k.Requests = nil
	r = fabric.Check(k, "ens1f0np0.10.20", fabric.Options{TrafficClass: -1, Root: t.TempDir()})
	if len(k.Requests) != 1 || string(k.Requests[0][8:17]) != "ens1f0np0" || r.DCBNetdev != "ens1f0np0" || r.DCB == nil || r.MaxMTU != 9978 {
		t.Errorf("QinQ: requests %q, report %+v", k.Requests, r)
	}
}

func TestECN(t *testing.T) {
	root := t.TempDir()
	for side, prios := range map[string]string{"roce_np": "00010000", "roce_rp": "00010000"} {
		for p, v := range prios {
			f := filepath.Join(root, "sys/class/net/ens1f0np0/ecn", side, "enable", string(rune('0'+p)))
			if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(f, []byte(string(v)+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	r := fabric.Check(mlx5Kernel(fabrictest.ReplyOpts{PFCEn: 8}), "ens1f0np0", fabric.Options{TrafficClass: -1, Root: root})
	f, _ := findingOf(r, "ECN ens1f0np0")
	if f.Status != fabric.StatusOK || f.Detail != "notification point (roce_np) on for priority 3; reaction point (roce_rp) on for priority 3" {
		t.Errorf("ECN finding %+v", f)
	}
	off := t.TempDir()
	f0 := filepath.Join(off, "sys/class/net/ens1f0np0/ecn/roce_np/enable/3")
	if err := os.MkdirAll(filepath.Dir(f0), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(f0, []byte("0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r = fabric.Check(mlx5Kernel(fabrictest.ReplyOpts{PFCEn: 8}), "ens1f0np0", fabric.Options{TrafficClass: -1, Root: off})
	if f, _ := findingOf(r, "ECN ens1f0np0"); f.Status != fabric.StatusWarn || !strings.Contains(f.Detail, "off on every priority") {
		t.Errorf("ECN off: %+v", f)
	}
}

// nicRoot is a sysfs root where netdev sits on a PCI function bound to
// driver, and, when trust is not "", MLNX_OFED's qos/trust says trust.
func nicRoot(t *testing.T, netdev, driver, trust string) string {
	t.Helper()
	root := t.TempDir()
	pci := filepath.Join(root, "sys/devices/pci0000:00/0000:00:02.0/0000:03:00.0")
	drv := filepath.Join(root, "sys/bus/pci/drivers", driver)
	dir := filepath.Join(root, "sys/class/net", netdev)
	for _, d := range []string{pci, drv, dir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for link, target := range map[string]string{filepath.Join(pci, "driver"): drv, filepath.Join(dir, "device"): pci} {
		if err := os.Symlink(target, link); err != nil {
			t.Fatal(err)
		}
	}
	if trust != "" {
		if err := os.MkdirAll(filepath.Join(dir, "qos"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "qos", "trust"), []byte(trust+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// ConnectX (mlx5) has no dcb apptrust: the kernel answers "operation not
// supported". Its trust turns to DSCP with its first DSCP entry in the APP
// table, so on mlx5 doctor's fix adds that entry (the DSCP of the traffic
// class, else 26, on the PFC priority), or uses MLNX_OFED's mlnx_qos;
// other NICs keep dcb apptrust. MLNX_OFED's qos/trust is read before the
// trust is taken for PCP.
func TestTrustFixPerDriver(t *testing.T) {
	pcp := fabrictest.ReplyOpts{PFCEn: 8, DSCP: map[int]int{}}
	for _, tc := range []struct {
		name          string
		driver, trust string
		opts          fabrictest.ReplyOpts
		tc            int
		check         string
		detail        string
		fix           []string
		notFix        []string
	}{
		{name: "mlx5 in PCP trust: a DSCP entry", driver: "mlx5_core", opts: pcp, tc: -1, check: "trust ens1f0np0",
			detail: "trusts pcp", fix: []string{"dcb app add dev ens1f0np0 dscp-prio 26:3", "mlnx_qos -i ens1f0np0 --trust dscp"}, notFix: []string{"apptrust set"}},
		{name: "mlx5 in PCP trust, traffic class 106", driver: "mlx5_core", opts: pcp, tc: 106, check: "traffic class ens1f0np0",
			detail: "trusts PCP", fix: []string{"dcb app add dev ens1f0np0 dscp-prio 26:3"}, notFix: []string{"apptrust set"}},
		{name: "mlx5 in PCP trust, traffic class 184, PFC on 5", driver: "mlx5_core", opts: fabrictest.ReplyOpts{PFCEn: 1 << 5, DSCP: map[int]int{}}, tc: 184,
			check: "trust ens1f0np0", detail: "trusts pcp", fix: []string{"dscp-prio 46:5"}, notFix: []string{"apptrust set"}},
		{name: "another NIC keeps apptrust", driver: "bnxt_en", opts: pcp, tc: -1, check: "trust ens1f0np0",
			detail: "trusts pcp", fix: []string{"dcb apptrust set dev ens1f0np0 order dscp pcp"}, notFix: []string{"mlnx_qos", "dcb app add"}},
		{name: "MLNX_OFED says dscp", driver: "mlx5_core", trust: "dscp", opts: pcp, tc: -1, check: "trust ens1f0np0",
			detail: "ens1f0np0 trusts dscp (no trust table reported; read from sys/class/net/ens1f0np0/qos/trust (MLNX_OFED))", notFix: []string{"dcb"}},
		{name: "MLNX_OFED's label and pcp", driver: "mlx5_core", trust: "Priority trust state: pcp", opts: fabrictest.ReplyOpts{PFCEn: 8}, tc: -1, check: "trust ens1f0np0",
			detail: "ens1f0np0 trusts pcp (no trust table reported; read from sys/class/net/ens1f0np0/qos/trust (MLNX_OFED))", fix: []string{"dcb app add"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := nicRoot(t, "ens1f0np0", tc.driver, tc.trust)
			r := fabric.Check(mlx5Kernel(tc.opts), "ens1f0np0", fabric.Options{TrafficClass: tc.tc, Root: root})
			f, ok := findingOf(r, tc.check)
			if !ok {
				t.Fatalf("no finding %q in %+v", tc.check, r.Findings)
			}
			if !strings.Contains(f.Detail, tc.detail) {
				t.Errorf("%s: detail %q, want ~%q", tc.check, f.Detail, tc.detail)
			}
			for _, w := range tc.fix {
				if !strings.Contains(f.Fix, w) {
					t.Errorf("%s: fix %q does not say %q", tc.check, f.Fix, w)
				}
			}
			for _, w := range tc.notFix {
				if strings.Contains(f.Fix, w) {
					t.Errorf("%s: fix %q says %q", tc.check, f.Fix, w)
				}
			}
			if r.Driver != tc.driver {
				t.Errorf("report's driver %q, want %q", r.Driver, tc.driver)
			}
		})
	}
}

// ecnRoot is a sysfs root where MLNX_OFED's ECN switches of ens1f0np0 are
// on for the priorities of on (both sides) and off for the others.
func ecnRoot(t *testing.T, on ...int) string {
	t.Helper()
	root := t.TempDir()
	for _, side := range []string{"roce_np", "roce_rp"} {
		dir := filepath.Join(root, "sys/class/net/ens1f0np0/ecn", side, "enable")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for p := range fabric.Priorities {
			v := "0\n"
			if slices.Contains(on, p) {
				v = "1\n"
			}
			if err := os.WriteFile(filepath.Join(dir, strconv.Itoa(p)), []byte(v), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	return root
}

// The traffic class doctor suggests is DSCP 26 (the upper six bits of the
// class: 104) where DSCP 26 maps to a PFC priority, 106 (ECT(0) in the ECN
// bits) where ECN is on for that priority, else the smallest DSCP that
// maps to one.
func TestExampleTrafficClass(t *testing.T) {
	for _, tc := range []struct {
		name   string
		opts   fabrictest.ReplyOpts
		ecnOn  []int
		tc     int
		detail string
		fix    string
	}{
		{name: "DSCP 26 on the PFC priority", opts: fabrictest.ReplyOpts{PFCEn: 8}, tc: -1,
			detail: "e.g. traffic class 104 (DSCP 26): docker network create -o traffic_class=104"},
		{name: "ECN on for that priority", opts: fabrictest.ReplyOpts{PFCEn: 8}, ecnOn: []int{3}, tc: -1,
			detail: "e.g. traffic class 106 (DSCP 26 with ECT(0) in the ECN bits: ECN is on for priority 3): docker network create -o traffic_class=106"},
		{name: "ECN on for another priority", opts: fabrictest.ReplyOpts{PFCEn: 8}, ecnOn: []int{5}, tc: -1,
			detail: "e.g. traffic class 104 (DSCP 26): docker network create -o traffic_class=104"},
		{name: "DSCP 26 on a lossy priority", opts: fabrictest.ReplyOpts{PFCEn: 8, DSCP: map[int]int{26: 5, 24: 3, 30: 3}}, tc: -1,
			detail: "e.g. traffic class 96 (DSCP 24): docker network create -o traffic_class=96"},
		{name: "a lossy class: the fix names DSCP 26 with ECT(0)", opts: fabrictest.ReplyOpts{PFCEn: 8}, ecnOn: []int{3}, tc: 0,
			detail: "lands on priority 0, which has no PFC", fix: "e.g. 106 (DSCP 26 with ECT(0) in the ECN bits: ECN is on for priority 3)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			if tc.ecnOn != nil {
				root = ecnRoot(t, tc.ecnOn...)
			}
			r := fabric.Check(mlx5Kernel(tc.opts), "ens1f0np0", fabric.Options{TrafficClass: tc.tc, Root: root})
			f, ok := findingOf(r, "traffic class ens1f0np0")
			if !ok {
				t.Fatalf("no traffic class finding in %+v", r.Findings)
			}
			if !strings.Contains(f.Detail, tc.detail) || !strings.Contains(f.Fix, tc.fix) {
				t.Errorf("traffic class finding %+v\nwant detail ~%q, fix ~%q", f, tc.detail, tc.fix)
			}
		})
	}
}

// A bond (RoCE LAG, mlx5_bond_0) has no DCB of its own: each port is
// checked under the VLAN and the bond, and ports that disagree are a
// warning naming what differs.
func TestBondParentChecksEachPort(t *testing.T) {
	kernel := func(p1 fabrictest.ReplyOpts) *fabrictest.Kernel {
		return &fabrictest.Kernel{
			Links: map[string]fabric.Link{
				"bond0":     {Name: "bond0", Kind: "bond", MTU: 9000, MaxMTU: 65535, Ports: []string{"ens1f0np0", "ens1f1np1"}},
				"bond0.100": {Name: "bond0.100", Kind: "vlan", MTU: 9000, MaxMTU: 65535, Lower: "bond0"},
				"ens1f0np0": {Name: "ens1f0np0", Kind: "device", MTU: 9000, MaxMTU: 9978},
				"ens1f1np1": {Name: "ens1f1np1", Kind: "device", MTU: 9000, MaxMTU: 9978},
			},
			Replies: map[string][]byte{"ens1f0np0": fabrictest.MLX5Reply(fabrictest.ReplyOpts{PFCEn: 8}), "ens1f1np1": fabrictest.MLX5Reply(p1)},
			Errs:    map[string]error{"bond0": syscall.EOPNOTSUPP},
		}
	}
	r := fabric.Check(kernel(fabrictest.ReplyOpts{PFCEn: 8}), "bond0.100", fabric.Options{TrafficClass: 106, Root: t.TempDir()})
	if !r.Bond || len(r.Ports) != 2 || r.DCBNetdev != "bond0" {
		t.Fatalf("report %+v", r)
	}
	for _, name := range []string{"PFC bond0.100 port ens1f0np0", "PFC bond0.100 port ens1f1np1", "traffic class bond0.100 port ens1f1np1", "bond ports bond0.100"} {
		if f, ok := findingOf(r, name); !ok || f.Status != fabric.StatusOK {
			t.Errorf("%s: %+v (findings %+v)", name, f, r.Findings)
		}
	}
	if _, ok := findingOf(r, "DCB bond0.100"); ok {
		t.Errorf("the bond's own (missing) DCB is reported: %+v", r.Findings)
	}
	// PFC off and another DSCP map on the second port.
	r = fabric.Check(kernel(fabrictest.ReplyOpts{DSCP: map[int]int{26: 5}}), "bond0.100", fabric.Options{TrafficClass: 106, Root: t.TempDir()})
	f, _ := findingOf(r, "bond ports bond0.100")
	if f.Status != fabric.StatusWarn || !strings.Contains(f.Detail, "they disagree on PFC (ens1f0np0: on for priority 3; ens1f1np1: on for priority none)") ||
		!strings.Contains(f.Detail, "DSCP map (") || strings.Contains(f.Detail, "trust (") || !strings.Contains(f.Fix, "set every port of bond0 alike") {
		t.Errorf("bond ports: %+v", f)
	}
	if f, _ := findingOf(r, "PFC bond0.100 port ens1f1np1"); f.Status != fabric.StatusWarn {
		t.Errorf("the port without PFC: %+v", f)
	}
	// Another class is judged on every port.
	fs, ok := r.CheckTrafficClass(104)
	if !ok || len(fs) != 2 || fs[1].Name != "traffic class bond0.100 port ens1f1np1" || fs[1].Status != fabric.StatusWarn {
		t.Errorf("traffic class 104 on the ports: %+v", fs)
	}
}
