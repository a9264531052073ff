// Package rdmatest builds fake sysfs trees that mirror real RDMA hosts, for
// the tests of every package and (through ./fakesysfs) for shell end-to-end
// scripts. Values come from GID tables and port attributes that users of
// ConnectX and Soft-RoCE hosts published in public issue threads (NVIDIA/nccl
// #1131, #1573 and #1587, k8snetworkplumbingwg/multus-cni#1100): see
// RealHostMLX5 for the host they add up to.
//
// Layout: devices live under sys/devices/... and sys/class entries are
// relative symlinks into them, as the kernel makes them, so code that follows
// links (and code that lists class entries, which are symlinks and not
// directories) sees what it sees on a host.
//
// Empty GID slots: on a host, gids/<i> of an empty slot reads all zeros and
// gid_attrs/{types,ndevs}/<i> fail with EINVAL. A plain file cannot fail
// with EINVAL, so here the attribute files of an empty slot exist but are
// empty (0 bytes), and gids/<i> holds the zero GID. Readers must treat an
// empty attribute file like EINVAL and the zero GID as an empty slot.
// File permissions are never used to make a file unreadable: root would
// read it anyway.
//
// Empty slots are hard links to two read-only template files under
// <root>/.rdmatest/ (creating an inode costs about 1 ms on some test
// machines; a 1024-slot rxe table has 3072 files). Every change replaces a
// slot's file by rename, so the templates never change: change slots only
// with SetGID, ClearGID, AddAddress, RemoveAddress or fakesysfs, never by
// writing into a slot file in place (that would change every empty slot).
//
// What the kernel knows and sysfs does not show (the slots reserved for the
// default GIDs, slots of deleted entries still held by a QP: see
// pending.go) is kept in dot files of the port directory, which no reader
// of sysfs looks at. dumps.go lists the fixtures taken from real hosts and
// what each reproduces; rename.go renames HCAs as a reboot with another
// probe order does.
package rdmatest

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
)

// GID types and the empty GID, in kernel text.
const (
	TypeV1  = "IB/RoCE v1"
	TypeV2  = "RoCE v2"
	ZeroGID = "0000:0000:0000:0000:0000:0000:0000:0000"
)

// Entry is one populated GID slot.
type Entry struct {
	Index int
	GID   string // kernel text, e.g. IPv4GID("10.152.0.12")
	Type  string // TypeV1 or TypeV2; "" writes an empty (unreadable) attr
	Ndev  string // "" writes an empty (unreadable) attr
}

// PortSpec describes one HCA port.
type PortSpec struct {
	Port      int    // default 1
	State     string // ACTIVE (default), DOWN, INIT, ARMED, NOP
	PhysState string // default LinkUp when ACTIVE, Disabled otherwise
	LinkLayer string // Ethernet (default) or InfiniBand
	TableSize int    // number of GID slots; required
	Entries   []Entry
	// DefaultTypes are the RoCE types of the port, one reserved default
	// slot each (0, 1, ...), in the kernel's order: IB/RoCE v1 then RoCE
	// v2 on mlx5, RoCE v2 alone on rxe. The kernel never puts an address's
	// entry in a reserved slot, even an empty one. Nil: AddAddress infers
	// them from the entries in slots 0 and 1.
	DefaultTypes []string
	// PendingDelete are slots whose entry was deleted while a QP still
	// held it: they read empty, yet AddAddress skips them until
	// ReleasePending.
	PendingDelete []int
}

// HCASpec describes one RDMA device.
type HCASpec struct {
	Name string
	// PCIDir is the device's directory relative to the root, e.g.
	// sys/devices/pci0000:00/0000:00:02.0/0000:03:00.0; "" makes a virtual
	// device (rxe) with no device link.
	PCIDir string
	// Driver is the PCI device's kernel driver, e.g. mlx5_core.
	Driver   string
	NodeGUID string
	// NodeDesc is the node_desc attribute; "" writes "rxe" for a virtual
	// device (what Soft-RoCE sets) and none for a device on PCI.
	NodeDesc string
	Ports    []PortSpec
	// Uverbs is N of uverbsN (231:192+N) and of umadN/issmN (231:N,
	// 231:64+N) for the first port; later ports take the next umad numbers.
	Uverbs int
}

// NetdevSpec describes one netdev under sys/class/net.
type NetdevSpec struct {
	Name string
	MAC  string
	MTU  int // default 1500
	// PCIDir as in HCASpec: the netdev's device link points there.
	// "" makes a virtual netdev (veth, dummy, rxe parent) with no device link.
	PCIDir  string
	DevPort int // 0-based port on its device
}

// Common are the host-wide files: the rdma_cm node and the netns mode.
type Common struct {
	// RdmaCM is the rdma_cm dev file content, e.g. "10:57"; "" means
	// rdma_ucm is not loaded (no misc/rdma_cm); "keep" leaves it as it is.
	RdmaCM string
	// NetnsMode is "shared" (Y, default) or "exclusive" (N); "keep"
	// leaves it as it is.
	NetnsMode string
}

