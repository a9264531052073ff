package gpu

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rdma-macvlan/rdma-macvlan/cmd/docker-rdma/internal/gpu/gputest"
)

// want8x8 is the matrix of gputest's host, worked out by hand from its
// layout: GPU0/mlx5_0 and GPU1/mlx5_1 share a second-level switch, the two
// pairs a first-level one; GPU2, GPU3 and mlx5_2 share a switch, mlx5_3 has
// a root port of the same host bridge; socket 1 has a flat switch per host
// bridge.
var want8x8 = [][]string{
	//  mlx5_0 mlx5_1 mlx5_2 mlx5_3 mlx5_4 mlx5_5 mlx5_6 mlx5_7
	{PIX, PXB, NODE, NODE, SYS, SYS, SYS, SYS}, // GPU0
	{PXB, PIX, NODE, NODE, SYS, SYS, SYS, SYS}, // GPU1
	{NODE, NODE, PIX, PHB, SYS, SYS, SYS, SYS}, // GPU2
	{NODE, NODE, PIX, PHB, SYS, SYS, SYS, SYS}, // GPU3
	{SYS, SYS, SYS, SYS, PIX, PIX, NODE, NODE}, // GPU4
	{SYS, SYS, SYS, SYS, PIX, PIX, NODE, NODE}, // GPU5
	{SYS, SYS, SYS, SYS, NODE, NODE, PIX, PIX}, // GPU6
	{SYS, SYS, SYS, SYS, NODE, NODE, PIX, PIX}, // GPU7
}

func hcas8x8(t *testing.T, root string) []Device {
	t.Helper()
	var out []Device
	for _, h := range gputest.HCAs {
		d, err := HCA(root, h.Name)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, d)
	}
	return out
}

