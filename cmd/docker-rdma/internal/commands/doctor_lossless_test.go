package commands

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"

	"github.com/rdma-macvlan/rdma-macvlan/api"
	"github.com/rdma-macvlan/rdma-macvlan/cmd/docker-rdma/internal/fabric"
	"github.com/rdma-macvlan/rdma-macvlan/cmd/docker-rdma/internal/fabric/fabrictest"
	"github.com/rdma-macvlan/rdma-macvlan/cmd/docker-rdma/internal/gpu/gputest"
	"github.com/rdma-macvlan/rdma-macvlan/netns/netnstest"
	"github.com/rdma-macvlan/rdma-macvlan/rdma/rdmatest"
)

// want8x8 is the GPU-by-HCA matrix of gputest's host (two sockets, two
// host bridges each, PCIe switches), worked out by hand from its layout.
var want8x8 = [][]string{
	{"PIX", "PXB", "NODE", "NODE", "SYS", "SYS", "SYS", "SYS"},
	{"PXB", "PIX", "NODE", "NODE", "SYS", "SYS", "SYS", "SYS"},
	{"NODE", "NODE", "PIX", "PHB", "SYS", "SYS", "SYS", "SYS"},
	{"NODE", "NODE", "PIX", "PHB", "SYS", "SYS", "SYS", "SYS"},
	{"SYS", "SYS", "SYS", "SYS", "PIX", "PIX", "NODE", "NODE"},
	{"SYS", "SYS", "SYS", "SYS", "PIX", "PIX", "NODE", "NODE"},
	{"SYS", "SYS", "SYS", "SYS", "NODE", "NODE", "PIX", "PIX"},
	{"SYS", "SYS", "SYS", "SYS", "NODE", "NODE", "PIX", "PIX"},
}

// railWorld is an engine whose daemon has one network (railN) per HCA
// index given, on gputest's 8x8 host, and whose kernel answers DCB with k.
func railWorld(t *testing.T, o gputest.Options, k fabric.Kernel, hcas ...int) (*world, string) {
	t.Helper()
	w := newWorld(t)
	w.info("28.2.2")
	w.plugin("rdma-macvlan:latest", pluginID, true, map[string]string{"sysfs": "/sys"})
	var st api.Status
	for _, i := range hcas {
		h := gputest.HCAs[i]
		id := strings.Repeat(fmt.Sprint(i), 64)
		st.Networks = append(st.Networks, api.Network{ID: id, Parent: h.Netdev, HCA: h.Name, Port: 1, PortState: "ACTIVE", LinkLayer: "Ethernet", Endpoints: []api.Endpoint{},
			Devices: []api.Device{{Path: fmt.Sprintf("/dev/infiniband/uverbs%d", i), Major: 231, Minor: uint32(192 + i)}, {Path: "/dev/infiniband/rdma_cm", Major: 10, Minor: 57}}})
		w.network(fmt.Sprintf("rail%d", i), id, "rdma-macvlan:latest", map[string]string{"parent": h.Netdev}, nil)
	}
	b, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	w.daemon(pluginID, b)
	w.env.Kernel = func() (fabric.Kernel, func(), error) { return k, func() {}, nil }
	return w, gputest.Host8x8(t, o)
}

// mlx5Rails answers DCB for every HCA of the 8x8 host as a ConnectX port in
// DSCP trust with PFC on priority 3, at MTU 9000.
func mlx5Rails() *fabrictest.Kernel {
	k := &fabrictest.Kernel{Links: map[string]fabric.Link{}, Replies: map[string][]byte{}}
	for _, h := range gputest.HCAs {
		k.Links[h.Netdev] = fabric.Link{Name: h.Netdev, Kind: "device", MTU: 9000, MaxMTU: 9978}
		k.Replies[h.Netdev] = fabrictest.MLX5Reply(fabrictest.ReplyOpts{Ifname: h.Netdev, PFCEn: 1 << 3})
	}
	return k
}