// MLX5Options describe a ConnectX (mlx5) host; zero values take the
// defaults of the host RealHostMLX5 describes.
type MLX5Options struct {
	HCA       string // mlx5_0
	Netdev    string // ens3np0
	MAC       string // a0:88:c2:5b:03:ec
	PCIAddr   string // 0000:03:00.0, under PCIBus
	PCIBus    string // the bridge directory of the PCI device: MLX5PCIBus
	TableSize int    // 255
	State     string // ACTIVE
	LinkLayer string // Ethernet
	NetnsMode string // shared (see hostWide)
	// HostIPv4 adds the v1/v2 pair of the netdev's own address at 2/3.
	HostIPv4 string
	// Extra are more populated entries (see Pair).
	Extra []Entry
	// PendingDelete are empty-reading slots a QP still holds (see
	// PortSpec).
	PendingDelete []int
	// NodeGUID is the HCA's node GUID (default: derived from MAC, as mlx5
	// firmware does); with PCIAddr it is what stays of a NIC across
	// renames (see RenameHCAs).
	NodeGUID string
	Uverbs   int    // 0: uverbs0, umad0, issm0
	RdmaCM   string // 10:57 (see hostWide)
	NoRdmaCM bool   // no misc/rdma_cm (rdma_ucm not loaded)
}

// RXEOptions describe a Soft-RoCE host: rxe0 on a virtual netdev, 1024 slots,
// RoCE v2 only, the default GID at 0.
type RXEOptions struct {
	HCA       string // rxe0
	Netdev    string // eth0
	MAC       string // 52:54:00:12:34:56
	TableSize int    // 1024
	State     string // ACTIVE
	NetnsMode string // shared (see hostWide)
	// HostIPv4 adds the netdev's own address at 1.
	HostIPv4 string
	Extra    []Entry
	Uverbs   int    // 0
	RdmaCM   string // 10:124, as observed on a 6.1 kernel (see hostWide)
	NoRdmaCM bool
}

// MLX5PCIBus is the bridge directory the mlx5 fixture's PCI device sits in.
const MLX5PCIBus = "sys/devices/pci0000:00/0000:00:02.0"

// RealHostMLX5 returns the options of a ConnectX host pieced together from
// published dumps: mlx5_0 port 1 (Ethernet, ACTIVE, LinkUp) on ens3np0 (MAC
// a0:88:c2:5b:03:ec) with a 255-slot table. Slots 0-1 hold the default GID
// (from the MAC) as RoCE v1 and v2, 2-3 the host's 11.0.0.72, 4-5 a
// container's link-local GID on its net1 (macvlan MAC a6:ed:cc:8b:19:94),
// 6-7 its 10.152.0.12, 8-9 another container's 10.152.0.13, also on a net1
// (same name, other namespace); 10-254 are empty: the GID reads all zeros
// and its type and netdev fail with EINVAL.
func RealHostMLX5() MLX5Options {
	extra := Pair(4, "fe80:0000:0000:0000:a4ed:ccff:fe8b:1994", "net1")
	extra = append(extra, Pair(6, IPv4GID("10.152.0.12"), "net1")...)
	extra = append(extra, Pair(8, IPv4GID("10.152.0.13"), "net1")...)
	return MLX5Options{HostIPv4: "11.0.0.72", Extra: extra}
}

func (o *MLX5Options) defaults() {
	def := func(p *string, v string) {
		if *p == "" {
			*p = v
		}
	}
	def(&o.HCA, "mlx5_0")
	def(&o.Netdev, "ens3np0")
	def(&o.MAC, "a0:88:c2:5b:03:ec")
	def(&o.PCIAddr, "0000:03:00.0")
	def(&o.PCIBus, MLX5PCIBus)
	def(&o.State, "ACTIVE")
	def(&o.LinkLayer, "Ethernet")
	def(&o.NodeGUID, nodeGUID(o.MAC))
	if o.TableSize == 0 {
		o.TableSize = 255
	}
}

func (o *RXEOptions) defaults() {
	def := func(p *string, v string) {
		if *p == "" {
			*p = v
		}
	}
	def(&o.HCA, "rxe0")
	def(&o.Netdev, "eth0")
	def(&o.MAC, "52:54:00:12:34:56")
	def(&o.State, "ACTIVE")
	if o.TableSize == 0 {
		o.TableSize = 1024
	}
}

