package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/rdma-macvlan/rdma-macvlan/driver"
	"github.com/rdma-macvlan/rdma-macvlan/netns"
	"github.com/rdma-macvlan/rdma-macvlan/plugin/plugintest"
)

const roceV2 = "RoCE v2"

// The two networks most phases use, on the parent p0: IPv4-only, and with
// IPv6 enabled.
var (
	netV4 = network{v4: "10.20.0.0/24", gw: "10.20.0.1/24"}
	netV6 = network{v4: "10.21.0.0/24", gw: "10.21.0.1/24", v6: "fd00:21::/64"}
)

func (e *env) runAll(filter *regexp.Regexp) {
	defer e.teardown()
	if !e.setup() {
		return
	}
	e.phase("exclusive", e.exclusive)
	if !e.networks() {
		return
	}
	for _, p := range []struct {
		name string
		fn   func()
	}{
		{"detect", e.detect},
		{"cdi", e.cdi},
		{"endpoint", e.endpointLifecycle},
		{"ipv6", e.ipv6LinkLocal},
		{"capacity", e.capacity},
		{"vlan", e.vlan},
	} {
		if filter == nil || filter.MatchString(p.name) {
			e.phase(p.name, p.fn)
		}
	}
}

func (e *env) phase(name string, fn func()) {
	e.s.note("phase %s", name)
	start := time.Now()
	fn()
	e.s.note("phase %s took %s", name, time.Since(start).Round(100*time.Millisecond))
}

// setup makes the RoCE parent p0 (a veth, both ends up), its Soft-RoCE
// device rxe0, and starts the daemon.
func (e *env) setup() bool {
	s := e.s
	e.parent, e.hca, e.port = "p0", "rxe0", 1
	for _, c := range [][]string{
		{"ip", "link", "add", e.parent, "type", "veth", "peer", "name", e.parent + "peer"},
		{"ip", "link", "set", e.parent, "up"},
		{"ip", "link", "set", e.parent + "peer", "up"},
	} {
		if _, err := cmd(c[0], c[1:]...); err != nil {
			s.fail("setup: veth parent p0", err)
			return false
		}
	}
	if _, err := cmd("rdma", "link", "add", e.hca, "type", "rxe", "netdev", e.parent); !s.check(err == nil,
		"setup: rdma link add rxe0 type rxe netdev p0", "%v", err) {
		return false
	}
	// The default GID (from p0's MAC) arrives asynchronously.
	mac, _ := readFile("/sys/class/net/" + e.parent + "/address")
	hw, _ := net.ParseMAC(mac)
	def := gidText(linkLocal(hw))
	_, ents, ok := waitTable(e.hca, e.port, e.wait, func(_ int, ents []gidEntry) bool { return len(withGID(ents, def)) > 0 })
	if !s.check(ok, "setup: rxe0 port 1 holds the default GID of p0 ("+def+")", "table: %v", ents) {
		return false
	}
	time.Sleep(time.Second) // let p0's own address events settle
	size, ents, _ := gidTable(e.hca, e.port)
	e.base = len(ents)
	s.note("rxe0 port 1: %d GID slots, %d used with p0 alone: %v", size, e.base, ents)

	err := e.startDaemon()
	if !s.check(err == nil, "setup: the daemon serves "+pluginSocket+" as a legacy plugin on the real /sys", "%v", err) {
		return false
	}
	s.note("modules the kernel loaded on demand for the daemon's start: xfrm_user %v, nfnetlink %v", moduleLoaded("xfrm_user"), moduleLoaded("nfnetlink"))
	if e.host, err = netns.Current(); err != nil {
		s.fail("setup: netlink handle", err)
		return false
	}
	return true
}

// exclusive runs first, before any other network namespace exists: the
// kernel refuses the switch otherwise.
func (e *env) exclusive() {
	s := e.s
	before, _ := readFile(netnsParam)
	_, err := cmd("rdma", "system", "set", "netns", "exclusive")
	if !s.check(err == nil, "rdma system set netns exclusive succeeds while no other netns exists", "%v", err) {
		return
	}
	defer func() {
		_, err := cmd("rdma", "system", "set", "netns", "shared")
		mode, merr := rdmaNetnsMode()
		s.check(err == nil && merr == nil && mode == "shared", "rdma system set netns shared restores the shared mode", "%v %v mode %q", err, merr, mode)
	}()
	mode, err := rdmaNetnsMode()
	s.check(err == nil && mode == "exclusive", "rdma system show reports netns exclusive", "%q %v", mode, err)
	after, _ := readFile(netnsParam)
	s.note("ib_core parameter netns_mode reads %q in shared mode, %q after rdma system set netns exclusive", before, after)
	if after != before {
		s.finding("%s follows the live mode (%q -> %q after rdma system set netns exclusive): it is not only the boot-time value", netnsParam, before, after)
	}

	// Make the sysfs fallback say "shared": only RDMA netlink can tell the
	// daemon the truth.
	undo, err := bindOver(netnsParam, "Y\n")
	if err != nil {
		s.fail("bind a file reading Y over "+netnsParam, err)
		return
	}
	nid := e.id('a')
	err = e.createNetwork(network{id: nid, generic: map[string]string{"parent": e.parent}, v4: "10.19.0.0/24", gw: "10.19.0.1/24"})
	if uerr := undo(); uerr != nil {
		s.fail("unmount the file over "+netnsParam, uerr)
	}
	var ce *plugintest.CallError
	refused := errors.As(err, &ce)
	s.check(refused && strings.Contains(ce.Msg, "exclusive netns mode"), "CreateNetwork is refused in the exclusive RDMA netns mode", "answer: %v", err)
	s.check(refused && strings.Contains(ce.Msg, "read from netlink"), "the refusal names RDMA netlink as its source (sysfs was made to read Y, shared)", "answer: %v", err)
	if !refused {
		_ = e.deleteNetwork(nid)
	}
	_, specErr := os.Stat(filepath.Join(cdiDir, "rdma-macvlan-"+e.hca+".json"))
	dl, _ := driverLinks()
	s.check(errors.Is(specErr, os.ErrNotExist) && len(stateFiles()) == 0 && len(dl) == 0,
		"the refused CreateNetwork leaves no CDI spec, no state file and no link", "spec: %v, state: %v, links: %v", specErr, stateFiles(), dl)
}

