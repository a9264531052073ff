package rdma

import (
	"fmt"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// DevDir is where the kernel's RDMA device nodes live, on the host and in
// containers.
const DevDir = "/dev/infiniband"

// DeviceNode is a character device a container needs to use an HCA.
type DeviceNode struct {
	// Path is the node's path on the host and in the container,
	// e.g. /dev/infiniband/uverbs0.
	Path         string
	Major, Minor uint32
	// Type is "c" (character device).
	Type string
}

// DeviceNodes returns the device nodes a container needs for hca: its
// uverbsN node(s) (verbs), then rdma_cm (librdmacm). Never umadN or issmN:
// those drive fabric management, not traffic. Major and minor numbers come
// from the sysfs dev files, so /dev is never touched.
//
// When rdma_cm is not registered (rdma_ucm not loaded) it returns the uverbs
// nodes together with an error wrapping ErrNoRdmaCM, so the caller can warn
// and go on: verbs work without it. No uverbs node is an error wrapping
// ErrNoUverbs.
// Equivalent to: ls -l /dev/infiniband; cat /sys/class/infiniband_verbs/uverbs*/ibdev
func (s *Sysfs) DeviceNodes(hca string) ([]DeviceNode, error) {
	if err := checkName("RDMA device", hca); err != nil {
		return nil, err
	}
	uverbs := uverbsNames(s.root(), hca)
	verbsDir := s.path("sys/class/infiniband_verbs")
	if len(uverbs) == 0 {
		return nil, fmt.Errorf("RDMA device %s: %w: no %s/uverbs*/ibdev names it (is ib_uverbs loaded? check: modprobe ib_uverbs; rdma dev show %s)",
			hca, ErrNoUverbs, verbsDir, hca)
	}
	sort.Slice(uverbs, func(i, j int) bool { return nodeNumber(uverbs[i]) < nodeNumber(uverbs[j]) })

	nodes := make([]DeviceNode, 0, len(uverbs)+1)
	for _, name := range uverbs {
		devFile := filepath.Join(verbsDir, name, "dev")
		major, minor, err := readDevNumbers(devFile)
		if err != nil {
			return nil, fmt.Errorf("RDMA device %s: %w", hca, err)
		}
		nodes = append(nodes, DeviceNode{Path: filepath.Join(DevDir, name), Major: major, Minor: minor, Type: "c"})
	}

	cmFile := s.path("sys/class/misc/rdma_cm/dev")
	major, minor, err := readDevNumbers(cmFile)
	if err != nil {
		return nodes, fmt.Errorf("RDMA device %s: %w (rdma_cm connection setup will fail; check: modprobe rdma_ucm): %w", hca, ErrNoRdmaCM, err)
	}
	nodes = append(nodes, DeviceNode{Path: filepath.Join(DevDir, "rdma_cm"), Major: major, Minor: minor, Type: "c"})
	return nodes, nil
}

// readDevNumbers parses a sysfs dev file: "231:192".
func readDevNumbers(path string) (major, minor uint32, err error) {
	v, err := readTrimmed(path)
	if err != nil {
		return 0, 0, fmt.Errorf("read device number: %w", err)
	}
	maj, min, ok := strings.Cut(v, ":")
	ma, err1 := strconv.ParseUint(maj, 10, 32)
	mi, err2 := strconv.ParseUint(min, 10, 32)
	if !ok || err1 != nil || err2 != nil {
		return 0, 0, fmt.Errorf("read device number from %s: %q is not major:minor", path, v)
	}
	return uint32(ma), uint32(mi), nil
}

// nodeNumber returns N of "uverbsN" for sorting; -1 when there is none.
func nodeNumber(name string) int {
	n, err := strconv.Atoi(strings.TrimLeft(name, "abcdefghijklmnopqrstuvwxyz_"))
	if err != nil {
		return -1
	}
	return n
}