func TestDoctorGPUTopology8x8(t *testing.T) {
	w, root := railWorld(t, gputest.Options{PeerMem: true}, mlx5Rails(), 0, 1, 2, 3, 4, 5, 6, 7)
	_, out := runDoctor(t, w, "--sysfs-root", root)
	if out.GPUTopology == nil {
		t.Fatalf("no GPU topology in %+v", out.Checks)
	}
	m := out.GPUTopology
	if len(m.GPUs) != 8 || len(m.HCAs) != 8 {
		t.Fatalf("%d GPUs, %d HCAs", len(m.GPUs), len(m.HCAs))
	}
	for g := range want8x8 {
		for h := range want8x8[g] {
			if m.Links[g][h] != want8x8[g][h] {
				t.Errorf("%s-%s: %s, want %s", m.GPUs[g].Name, m.HCAs[h].Name, m.Links[g][h], want8x8[g][h])
			}
		}
	}
	if strings.Join(m.Rails["mlx5_5"], ",") != "rail5" {
		t.Errorf("rails of mlx5_5: %v", m.Rails["mlx5_5"])
	}
	for name, want := range map[string]string{
		"GPU topology GPU0": "0000:1a:00.0, NUMA node 0: nearest mlx5_0 (network rail0) PIX",
		"GPU topology GPU2": "0000:39:00.0, NUMA node 0: nearest mlx5_2 (network rail2) PIX",
		"GPU topology GPU7": "0000:bc:00.0, NUMA node 1: nearest mlx5_6 (network rail6), mlx5_7 (network rail7) PIX",
		"GPUDirect":         "nvidia_peermem is loaded",
	} {
		c, ok := checkOf(out, name)
		if !ok || c.Status != statusOK || !strings.Contains(c.Detail, want) {
			t.Errorf("%s = %+v, want ok ~%q", name, c, want)
		}
	}

	// The text form prints the matrix as nvidia-smi topo -m does.
	w.run("doctor", "--sysfs-root", root)
	text := w.stdout.String()
	t.Logf("\n%s", text)
	for _, s := range []string{"GPU topology (like nvidia-smi topo -m):", "networks: mlx5_0: rail0; mlx5_1: rail1"} {
		if !strings.Contains(text, s) {
			t.Errorf("text lacks %q", s)
		}
	}
	found := false
	for _, line := range strings.Split(text, "\n") {
		if strings.Join(strings.Fields(line), " ") == "GPU2 NODE NODE PIX PHB SYS SYS SYS SYS 0 0000:39:00.0" {
			found = true
		}
	}
	if !found {
		t.Errorf("no GPU2 row in the text")
	}
}

// TestDoctorGPUFarFromEveryRail: with networks only on socket 0's HCAs,
// socket 1's GPUs are warned about (their traffic crosses the sockets).
func TestDoctorGPUFarFromEveryRail(t *testing.T) {
	w, root := railWorld(t, gputest.Options{}, mlx5Rails(), 0, 2, 3)
	_, out := runDoctor(t, w, "--sysfs-root", root)
	c, _ := checkOf(out, "GPU topology GPU5")
	if c.Status != statusWarn || !strings.Contains(c.Detail, "NUMA node 1: nearest mlx5_0 (network rail0), mlx5_2 (network rail2), mlx5_3 (network rail3) SYS") ||
		!strings.Contains(c.Fix, "HCA of NUMA node 1") {
		t.Errorf("GPU5: %+v", c)
	}
	if c, _ := checkOf(out, "GPU topology GPU1"); c.Status != statusOK || !strings.Contains(c.Detail, "mlx5_0 (network rail0) PXB") {
		t.Errorf("GPU1 (PXB to mlx5_0): %+v", c)
	}
	if c, _ := checkOf(out, "GPU topology GPU3"); !strings.Contains(c.Detail, "nearest mlx5_2 (network rail2) PIX") {
		t.Errorf("GPU3: %+v", c)
	}
	if !strings.Contains(c.Detail, "PXN, on by default since NCCL 2.12") {
		t.Errorf("GPU5 (SYS): what NCCL does is not said: %+v", c)
	}
	if len(out.GPUTopology.HCAs) != 3 {
		t.Errorf("matrix of %d HCAs, want the 3 behind networks", len(out.GPUTopology.HCAs))
	}
	// No peer memory module and the proprietary driver: no GPUDirect.
	c, _ = checkOf(out, "GPUDirect")
	if c.Status != statusWarn || !strings.Contains(c.Detail, "the nvidia module is NVIDIA's proprietary one") || !strings.Contains(c.Fix, "modprobe nvidia_peermem") {
		t.Errorf("GPUDirect: %+v", c)
	}
	for _, c := range out.Checks {
		if strings.HasPrefix(c.Name, "GPU") && c.Status == statusFail {
			t.Errorf("GPU checks warn, never fail: %+v", c)
		}
	}
}