// networks creates the IPv4-only and the IPv6 network on p0. The first is
// created while sysfs is made to say "exclusive": it succeeds only if the
// daemon takes the mode from RDMA netlink.
func (e *env) networks() bool {
	s := e.s
	netV4.id, netV4.generic = e.id('a'), map[string]string{"parent": e.parent}
	netV6.id, netV6.generic = e.id('a'), map[string]string{"parent": e.parent}
	undo, err := bindOver(netnsParam, "N\n")
	if err != nil {
		s.fail("bind a file reading N over "+netnsParam, err)
		return false
	}
	err = e.createNetwork(netV4)
	ok := s.check(err == nil, "CreateNetwork -o parent=p0 succeeds in shared mode while sysfs is made to read N: the mode comes from RDMA netlink", "%v", err)
	if ok {
		n, _, serr := e.status(netV4.id, "")
		s.check(serr == nil && n.NetnsMode == "shared", "status reports netns_mode shared (from netlink; sysfs reads N)", "%q %v", n.NetnsMode, serr)
	}
	if uerr := undo(); uerr != nil {
		s.fail("unmount the file over "+netnsParam, uerr)
	}
	err = e.createNetwork(netV6)
	return s.check(err == nil, "CreateNetwork of an IPv6 network (--ipv6 --subnet fd00:21::/64) on p0 succeeds", "%v", err) && ok
}

// detect compares the daemon's view of the HCA with the kernel's.
func (e *env) detect() {
	s := e.s
	n, _, err := e.status(netV4.id, "")
	if err != nil {
		s.fail("status", err)
		return
	}
	rl, err := rdmaLinks()
	var link *rdmaLink
	for i := range rl {
		if rl[i].Netdev == e.parent {
			link = &rl[i]
		}
	}
	if !s.check(err == nil && link != nil, "rdma link show names a port with netdev p0", "%v %+v", err, rl) {
		return
	}
	s.check(n.HCA == link.Ifname && n.Port == link.Port, fmt.Sprintf("detection: parent p0 -> %s port %d, as rdma link show", link.Ifname, link.Port),
		"status says %s port %d", n.HCA, n.Port)

	pdir := filepath.Join(ibClass, e.hca, "ports", fmt.Sprint(e.port))
	ll, _ := readFile(filepath.Join(pdir, "link_layer"))
	di, derr := ibvDevinfo(e.hca, e.port)
	s.check(n.LinkLayer == "Ethernet" && ll == "Ethernet" && derr == nil && di.LinkLayer == "Ethernet",
		"link layer Ethernet in status, sysfs and ibv_devinfo", "status %q sysfs %q ibv_devinfo %q %v", n.LinkLayer, ll, di.LinkLayer, derr)
	state, _ := readFile(filepath.Join(pdir, "state"))
	_, st, _ := strings.Cut(state, ": ")
	s.check(n.PortState == st && link.State == st, "port state "+st+" in status, sysfs and rdma link show",
		"status %q sysfs %q rdma %q", n.PortState, state, link.State)

	nodes, err := hcaNodes(e.hca)
	if !s.check(err == nil, "kernel: rxe0 has uverbs and rdma_cm nodes (sysfs infiniband_verbs and misc)", "%v", err) {
		return
	}
	real := map[string][2]uint32{}
	for _, nd := range nodes {
		s.check(nd.StatErr == nil && nd.IsChar && nd.StatMajor == nd.SysMajor && nd.StatMinor == nd.SysMinor,
			fmt.Sprintf("kernel: %s is c %d:%d in sysfs and in /dev", nd.Path, nd.SysMajor, nd.SysMinor),
			"stat: char %v %d:%d %v", nd.IsChar, nd.StatMajor, nd.StatMinor, nd.StatErr)
		real[nd.Path] = [2]uint32{nd.SysMajor, nd.SysMinor}
		base := filepath.Base(nd.Path)
		switch {
		case strings.HasPrefix(base, "uverbs"):
			k, _ := strconv.ParseUint(strings.TrimPrefix(base, "uverbs"), 10, 32)
			if nd.SysMajor != 231 || nd.SysMinor != 192+uint32(k) {
				s.finding("%s is %d:%d, not 231:%d, the numbers ib_uverbs registers (major 231, minors from 192)", nd.Path, nd.SysMajor, nd.SysMinor, 192+k)
			}
		case base == "rdma_cm":
			s.note("rdma_cm is %d:%d here (misc, dynamic minor)", nd.SysMajor, nd.SysMinor)
			if nd.SysMajor != 10 {
				s.finding("rdma_cm major is %d, not 10 (misc)", nd.SysMajor)
			}
		}
	}
	got := map[string][2]uint32{}
	for _, d := range n.Devices {
		got[d.Path] = [2]uint32{d.Major, d.Minor}
	}
	s.check(mapsEqual(got, real), "status devices are exactly rxe0's uverbs and rdma_cm nodes with their real major:minor",
		"status %v, kernel %v", got, real)
	umad, _ := filepath.Glob("/dev/infiniband/umad*")
	issm, _ := filepath.Glob("/dev/infiniband/issm*")
	s.check(len(umad) > 0 && len(issm) > 0 && !hasMgmtNode(keys(got)), "status devices leave out umad/issm, which exist here ("+strings.Join(append(umad, issm...), " ")+")",
		"status %v", keys(got))

	s.check(n.NetnsMode == "shared", "status netns_mode shared", "%q", n.NetnsMode)
	size, ents, err := gidTable(e.hca, e.port)
	if err != nil {
		s.fail("read the GID table", err)
		return
	}
	if size != 1024 {
		s.finding("rxe0 port 1 has %d GID slots, not 1024", size)
	}
	s.check(n.GIDTable != nil && n.GIDTable.Size == size && n.GIDTable.Used == len(ents) && n.GIDTable.Free == size-len(ents),
		fmt.Sprintf("status gid_table = sysfs: %d slots, %d used, %d free", size, len(ents), size-len(ents)), "status %+v", n.GIDTable)
	types := map[string]bool{}
	for _, g := range ents {
		types[g.Type] = true
	}
	s.check(n.RoCETypes == len(types) && types[roceV2] && len(types) == 1, "RoCE types per address: 1 (RoCE v2 only), in status and sysfs",
		"status %d, sysfs types %v", n.RoCETypes, types)
}

