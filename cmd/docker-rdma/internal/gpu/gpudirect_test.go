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
		})
	}
}