// NCCL's NCCL_NET_GDR_LEVEL is PXB by default and it has no NODE level: a
// GPU whose nearest rail is NODE or PHB away gets no GPUDirect RDMA from
// NCCL unless told, a warning naming the variable.
func TestDoctorGPUBeyondNCCLsGDRLevel(t *testing.T) {
	w, root := railWorld(t, gputest.Options{}, mlx5Rails(), 2, 3)
	_, out := runDoctor(t, w, "--sysfs-root", root)
	c, _ := checkOf(out, "GPU topology GPU0")
	if c.Status != statusWarn || !strings.Contains(c.Detail, "nearest mlx5_2 (network rail2), mlx5_3 (network rail3) NODE") ||
		!strings.Contains(c.Detail, "NCCL counts NODE as PHB") || !strings.Contains(c.Detail, "turns GPUDirect RDMA off") ||
		!strings.Contains(c.Fix, "NCCL_NET_GDR_LEVEL=PHB") {
		t.Errorf("GPU0 (NODE): %+v", c)
	}
	if c, _ := checkOf(out, "GPU topology GPU2"); c.Status != statusOK {
		t.Errorf("GPU2 (PIX to mlx5_2): %+v", c)
	}
}

func TestDoctorGPUDirectDmaBuf(t *testing.T) {
	w, root := railWorld(t, gputest.Options{OpenModule: true}, mlx5Rails(), 0)
	_, out := runDoctor(t, w, "--sysfs-root", root)
	c, _ := checkOf(out, "GPUDirect")
	if c.Status != statusOK || !strings.Contains(c.Detail, "dma-buf: kernel 6.1.0-18-amd64 and NVIDIA's open kernel module 535.104.05") {
		t.Errorf("GPUDirect: %+v", c)
	}
}

func TestDoctorNoGPU(t *testing.T) {
	w, root := doctorWorld(t, rdmatest.MLX5Options{})
	_, out := runDoctor(t, w, "--sysfs-root", root)
	c, _ := checkOf(out, "GPUDirect")
	if c.Status != statusInfo || !strings.Contains(c.Detail, "no NVIDIA GPU") || out.GPUTopology != nil {
		t.Errorf("GPUDirect: %+v, topology %v", c, out.GPUTopology)
	}
}

func TestDoctorFabric(t *testing.T) {
	for _, tc := range []struct {
		name, tc      string
		check, status string
		detail, fix   string
	}{
		{name: "traffic class on the PFC priority", tc: "106", check: "traffic class ens10np0", status: statusOK,
			detail: "traffic class 106 (DSCP 26) lands on priority 3, which has PFC (network rail0)"},
		{name: "traffic class on a lossy priority", tc: "0", check: "traffic class ens10np0", status: statusWarn,
			detail: "lands on priority 0, which has no PFC (PFC on: 3)", fix: "dcb pfc set dev ens10np0 prio-pfc 0:on"},
		{name: "no traffic class: the PFC priorities", check: "PFC ens10np0", status: statusOK,
			detail: "on for priority 3 of ens10np0"},
		{name: "RoCE MTU", check: "RoCE MTU ens14np0", status: statusOK, detail: "netdev MTU 9000 gives RoCE MTU 4096 (MTU - 96, rounded down to 4096/2048/1024) (network rail4)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, root := railWorld(t, gputest.Options{}, mlx5Rails(), 0, 4)
			args := []string{"--sysfs-root", root}
			if tc.tc != "" {
				args = append(args, "--traffic-class", tc.tc)
			}
			_, out := runDoctor(t, w, args...)
			c, ok := checkOf(out, tc.check)
			if !ok || c.Status != tc.status || !strings.Contains(c.Detail, tc.detail) || !strings.Contains(c.Fix, tc.fix) {
				t.Errorf("%s = %+v\nwant %s ~%q fix ~%q", tc.check, c, tc.status, tc.detail, tc.fix)
			}
			if len(out.Fabric) != 2 || out.Fabric[0].Parent != "ens10np0" || out.Fabric[0].DCB == nil || out.Fabric[0].RoCEMTU != 4096 {
				t.Errorf("fabric reports in the JSON: %+v", out.Fabric)
			}
		})
	}
}

