package commands

import (
	"fmt"
	"strings"

	"github.com/rdma-macvlan/rdma-macvlan/gpu"
)

// noteNearestRails tells, in one line on stderr, which of the run's
// rdma-macvlan networks (rails) are nearest on PCIe to each GPU --gpus
// gives the container. A note, never a reason to refuse the run.
func (s *session) noteNearestRails(value string, nets []runNet) {
	if len(nets) == 0 {
		return
	}
	if local, _ := s.local(); !local {
		return
	}
	note := func(format string, a ...any) {
		tprintf(s.env.Stderr, "docker rdma run: note: --gpus "+value+": "+format+"\n", a...)
	}
	root := s.sysfsRoot(nets[0].view.Backend)
	all, err := gpu.GPUs(root)
	if err != nil {
		note("cannot tell which rail is nearest: %v", err)
		return
	}
	if len(all) == 0 {
		note("no NVIDIA GPU on this host's PCIe (sysfs under %s), so no nearest rail", root)
		return
	}
	uuids, err := gpu.UUIDs(root)
	if err != nil {
		note("cannot read the GPUs' UUIDs: %v", err)
		return
	}
	gpus, err := gpu.Requested(value, all, uuids)
	if err != nil {
		tprintf(s.env.Stderr, "docker rdma run: note: %v, so no nearest rail\n", err)
		return
	}
	var hcas []gpu.Device
	var rails []string
	for _, n := range nets {
		if n.view.HCA == "" {
			continue
		}
		h, err := gpu.HCA(root, n.view.HCA)
		if err != nil {
			continue
		}
		hcas = append(hcas, h)
		rails = append(rails, n.view.Name)
	}
	if len(hcas) == 0 {
		note("the networks' HCAs are not on PCIe here, so no nearest rail")
		return
	}
	m := gpu.NewMatrix(gpus, hcas)
	var parts []string
	for g, d := range m.GPUs {
		near, link := m.Nearest(g)
		var names []string
		for _, h := range near {
			names = append(names, fmt.Sprintf("%s (%s)", rails[h], m.HCAs[h].Name))
		}
		parts = append(parts, fmt.Sprintf("%s %s nearest %s %s", d.Name, d.BDF, strings.Join(names, ", "), link))
	}
	tprintf(s.env.Stderr, "docker rdma run: note: nearest rails: %s (PIX/PXB: a PCIe switch; PHB/NODE: the CPU; SYS: another NUMA node)\n", strings.Join(parts, "; "))
}