// cdiSpec is the part of a CDI spec checked here, decoded independently of
// the project's types.
type cdiSpec struct {
	Version string `json:"cdiVersion"`
	Kind    string `json:"kind"`
	Devices []struct {
		Name           string `json:"name"`
		ContainerEdits struct {
			Env         []string `json:"env"`
			DeviceNodes []struct {
				Path        string `json:"path"`
				Type        string `json:"type"`
				Major       int64  `json:"major"`
				Minor       int64  `json:"minor"`
				Permissions string `json:"permissions"`
			} `json:"deviceNodes"`
		} `json:"containerEdits"`
	} `json:"devices"`
}

func (e *env) cdi() {
	s := e.s
	path := filepath.Join(cdiDir, "rdma-macvlan-"+e.hca+".json")
	b, err := os.ReadFile(path)
	if !s.check(err == nil, "the daemon wrote the CDI spec "+path, "%v", err) {
		return
	}
	var spec cdiSpec
	if err := json.Unmarshal(b, &spec); err != nil {
		s.fail("decode the CDI spec", err)
		return
	}
	if !s.check(spec.Kind == "rdma-macvlan/hca" && len(spec.Devices) == 1 && spec.Devices[0].Name == e.hca,
		"CDI spec: kind rdma-macvlan/hca, one device named rxe0 (--device rdma-macvlan/hca=rxe0)", "%s", b) {
		return
	}
	nodes, err := hcaNodes(e.hca)
	if err != nil {
		s.fail("kernel device nodes", err)
		return
	}
	real := map[string][2]uint32{}
	for _, nd := range nodes {
		if nd.StatErr == nil {
			real[nd.Path] = [2]uint32{nd.StatMajor, nd.StatMinor}
		}
	}
	got := map[string][2]uint32{}
	allChar := true
	for _, dn := range spec.Devices[0].ContainerEdits.DeviceNodes {
		got[dn.Path] = [2]uint32{uint32(dn.Major), uint32(dn.Minor)}
		allChar = allChar && dn.Type == "c" && dn.Permissions == "rw"
	}
	s.check(mapsEqual(got, real) && allChar, "CDI deviceNodes = the real nodes (stat of /dev/infiniband/*): char, rw, same major:minor",
		"spec %v, stat %v", got, real)
	s.check(!hasMgmtNode(keys(got)), "CDI deviceNodes have no umad/issm", "%v", keys(got))
	env := spec.Devices[0].ContainerEdits.Env
	// The device's own names: RDMA_MACVLAN_DEVICE_<device>, with rxe0 as is.
	want := []string{fmt.Sprintf("RDMA_MACVLAN_DEVICE_%s=%s:%d", e.hca, e.hca, e.port), "RDMA_MACVLAN_NETDEV_" + e.hca + "=" + e.parent}
	s.check(containsAll(env, want), "CDI env names rxe0, port 1 and netdev p0 under the device's own names", "env %v", env)
}

// endpointLifecycle follows one container on the IPv4 network.
func (e *env) endpointLifecycle() {
	s := e.s
	_, before, err := gidTable(e.hca, e.port)
	if err != nil {
		s.fail("read the GID table", err)
		return
	}
	ep := &endpoint{nid: netV4.id, eid: e.id('e'), v4: "10.20.0.2/24"}
	if err := e.createEndpoint(ep); !s.check(err == nil, "CreateEndpoint 10.20.0.2/24", "%v", err) {
		return
	}
	defer e.cleanupEndpoint(ep)
	err = e.join(ep, true)
	if !s.check(err == nil, "Join, then (as libnetwork) move the link into a new netns, rename it eth0, set MAC and 10.20.0.2/24, up", "%v", err) {
		return
	}
	_, es, took, err := e.waitReady(ep)
	if !s.check(err == nil, "status: the endpoint is rdma_ready after its address lands in the container netns", "%v", err) {
		return
	}
	s.note("rdma_ready %s after the address was set (emulated CPU)", took.Round(10*time.Millisecond))
	want := gidText(net.ParseIP("10.20.0.2"))
	_, ents, _ := gidTable(e.hca, e.port)
	k := withGID(ents, want)
	if !s.check(len(k) == 1 && k[0].Type == roceV2 && k[0].Ndev == "eth0", "kernel: one RoCE v2 entry for 10.20.0.2 ("+want+") with ndev eth0", "%v", k) {
		return
	}
	s.check(len(es.GIDs) == 1 && es.GIDs[0].Index == k[0].Index && es.GIDs[0].Type == k[0].Type && es.GIDs[0].GID == want,
		fmt.Sprintf("status: the endpoint's GID is index %d, %s, as in sysfs", k[0].Index, k[0].Type), "status %+v", es.GIDs)
	di, err := ibvDevinfo(e.hca, e.port)
	g, ok := di.GIDs[k[0].Index]
	s.check(err == nil && ok && g.IP.Equal(net.ParseIP("10.20.0.2")) && g.Type == roceV2,
		fmt.Sprintf("ibv_devinfo -v: GID[%d] is ::ffff:10.20.0.2, RoCE v2", k[0].Index), "%+v %v", g, err)
	n, _, _ := e.status(ep.nid, "")
	s.check(len(ents) == len(before)+1 && n.GIDTable != nil && n.GIDTable.Used == len(ents),
		fmt.Sprintf("the endpoint takes one slot: %d -> %d used, status agrees", len(before), len(before)+1),
		"sysfs %d, status %+v", len(ents), n.GIDTable)
	e.inContainer(ep, "10.20.0.2")

	err = e.leave(ep)
	if !s.check(err == nil, "Leave, then (as libnetwork) move the link back", "%v", err) {
		return
	}
	_, ents, ok = waitTable(e.hca, e.port, e.wait, func(_ int, ents []gidEntry) bool { return len(withGID(ents, want)) == 0 })
	s.check(ok, "kernel: the entry is gone once the link left the container", "%v", withGID(ents, want))
	_, es, err = e.status(ep.nid, ep.eid)
	s.check(err == nil && !es.RDMAReady && len(es.GIDs) == 0, "status after Leave: not rdma_ready, no GIDs", "%+v %v", es, err)
	err = e.deleteEndpoint(ep)
	s.check(err == nil, "DeleteEndpoint", "%v", err)
	dl, _ := driverLinks()
	s.check(len(dl) == 0, "DeleteEndpoint removed the link", "%v", dl)
	_, ents, ok = waitTable(e.hca, e.port, e.wait, func(_ int, ents []gidEntry) bool { return len(ents) == len(before) })
	n, _, _ = e.status(ep.nid, "")
	s.check(ok && n.GIDTable != nil && n.GIDTable.Used == len(before) && len(n.Endpoints) == 0,
		fmt.Sprintf("used slots back to %d in sysfs and status; no endpoint left", len(before)), "sysfs %d, status %+v, endpoints %d", len(ents), n.GIDTable, len(n.Endpoints))
}