// BuildMLX5 builds an mlx5 host under root: the PCI device with its netdev,
// mlx5_0 with port 1 (reserved default pair at 0/1, optional host IPv4 pair,
// extra entries, the rest empty), uverbs, umad/issm, rdma_cm and the netns
// mode. It can be called again on the same root with another HCA, netdev and
// PCIAddr (and Uverbs) to add a second device.
func BuildMLX5(root string, o MLX5Options) error {
	o.defaults()
	def, err := DefaultGID(o.MAC)
	if err != nil {
		return err
	}
	var entries []Entry
	var defaultTypes []string
	if o.LinkLayer == "InfiniBand" {
		// IB ports have one default GID and no netdev attribute.
		entries = []Entry{{Index: 0, GID: def, Type: TypeV1}}
	} else {
		defaultTypes = []string{TypeV1, TypeV2}
		entries = Pair(0, def, o.Netdev)
		if o.HostIPv4 != "" {
			entries = append(entries, Pair(2, IPv4GID(o.HostIPv4), o.Netdev)...)
		}
	}
	entries = append(entries, o.Extra...)
	pciDir := o.PCIBus + "/" + o.PCIAddr
	if err := buildPCIDevice(root, o.PCIAddr, pciDir, "mlx5_core", "0x15b3", "0x1017"); err != nil {
		return err
	}
	if err := AddNetdev(root, NetdevSpec{Name: o.Netdev, MAC: o.MAC, PCIDir: pciDir}); err != nil {
		return err
	}
	if err := BuildHCA(root, HCASpec{
		Name:     o.HCA,
		PCIDir:   pciDir,
		Driver:   "mlx5_core",
		NodeGUID: o.NodeGUID,
		Uverbs:   o.Uverbs,
		Ports: []PortSpec{{
			Port: 1, State: o.State, LinkLayer: o.LinkLayer,
			TableSize: o.TableSize, Entries: entries,
			DefaultTypes: defaultTypes, PendingDelete: o.PendingDelete,
		}},
	}); err != nil {
		return err
	}
	return hostWide(root, o.RdmaCM, "10:57", o.NoRdmaCM, o.NetnsMode)
}

// BuildRXE builds a Soft-RoCE host under root: a virtual netdev, rxe0 with no
// device link, one port of 1024 slots with the RoCE v2 default GID at 0 and
// ndevs naming the netdev, uverbs, umad/issm, rdma_cm and the netns mode.
// Equivalent to: rdma link add rxe0 type rxe netdev eth0
func BuildRXE(root string, o RXEOptions) error {
	o.defaults()
	def, err := DefaultGID(o.MAC)
	if err != nil {
		return err
	}
	entries := []Entry{{Index: 0, GID: def, Type: TypeV2, Ndev: o.Netdev}}
	if o.HostIPv4 != "" {
		entries = append(entries, Entry{Index: 1, GID: IPv4GID(o.HostIPv4), Type: TypeV2, Ndev: o.Netdev})
	}
	entries = append(entries, o.Extra...)
	if err := AddNetdev(root, NetdevSpec{Name: o.Netdev, MAC: o.MAC}); err != nil {
		return err
	}
	if err := BuildHCA(root, HCASpec{
		Name:     o.HCA,
		NodeGUID: nodeGUID(o.MAC),
		Uverbs:   o.Uverbs,
		Ports: []PortSpec{{
			Port: 1, State: o.State, LinkLayer: "Ethernet",
			TableSize: o.TableSize, Entries: entries, DefaultTypes: []string{TypeV2},
		}},
	}); err != nil {
		return err
	}
	return hostWide(root, o.RdmaCM, "10:124", o.NoRdmaCM, o.NetnsMode)
}

// BuildMLX4DualPort builds a ConnectX-3 class host under root: mlx4_0 on
// one PCI function with two Ethernet ports of 128 GID slots each, port 1
// on netdev eth2 and port 2 on eth3 (dev_port 0 and 1), and rdma_cm. It is
// the shape of every HCA with more than one port on one device.
func BuildMLX4DualPort(root string) error {
	pci := MLX5PCIBus + "/0000:04:00.0"
	for _, err := range []error{
		AddNetdev(root, NetdevSpec{Name: "eth2", MAC: "00:02:c9:00:00:02", PCIDir: pci, DevPort: 0}),
		AddNetdev(root, NetdevSpec{Name: "eth3", MAC: "00:02:c9:00:00:03", PCIDir: pci, DevPort: 1}),
		BuildHCA(root, HCASpec{Name: "mlx4_0", PCIDir: pci, Driver: "mlx4_core",
			Ports: []PortSpec{{Port: 1, TableSize: 128}, {Port: 2, TableSize: 128}}}),
		WriteCommon(root, Common{RdmaCM: "10:57"}),
	} {
		if err != nil {
			return err
		}
	}
	return nil
}

// hostWide writes the files one host has once (rdma_cm, netns_mode): a
// value set in the options is always written; a default only when the file
// is not there yet, so that adding a second device to a tree keeps them.
func hostWide(root, rdmaCM, defaultCM string, noCM bool, netnsMode string) error {
	exists := func(rel string) bool {
		_, err := os.Stat(filepath.Join(root, rel))
		return err == nil
	}
	c := Common{RdmaCM: rdmaCM, NetnsMode: netnsMode}
	switch {
	case noCM:
		c.RdmaCM = ""
	case rdmaCM == "" && exists("sys/class/misc/rdma_cm/dev"):
		c.RdmaCM = "keep"
	case rdmaCM == "":
		c.RdmaCM = defaultCM
	}
	if netnsMode == "" && exists(netnsModeFile) {
		c.NetnsMode = "keep"
	}
	return WriteCommon(root, c)
}

