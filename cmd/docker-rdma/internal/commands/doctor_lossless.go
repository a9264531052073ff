package commands

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/rdma-macvlan/rdma-macvlan/cmd/docker-rdma/internal/fabric"
	"github.com/rdma-macvlan/rdma-macvlan/cmd/docker-rdma/internal/gpu"
	"github.com/rdma-macvlan/rdma-macvlan/netns"
	"github.com/rdma-macvlan/rdma-macvlan/rdma"
)

// gpuTopology is the GPU-by-HCA matrix doctor shows, with the networks
// (rails) behind each HCA.
type gpuTopology struct {
	*gpu.Matrix
	// Rails maps an HCA to the rdma-macvlan networks on it.
	Rails map[string][]string `json:"rails"`
}

// rail is an rdma-macvlan network as the lossless checks see it: tc is its
// -o traffic_class, -1 when not set.
type rail struct {
	name, parent, hca string
	tc                int
}

// checkLossless checks what a lossless fabric and GPUDirect RDMA need: the
// DCB, ECN and MTU settings of each network's parent, whether an HCA can
// reach GPU memory, and how near each GPU is to each network's HCA.
func (d *doctor) checkLossless(engine bool) {
	var rails []rail
	if engine {
		rails = d.rails()
		d.checkFabric(rails)
	}
	d.checkGPUs(rails)
}

// rails lists the rdma-macvlan networks with their parents and HCAs, from
// the daemon's status, else Docker's options and sysfs.
func (d *doctor) rails() []rail {
	s := d.s
	nets, err := s.rdmaNetworks()
	if err != nil {
		d.add("fabric", statusWarn, "cannot list the rdma-macvlan networks: "+err.Error(), "")
		return nil
	}
	if s.sysfsRootFlag == "" {
		s.sysfsRootFlag = d.root
	}
	var out []rail
	for _, n := range nets {
		v, _ := s.resolveNetwork(n)
		tc := -1
		if v.TrafficClass != nil {
			tc = *v.TrafficClass
		}
		out = append(out, rail{name: n.Name, parent: v.Parent, hca: v.HCA, tc: tc})
	}
	return out
}

// kernelAt answers the fabric checks from the kernel of one namespace.
type kernelAt struct{ h *netns.Handle }

func (k kernelAt) GetDCB(body []byte) ([]byte, error) { return k.h.GetDCB(body) }

func (k kernelAt) Link(name string) (fabric.Link, error) {
	l, err := k.h.LinkByName(name)
	if err != nil {
		return fabric.Link{}, err
	}
	out := fabric.Link{Name: l.Name, Kind: l.Kind, MTU: l.MTU}
	if out.MaxMTU, err = k.h.LinkMaxMTU(name); err != nil {
		return fabric.Link{}, err
	}
	if l.Kind == "bond" {
		// Its ports: the links enslaved to it.
		links, err := k.h.Links()
		if err != nil {
			return fabric.Link{}, fmt.Errorf("ports of bond %s: %w", name, err)
		}
		for _, p := range links {
			if p.MasterIndex == l.Index {
				out.Ports = append(out.Ports, p.Name)
			}
		}
		sort.Strings(out.Ports)
	}
	if l.Kind == "vlan" && l.ParentIndex > 0 {
		lower, err := k.h.LinkByIndex(l.ParentIndex)
		if err != nil {
			return fabric.Link{}, fmt.Errorf("lower device of VLAN %s: %w", name, err)
		}
		out.Lower = lower.Name
	}
	return out, nil
}

// kernel returns what to ask about netdevs, or why there is nothing to ask.
func (d *doctor) kernel() (fabric.Kernel, func(), error) {
	if d.s.env.Kernel != nil {
		return d.s.env.Kernel()
	}
	if d.root != "/" {
		return nil, nil, fmt.Errorf("the sysfs root %s is not this host's /, and DCB netlink answers for this host", d.root)
	}
	h, err := netns.Current()
	if err != nil {
		return nil, nil, err
	}
	return kernelAt{h}, h.Close, nil
}

