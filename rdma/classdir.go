package rdma

import (
	"os"
	"path/filepath"
	"strings"
)

// The two class directories read here list every RDMA device and every
// verbs node of the host; both are read under the Sysfs's root, so several
// roots in one process (parallel tests, the CLI's hosts) never meet.
//
// A directory listing here is one getdents per call: entries are told
// apart by the type the kernel gives them, never by an lstat each; and only
// uverbsN entries are opened, never the fabric management nodes (umadN,
// issmN, one pair per port), which a container must not get.

// rdmaDeviceList lists the HCAs under root's sys/class/infiniband (sysfs
// has a symbolic link per device), in no particular order; nil when there
// are none or the class is missing.
func rdmaDeviceList(root string) []string {
	entries, err := os.ReadDir(filepath.Join(root, "sys/class/infiniband"))
	if err != nil {
		return nil
	}
	var devs []string
	for _, e := range entries {
		if !e.IsDir() {
			devs = append(devs, e.Name())
		}
	}
	return devs
}

// uverbsNames returns the names (uverbsN) of hca's verbs device nodes under
// root, in no particular order: the entries of sys/class/infiniband_verbs
// whose ibdev names hca.
func uverbsNames(root, hca string) []string {
	dir := filepath.Join(root, "sys/class/infiniband_verbs")
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var names []string
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), "uverbs") {
			continue // abi_version
		}
		if ibdev, err := readTrimmed(filepath.Join(dir, e.Name(), "ibdev")); err == nil && ibdev == hca {
			names = append(names, e.Name())
		}
	}
	return names
}