// Pair returns the v1 and v2 entries mlx5 adds for one address, at index
// and index+1.
func Pair(index int, gid, ndev string) []Entry {
	return []Entry{
		{Index: index, GID: gid, Type: TypeV1, Ndev: ndev},
		{Index: index + 1, GID: gid, Type: TypeV2, Ndev: ndev},
	}
}

// BuildHCA writes one RDMA device, its ports and its uverbs and umad/issm
// nodes under root.
func BuildHCA(root string, h HCASpec) error {
	if h.Name == "" || len(h.Ports) == 0 {
		return fmt.Errorf("build HCA %q: need a name and at least one port", h.Name)
	}
	if err := writeTemplates(root); err != nil {
		return err
	}
	parent := h.PCIDir
	if parent == "" {
		parent = "sys/devices/virtual"
	}
	hcaDir := filepath.Join(parent, "infiniband", h.Name)
	files := map[string]string{
		"node_type": "1: CA",
		"node_guid": h.NodeGUID,
	}
	switch {
	case h.NodeDesc != "":
		files["node_desc"] = h.NodeDesc
	case h.PCIDir == "":
		files["node_desc"] = "rxe"
	}
	for name, v := range files {
		if err := writeFile(root, filepath.Join(hcaDir, name), v); err != nil {
			return err
		}
	}
	if h.PCIDir != "" {
		if err := symlink(root, h.PCIDir, filepath.Join(hcaDir, "device")); err != nil {
			return err
		}
	}
	for i := range h.Ports {
		if err := buildPort(root, hcaDir, h.Ports[i]); err != nil {
			return fmt.Errorf("build HCA %s: %w", h.Name, err)
		}
	}
	if err := symlink(root, hcaDir, filepath.Join("sys/class/infiniband", h.Name)); err != nil {
		return err
	}

	return writeCharDevs(root, parent, h.Name, h.Uverbs, h.Ports)
}

// writeCharDevs writes the uverbs node of HCA name (parent is its device's
// directory) and the umad and issm nodes of each of its ports, with their
// class entries.
func writeCharDevs(root, parent, name string, uverbs int, ports []PortSpec) error {
	// Character devices: class entries point into the parent device.
	uv := "uverbs" + strconv.Itoa(uverbs)
	uvDir := filepath.Join(parent, "infiniband_verbs", uv)
	for f, v := range map[string]string{
		"ibdev":       name,
		"dev":         fmt.Sprintf("231:%d", 192+uverbs),
		"abi_version": "1",
	} {
		if err := writeFile(root, filepath.Join(uvDir, f), v); err != nil {
			return err
		}
	}
	if err := symlink(root, uvDir, filepath.Join("sys/class/infiniband_verbs", uv)); err != nil {
		return err
	}
	if err := writeFile(root, "sys/class/infiniband_verbs/abi_version", "6"); err != nil {
		return err
	}
	for i, p := range ports {
		n := uverbs + i
		for _, node := range []struct {
			name  string
			minor int
		}{{"umad", n}, {"issm", 64 + n}} {
			nodeName := node.name + strconv.Itoa(n)
			dir := filepath.Join(parent, "infiniband_mad", nodeName)
			for f, v := range map[string]string{
				"ibdev": name,
				"port":  strconv.Itoa(portNum(p)),
				"dev":   fmt.Sprintf("231:%d", node.minor),
			} {
				if err := writeFile(root, filepath.Join(dir, f), v); err != nil {
					return err
				}
			}
			if err := symlink(root, dir, filepath.Join("sys/class/infiniband_mad", nodeName)); err != nil {
				return err
			}
		}
	}
	return writeFile(root, "sys/class/infiniband_mad/abi_version", "5")
}

func portNum(p PortSpec) int {
	if p.Port == 0 {
		return 1
	}
	return p.Port
}

var stateNumbers = map[string]int{"NOP": 0, "DOWN": 1, "INIT": 2, "ARMED": 3, "ACTIVE": 4, "ACTIVE_DEFER": 5}
var physNumbers = map[string]int{"Sleep": 1, "Polling": 2, "Disabled": 3, "PortConfigurationTraining": 4, "LinkUp": 5, "LinkErrorRecovery": 6, "Phy Test": 7}