// inContainer checks what a workload in the container sees in the shared
// netns mode: the HCA, and an rdma_cm that binds the container's own
// address (rping -s keeps listening until timeout kills it), while a
// namespace without a child of the parent cannot bind that address.
func (e *env) inContainer(ep *endpoint, addr string) {
	s := e.s
	out, err := cmd("ip", "netns", "exec", ep.ctr.name, "ibv_devices")
	s.check(err == nil && strings.Contains(out, e.hca), "in the container netns ibv_devices lists rxe0 (shared mode)", "%v: %s", err, out)
	out, err = cmd("ip", "netns", "exec", ep.ctr.name, "timeout", "3", "rping", "-s", "-a", addr, "-C", "1")
	var xe *exec.ExitError
	s.check(errors.As(err, &xe) && xe.ExitCode() == 124, "in the container rdma_cm binds "+addr+" (rping -s listens until killed)", "%v: %s", err, out)
	other, err := e.newContainer(true)
	if err != nil {
		s.fail("a namespace without a child of p0", err)
		return
	}
	defer other.remove()
	out, err = cmd("ip", "netns", "exec", other.name, "timeout", "3", "rping", "-s", "-a", addr, "-C", "1")
	if s.check(errors.As(err, &xe) && xe.ExitCode() != 124, "in a namespace without a child of p0, rdma_cm cannot bind "+addr, "%v: %s", err, out) {
		s.note("rping there: %s", lastLine(out))
	}
}

// ipv6LinkLocal follows a container on the IPv6 network: its IPv4, its IPv6
// and its link-local address each take a slot.
func (e *env) ipv6LinkLocal() {
	s := e.s
	_, before, _ := gidTable(e.hca, e.port)
	ep := &endpoint{nid: netV6.id, eid: e.id('e'), v4: "10.21.0.2/24", v6: "fd00:21::2/64"}
	if err := e.createEndpoint(ep); !s.check(err == nil, "CreateEndpoint 10.21.0.2/24 + fd00:21::2/64 on the IPv6 network", "%v", err) {
		return
	}
	defer e.cleanupEndpoint(ep)
	if err := e.join(ep, false); !s.check(err == nil, "Join and move into a new netns with both addresses, IPv6 on", "%v", err) {
		return
	}
	_, es, took, err := e.waitReady(ep)
	s.check(err == nil, "status: the IPv6 endpoint is rdma_ready", "%v", err)
	s.note("rdma_ready %s after the addresses were set", took.Round(10*time.Millisecond))
	mac, _ := net.ParseMAC(ep.mac)
	wants := []struct{ what, gid string }{
		{"IPv4 10.21.0.2", gidText(net.ParseIP("10.21.0.2"))},
		{"IPv6 fd00:21::2", gidText(net.ParseIP("fd00:21::2"))},
		{"link-local " + linkLocal(mac).String() + " (from the MAC)", gidText(linkLocal(mac))},
	}
	_, ents, _ := gidTable(e.hca, e.port)
	var idx []int
	for _, w := range wants {
		k := withGID(ents, w.gid)
		if s.check(len(k) == 1 && k[0].Ndev == "eth0" && k[0].Type == roceV2, "kernel: one RoCE v2 entry on eth0 for the "+w.what, "%v", k) {
			idx = append(idx, k[0].Index)
		}
	}
	var sidx []int
	for _, g := range es.GIDs {
		sidx = append(sidx, g.Index)
	}
	slices.Sort(idx)
	slices.Sort(sidx)
	s.check(slices.Equal(idx, sidx) && len(sidx) == 3, "status: the endpoint's 3 GIDs are those entries", "status %v, sysfs %v", sidx, idx)
	s.check(len(ents)-len(before) == 3, "the link-local costs a slot: the container takes 3, as the plugin counts for an IPv6 network",
		"%d -> %d", len(before), len(ents))
	if err := e.leave(ep); !s.check(err == nil, "Leave and move back", "%v", err) {
		return
	}
	err = e.deleteEndpoint(ep)
	_, ents, ok := waitTable(e.hca, e.port, e.wait, func(_ int, ents []gidEntry) bool { return len(ents) == len(before) })
	s.check(err == nil && ok, fmt.Sprintf("after Leave + DeleteEndpoint the 3 entries are gone (%d used)", len(before)), "%v, %d used", err, len(ents))

	e.oldDockerProbe()
}

