package main

// What the kernel says, read without the project's own code: sysfs files
// read directly, rdma-core and iproute2 tools, stat of the device nodes and
// dmesg. The checks compare the daemon's answers with these.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

const (
	ibClass     = "/sys/class/infiniband"
	verbsClass  = "/sys/class/infiniband_verbs"
	rdmaCMDev   = "/sys/class/misc/rdma_cm/dev"
	netnsParam  = "/sys/module/ib_core/parameters/netns_mode"
	zeroGIDText = "0000:0000:0000:0000:0000:0000:0000:0000"
)

// cmd runs a command and returns its combined output.
func cmd(name string, args ...string) (string, error) {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return string(out), nil
}

func readFile(path string) (string, error) {
	b, err := os.ReadFile(path)
	return strings.TrimSpace(string(b)), err
}

// gidEntry is one populated slot of a port's GID table as sysfs shows it.
type gidEntry struct {
	Index int
	GID   string // kernel text: 8 groups of 4 hex digits
	Type  string // gid_attrs/types/<i>
	Ndev  string // gid_attrs/ndevs/<i>
}

// gidTable reads a port's GID table from sysfs: the number of slots and the
// populated ones, sorted by index.
func gidTable(hca string, port int) (size int, entries []gidEntry, err error) {
	dir := filepath.Join(ibClass, hca, "ports", strconv.Itoa(port))
	names, err := os.ReadDir(filepath.Join(dir, "gids"))
	if err != nil {
		return 0, nil, err
	}
	for _, n := range names {
		i, err := strconv.Atoi(n.Name())
		if err != nil {
			continue
		}
		size++
		g, err := readFile(filepath.Join(dir, "gids", n.Name()))
		if err != nil || g == zeroGIDText || g == "" {
			continue
		}
		t, _ := readFile(filepath.Join(dir, "gid_attrs", "types", n.Name()))
		d, _ := readFile(filepath.Join(dir, "gid_attrs", "ndevs", n.Name()))
		entries = append(entries, gidEntry{Index: i, GID: g, Type: t, Ndev: d})
	}
	sort.Slice(entries, func(a, b int) bool { return entries[a].Index < entries[b].Index })
	return size, entries, nil
}

// withGID returns the entries holding gid.
func withGID(entries []gidEntry, gid string) []gidEntry {
	var out []gidEntry
	for _, g := range entries {
		if g.GID == gid {
			out = append(out, g)
		}
	}
	return out
}