// TestDoctorFabricNotReported: a NIC without DCB (the kernel answers
// EOPNOTSUPP) is reported as such, and doctor does not fail for it.
func TestDoctorFabricNotReported(t *testing.T) {
	k := &fabrictest.Kernel{
		Links: map[string]fabric.Link{"ens10np0": {Name: "ens10np0", Kind: "device", MTU: 1500, MaxMTU: 1500}},
		Errs:  map[string]error{"ens10np0": syscall.EOPNOTSUPP},
	}
	w, root := railWorld(t, gputest.Options{}, k, 0)
	_, out := runDoctor(t, w, "--sysfs-root", root, "--traffic-class", "106")
	c, _ := checkOf(out, "DCB ens10np0")
	if c.Status != statusInfo || !strings.Contains(c.Detail, "not reported by this NIC") {
		t.Errorf("DCB: %+v", c)
	}
	if _, ok := checkOf(out, "traffic class ens10np0"); ok {
		t.Errorf("a traffic class judged without DCB")
	}
	c, _ = checkOf(out, "RoCE MTU ens10np0")
	if c.Status != statusInfo || !strings.Contains(c.Detail, "gives RoCE MTU 1024") || !strings.Contains(c.Detail, "takes no MTU above 1500, so no jumbo frames") {
		t.Errorf("RoCE MTU: %+v", c)
	}
	if len(out.Fabric) != 1 || !out.Fabric[0].DCBNotReported {
		t.Errorf("fabric report: %+v", out.Fabric)
	}
}

// TestDoctorFabricTestTree: without a kernel to ask for a test tree, the
// parents are not checked, and doctor says why.
func TestDoctorFabricTestTree(t *testing.T) {
	w, root := doctorWorld(t, rdmatest.MLX5Options{})
	_, out := runDoctor(t, w, "--sysfs-root", root)
	c, _ := checkOf(out, "fabric")
	if c.Status != statusInfo || !strings.Contains(c.Detail, "parents not checked: the sysfs root "+root+" is not this host's /") {
		t.Errorf("fabric: %+v", c)
	}
}

func TestDoctorTrafficClassRange(t *testing.T) {
	for _, v := range []string{"256", "-2", "x"} {
		w, root := doctorWorld(t, rdmatest.MLX5Options{})
		if rc := w.run("doctor", "--sysfs-root", root, "--traffic-class", v); rc != exitUsage {
			t.Errorf("--traffic-class %s: status %d, stderr %q", v, rc, w.stderr.String())
		}
	}
}

// TestPrivilegedDoctorDCBOnVeth asks a real kernel for the DCB settings of a
// veth, whose driver has no DCB support: the kernel answers EOPNOTSUPP, and
// doctor says "not reported by this NIC" instead of failing.
func TestPrivilegedDoctorDCBOnVeth(t *testing.T) {
	h := netnstest.NewHost(t) // skips, saying so, when not root
	_, err := h.GetDCB(fabric.IEEEGetRequest("p0"))
	if !errors.Is(err, syscall.EOPNOTSUPP) {
		t.Fatalf("DCB of a veth: %v, want EOPNOTSUPP", err)
	}
	if _, err := h.GetDCB(fabric.IEEEGetRequest("nosuchlink")); !errors.Is(err, syscall.ENODEV) {
		t.Errorf("DCB of a missing link: %v, want ENODEV", err)
	}

	w := newWorld(t)
	w.info("28.2.2")
	w.plugin("rdma-macvlan:latest", pluginID, true, map[string]string{"sysfs": "/sys"})
	st, _ := json.Marshal(api.Status{Networks: []api.Network{{ID: netRoce, Parent: "p0", Endpoints: []api.Endpoint{}}}})
	w.daemon(pluginID, st)
	w.network("roce", netRoce, "rdma-macvlan:latest", map[string]string{"parent": "p0"}, nil)
	w.env.Kernel = func() (fabric.Kernel, func(), error) { return kernelAt{h}, func() {}, nil }
	_, out := runDoctor(t, w, "--sysfs-root", t.TempDir(), "--traffic-class", "106")
	c, _ := checkOf(out, "DCB p0")
	if c.Status != statusInfo || !strings.Contains(c.Detail, "not reported by this NIC") || !strings.Contains(c.Detail, "operation not supported") {
		t.Errorf("DCB check: %+v", c)
	}
	c, _ = checkOf(out, "RoCE MTU p0")
	if c.Status != statusWarn || !strings.Contains(c.Detail, "netdev MTU 1500 gives RoCE MTU 1024") || !strings.Contains(c.Detail, "p0 takes MTUs up to 65535") {
		t.Errorf("MTU check: %+v", c)
	}
	if len(out.Fabric) != 1 || !out.Fabric[0].DCBNotReported || out.Fabric[0].MaxMTU != 65535 {
		t.Errorf("fabric report: %+v", out.Fabric)
	}
}