// oldDockerProbe joins a container to the IPv4-only network with IPv6 left
// on in it (the engines tested in vm-docker.sh, 20.10 included, turn it off;
// a container can turn it back on), and reports how many slots it takes
// against the one the plugin reserves. It records a finding, not a check.
func (e *env) oldDockerProbe() {
	s := e.s
	_, before, _ := gidTable(e.hca, e.port)
	ep := &endpoint{nid: netV4.id, eid: e.id('e'), v4: "10.20.0.3/24"}
	if err := e.createEndpoint(ep); err != nil {
		s.note("probe: CreateEndpoint: %v", err)
		return
	}
	defer e.cleanupEndpoint(ep)
	if err := e.join(ep, false); err != nil {
		s.note("probe: join: %v", err)
		return
	}
	if _, _, _, err := e.waitReady(ep); err != nil {
		s.note("probe: %v", err)
	}
	mac, _ := net.ParseMAC(ep.mac)
	ll := gidText(linkLocal(mac))
	_, ents, _ := waitTable(e.hca, e.port, 5*time.Second, func(_ int, ents []gidEntry) bool { return len(withGID(ents, ll)) > 0 })
	taken := len(ents) - len(before)
	s.note("probe: a container on the IPv4-only network with IPv6 left on takes %d slot(s)", taken)
	if taken > 1 {
		s.finding("on an IPv4-only network a container whose eth0 keeps IPv6 (the engine turned it off; here it is left on) takes %d GID slots (IPv4 + link-local %s), but the plugin reserves 1 for it while it starts (wantedGIDs adds the link-local only when the network has IPv6)", taken, linkLocal(mac))
	}
	_ = e.leave(ep)
	_ = e.deleteEndpoint(ep)
	waitTable(e.hca, e.port, e.wait, func(_ int, ents []gidEntry) bool { return len(ents) == len(before) })
}

// capacity fills the table with addresses on another link and checks that
// the admission decision matches what the kernel does at the edge.
func (e *env) capacity() {
	s := e.s
	size, ents, err := gidTable(e.hca, e.port)
	if err != nil {
		s.fail("read the GID table", err)
		return
	}
	start := len(ents)
	for _, c := range [][]string{
		{"ip", "link", "add", "fill0", "link", e.parent, "type", "macvlan", "mode", "bridge"},
		{"sysctl", "-q", "-w", "net.ipv6.conf.fill0.disable_ipv6=1"},
		{"ip", "link", "set", "fill0", "up"},
	} {
		if _, err := cmd(c[0], c[1:]...); err != nil {
			s.fail("filler link fill0", err)
			return
		}
	}
	defer func() {
		_, _ = cmd("ip", "link", "del", "fill0")
		_, ents, ok := waitTable(e.hca, e.port, 2*e.wait, func(_ int, ents []gidEntry) bool { return len(ents) == start })
		s.check(ok, fmt.Sprintf("deleting fill0 frees its entries: back to %d used", start), "%d used", len(ents))
	}()
	fill := size - start - 3
	var batch strings.Builder
	for i := range fill {
		fmt.Fprintf(&batch, "address add 10.50.%d.%d/32 dev fill0\n", i/250, i%250+1)
	}
	t0 := time.Now()
	if err := ipBatch(batch.String()); err != nil {
		s.fail("add the filler addresses", err)
		return
	}
	_, ents, ok := waitTable(e.hca, e.port, 3*e.wait, func(_ int, ents []gidEntry) bool { return len(ents) >= size-3 })
	if !s.check(ok && len(ents) == size-3, fmt.Sprintf("kernel: %d addresses on fill0 take %d slots, leaving 3 of %d free", fill, fill, size),
		"%d used", len(ents)) {
		return
	}
	s.note("the kernel added %d GID entries in %s", fill, time.Since(t0).Round(100*time.Millisecond))
	n, _, _ := e.status(netV4.id, "")
	s.check(n.GIDTable != nil && n.GIDTable.Free == 3, "status: 3 free", "%+v", n.GIDTable)

	// 3 free: an IPv6 container (IPv4 + IPv6 + link-local) fits exactly.
	e6 := &endpoint{nid: netV6.id, eid: e.id('e'), v4: "10.21.0.3/24", v6: "fd00:21::3/64"}
	err = e.createEndpoint(e6)
	if s.check(err == nil, "admission: an IPv6 container (3 slots) is admitted with 3 free", "%v", err) {
		func() {
			defer e.cleanupEndpoint(e6)
			if err := e.join(e6, false); err != nil {
				s.fail("join the IPv6 container", err)
				return
			}
			_, es, _, err := e.waitReady(e6)
			_, ents, _ := gidTable(e.hca, e.port)
			s.check(err == nil && len(es.GIDs) == 3 && len(ents) == size, "kernel: the admitted IPv6 container gets all 3 entries; the table is full",
				"%v, status GIDs %v, %d used", err, es.GIDs, len(ents))
			_ = e.leave(e6)
			_ = e.deleteEndpoint(e6)
			_, ents, ok := waitTable(e.hca, e.port, e.wait, func(_ int, ents []gidEntry) bool { return len(ents) == size-3 })
			s.check(ok, "its Leave frees the 3 slots", "%d used", len(ents))
		}()
	}

	// 2 free: the IPv6 container no longer fits; two IPv4 ones do.
	if _, err := cmd("ip", "address", "add", "10.50.250.1/32", "dev", "fill0"); err != nil {
		s.fail("one more filler address", err)
		return
	}
	if _, ents, ok := waitTable(e.hca, e.port, e.wait, func(_ int, ents []gidEntry) bool { return len(ents) == size-2 }); !s.check(ok, "kernel: 2 free", "%d used", len(ents)) {
		return
	}
	e6b := &endpoint{nid: netV6.id, eid: e.id('e'), v4: "10.21.0.4/24", v6: "fd00:21::4/64"}
	err = e.createEndpoint(e6b)
	s.check(isTooFull(err), "admission: an IPv6 container (3 slots) is refused with 2 free", "%v", err)
	if err == nil {
		_ = e.deleteEndpoint(e6b)
	}
	e.ipv4Edge(size)
	e.oldDockerEdgeProbe(size)
}