func TestMatrix8x8(t *testing.T) {
	root := gputest.Host8x8(t, gputest.Options{})
	gpus, err := GPUs(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(gpus) != 8 {
		t.Fatalf("found %d GPUs, want 8 (the NVIDIA audio function and the other vendor's display are no GPUs): %+v", len(gpus), gpus)
	}
	for i, g := range gpus {
		if g.BDF != gputest.GPUs[i].BDF || g.Name != "GPU"+string(rune('0'+i)) {
			t.Errorf("GPU %d is %s at %s, want GPU%d at %s (PCI order)", i, g.Name, g.BDF, i, gputest.GPUs[i].BDF)
		}
		if want := i / 4; g.NUMA != want {
			t.Errorf("%s NUMA %d, want %d", g.Name, g.NUMA, want)
		}
	}
	m := NewMatrix(gpus, hcas8x8(t, root))
	for g := range want8x8 {
		for h := range want8x8[g] {
			if m.Links[g][h] != want8x8[g][h] {
				t.Errorf("GPU%d-%s: %s, want %s", g, m.HCAs[h].Name, m.Links[g][h], want8x8[g][h])
			}
		}
	}
	near, link := m.Nearest(3)
	if link != PIX || len(near) != 1 || m.HCAs[near[0]].Name != "mlx5_2" {
		t.Errorf("nearest to GPU3: %v %s, want mlx5_2 PIX", near, link)
	}
	near, link = m.Nearest(6)
	if link != PIX || len(near) != 2 || m.HCAs[near[0]].Name != "mlx5_6" || m.HCAs[near[1]].Name != "mlx5_7" {
		t.Errorf("nearest to GPU6: %v %s, want mlx5_6 and mlx5_7 PIX", near, link)
	}
	var b bytes.Buffer
	m.Render(&b, "")
	t.Logf("\n%s", b.String())
	lines := strings.Split(b.String(), "\n")
	if f := strings.Fields(lines[2]); strings.Join(f, " ") != "GPU1 PXB PIX NODE NODE SYS SYS SYS SYS 0 0000:1e:00.0" {
		t.Errorf("GPU1's row: %q", lines[2])
	}
}

// TestLinkRules covers the edges of the rules on small trees.
func TestLinkRules(t *testing.T) {
	dev := func(host string, numa int, path ...string) Device {
		return Device{HostBridge: host, NUMA: numa, Path: path}
	}
	for _, tc := range []struct {
		name string
		a, b Device
		want string
	}{
		{"two functions of one device on a root port", dev("pci0000:00", 0, "00:01.0", "01:00.0"), dev("pci0000:00", 0, "00:01.0", "01:00.1"), PIX},
		{"one switch", dev("h", 0, "rp", "usp", "dsp1", "g"), dev("h", 0, "rp", "usp", "dsp2", "n"), PIX},
		{"a switch below another", dev("h", 0, "rp", "usp", "dsp1", "g"), dev("h", 0, "rp", "usp", "dsp2", "usp2", "dsp3", "n"), PXB},
		{"root ports of one host bridge", dev("h", 0, "rp1", "g"), dev("h", 0, "rp2", "n"), PHB},
		{"host bridges of one node", dev("h1", 0, "rp", "g"), dev("h2", 0, "rp", "n"), NODE},
		{"host bridges of two nodes", dev("h1", 0, "rp", "g"), dev("h2", 1, "rp", "n"), SYS},
		{"no NUMA information", dev("h1", -1, "rp", "g"), dev("h2", -1, "rp", "n"), NODE},
	} {
		if got := Link(tc.a, tc.b); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
		if got := Link(tc.b, tc.a); got != tc.want {
			t.Errorf("%s, the other way: %s, want %s", tc.name, got, tc.want)
		}
	}
}

func TestVirtualHCA(t *testing.T) {
	root := t.TempDir()
	if _, err := HCA(root, "rxe0"); err == nil || !strings.Contains(err.Error(), "virtual") {
		t.Errorf("rxe0 with no device link: %v", err)
	}
}

func TestNoGPUs(t *testing.T) {
	gpus, err := GPUs(t.TempDir())
	if err != nil || len(gpus) != 0 {
		t.Errorf("empty tree: %v %v", gpus, err)
	}
}

// An mlx5 sub-function's RDMA device hangs off an auxiliary device below
// its PCI function (.../0000:17:00.0/mlx5_core.sf.2): it is placed at that
// function, with its NUMA node, so the matrix has it where the port is.
func TestSubFunctionHCA(t *testing.T) {
	root := gputest.Host8x8(t, gputest.Options{})
	pf, err := HCA(root, "mlx5_0")
	if err != nil {
		t.Fatal(err)
	}
	fn := filepath.Join(append([]string{root, "sys/devices", pf.HostBridge}, pf.Path...)...)
	sf := filepath.Join(fn, "mlx5_core.sf.2")
	if err := os.MkdirAll(filepath.Join(root, "sys/class/infiniband/mlx5_8"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(sf, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(sf, filepath.Join(root, "sys/class/infiniband/mlx5_8/device")); err != nil {
		t.Fatal(err)
	}
	d, err := HCA(root, "mlx5_8")
	if err != nil {
		t.Fatalf("a sub-function: %v", err)
	}
	if d.BDF != pf.BDF || d.HostBridge != pf.HostBridge || d.NUMA != pf.NUMA || strings.Join(d.Path, "/") != strings.Join(pf.Path, "/") {
		t.Errorf("sub-function placed at %+v, want its function's place %+v", d, pf)
	}
	gpus, err := GPUs(root)
	if err != nil {
		t.Fatal(err)
	}
	if got := Link(gpus[0], d); got != PIX {
		t.Errorf("GPU0 to mlx5_0's sub-function: %s, want PIX", got)
	}
	// Anything else that is not a PCI address is still refused.
	other := filepath.Join(fn, "not-a-function")
	if err := os.MkdirAll(other, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(root, "sys/class/infiniband/odd0"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(other, filepath.Join(root, "sys/class/infiniband/odd0/device")); err != nil {
		t.Fatal(err)
	}
	if _, err := HCA(root, "odd0"); err == nil || !strings.Contains(err.Error(), "is not a PCI address") {
		t.Errorf("odd0: %v", err)
	}
}
