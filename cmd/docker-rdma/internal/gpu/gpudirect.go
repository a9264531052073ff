package gpu

import (
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// DmaBufKernel is the first kernel whose RDMA core registers dma-buf memory
// (ib_umem_dmabuf, 5.12): how an HCA reaches GPU memory without a peer
// memory module.
var DmaBufKernel = [2]int{5, 12}

// Readiness says whether GPUDirect RDMA can work on the host, from kernel
// and driver facts only.
type Readiness struct {
	// PeerMem names the loaded peer memory module (nvidia_peermem, or the
	// older nv_peer_mem); "" when none is.
	PeerMem string `json:"peer_mem,omitempty"`
	// Driver is the loaded nvidia module's version; "" when not loaded.
	Driver string `json:"nvidia_driver,omitempty"`
	// OpenModule is set when the nvidia module is NVIDIA's open kernel
	// module, which exports GPU memory as dma-buf.
	OpenModule bool `json:"open_kernel_module"`
	// Kernel is the kernel release.
	Kernel string `json:"kernel,omitempty"`
	// DmaBuf says whether dma-buf can carry GPU memory to the HCA;
	// DmaBufWhy says why not.
	DmaBuf    bool   `json:"dma_buf"`
	DmaBufWhy string `json:"dma_buf_why_not,omitempty"`
}

// CheckGPUDirect reads the facts under root: sys/module for the loaded
// modules, proc/driver/nvidia/version for the kind of nvidia module, and
// proc/sys/kernel/osrelease for the kernel.
func CheckGPUDirect(root string) Readiness {
	var r Readiness
	for _, m := range []string{"nvidia_peermem", "nv_peer_mem"} {
		if _, err := os.Stat(filepath.Join(root, "sys/module", m)); err == nil {
			r.PeerMem = m
			break
		}
	}
	if _, err := os.Stat(filepath.Join(root, "sys/module/nvidia")); err == nil {
		r.Driver = cmp.Or(readAttr(filepath.Join(root, "sys/module/nvidia/version")), "version unknown")
	}
	if b, err := os.ReadFile(filepath.Join(root, "proc/driver/nvidia/version")); err == nil {
		// "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  535.104.05 ..."
		// for the open module; "NVIDIA UNIX x86_64 Kernel Module" otherwise.
		r.OpenModule = strings.Contains(string(b), "Open Kernel Module")
	}
	if b, err := os.ReadFile(filepath.Join(root, "proc/sys/kernel/osrelease")); err == nil {
		r.Kernel = strings.TrimSpace(string(b))
	}
	newEnough, known := KernelAtLeast(r.Kernel, DmaBufKernel)
	switch {
	case r.Driver == "":
		r.DmaBufWhy = "the nvidia module is not loaded"
	case !known:
		r.DmaBufWhy = "the kernel release is unknown"
	case !newEnough:
		r.DmaBufWhy = fmt.Sprintf("kernel %s is older than %d.%d, the first whose RDMA core takes dma-buf memory", r.Kernel, DmaBufKernel[0], DmaBufKernel[1])
	case !r.OpenModule:
		r.DmaBufWhy = "the nvidia module is NVIDIA's proprietary one (proc/driver/nvidia/version); GPU memory as dma-buf needs the open kernel module"
	default:
		r.DmaBuf = true
	}
	return r
}

// KernelAtLeast compares a release such as 6.1.0-18-amd64 with major.minor;
// known is false when the release does not say.
func KernelAtLeast(release string, want [2]int) (ok, known bool) {
	parts := strings.SplitN(release, ".", 3)
	if len(parts) < 2 {
		return false, false
	}
	ma, err1 := strconv.Atoi(parts[0])
	mi, err2 := strconv.Atoi(strings.TrimRightFunc(parts[1], func(r rune) bool { return r < '0' || r > '9' }))
	if err1 != nil || err2 != nil {
		return false, false
	}
	return ma > want[0] || ma == want[0] && mi >= want[1], true
}
