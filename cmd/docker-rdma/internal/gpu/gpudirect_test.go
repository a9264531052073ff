package gpu

import (
	"strings"
	"testing"

	"github.com/rdma-macvlan/rdma-macvlan/cmd/docker-rdma/internal/gpu/gputest"
)

func TestGPUDirect(t *testing.T) {
	for _, tc := range []struct {
		name    string
		o       gputest.Options
		peermem string
		dmabuf  bool
		why     string
	}{
		{name: "nvidia_peermem loaded", o: gputest.Options{PeerMem: true}, peermem: "nvidia_peermem", why: "proprietary"},
		{name: "open module on 6.1: dma-buf", o: gputest.Options{OpenModule: true}, dmabuf: true},
		{name: "open module on 5.12: dma-buf", o: gputest.Options{OpenModule: true, Kernel: "5.12.0"}, dmabuf: true},
		{name: "open module on 5.11", o: gputest.Options{OpenModule: true, Kernel: "5.11.22-generic"}, why: "kernel 5.11.22-generic is older than 5.12"},
		{name: "proprietary module", o: gputest.Options{}, why: "proprietary"},
		{name: "no driver", o: gputest.Options{Driver: "none"}, why: "not loaded"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			if err := gputest.Driver(root, tc.o); err != nil {
				t.Fatal(err)
			}
			r := CheckGPUDirect(root)
			if r.PeerMem != tc.peermem || r.DmaBuf != tc.dmabuf || !strings.Contains(r.DmaBufWhy, tc.why) {
				t.Errorf("%+v, want peermem %q, dma-buf %v, why ~%q", r, tc.peermem, tc.dmabuf, tc.why)
			}
			if r.Ready() != (tc.peermem != "" || tc.dmabuf) {
				t.Errorf("Ready() = %v", r.Ready())
			}
		})
	}
}

func TestRequested(t *testing.T) {
	root := gputest.Host8x8(t, gputest.Options{})
	gpus, err := GPUs(root)
	if err != nil {
		t.Fatal(err)
	}
	uuids, err := UUIDs(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		value string
		want  string // GPU names, comma-separated
		err   string
	}{
		{value: "all", want: "GPU0,GPU1,GPU2,GPU3,GPU4,GPU5,GPU6,GPU7"},
		{value: "2", want: "GPU0,GPU1"},
		{value: "count=3,capabilities=utility", want: "GPU0,GPU1,GPU2"},
		{value: `"device=2,5"`, want: "GPU2,GPU5"},
		{value: "device=" + gputest.GPUs[6].UUID, want: "GPU6"},
		{value: "device=8", err: "this host has 8 NVIDIA GPU(s)"},
		{value: "device=GPU-nope", err: "no NVIDIA GPU with that UUID"},
		{value: "lots", err: "is not all, a count"},
	} {
		got, err := Requested(tc.value, gpus, uuids)
		var names []string
		for _, g := range got {
			names = append(names, g.Name)
		}
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("--gpus %s: %v, want error ~%q", tc.value, err, tc.err)
			}
			continue
		}
		if err != nil || strings.Join(names, ",") != tc.want {
			t.Errorf("--gpus %s: %v %v, want %s", tc.value, names, err, tc.want)
		}
	}
}