// ipv4Edge checks admission against the kernel with 2 free slots and
// containers on the IPv4-only network: two are admitted and get their
// GIDs, the third is refused and the kernel indeed has no slot for it.
func (e *env) ipv4Edge(size int) {
	s := e.s
	e1 := &endpoint{nid: netV4.id, eid: e.id('e'), v4: "10.20.0.11/24"}
	e2 := &endpoint{nid: netV4.id, eid: e.id('e'), v4: "10.20.0.12/24"}
	e3 := &endpoint{nid: netV4.id, eid: e.id('e'), v4: "10.20.0.13/24"}
	err := e.createEndpoint(e1)
	if !s.check(err == nil, "admission: IPv4 container 1 admitted (2 free)", "%v", err) {
		return
	}
	defer e.cleanupEndpoint(e1)
	err = e.createEndpoint(e2)
	if !s.check(err == nil, "admission: IPv4 container 2 admitted (2 free, 1 held by a container still starting)", "%v", err) {
		return
	}
	defer e.cleanupEndpoint(e2)
	err = e.createEndpoint(e3)
	s.check(isTooFull(err), "admission: IPv4 container 3 refused (2 free, both held)", "%v", err)
	if err == nil {
		defer e.cleanupEndpoint(e3)
	}
	dl, _ := driverLinks()
	s.check(len(dl) == 2, "the refused CreateEndpoints left no link", "%v", dl)
	for i, ep := range []*endpoint{e1, e2} {
		if err := e.join(ep, true); err != nil {
			s.fail(fmt.Sprintf("join IPv4 container %d", i+1), err)
			return
		}
	}
	_, es1, _, err1 := e.waitReady(e1)
	_, es2, _, err2 := e.waitReady(e2)
	_, ents, _ := gidTable(e.hca, e.port)
	s.check(err1 == nil && err2 == nil && len(es1.GIDs) == 1 && len(es2.GIDs) == 1, "kernel: both admitted containers get their GID, the last one included",
		"%v %v", err1, err2)
	n, _, _ := e.status(netV4.id, "")
	s.check(len(ents) == size && n.GIDTable != nil && n.GIDTable.Free == 0, "the table is full: sysfs and status agree", "sysfs %d used, status %+v", len(ents), n.GIDTable)

	// The refused container's address, added by hand on another link: the
	// kernel has no slot for it.
	e.edgeProbe("10.20.0.13", size)
}

// oldDockerEdgeProbe starts two containers on the IPv4-only network with 2
// slots free, IPv6 left on in their eth0 (as if the containers turned it
// on; the engines tested in vm-docker.sh turn it off), and
// reports what the kernel does with the plugin's reservation of 1 slot
// each. It records a finding, not a check.
func (e *env) oldDockerEdgeProbe(size int) {
	s := e.s
	if _, ents, ok := waitTable(e.hca, e.port, e.wait, func(_ int, ents []gidEntry) bool { return len(ents) == size-2 }); !ok {
		s.note("probe: the table did not return to 2 free (%d used)", len(ents))
		return
	}
	a := &endpoint{nid: netV4.id, eid: e.id('e'), v4: "10.20.0.21/24"}
	b := &endpoint{nid: netV4.id, eid: e.id('e'), v4: "10.20.0.22/24"}
	for _, ep := range []*endpoint{a, b} {
		if err := e.createEndpoint(ep); err != nil {
			s.note("probe: CreateEndpoint %s with 2 free: %v", ep.v4, err)
			return
		}
		defer e.cleanupEndpoint(ep)
	}
	s.note("probe: 2 free, two containers on the IPv4-only network admitted (the plugin reserves 1 slot each)")
	gidB := gidText(net.ParseIP("10.20.0.22"))
	before, _ := dmesgCount("__ib_cache_gid_add", gidB, "error=-28")
	for _, ep := range []*endpoint{a, b} {
		if err := e.join(ep, false); err != nil {
			s.note("probe: join %s: %v", ep.v4, err)
			return
		}
		if ep == a {
			// Let the first container's entries land before the second starts.
			macA, _ := net.ParseMAC(a.mac)
			waitTable(e.hca, e.port, e.wait, func(_ int, ents []gidEntry) bool {
				return len(withGID(ents, gidText(linkLocal(macA)))) > 0 || len(ents) == size
			})
		}
	}
	// The second container's watch polls a full table until the daemon's
	// GID timeout: what does that cost, next to an idle daemon?
	e.measureDaemonCPU("while one container waits for its GID on a full table")
	t := time.Now()
	_, _ = e.c.Status()
	s.note("one GET /v1/status with the table full took %s", time.Since(t).Round(time.Millisecond))
	_, esA, _, errA := e.waitReady(a)
	esB, errB := e.waitSettled(b)
	e.measureDaemonCPU("idle, the table full")
	t = time.Now()
	_, _ = e.c.Status()
	s.note("one GET /v1/status with the table full and the daemon otherwise idle took %s", time.Since(t).Round(time.Millisecond))
	after, _ := dmesgCount("__ib_cache_gid_add", gidB, "error=-28")
	s.note("probe: first container ready=%v (%v), GIDs %v; second ready=%v (%v); ENOSPC lines for the second's IPv4: %d", esA.RDMAReady, errA, esA.GIDs, esB.RDMAReady, errB, after-before)
	if !esB.RDMAReady && after > before {
		s.finding("with 2 slots free, two containers on an IPv4-only network with IPv6 left on in them are both admitted, but the first takes 2 slots (IPv4 + its link-local) and the kernel refuses the second's IPv4 GID (dmesg: error=-28); the daemon says: %q", esB.RDMAReason)
	}
}

// measureDaemonCPU notes the daemon's CPU use over 3 s in which this
// program makes no request.
func (e *env) measureDaemonCPU(what string) {
	c0, t0 := e.daemonCPU(), time.Now()
	time.Sleep(3 * time.Second)
	c1, el := e.daemonCPU(), time.Since(t0)
	e.s.note("daemon CPU %s: %s in %s (%.0f%% of one emulated CPU)", what, c1-c0, el.Round(10*time.Millisecond), 100*float64(c1-c0)/float64(el))
}