// Without --traffic-class, doctor judges each network's own -o
// traffic_class on its parent: two networks on one parent with different
// classes get a finding each, naming them; a parent whose networks set none
// says so. --traffic-class replaces them all.
func TestDoctorFabricNetworkTrafficClass(t *testing.T) {
	w := newWorld(t)
	w.info("28.2.2")
	w.plugin("rdma-macvlan:latest", pluginID, true, map[string]string{"sysfs": "/sys"})
	var st api.Status
	for i, n := range []struct {
		name, parent, hca string
		tc                *int
	}{
		{"lossless", "ens10np0", "mlx5_0", intPtr(106)}, {"lossy", "ens10np0", "mlx5_0", intPtr(0)}, {"plain", "ens14np0", "mlx5_4", nil},
	} {
		id := strings.Repeat(fmt.Sprint(i+1), 64)
		st.Networks = append(st.Networks, api.Network{ID: id, Parent: n.parent, HCA: n.hca, Port: 1, PortState: "ACTIVE", Endpoints: []api.Endpoint{}, TrafficClass: n.tc})
		opts := map[string]string{"parent": n.parent}
		if n.tc != nil {
			opts["traffic_class"] = fmt.Sprint(*n.tc)
		}
		w.network(n.name, id, "rdma-macvlan:latest", opts, nil)
	}
	b, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	w.daemon(pluginID, b)
	k := mlx5Rails()
	w.env.Kernel = func() (fabric.Kernel, func(), error) { return k, func() {}, nil }
	root := gputest.Host8x8(t, gputest.Options{})
	checks := func(out doctorOutput, name string) []check {
		var cs []check
		for _, c := range out.Checks {
			if c.Name == name {
				cs = append(cs, c)
			}
		}
		return cs
	}

	_, out := runDoctor(t, w, "--sysfs-root", root)
	cs := checks(out, "traffic class ens10np0")
	if len(cs) != 2 {
		t.Fatalf("traffic class ens10np0: %+v; want one per class of its networks", cs)
	}
	if c := cs[0]; c.Status != statusWarn || !strings.Contains(c.Detail, "traffic class 0 (DSCP 0) lands on priority 0, which has no PFC") ||
		!strings.HasSuffix(c.Detail, "(network lossy: its -o traffic_class)") {
		t.Errorf("class 0: %+v", c)
	}
	if c := cs[1]; c.Status != statusOK || c.Detail != "traffic class 106 (DSCP 26) lands on priority 3, which has PFC (network lossless: its -o traffic_class)" {
		t.Errorf("class 106: %+v", c)
	}
	if cs := checks(out, "traffic class ens14np0"); len(cs) != 1 || !strings.Contains(cs[0].Detail, "no traffic class set on the network (-o traffic_class) or given (--traffic-class)") {
		t.Errorf("traffic class ens14np0: %+v", cs)
	}

	_, out = runDoctor(t, w, "--sysfs-root", root, "--traffic-class", "106")
	if cs := checks(out, "traffic class ens10np0"); len(cs) != 1 || cs[0].Status != statusOK || !strings.HasSuffix(cs[0].Detail, "(network lossless, lossy)") {
		t.Errorf("with --traffic-class 106: %+v; want one finding for every network of the parent", cs)
	}
}

func intPtr(n int) *int { return &n }