func (d *doctor) checkFabric(rails []rail) {
	if len(rails) == 0 {
		d.add("fabric", statusInfo, "no rdma-macvlan network: the PFC, trust, DSCP map and MTU of a network's parent are checked once one exists", "")
		return
	}
	byParent := map[string][]string{}
	// The traffic classes judged per parent, each with its networks:
	// --traffic-class for every network, else each network's own.
	classes := map[string]map[int][]string{}
	for _, r := range rails {
		if r.parent == "" {
			continue
		}
		byParent[r.parent] = append(byParent[r.parent], r.name)
		tc := r.tc
		if d.trafficClass >= 0 {
			tc = d.trafficClass
		}
		if tc >= 0 {
			if classes[r.parent] == nil {
				classes[r.parent] = map[int][]string{}
			}
			classes[r.parent][tc] = append(classes[r.parent][tc], r.name)
		}
	}
	if local, host := d.s.local(); !local {
		d.add("fabric", statusInfo, "not checked: the networks' parents are on "+host, "run docker rdma doctor on "+host)
		return
	}
	k, closeK, err := d.kernel()
	if err != nil {
		d.add("fabric", statusInfo, "parents not checked: "+err.Error(), "")
		return
	}
	defer closeK()
	for _, p := range slices.Sorted(maps.Keys(byParent)) {
		tcs := slices.Sorted(maps.Keys(classes[p]))
		first := -1
		if len(tcs) > 0 {
			first = tcs[0]
		}
		// whose says where a judged class comes from.
		whose := func(tc int) string {
			if d.trafficClass >= 0 {
				return " (network " + strings.Join(byParent[p], ", ") + ")"
			}
			return " (network " + strings.Join(classes[p][tc], ", ") + ": its -o traffic_class)"
		}
		r := fabric.Check(k, p, fabric.Options{TrafficClass: first, Root: d.root})
		for _, f := range r.Findings {
			if (f.Name == "traffic class "+p || strings.HasPrefix(f.Name, "traffic class "+p+" port ")) && first >= 0 {
				d.add(f.Name, f.Status, f.Detail+whose(first), f.Fix)
				continue
			}
			d.add(f.Name, f.Status, f.Detail+" (network "+strings.Join(byParent[p], ", ")+")", f.Fix)
		}
		for _, tc := range tcs[min(1, len(tcs)):] {
			if fs, ok := r.CheckTrafficClass(tc); ok {
				for _, f := range fs {
					d.add(f.Name, f.Status, f.Detail+whose(tc), f.Fix)
				}
			}
		}
		d.out.Fabric = append(d.out.Fabric, r)
	}
}