func buildPort(root, hcaDir string, p PortSpec) error {
	port := portNum(p)
	if p.TableSize <= 0 {
		return fmt.Errorf("port %d: table size %d", port, p.TableSize)
	}
	state, phys, ll := p.State, p.PhysState, p.LinkLayer
	if state == "" {
		state = "ACTIVE"
	}
	if phys == "" {
		phys = "Disabled"
		if state == "ACTIVE" {
			phys = "LinkUp"
		}
	}
	if ll == "" {
		ll = "Ethernet"
	}
	sn, ok1 := stateNumbers[state]
	pn, ok2 := physNumbers[phys]
	if !ok1 || !ok2 {
		return fmt.Errorf("port %d: unknown state %q or phys_state %q", port, state, phys)
	}
	dir := filepath.Join(hcaDir, "ports", strconv.Itoa(port))
	// A rebuild may shrink the table: start from no slots.
	for _, sub := range []string{"gids", "gid_attrs"} {
		if err := os.RemoveAll(filepath.Join(root, dir, sub)); err != nil {
			return err
		}
	}
	for name, v := range map[string]string{
		"state":      fmt.Sprintf("%d: %s", sn, state),
		"phys_state": fmt.Sprintf("%d: %s", pn, phys),
		"link_layer": ll,
		"rate":       "25 Gb/sec (1X EDR)",
	} {
		if err := writeFile(root, filepath.Join(dir, name), v); err != nil {
			return err
		}
	}
	for _, sub := range []string{"gids", "gid_attrs/types", "gid_attrs/ndevs"} {
		if err := os.MkdirAll(filepath.Join(root, dir, sub), 0o755); err != nil {
			return err
		}
	}
	byIndex := make(map[int]Entry, len(p.Entries))
	for _, e := range p.Entries {
		if e.Index < 0 || e.Index >= p.TableSize {
			return fmt.Errorf("port %d: GID index %d outside a table of %d", port, e.Index, p.TableSize)
		}
		byIndex[e.Index] = e
	}
	if len(p.DefaultTypes) > p.TableSize {
		return fmt.Errorf("port %d: %d default types in a table of %d", port, len(p.DefaultTypes), p.TableSize)
	}
	for _, i := range p.PendingDelete {
		if _, ok := byIndex[i]; ok || i < len(p.DefaultTypes) || i >= p.TableSize {
			return fmt.Errorf("port %d: pending-delete slot %d must be an empty slot past the %d reserved ones of a table of %d",
				port, i, len(p.DefaultTypes), p.TableSize)
		}
	}
	if err := writePortMeta(root, dir, p.DefaultTypes, p.PendingDelete); err != nil {
		return err
	}
	for i := 0; i < p.TableSize; i++ {
		var err error
		if e, ok := byIndex[i]; ok {
			err = writeEntry(root, dir, e)
		} else {
			err = clearEntry(root, dir, i)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// Templates of empty slots, relative to the root, shared by hard links.
const (
	templateDir      = ".rdmatest"
	zeroGIDTemplate  = templateDir + "/zero-gid"
	emptyTemplate    = templateDir + "/empty-attr"
	templateFileMode = 0o444
)

// writeTemplates (re)creates the read-only templates of empty slots.
func writeTemplates(root string) error {
	for rel, v := range map[string]string{zeroGIDTemplate: ZeroGID, emptyTemplate: ""} {
		if err := writeFileAtomic(root, rel, v); err != nil {
			return err
		}
		if err := os.Chmod(filepath.Join(root, rel), templateFileMode); err != nil {
			return err
		}
	}
	return nil
}

// writeEntry fills one slot's three files. Attributes go first and the GID
// last, so a concurrent reader that sees the GID also sees its attributes;
// renames keep it from seeing a half-written file.
func writeEntry(root, portDir string, e Entry) error {
	name := strconv.Itoa(e.Index)
	for _, f := range []struct{ sub, v string }{{"gid_attrs/types", e.Type}, {"gid_attrs/ndevs", e.Ndev}, {"gids", e.GID}} {
		rel := filepath.Join(portDir, f.sub, name)
		var err error
		if f.v == "" {
			err = linkTemplate(root, emptyTemplate, rel)
		} else {
			err = writeFileAtomic(root, rel, f.v)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// clearEntry empties a slot: GID first, then its attributes, the reverse of
// writeEntry.
func clearEntry(root, portDir string, index int) error {
	name := strconv.Itoa(index)
	for _, f := range []struct{ sub, tmpl string }{{"gids", zeroGIDTemplate}, {"gid_attrs/types", emptyTemplate}, {"gid_attrs/ndevs", emptyTemplate}} {
		if err := linkTemplate(root, f.tmpl, filepath.Join(portDir, f.sub, name)); err != nil {
			return err
		}
	}
	return nil
}

var linkSeq atomic.Uint64

// linkTemplate replaces root/rel by a hard link to the template, through a
// rename so that rel never goes missing.
func linkTemplate(root, tmpl, rel string) error {
	p := filepath.Join(root, rel)
	tmp := filepath.Join(filepath.Dir(p), fmt.Sprintf(".tmp-link-%d-%d", os.Getpid(), linkSeq.Add(1)))
	if err := os.Link(filepath.Join(root, tmpl), tmp); err != nil {
		return fmt.Errorf("empty slot %s: %w", rel, err)
	}
	if err := os.Rename(tmp, p); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("empty slot %s: %w", rel, err)
	}
	return nil
}

// buildPCIDevice writes a PCI function with its driver link and bus entry.
func buildPCIDevice(root, addr, dir, driver, vendor, device string) error {
	for name, v := range map[string]string{"vendor": vendor, "device": device} {
		if err := writeFile(root, filepath.Join(dir, name), v); err != nil {
			return err
		}
	}
	drv := filepath.Join("sys/bus/pci/drivers", driver)
	if err := os.MkdirAll(filepath.Join(root, drv), 0o755); err != nil {
		return err
	}
	if err := symlink(root, drv, filepath.Join(dir, "driver")); err != nil {
		return err
	}
	return symlink(root, dir, filepath.Join("sys/bus/pci/devices", addr))
}

// AddNetdev writes sys/class/net/<name> (address, mtu, dev_port and, for a
// PCI netdev, the device link). Use it alone for a netdev with no RDMA
// device.
func AddNetdev(root string, n NetdevSpec) error {
	if n.Name == "" {
		return errors.New("add netdev: need a name")
	}
	if _, err := net.ParseMAC(n.MAC); err != nil {
		return fmt.Errorf("add netdev %s: %w", n.Name, err)
	}
	parent := n.PCIDir
	if parent == "" {
		parent = "sys/devices/virtual"
	}
	mtu := n.MTU
	if mtu == 0 {
		mtu = 1500
	}
	dir := filepath.Join(parent, "net", n.Name)
	for name, v := range map[string]string{
		"address":  strings.ToLower(n.MAC),
		"mtu":      strconv.Itoa(mtu),
		"dev_port": strconv.Itoa(n.DevPort),
	} {
		if err := writeFile(root, filepath.Join(dir, name), v); err != nil {
			return err
		}
	}
	if n.PCIDir != "" {
		if err := symlink(root, n.PCIDir, filepath.Join(dir, "device")); err != nil {
			return err
		}
	}
	return symlink(root, dir, filepath.Join("sys/class/net", n.Name))
}

// WriteCommon writes misc/rdma_cm/dev (or removes it when c.RdmaCM is "")
// and module/ib_core/parameters/netns_mode. "keep" leaves a file as it is.
func WriteCommon(root string, c Common) error {
	cmDir := "sys/devices/virtual/misc/rdma_cm"
	switch c.RdmaCM {
	case "keep":
	case "":
		if err := os.RemoveAll(filepath.Join(root, cmDir)); err != nil {
			return err
		}
		if err := os.Remove(filepath.Join(root, "sys/class/misc/rdma_cm")); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	default:
		if err := writeFile(root, filepath.Join(cmDir, "dev"), c.RdmaCM); err != nil {
			return err
		}
		if err := symlink(root, cmDir, "sys/class/misc/rdma_cm"); err != nil {
			return err
		}
	}
	if c.NetnsMode == "keep" {
		return nil
	}
	return SetNetnsMode(root, c.NetnsMode)
}

const netnsModeFile = "sys/module/ib_core/parameters/netns_mode"

// SetNetnsMode writes the ib_core netns_mode parameter: "shared" (or "")
// writes Y, "exclusive" N.
func SetNetnsMode(root, mode string) error {
	v := "Y"
	switch mode {
	case "", "shared":
	case "exclusive":
		v = "N"
	default:
		return fmt.Errorf("netns mode %q: want shared or exclusive", mode)
	}
	return writeFile(root, netnsModeFile, v)
}

// portDir returns the port directory of hca relative to root, following the
// class link, and checks that it exists.
func portDir(root, hca string, port int) (string, error) {
	dir := filepath.Join("sys/class/infiniband", hca, "ports", strconv.Itoa(port))
	if _, err := os.Stat(filepath.Join(root, dir, "gids")); err != nil {
		return "", fmt.Errorf("RDMA device %s port %d in %s: %w", hca, port, root, err)
	}
	return dir, nil
}

func checkSlot(root, dir string, index int) error {
	if _, err := os.Stat(filepath.Join(root, dir, "gids", strconv.Itoa(index))); err != nil {
		return fmt.Errorf("GID index %d: no such slot in %s: %w", index, dir, err)
	}
	return nil
}

// SetGID fills one slot, as the kernel does when an address appears on the
// port's netdev or one of its uppers.
func SetGID(root, hca string, port, index int, gid, typ, ndev string) error {
	dir, err := portDir(root, hca, port)
	if err != nil {
		return err
	}
	if err := checkSlot(root, dir, index); err != nil {
		return err
	}
	if err := dropPending(root, dir, index); err != nil {
		return err
	}
	return writeEntry(root, dir, Entry{Index: index, GID: gid, Type: typ, Ndev: ndev})
}

// ClearGID empties one slot, as the kernel does when the address goes and
// no QP holds its entry: the slot is free (a pending delete of it ends).
func ClearGID(root, hca string, port, index int) error {
	dir, err := portDir(root, hca, port)
	if err != nil {
		return err
	}
	if err := checkSlot(root, dir, index); err != nil {
		return err
	}
	if err := dropPending(root, dir, index); err != nil {
		return err
	}
	return clearEntry(root, dir, index)
}

// ErrTableFull is returned by AddAddress when the table has too few empty
// slots (the kernel logs error=-28 and adds nothing more).
var ErrTableFull = errors.New("GID table full")

// AddAddress simulates the kernel adding an IP address on ndev (the port's
// netdev or an upper of it, in any namespace): one entry per RoCE type of
// the port (its default types: v1+v2 for mlx5, v2 for rxe), each in the
// lowest free slot past the reserved default ones. A slot is free when it
// is empty and no QP holds a deleted entry there (PendingDelete): such a
// slot reads empty, yet the kernel passes over it. Like the kernel, when
// the table fills up midway the first types are added and the rest fail
// (ErrTableFull). It returns the indices written.
func AddAddress(root, hca string, port int, ip, ndev string) ([]int, error) {
	gid, err := gidOf(ip)
	if err != nil {
		return nil, err
	}
	dir, err := portDir(root, hca, port)
	if err != nil {
		return nil, err
	}
	slots, err := readSlots(root, dir)
	if err != nil {
		return nil, err
	}
	types, pending, err := readPortMeta(root, dir)
	if err != nil {
		return nil, err
	}
	if types == nil {
		// A port built without its default types: the types of the
		// entries in the reserved slots.
		for i := 0; i < len(slots) && slots[i].GID != ZeroGID && i < 2; i++ {
			if t := slots[i].Type; t != "" && (len(types) == 0 || types[0] != t) {
				types = append(types, t)
			}
		}
	}
	reserved := len(types)
	if len(types) == 0 {
		types = []string{TypeV2}
	}
	var written []int
	next := reserved
	for _, t := range types {
		for next < len(slots) && (slots[next].GID != ZeroGID || pending[next]) {
			next++
		}
		if next >= len(slots) {
			return written, fmt.Errorf("add %s on %s/%d: %w (%d slots, %d reserved, %d held by a pending delete)",
				ip, hca, port, ErrTableFull, len(slots), reserved, len(pending))
		}
		if err := writeEntry(root, dir, Entry{Index: next, GID: gid, Type: t, Ndev: ndev}); err != nil {
			return written, err
		}
		slots[next].GID = gid
		written = append(written, next)
	}
	return written, nil
}

// RemoveAddress simulates the kernel removing an IP address: every entry
// holding its GID is emptied. It returns the indices cleared.
func RemoveAddress(root, hca string, port int, ip string) ([]int, error) {
	dir, idx, err := entriesOf(root, hca, port, ip)
	if err != nil {
		return nil, err
	}
	var cleared []int
	for _, i := range idx {
		if err := clearEntry(root, dir, i); err != nil {
			return cleared, err
		}
		cleared = append(cleared, i)
	}
	return cleared, nil
}

// entriesOf returns the port's directory and the indices of the entries
// holding the GID of ip.
func entriesOf(root, hca string, port int, ip string) (string, []int, error) {
	gid, err := gidOf(ip)
	if err != nil {
		return "", nil, err
	}
	dir, err := portDir(root, hca, port)
	if err != nil {
		return "", nil, err
	}
	slots, err := readSlots(root, dir)
	if err != nil {
		return "", nil, err
	}
	var idx []int
	for i, s := range slots {
		if s.GID == gid {
			idx = append(idx, i)
		}
	}
	return dir, idx, nil
}

// readSlots reads every slot of a port, index = position.
func readSlots(root, dir string) ([]Entry, error) {
	ents, err := os.ReadDir(filepath.Join(root, dir, "gids"))
	if err != nil {
		return nil, err
	}
	n := 0
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err == nil {
			n++
		}
	}
	slots := make([]Entry, n)
	for i := range slots {
		name := strconv.Itoa(i)
		g, err := os.ReadFile(filepath.Join(root, dir, "gids", name))
		if err != nil {
			return nil, fmt.Errorf("read slot %d of %s: %w (slots must be numbered 0..%d)", i, dir, err, len(slots)-1)
		}
		t, _ := os.ReadFile(filepath.Join(root, dir, "gid_attrs/types", name))
		slots[i] = Entry{Index: i, GID: strings.TrimSpace(string(g)), Type: strings.TrimSpace(string(t))}
	}
	return slots, nil
}

// gidOf returns the kernel text of the GID of an IPv4 or IPv6 address.
func gidOf(ip string) (string, error) {
	p := net.ParseIP(ip)
	if p == nil {
		return "", fmt.Errorf("%q is not an IP address", ip)
	}
	return formatGID(p.To16()), nil
}

// IPv4GID returns the v4-mapped GID of an IPv4 address in kernel text, or
// "" when ip is not IPv4. Written independently of package rdma so that the
// fixtures check its decoder rather than mirror it.
func IPv4GID(ip string) string {
	p := net.ParseIP(ip).To4()
	if p == nil {
		return ""
	}
	return fmt.Sprintf("0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x", p[0], p[1], p[2], p[3])
}

// DefaultGID returns the default GID (fe80::/64 + modified EUI-64) the
// kernel derives from a port netdev's MAC, in kernel text.
func DefaultGID(mac string) (string, error) {
	m, err := net.ParseMAC(mac)
	if err != nil || len(m) != 6 {
		return "", fmt.Errorf("default GID of MAC %q: not a 6-byte MAC", mac)
	}
	return fmt.Sprintf("fe80:0000:0000:0000:%02x%02x:%02xff:fe%02x:%02x%02x", m[0]^2, m[1], m[2], m[3], m[4], m[5]), nil
}

func formatGID(b net.IP) string {
	var parts [8]string
	for i := range parts {
		parts[i] = fmt.Sprintf("%02x%02x", b[2*i], b[2*i+1])
	}
	return strings.Join(parts[:], ":")
}

// nodeGUID derives a node GUID from a MAC the way mlx5 firmware usually
// does: a0:88:c2:5b:03:ec -> a088:c203:005b:03ec.
func nodeGUID(mac string) string {
	m, err := net.ParseMAC(mac)
	if err != nil || len(m) != 6 {
		return "0000:0000:0000:0000"
	}
	return fmt.Sprintf("%02x%02x:%02x03:00%02x:%02x%02x", m[0], m[1], m[2], m[3], m[4], m[5])
}

// writeFile writes v plus a newline (as sysfs shows attributes) to
// root/rel, creating directories; "" writes an empty file.
func writeFile(root, rel, v string) error {
	p := filepath.Join(root, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	return os.WriteFile(p, content(v), 0o644)
}

// writeFileAtomic is writeFile through a rename, for files that tests
// change while the code under test reads them.
func writeFileAtomic(root, rel, v string) error {
	p := filepath.Join(root, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(p), ".tmp-")
	if err != nil {
		return err
	}
	_, werr := f.Write(content(v))
	cerr := f.Close()
	if err := errors.Join(werr, cerr, os.Chmod(f.Name(), 0o644)); err != nil {
		_ = os.Remove(f.Name())
		return err
	}
	if err := os.Rename(f.Name(), p); err != nil {
		_ = os.Remove(f.Name())
		return err
	}
	return nil
}

func content(v string) []byte {
	if v == "" {
		return nil
	}
	return []byte(v + "\n")
}

// symlink makes root/link a relative symlink to root/target, replacing an
// existing one, as the kernel links class entries into sys/devices.
func symlink(root, target, link string) error {
	l := filepath.Join(root, link)
	if err := os.MkdirAll(filepath.Dir(l), 0o755); err != nil {
		return err
	}
	// Like the kernel (kernfs_get_target_path), climb to a common ancestor
	// of the target's parent and name the target last, so the link's last
	// element is the target's name even when the target is an ancestor
	// (net/ens3np0/device -> ../../../0000:03:00.0, not ../..).
	t := filepath.Join(root, target)
	rel, err := filepath.Rel(filepath.Dir(l), filepath.Dir(t))
	if err != nil {
		return err
	}
	rel = filepath.Join(rel, filepath.Base(t))
	if err := os.Remove(l); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return os.Symlink(rel, l)
}

// Reregister gives RDMA device hca the uverbs node uverbsN, as the kernel
// does when the device is registered again (a RoCE LAG toggle, a devlink
// or driver reload) and another number is free first: its old uverbs
// entry goes, the new one points at the same device.
func Reregister(root, hca string, uverbs int) error {
	class := filepath.Join(root, "sys/class/infiniband_verbs")
	ents, err := os.ReadDir(class)
	if err != nil {
		return err
	}
	parent := ""
	for _, e := range ents {
		link := filepath.Join(class, e.Name())
		b, err := os.ReadFile(filepath.Join(link, "ibdev"))
		if err != nil || strings.TrimSpace(string(b)) != hca {
			continue
		}
		real, err := filepath.EvalSymlinks(link)
		if err != nil {
			return err
		}
		// .../<device>/infiniband_verbs/uverbsN
		parent, err = filepath.Rel(root, filepath.Dir(filepath.Dir(real)))
		if err != nil {
			return err
		}
		if err := os.Remove(link); err != nil {
			return err
		}
		if err := os.RemoveAll(real); err != nil {
			return err
		}
	}
	if parent == "" {
		return fmt.Errorf("no uverbs node of %s under %s", hca, class)
	}
	uv := "uverbs" + strconv.Itoa(uverbs)
	uvDir := filepath.Join(parent, "infiniband_verbs", uv)
	for f, v := range map[string]string{"ibdev": hca, "dev": fmt.Sprintf("231:%d", 192+uverbs), "abi_version": "1"} {
		if err := writeFile(root, filepath.Join(uvDir, f), v); err != nil {
			return err
		}
	}
	return symlink(root, uvDir, filepath.Join("sys/class/infiniband_verbs", uv))
}
