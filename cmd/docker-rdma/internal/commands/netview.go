package commands

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/rdma-macvlan/rdma-macvlan/api"
	"github.com/rdma-macvlan/rdma-macvlan/cdi"
	"github.com/rdma-macvlan/rdma-macvlan/cmd/docker-rdma/internal/docker"
	"github.com/rdma-macvlan/rdma-macvlan/rdma"
)

// netFacts are a network's RDMA facts as docker rdma shows them: built once,
// from the daemon's status (fromStatus) or else from sysfs and CDI specs
// (fallback), and carried as they are into ls rows and inspect's networks.
type netFacts struct {
	HCA       string        `json:"hca,omitempty"`
	Port      int           `json:"port,omitempty"`
	PortState string        `json:"port_state,omitempty"`
	LinkLayer string        `json:"link_layer,omitempty"`
	NetnsMode string        `json:"netns_mode,omitempty"`
	GIDTable  *api.GIDTable `json:"gid_table,omitempty"`
	// CDIDevice is the CDI name of the HCA's device when the daemon or a
	// spec on disk says there is one.
	CDIDevice string `json:"cdi_device,omitempty"`
	// GIDCheck is the network's gid_check; GIDCheckNote says why strict
	// works as warn on this engine, once the daemon has seen it.
	GIDCheck     string `json:"gid_check,omitempty"`
	GIDCheckNote string `json:"gid_check_note,omitempty"`
	// TrafficClass and ServiceLevel are the network's -o traffic_class and
	// service_level: what docker rdma run's workloads are told to send
	// RoCE with; nil when not set.
	TrafficClass *int `json:"traffic_class,omitempty"`
	ServiceLevel *int `json:"service_level,omitempty"`
	// Source is where the RDMA facts come from: daemon, sysfs or CDI spec.
	Source   string   `json:"source,omitempty"`
	Missing  []string `json:"missing,omitempty"`
	Problems []string `json:"problems,omitempty"`
}

// netView is what docker rdma knows about one rdma-macvlan network: from
// the daemon's status when it can read it, else from Docker's network
// options, sysfs and the CDI spec, with what is missing said in Missing.
type netView struct {
	Name, ID, Driver string
	Parent           string
	Backend          *backend
	// Status is the daemon's view of the network; nil when unknown.
	Status *api.Network
	netFacts
	Nodes []api.Device
	// nodesFrom says where Nodes were read, for an error about one of them.
	nodesFrom string
	// sys is the sysfs tree the facts were read from, nil when none was.
	sys *rdma.Sysfs
}

// resolveNetwork builds the view of one Docker network known to be
// rdma-macvlan. An error means the plugin is missing or disabled.
func (s *session) resolveNetwork(n docker.Network) (*netView, error) {
	v := &netView{Name: n.Name, ID: n.ID, Driver: n.Driver, Parent: n.Options[api.OptParent]}
	v.GIDCheck = firstNonEmpty(n.Options[api.OptGIDCheck], api.GIDCheckWarn)
	b, err := s.backendFor(n.Driver)
	if err != nil {
		return v, err
	}
	v.Backend = b
	tc, sl := optionLevel(n.Options, api.OptTrafficClass, api.TrafficClassMax), optionLevel(n.Options, api.OptServiceLevel, api.ServiceLevelMax)
	defer func() {
		// The daemon's word, else Docker's copy of the options.
		v.TrafficClass = firstSet(v.TrafficClass, tc)
		v.ServiceLevel = firstSet(v.ServiceLevel, sl)
	}()
	st, stErr := s.status(b)
	if ns := findNetwork(st, n.ID); ns != nil {
		v.fromStatus(ns)
		return v, nil
	}
	if stErr != nil {
		v.Missing = append(v.Missing, "daemon status: "+stErr.Error())
	} else {
		v.Missing = append(v.Missing, fmt.Sprintf("the daemon at %s does not know network %s (its state was lost? containers on it will fail: recreate the network)", b.Socket, shortID(n.ID)))
	}
	s.fallback(v, n.Options[api.OptRDMADevice])
	return v, nil
}

