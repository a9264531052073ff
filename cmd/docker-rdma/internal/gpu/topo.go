package gpu

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// How far apart two PCI devices are, in nvidia-smi topo -m's words, nearest
// first.
const (
	// PIX: through at most one PCIe switch (both on one switch, or one
	// bridge).
	PIX = "PIX"
	// PXB: through several PCIe switches, without the host bridge.
	PXB = "PXB"
	// PHB: through the PCIe host bridge (the CPU's root complex): both
	// under one root complex, on different root ports.
	PHB = "PHB"
	// NODE: between host bridges within one NUMA node.
	NODE = "NODE"
	// SYS: across the interconnect between NUMA nodes (sockets).
	SYS = "SYS"
)

// rank orders the links, nearest first.
var rank = map[string]int{PIX: 0, PXB: 1, PHB: 2, NODE: 3, SYS: 4}

// Closer reports whether link a is nearer than link b.
func Closer(a, b string) bool { return rank[a] < rank[b] }

// Link says how far apart a and b are on the PCIe tree.
func Link(a, b Device) string {
	if a.HostBridge != b.HostBridge {
		if a.NUMA != b.NUMA && a.NUMA >= 0 && b.NUMA >= 0 {
			return SYS
		}
		return NODE
	}
	c := 0
	for c < len(a.Path) && c < len(b.Path) && a.Path[c] == b.Path[c] {
		c++
	}
	if c == 0 {
		// Different root ports of one root complex.
		return PHB
	}
	// Below the deepest common bridge, each side crosses its own ports. A
	// switch is an upstream port with downstream ports under it, so two
	// devices on one switch are each one downstream port below the
	// upstream port they share; any more and another switch is in the way.
	if len(a.Path)-c <= 2 && len(b.Path)-c <= 2 {
		return PIX
	}
	return PXB
}

// Matrix is the GPU-by-HCA link matrix.
type Matrix struct {
	GPUs []Device `json:"gpus"`
	HCAs []Device `json:"hcas"`
	// Links[g][h] is Link(GPUs[g], HCAs[h]).
	Links [][]string `json:"links"`
}

// NewMatrix works out every GPU-HCA link.
func NewMatrix(gpus, hcas []Device) *Matrix {
	m := &Matrix{GPUs: gpus, HCAs: hcas, Links: make([][]string, len(gpus))}
	for g := range gpus {
		m.Links[g] = make([]string, len(hcas))
		for h := range hcas {
			m.Links[g][h] = Link(gpus[g], hcas[h])
		}
	}
	return m
}

// Nearest returns the indexes of the HCAs nearest to GPU g and their link.
func (m *Matrix) Nearest(g int) ([]int, string) {
	best := ""
	var out []int
	for h, l := range m.Links[g] {
		switch {
		case best == "" || Closer(l, best):
			best, out = l, []int{h}
		case l == best:
			out = append(out, h)
		}
	}
	return out, best
}

// Render prints the matrix as nvidia-smi topo -m lays it out, with each
// device's PCI address and NUMA node, and the legend.
func (m *Matrix) Render(w io.Writer, indent string) {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	head := []string{indent}
	for _, h := range m.HCAs {
		head = append(head, h.Name)
	}
	head = append(head, "NUMA", "PCI")
	fmt.Fprintln(tw, strings.Join(head, "\t"))
	for g, d := range m.GPUs {
		row := []string{indent + d.Name}
		row = append(row, m.Links[g]...)
		row = append(row, numa(d.NUMA), d.BDF)
		fmt.Fprintln(tw, strings.Join(row, "\t"))
	}
	_ = tw.Flush()
	var hcas []string
	for _, h := range m.HCAs {
		hcas = append(hcas, fmt.Sprintf("%s %s NUMA %s", h.Name, h.BDF, numa(h.NUMA)))
	}
	fmt.Fprintf(w, "%sHCAs: %s\n", indent, strings.Join(hcas, ", "))
	fmt.Fprintf(w, "%sPIX: one PCIe switch; PXB: several switches; PHB: the host bridge; NODE: between host bridges of a NUMA node; SYS: across NUMA nodes\n", indent)
}

func numa(n int) string {
	if n < 0 {
		return "-"
	}
	return fmt.Sprint(n)
}