// edgeProbe puts addr on a macvlan of p0 in a fresh netns and checks that
// the full table refuses its entry (dmesg: error=-28).
func (e *env) edgeProbe(addr string, size int) {
	s := e.s
	gid := gidText(net.ParseIP(addr))
	before, err := dmesgCount("__ib_cache_gid_add", gid, "error=-28")
	if err != nil {
		s.fail("dmesg", err)
		return
	}
	ctr, err := e.newContainer(true)
	if err != nil {
		s.fail("netns for the refused container's address", err)
		return
	}
	defer ctr.remove()
	for _, c := range [][]string{
		{"ip", "link", "add", "edge0", "link", e.parent, "type", "macvlan", "mode", "bridge"},
		{"ip", "link", "set", "edge0", "netns", ctr.name},
		{"ip", "-n", ctr.name, "address", "add", addr + "/24", "dev", "edge0"},
		{"ip", "-n", ctr.name, "link", "set", "edge0", "up"},
	} {
		if _, err := cmd(c[0], c[1:]...); err != nil {
			s.fail("put "+addr+" on edge0", err)
			return
		}
	}
	deadline := time.Now().Add(e.wait)
	after := before
	for after == before && time.Now().Before(deadline) {
		time.Sleep(200 * time.Millisecond)
		after, _ = dmesgCount("__ib_cache_gid_add", gid, "error=-28")
	}
	_, ents, _ := gidTable(e.hca, e.port)
	s.check(after > before && len(withGID(ents, gid)) == 0 && len(ents) == size,
		"kernel: the refused container's address, added by hand, gets no entry (dmesg: __ib_cache_gid_add ... error=-28)",
		"dmesg lines %d -> %d, entries %v", before, after, withGID(ents, gid))
}

// vlan checks the 802.1Q parent life cycle, which the host kernel cannot.
func (e *env) vlan() {
	s := e.s
	_, before, _ := gidTable(e.hca, e.port)
	n3 := network{id: e.id('a'), generic: map[string]string{"parent": e.parent + ".10"}, v4: "10.22.0.0/24", gw: "10.22.0.1/24"}
	err := e.createNetwork(n3)
	if !s.check(err == nil, "CreateNetwork -o parent=p0.10 (missing: the daemon creates it)", "%v", err) {
		return
	}
	deleted := false
	defer func() {
		if !deleted {
			_ = e.deleteNetwork(n3.id)
		}
	}()
	ls, _ := links()
	v, ok := ls["p0.10"]
	s.check(ok && v.LinkInfo.Kind == "vlan" && v.LinkInfo.Data.ID == 10 && v.Link == e.parent && slices.Contains(v.Flags, "UP"),
		"kernel: p0.10 is an 802.1Q VLAN, id 10, on p0, up", "%+v", v)
	n, _, err := e.status(n3.id, "")
	s.check(err == nil && n.HCA == e.hca && n.Port == e.port, "detection through the VLAN: p0.10 -> rxe0 port 1", "%+v %v", n, err)
	time.Sleep(time.Second)
	_, mid, _ := gidTable(e.hca, e.port)
	var vl []gidEntry
	for _, g := range mid {
		if g.Ndev == "p0.10" {
			vl = append(vl, g)
		}
	}
	s.note("the VLAN sub-interface itself holds %d GID entries: %v", len(vl), vl)

	ep := &endpoint{nid: n3.id, eid: e.id('e'), v4: "10.22.0.2/24"}
	if err := e.createEndpoint(ep); s.check(err == nil, "CreateEndpoint on the VLAN network", "%v", err) {
		func() {
			defer e.cleanupEndpoint(ep)
			ls, _ := links()
			l := ls[driver.LinkName(ep.eid)]
			s.check(l.LinkInfo.Kind == "macvlan" && l.Link == "p0.10", "the container link is a macvlan of p0.10", "%+v", l)
			if err := e.join(ep, true); err != nil {
				s.fail("join on the VLAN network", err)
				return
			}
			_, es, _, err := e.waitReady(ep)
			want := gidText(net.ParseIP("10.22.0.2"))
			_, ents, _ := gidTable(e.hca, e.port)
			k := withGID(ents, want)
			s.check(err == nil && len(k) == 1 && len(es.GIDs) == 1 && es.GIDs[0].Index == k[0].Index,
				"kernel: a macvlan on the VLAN gets its GID on rxe0; status ready with that index", "%v, sysfs %v, status %v", err, k, es.GIDs)
			_ = e.leave(ep)
			_ = e.deleteEndpoint(ep)
			_, ents, ok := waitTable(e.hca, e.port, e.wait, func(_ int, ents []gidEntry) bool { return len(withGID(ents, want)) == 0 })
			s.check(ok, "its entry goes with Leave", "%v", withGID(ents, want))
		}()
	}
	err = e.deleteNetwork(n3.id)
	deleted = err == nil
	ls, _ = links()
	_, still := ls["p0.10"]
	s.check(err == nil && !still, "DeleteNetwork deletes the VLAN it created", "%v, p0.10 exists: %v", err, still)
	_, ents, ok := waitTable(e.hca, e.port, e.wait, func(_ int, ents []gidEntry) bool { return len(ents) == len(before) })
	s.check(ok, fmt.Sprintf("the VLAN's entries go with it: %d used", len(before)), "%d used", len(ents))

	// A VLAN that existed before is left alone.
	if _, err := cmd("ip", "link", "add", "link", e.parent, "name", "p0.11", "type", "vlan", "id", "11"); err != nil {
		s.fail("ip link add p0.11", err)
		return
	}
	defer func() { _, _ = cmd("ip", "link", "del", "p0.11") }()
	n4 := network{id: e.id('a'), generic: map[string]string{"parent": e.parent + ".11"}, v4: "10.23.0.0/24", gw: "10.23.0.1/24"}
	err = e.createNetwork(n4)
	derr := e.deleteNetwork(n4.id)
	ls, _ = links()
	_, still = ls["p0.11"]
	s.check(err == nil && derr == nil && still, "a VLAN that existed before survives DeleteNetwork", "%v %v, exists: %v", err, derr, still)
}

// cleanupEndpoint undoes whatever of the endpoint's life cycle is left
// after a failed check; the calls are idempotent.
func (e *env) cleanupEndpoint(ep *endpoint) {
	if ep.ctr != nil {
		_ = e.leave(ep)
	}
	_ = e.deleteEndpoint(ep)
}