func (v *netView) fromStatus(ns *api.Network) {
	v.Status = ns
	if v.Parent == "" {
		v.Parent = ns.Parent
	}
	v.netFacts = netFacts{HCA: ns.HCA, Port: ns.Port, PortState: ns.PortState, LinkLayer: ns.LinkLayer, NetnsMode: ns.NetnsMode,
		GIDTable: ns.GIDTable, CDIDevice: ns.CDIDevice, GIDCheck: firstNonEmpty(ns.GIDCheck, v.GIDCheck), GIDCheckNote: ns.GIDCheckNote,
		TrafficClass: ns.TrafficClass, ServiceLevel: ns.ServiceLevel, Source: "daemon", Problems: append([]string(nil), ns.Problems...)}
	v.Nodes = ns.Devices
	v.nodesFrom = "the daemon's status"
	if v.Backend != nil {
		v.nodesFrom += " on socket " + v.Backend.Socket
	}
	if ns.HCA == "" {
		v.Problems = append(v.Problems, "the daemon has no RDMA device for this network")
	}
}

// optionLevel reads a QoS option from Docker's copy of a network's options
// (what the daemon accepted: a decimal number from 0 to maxN); nil when it
// is not there or not such a number.
func optionLevel(opts map[string]string, key string, maxN int) *int {
	v, ok := opts[key]
	if !ok {
		return nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 || n > maxN {
		return nil
	}
	return &n
}

func firstSet(a ...*int) *int {
	for _, p := range a {
		if p != nil {
			return p
		}
	}
	return nil
}

// qosText says a network's QoS for the tables: "tc=106,sl=3", "-" when
// neither is set.
func qosText(tc, sl *int) string {
	var f []string
	if tc != nil {
		f = append(f, "tc="+strconv.Itoa(*tc))
	}
	if sl != nil {
		f = append(f, "sl="+strconv.Itoa(*sl))
	}
	return dash(strings.Join(f, ","))
}

// sysfsRoot is the root sysfs is read under: --sysfs-root, else the source
// of the managed plugin's sysfs mount when it is a .../sys directory (so a
// plugin pointed at a test tree is read the same way), else /.
func (s *session) sysfsRoot(b *backend) string {
	if s.sysfsRootFlag != "" {
		return s.sysfsRootFlag
	}
	if b != nil && b.Plugin != nil {
		if src := b.Plugin.MountSource("sysfs"); filepath.Base(src) == "sys" && src != "/sys" {
			return filepath.Dir(src)
		}
	}
	return "/"
}

// fallback fills in the view from sysfs and CDI specs on this host.
//
// Why docker rdma rebuilds what the daemon knows instead of reporting the
// daemon unreachable: the daemon's socket lies under /run/docker/plugins,
// which only root can enter, so every member of the docker group, the usual
// user of docker rdma, cannot ask it. For them the fallback is what makes ls
// and inspect work at all (the HCA, port, GID table, device flags and each
// container's GID index; e2e-cli checks this as uid 65534). What it cannot
// know (readiness, the daemon's refusals, GID moves) is named in Missing,
// and doctor says why the daemon was not asked.
func (s *session) fallback(v *netView, rdmaDevice string) {
	if local, host := s.local(); !local {
		v.Missing = append(v.Missing, "the RDMA device: Docker runs on "+host+", whose sysfs and CDI specs cannot be read from here")
		return
	}
	sys := rdma.NewSysfs(s.sysfsRoot(v.Backend))
	hca, port := rdmaDevice, 0
	var detectErr error
	if hca == "" && v.Parent != "" {
		for _, dev := range parentCandidates(v.Parent) {
			h, p, err := sys.HCAForNetdev(dev)
			if err == nil {
				hca, port = h, p
				break
			}
			if detectErr == nil {
				detectErr = err
			}
		}
	}
	if hca != "" {
		v.sysfsFacts(sys, hca, port)
	}
	specName := ""
	if hca != "" {
		specName = v.cdiName()
	}
	spec, specName, err := s.findCDISpec(v.Backend, specName)
	switch {
	case err != nil:
		v.Missing = append(v.Missing, err.Error())
	case spec != nil && hca == "":
		// The only spec: the network most likely uses its HCA port.
		v.HCA, v.Port, v.Source = specName, 0, "CDI spec"
		for _, d := range spec.Devices {
			for _, hp := range cdi.PortsInEnv(d.ContainerEdits.Env) {
				if i := strings.LastIndexByte(hp, ':'); i > 0 {
					v.HCA = hp[:i]
					v.Port, _ = strconv.Atoi(hp[i+1:])
				}
			}
			for _, n := range d.ContainerEdits.DeviceNodes {
				v.Nodes = append(v.Nodes, api.Device{Path: n.Path, Major: uint32(n.Major), Minor: uint32(n.Minor)})
				v.nodesFrom = "the CDI spec of " + cdi.Qualified(specName)
			}
		}
		v.CDIDevice = cdi.Qualified(specName)
		v.Missing = append(v.Missing, "which HCA serves parent "+v.Parent+" (taken from the only rdma-macvlan CDI spec, "+v.CDIDevice+")")
	case spec != nil:
		v.CDIDevice = cdi.Qualified(specName)
	}
	if v.HCA == "" {
		why := "no parent in the network's options"
		if detectErr != nil {
			why = detectErr.Error()
		} else if v.Parent != "" {
			why = "parent " + v.Parent + " not found in " + sys.Root
		}
		v.Missing = append(v.Missing, "the RDMA device: "+why)
	}
	v.Missing = append(v.Missing, missingReadiness)
}

// cdiName is the CDI device name of the network's HCA port: the daemon's
// or a spec's word, else what sysfs says of the port (the HCA's name, or
// <hca>-p<port> on an HCA with more than one port); "" when the HCA is not
// known.
func (v *netView) cdiName() string {
	if name := cdi.Unqualified(v.CDIDevice); name != "" {
		return name
	}
	if v.HCA == "" {
		return ""
	}
	if v.sys != nil && v.Port > 0 {
		if name, err := cdi.NameOnHost(v.sys, v.HCA, v.Port); err == nil {
			return name
		}
	}
	return v.HCA
}

// cdiDevice is the fully qualified CDI device of the network's HCA port,
// as docker run --device takes it; "" when the HCA is not known.
func (v *netView) cdiDevice() string {
	if name := v.cdiName(); name != "" {
		return cdi.Qualified(name)
	}
	return ""
}

// missingReadiness is what the fallback can never know.
const missingReadiness = "GID readiness of endpoints (only the daemon knows which are its own)"

// sysfsFacts reads an HCA port's state, GID table and device nodes.
func (v *netView) sysfsFacts(sys *rdma.Sysfs, hca string, port int) {
	v.HCA, v.Source, v.sys = hca, "sysfs", sys
	if port == 0 {
		if ports, err := sys.Ports(hca); err == nil && len(ports) > 0 {
			port = ports[0]
		}
	}
	v.Port = port
	if pi, err := sys.Port(hca, port); err != nil {
		v.Problems = append(v.Problems, err.Error())
	} else {
		v.PortState, v.LinkLayer = pi.State, pi.LinkLayer
		if gids, err := sys.GIDs(hca, port); err == nil {
			v.GIDTable = &api.GIDTable{Size: pi.GIDTableSize, Used: len(gids), Free: max(pi.GIDTableSize-len(gids), 0)}
		}
	}
	nodes, err := sys.DeviceNodes(hca)
	if err != nil {
		v.Problems = append(v.Problems, err.Error())
	}
	for _, n := range nodes {
		v.Nodes = append(v.Nodes, api.Device{Path: n.Path, Major: n.Major, Minor: n.Minor})
		v.nodesFrom = "sysfs under " + sys.Root
	}
	if mode, err := sys.NetnsModeFromSysfs(); err == nil {
		v.NetnsMode = mode
	}
}

// parentCandidates are the netdevs to look up for a parent: itself, and
// for IFNAME.VLAN (IFNAME.OUTER.INNER for a VLAN on a VLAN) each device
// under it by name, down to the real device, whose HCA the VLANs use.
func parentCandidates(parent string) []string {
	c := []string{parent}
	for dev := parent; ; {
		i := strings.LastIndex(dev, ".")
		if i <= 0 {
			return c
		}
		dev = dev[:i]
		c = append(c, dev)
	}
}

// cdiDirs are the directories to look for rdma-macvlan CDI specs in: the
// managed plugin's cdi mount, the engine's CDI spec dirs, and the CDI
// defaults.
func (s *session) cdiDirs(b *backend) []string {
	var dirs []string
	if b != nil && b.Plugin != nil {
		if src := b.Plugin.MountSource("cdi"); src != "" {
			dirs = append(dirs, src)
		}
	}
	if info, err := s.dockerInfo(); err == nil {
		dirs = append(dirs, info.CDISpecDirs...)
	}
	dirs = append(dirs, "/etc/cdi", "/var/run/cdi")
	seen := map[string]bool{}
	out := dirs[:0]
	for _, d := range dirs {
		d = filepath.Clean(d)
		if !seen[d] {
			seen[d] = true
			out = append(out, d)
		}
	}
	return out
}

// findCDISpec reads the rdma-macvlan CDI spec of the device name, or when
// name is "" the spec of the only device that has one. It returns nil
// without an error when there is none.
func (s *session) findCDISpec(b *backend, name string) (*cdi.Spec, string, error) {
	dirs := s.cdiDirs(b)
	if name == "" {
		found := map[string]bool{}
		for _, d := range dirs {
			names, _ := cdi.SpecNames(d)
			for _, n := range names {
				found[n] = true
			}
		}
		if len(found) != 1 {
			return nil, "", nil
		}
		for n := range found {
			name = n
		}
	}
	for _, d := range dirs {
		spec, ok, err := cdi.ReadSpec(d, name)
		if err != nil {
			return nil, "", err
		}
		if ok {
			return &spec, name, nil
		}
	}
	return nil, "", nil
}

// cdiSpecInEngine reports whether the engine resolves the CDI device of
// v's HCA port: it reads CDI specs (Docker >= 25 with CDI on) and one of
// its spec directories holds the spec. When Docker runs elsewhere the
// directories cannot be looked at, and the daemon's word (v.CDIDevice) is
// taken.
func (s *session) cdiSpecInEngine(v *netView) (bool, string) {
	name := v.cdiName()
	info, err := s.dockerInfo()
	if err != nil {
		return false, "docker info failed: " + err.Error()
	}
	if len(info.CDISpecDirs) == 0 {
		return false, fmt.Sprintf("Docker %s does not resolve CDI devices (needs Docker >= 25 with CDI on; 28.2 and later have it on by default)", info.ServerVersion)
	}
	if name == "" {
		return false, "the HCA is not known"
	}
	if local, _ := s.local(); !local {
		return v.CDIDevice != "", "the engine's CDI directories are on another host"
	}
	for _, d := range info.CDISpecDirs {
		if _, err := os.Stat(cdi.SpecPath(d, name)); err == nil {
			return true, ""
		}
	}
	return false, fmt.Sprintf("no rdma-macvlan CDI spec for %s in the engine's CDI directories (%s); the plugin writes specs to its --cdi-dir (managed plugin: the cdi mount)",
		cdi.Qualified(name), strings.Join(info.CDISpecDirs, ", "))
}

// rdmaNetworks lists Docker's rdma-macvlan networks, inspected, sorted by
// name.
func (s *session) rdmaNetworks() ([]docker.Network, error) {
	list, err := s.cli.Networks(s.ctx)
	if err != nil {
		return nil, err
	}
	var nets []docker.Network
	for _, n := range list {
		if !s.isRDMADriver(n.Driver) {
			continue
		}
		full, err := s.cli.NetworkInspect(s.ctx, n.ID)
		if err != nil {
			// Removed between ls and inspect.
			continue
		}
		nets = append(nets, full)
	}
	sort.Slice(nets, func(i, j int) bool { return nets[i].Name < nets[j].Name })
	return nets, nil
}

func shortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}
