package rdma

import (
	"path/filepath"
	"strings"
	"sync"

	"github.com/Mellanox/rdmamap"
)

// This file is the only one that knows rdmamap. rdmamap (v1.2.0) reads
// sysfs at paths kept in package variables (RdmaClassDir, ...) and has no
// other way to be pointed at a root; so each call here points them at the
// Sysfs's root and calls rdmamap under one lock, and several roots in one
// process (parallel tests, the CLI's hosts) each read their own tree.

var rdmamapMu sync.Mutex

// withRdmamap runs fn with rdmamap pointed at root, holding rdmamapMu.
// RdmaDeviceDir and RdmaUcmDevice stay "/dev/...": they name device nodes
// as containers see them, which this package reports but never reads (the
// daemon needs no access to /dev).
func withRdmamap(root string, fn func()) {
	rdmamapMu.Lock()
	defer rdmamapMu.Unlock()
	rdmamap.RdmaClassDir = filepath.Join(root, "sys/class/infiniband")
	rdmamap.RdmaIbUcmDir = filepath.Join(root, "sys/class/infiniband_cm")
	rdmamap.RdmaUmadDir = filepath.Join(root, "sys/class/infiniband_mad")
	rdmamap.RdmaUverbsDir = filepath.Join(root, "sys/class/infiniband_verbs")
	rdmamap.PciDevDir = filepath.Join(root, "sys/bus/pci/devices")
	rdmamap.AuxDevDir = filepath.Join(root, "sys/bus/auxiliary/devices")
	fn()
}

// rdmaDeviceList lists the HCAs under root's sys/class/infiniband, in no
// particular order; nil when there are none or the class is missing.
func rdmaDeviceList(root string) []string {
	var devs []string
	withRdmamap(root, func() { devs = rdmamap.GetRdmaDeviceList() })
	return devs
}

// uverbsNames returns the names (uverbsN) of hca's verbs device nodes under
// root, in no particular order. rdmamap also lists the fabric management
// nodes (umadN, issmN), which a container must not get: they are dropped.
func uverbsNames(root, hca string) []string {
	var names []string
	withRdmamap(root, func() {
		for _, p := range rdmamap.GetRdmaCharDevices(hca) {
			if name := filepath.Base(p); strings.HasPrefix(name, rdmamap.RdmaUverbsFilxPrefix) {
				names = append(names, name)
			}
		}
	})
	return names
}