// teardown deletes the networks and checks that nothing is left.
func (e *env) teardown() {
	s := e.s
	if e.c == nil {
		e.finish()
		return
	}
	s.note("phase teardown")
	var errs []error
	for _, n := range []network{netV4, netV6} {
		if n.id != "" {
			errs = append(errs, e.deleteNetwork(n.id))
		}
	}
	err := errors.Join(errs...)
	s.check(err == nil, "DeleteNetwork of both networks", "%v", err)
	_, specErr := os.Stat(filepath.Join(cdiDir, "rdma-macvlan-"+e.hca+".json"))
	s.check(errors.Is(specErr, os.ErrNotExist), "the CDI spec goes with the last network on rxe0", "%v", specErr)
	dl, _ := driverLinks()
	s.check(len(stateFiles()) == 0 && len(dl) == 0, "no state file and no container link left", "state %v, links %v", stateFiles(), dl)
	_, ents, ok := waitTable(e.hca, e.port, e.wait, func(_ int, ents []gidEntry) bool { return len(ents) == e.base })
	s.check(ok, fmt.Sprintf("the GID table is back to the parent's %d entries", e.base), "%v", ents)
	e.busyProbe()
	e.finish()
}

// busyProbe checks the kernel's rule for the mode switch: it fails with
// EBUSY while a non-initial netns exists. A finding if not.
func (e *env) busyProbe() {
	s := e.s
	if _, err := cmd("ip", "netns", "add", "busyprobe"); err != nil {
		return
	}
	_, err := cmd("rdma", "system", "set", "netns", "exclusive")
	_, _ = cmd("ip", "netns", "del", "busyprobe")
	if err == nil {
		s.finding("rdma system set netns exclusive succeeded while another netns existed")
		// The namespace goes asynchronously; switch back once it has.
		deadline := time.Now().Add(e.wait)
		for time.Now().Before(deadline) {
			if _, err := cmd("rdma", "system", "set", "netns", "shared"); err == nil {
				return
			}
			time.Sleep(200 * time.Millisecond)
		}
		return
	}
	s.note("as expected, with another netns: %s", lastLine(err.Error()))
}

func (e *env) finish() {
	s := e.s
	if e.daemon != nil {
		s.note("the daemon used %s of CPU in %s", e.daemonCPU(), time.Since(s.start).Round(time.Second))
		err := e.stopDaemon()
		s.check(err == nil, "the daemon exits cleanly on SIGTERM", "%v", err)
	}
	if e.host != nil {
		e.host.Close()
		e.host = nil
	}
	e.netlinkFamiliesProbe()
	if s.failed > 0 {
		s.note("daemon log (last 60 lines):")
		for _, l := range e.daemonLogTail(60) {
			s.note("  %s", l)
		}
	}
}

func isTooFull(err error) bool {
	var ce *plugintest.CallError
	return errors.As(err, &ce) && strings.Contains(ce.Msg, "too full")
}

func ipBatch(lines string) error {
	f, err := os.CreateTemp("/run", "rmv-batch-")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if _, err := f.WriteString(lines); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	_, err = cmd("ip", "-batch", f.Name())
	return err
}

func mapsEqual(a, b map[string][2]uint32) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func keys(m map[string][2]uint32) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func hasMgmtNode(paths []string) bool {
	for _, p := range paths {
		b := filepath.Base(p)
		if strings.HasPrefix(b, "umad") || strings.HasPrefix(b, "issm") {
			return true
		}
	}
	return false
}

func containsAll(have, want []string) bool {
	for _, w := range want {
		if !slices.Contains(have, w) {
			return false
		}
	}
	return true
}

// netlinkFamiliesProbe starts the daemon once more on a scratch socket and
// state with the XFRM and netfilter netlink families unavailable (their
// modules unloaded, on-demand loading off), as on a kernel built without
// them. The daemon needs only rtnetlink and RDMA netlink; it records a
// finding if it cannot start. Runs after the daemon under test stopped.
func (e *env) netlinkFamiliesProbe() {
	s := e.s
	const modprobePath = "/proc/sys/kernel/modprobe"
	orig, err := readFile(modprobePath)
	if err != nil {
		return
	}
	if err := os.WriteFile(modprobePath, []byte("/nonexistent\n"), 0o644); err != nil {
		s.note("probe: cannot turn off module loading: %v", err)
		return
	}
	defer func() { _ = os.WriteFile(modprobePath, []byte(orig+"\n"), 0o644) }()
	_, _ = cmd("modprobe", "-r", "xfrm_user", "nfnetlink")
	if moduleLoaded("xfrm_user") || moduleLoaded("nfnetlink") {
		s.note("probe: xfrm_user or nfnetlink still loaded; skipped")
		return
	}
	dir, err := os.MkdirTemp("/run", "rmv-probe-")
	if err != nil {
		return
	}
	defer os.RemoveAll(dir)
	sock := filepath.Join(dir, "p.sock")
	d := exec.Command(e.daemonPath, "--socket", sock, "--state-dir", filepath.Join(dir, "state"), "--cdi-dir", filepath.Join(dir, "cdi"))
	logf, err := os.Create(filepath.Join(dir, "log"))
	if err != nil {
		return
	}
	defer logf.Close()
	d.Stdout, d.Stderr = logf, logf
	if err := d.Start(); err != nil {
		return
	}
	output := func() string { b, _ := os.ReadFile(logf.Name()); return string(b) }
	done := make(chan error, 1)
	go func() { done <- d.Wait() }()
	c := plugintest.NewClient(sock)
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case werr := <-done:
			msg := output()
			s.note("probe: without XFRM and netfilter netlink the daemon exited: %v", werr)
			s.finding("the daemon cannot start on a kernel without the XFRM or netfilter netlink families (here: xfrm_user and nfnetlink unloaded, module loading off): netns.Current opens them through netlink.NewHandle() with no family list although it uses only rtnetlink and RDMA netlink; its last words: %q", lastLine(msg))
			return
		default:
		}
		if _, err := c.Status(); err == nil && strings.Contains(output(), "msg=ready") {
			s.note("probe: the daemon starts without the XFRM and netfilter netlink families")
			_ = d.Process.Signal(syscall.SIGTERM)
			<-done
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	_ = d.Process.Kill()
	<-done
	s.note("probe: the daemon neither became ready nor exited within 15 s: %s", lastLine(output()))
}

func moduleLoaded(name string) bool {
	b, _ := os.ReadFile("/proc/modules")
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, name+" ") {
			return true
		}
	}
	return false
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}