// waitTable polls the GID table every 200 ms until cond holds or timeout.
// A full rxe table is 1024 slots and up to 3072 sysfs reads per poll: more
// often would slow the emulated kernel it waits for.
func waitTable(hca string, port int, timeout time.Duration, cond func(size int, entries []gidEntry) bool) (int, []gidEntry, bool) {
	deadline := time.Now().Add(timeout)
	for {
		size, entries, err := gidTable(hca, port)
		if err == nil && cond(size, entries) {
			return size, entries, true
		}
		if time.Now().After(deadline) {
			return size, entries, false
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// gidText is the kernel's text of the GID of ip: v4-mapped for IPv4.
func gidText(ip net.IP) string {
	b := ip.To16()
	parts := make([]string, 8)
	for i := range parts {
		parts[i] = fmt.Sprintf("%02x%02x", b[2*i], b[2*i+1])
	}
	return strings.Join(parts, ":")
}

// linkLocal is the EUI-64 IPv6 link-local address the kernel derives from
// mac (addr_gen_mode eui64, the default).
func linkLocal(mac net.HardwareAddr) net.IP {
	ip := net.IP{0xfe, 0x80, 0, 0, 0, 0, 0, 0, mac[0] ^ 2, mac[1], mac[2], 0xff, 0xfe, mac[3], mac[4], mac[5]}
	return ip
}

// rdmaLink is one line of rdma -j link show.
type rdmaLink struct {
	Ifname        string `json:"ifname"`
	Port          int    `json:"port"`
	State         string `json:"state"`
	PhysicalState string `json:"physical_state"`
	Netdev        string `json:"netdev"`
}

func rdmaLinks() ([]rdmaLink, error) {
	out, err := cmd("rdma", "-j", "link", "show")
	if err != nil {
		return nil, err
	}
	var links []rdmaLink
	if err := json.Unmarshal([]byte(out), &links); err != nil {
		return nil, fmt.Errorf("decode rdma -j link show: %w: %s", err, out)
	}
	return links, nil
}

// rdmaNetnsMode is what rdma system show says: shared or exclusive.
func rdmaNetnsMode() (string, error) {
	out, err := cmd("rdma", "system", "show")
	if err != nil {
		return "", err
	}
	f := strings.Fields(out)
	for i := 0; i+1 < len(f); i++ {
		if f[i] == "netns" {
			return f[i+1], nil
		}
	}
	return "", fmt.Errorf("no netns mode in rdma system show: %q", out)
}

// devinfo is what ibv_devinfo -v says about one port.
type devinfo struct {
	LinkLayer string
	GIDs      map[int]devinfoGID
}

type devinfoGID struct {
	IP   net.IP
	Type string
}

var gidLine = regexp.MustCompile(`GID\[\s*(\d+)\]:\s+(\S+),\s+(.+)$`)

func ibvDevinfo(hca string, port int) (devinfo, error) {
	out, err := cmd("ibv_devinfo", "-v", "-d", hca, "-i", strconv.Itoa(port))
	if err != nil {
		return devinfo{}, err
	}
	d := devinfo{GIDs: map[int]devinfoGID{}}
	for _, l := range strings.Split(out, "\n") {
		l = strings.TrimSpace(l)
		if v, ok := strings.CutPrefix(l, "link_layer:"); ok {
			d.LinkLayer = strings.TrimSpace(v)
		}
		if m := gidLine.FindStringSubmatch(l); m != nil {
			i, _ := strconv.Atoi(m[1])
			d.GIDs[i] = devinfoGID{IP: net.ParseIP(m[2]), Type: strings.TrimSpace(m[3])}
		}
	}
	return d, nil
}

// devNode is a character device as the kernel registered it (sysfs dev
// file) and as /dev/infiniband holds it (stat).
type devNode struct {
	Path                 string
	SysMajor, SysMinor   uint32
	StatMajor, StatMinor uint32
	IsChar               bool
	StatErr              error
}

func parseDev(s string) (uint32, uint32, error) {
	ma, mi, ok := strings.Cut(s, ":")
	a, err1 := strconv.ParseUint(ma, 10, 32)
	b, err2 := strconv.ParseUint(mi, 10, 32)
	if !ok || err1 != nil || err2 != nil {
		return 0, 0, fmt.Errorf("not major:minor: %q", s)
	}
	return uint32(a), uint32(b), nil
}

func statNode(n *devNode) {
	var st unix.Stat_t
	if err := unix.Stat(n.Path, &st); err != nil {
		n.StatErr = err
		return
	}
	n.IsChar = st.Mode&unix.S_IFMT == unix.S_IFCHR
	n.StatMajor, n.StatMinor = unix.Major(st.Rdev), unix.Minor(st.Rdev)
}

// hcaNodes returns the uverbs nodes of hca (infiniband_verbs class) and
// rdma_cm (misc class), with both views of their numbers.
func hcaNodes(hca string) ([]devNode, error) {
	dirs, err := filepath.Glob(filepath.Join(verbsClass, "uverbs*"))
	if err != nil {
		return nil, err
	}
	var nodes []devNode
	for _, d := range dirs {
		if ib, _ := readFile(filepath.Join(d, "ibdev")); ib != hca {
			continue
		}
		dev, err := readFile(filepath.Join(d, "dev"))
		if err != nil {
			return nil, err
		}
		n := devNode{Path: "/dev/infiniband/" + filepath.Base(d)}
		if n.SysMajor, n.SysMinor, err = parseDev(dev); err != nil {
			return nil, err
		}
		statNode(&n)
		nodes = append(nodes, n)
	}
	if len(nodes) == 0 {
		return nil, fmt.Errorf("no %s/uverbs*/ibdev names %s", verbsClass, hca)
	}
	dev, err := readFile(rdmaCMDev)
	if err != nil {
		return nil, err
	}
	n := devNode{Path: "/dev/infiniband/rdma_cm"}
	if n.SysMajor, n.SysMinor, err = parseDev(dev); err != nil {
		return nil, err
	}
	statNode(&n)
	return append(nodes, n), nil
}

// ipLink is the part of ip -j -d link show used here.
type ipLink struct {
	Ifname   string `json:"ifname"`
	Link     string `json:"link"`
	Address  string `json:"address"`
	Flags    []string
	LinkInfo struct {
		Kind string `json:"info_kind"`
		Data struct {
			ID   int    `json:"id"`
			Mode string `json:"mode"`
		} `json:"info_data"`
	} `json:"linkinfo"`
}

// links lists the links of the initial namespace (ip -j -d link show).
func links() (map[string]ipLink, error) {
	out, err := cmd("ip", "-j", "-d", "link", "show")
	if err != nil {
		return nil, err
	}
	var ls []ipLink
	if err := json.Unmarshal([]byte(out), &ls); err != nil {
		return nil, fmt.Errorf("decode ip -j link: %w", err)
	}
	m := make(map[string]ipLink, len(ls))
	for _, l := range ls {
		m[l.Ifname] = l
	}
	return m, nil
}

// dmesgCount counts kernel log lines containing every one of subs.
func dmesgCount(subs ...string) (int, error) {
	out, err := cmd("dmesg")
	if err != nil {
		return 0, err
	}
	n := 0
lines:
	for _, l := range strings.Split(out, "\n") {
		for _, s := range subs {
			if !strings.Contains(l, s) {
				continue lines
			}
		}
		n++
	}
	return n, nil
}

// bindOver bind-mounts a file holding content over path (a sysfs file), so
// that a reader of path sees content. The returned func undoes it.
func bindOver(path, content string) (func() error, error) {
	f, err := os.CreateTemp("/run", "rmv-bind-")
	if err != nil {
		return nil, err
	}
	name := f.Name()
	_, werr := f.WriteString(content)
	cerr := f.Close()
	if err := errors.Join(werr, cerr); err != nil {
		os.Remove(name)
		return nil, err
	}
	if err := unix.Mount(name, path, "", unix.MS_BIND, ""); err != nil {
		os.Remove(name)
		return nil, fmt.Errorf("bind %s over %s: %w", name, path, err)
	}
	return func() error {
		err := unix.Unmount(path, 0)
		os.Remove(name)
		return err
	}, nil
}