// checkGPUs checks GPUDirect readiness and the GPU-HCA topology. It says
// nothing more than one line on a host without NVIDIA GPUs.
func (d *doctor) checkGPUs(rails []rail) {
	gpus, err := gpu.GPUs(d.root)
	if err != nil {
		d.add("GPUs", statusWarn, "cannot read the PCI devices: "+err.Error(), "")
		return
	}
	if len(gpus) == 0 {
		d.add("GPUDirect", statusInfo, "no NVIDIA GPU (PCI vendor 0x10de, class 0x0300 or 0x0302) under "+filepath.Join(d.root, "sys/bus/pci/devices")+": not checked", "")
		return
	}
	r := gpu.CheckGPUDirect(d.root)
	switch {
	case r.PeerMem != "":
		d.add("GPUDirect", statusOK, fmt.Sprintf("%s is loaded: HCAs reach GPU memory as peer memory (nvidia %s)", r.PeerMem, r.Driver), "")
	case r.DmaBuf:
		d.add("GPUDirect", statusOK, fmt.Sprintf("dma-buf: kernel %s and NVIDIA's open kernel module %s let HCAs reach GPU memory (nvidia_peermem is not loaded, and not needed)", r.Kernel, r.Driver), "")
	default:
		d.add("GPUDirect", statusWarn, fmt.Sprintf("no way for an HCA to reach GPU memory: nvidia_peermem is not loaded, and dma-buf cannot work: %s. NCCL then copies through host memory", r.DmaBufWhy),
			"modprobe nvidia_peermem (and list it in /etc/modules-load.d/ to keep it across reboots); or NVIDIA's open kernel module on a kernel >= 5.12, for dma-buf")
	}

	hcaRails := map[string][]string{}
	var names []string
	for _, rl := range rails {
		if rl.hca == "" {
			continue
		}
		if _, ok := hcaRails[rl.hca]; !ok {
			names = append(names, rl.hca)
		}
		hcaRails[rl.hca] = append(hcaRails[rl.hca], rl.name)
	}
	what := "the HCAs of the rdma-macvlan networks"
	if len(names) == 0 {
		// No network yet: show where a network could go.
		what = "every RDMA device (no rdma-macvlan network yet)"
		names, _ = rdma.NewSysfs(d.root).Devices()
	}
	sort.Strings(names)
	var hcas []gpu.Device
	for _, n := range names {
		h, err := gpu.HCA(d.root, n)
		if errors.Is(err, gpu.ErrVirtual) {
			d.add("GPU topology", statusInfo, err.Error()+": not in the matrix", "")
			continue
		}
		if err != nil {
			d.add("GPU topology", statusWarn, err.Error(), "")
			continue
		}
		hcas = append(hcas, h)
	}
	if len(hcas) == 0 {
		d.add("GPU topology", statusInfo, fmt.Sprintf("%d NVIDIA GPU(s), and no HCA on PCIe among %s", len(gpus), what), "")
		return
	}
	m := gpu.NewMatrix(gpus, hcas)
	d.out.GPUTopology = &gpuTopology{Matrix: m, Rails: hcaRails}
	for g, dev := range m.GPUs {
		near, link := m.Nearest(g)
		var desc []string
		for _, h := range near {
			n := m.HCAs[h].Name
			if rs := hcaRails[n]; len(rs) > 0 {
				n += " (network " + strings.Join(rs, ", ") + ")"
			}
			desc = append(desc, n)
		}
		detail := fmt.Sprintf("%s, NUMA node %s: nearest %s %s", dev.BDF, numaText(dev.NUMA), strings.Join(desc, ", "), link)
		name := "GPU topology " + dev.Name
		// NCCL uses GPUDirect RDMA up to NCCL_NET_GDR_LEVEL, PXB by default;
		// it has no NODE level (a path between host bridges of one node is
		// its PHB).
		switch link {
		case gpu.PIX, gpu.PXB:
			d.add(name, statusOK, detail, "")
		case gpu.SYS:
			d.add(name, statusWarn, detail+": every one of "+what+" is on another NUMA node. NCCL turns GPUDirect RDMA off beyond its NCCL_NET_GDR_LEVEL (PXB by default) and copies through host memory, "+
				"unless it reaches one of those HCAs through a GPU nearer it over NVLink (PXN, on by default since NCCL 2.12; NCCL_PXN_DISABLE=1 turns it off)",
				"put an rdma-macvlan network on an HCA of NUMA node "+numaText(dev.NUMA)+", or run this GPU's workloads on GPUs near the networks' HCAs")
		default:
			d.add(name, statusWarn, detail+": no HCA shares a PCIe switch with it. NCCL's NCCL_NET_GDR_LEVEL is PXB by default, and NCCL counts "+link+" as PHB (it has no NODE level): "+
				"it turns GPUDirect RDMA off for this GPU and copies through host memory",
				"put an rdma-macvlan network on an HCA under this GPU's PCIe switch; or allow GPUDirect RDMA through the host bridge with -e NCCL_NET_GDR_LEVEL=PHB, "+
					"and compare with and without it (the root complex's peer-to-peer throughput decides which is faster)")
		}
	}
}

func numaText(n int) string {
	if n < 0 {
		return "unknown"
	}
	return fmt.Sprint(n)
}

// renderGPUTopology prints the matrix under doctor's checks.
func renderGPUTopology(w io.Writer, t *gpuTopology) {
	if t == nil {
		return
	}
	fmt.Fprintln(w, "\nGPU topology (like nvidia-smi topo -m):")
	t.Render(w, "  ")
	var rails []string
	for _, h := range t.HCAs {
		if rs := t.Rails[h.Name]; len(rs) > 0 {
			rails = append(rails, h.Name+": "+strings.Join(rs, ", "))
		}
	}
	if len(rails) > 0 {
		tprintf(w, "  networks: %s\n", strings.Join(rails, "; "))
	}
}
