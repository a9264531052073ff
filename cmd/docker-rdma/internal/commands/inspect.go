package commands

import (
	"cmp"
	"fmt"
	"io"
	"net"
	"net/netip"
	"slices"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/rdma-macvlan/rdma-macvlan/api"
	"github.com/rdma-macvlan/rdma-macvlan/cmd/docker-rdma/internal/docker"
	"github.com/rdma-macvlan/rdma-macvlan/internal/rdmaenv"
	"github.com/rdma-macvlan/rdma-macvlan/internal/rdmaexec"
	"github.com/rdma-macvlan/rdma-macvlan/rdma"
)

// inspectEndpoint is one container's endpoint on an rdma-macvlan network.
type inspectEndpoint struct {
	ID          string `json:"id"`
	Container   string `json:"container,omitempty"`
	ContainerID string `json:"container_id,omitempty"`
	// Ifname is the interface's name in the container, from the GID table
	// (empty when not known); HostIfname the link's name in the host
	// namespace before Docker moved it.
	Ifname     string    `json:"ifname,omitempty"`
	HostIfname string    `json:"host_ifname,omitempty"`
	IPv4       string    `json:"ipv4,omitempty"`
	IPv6       string    `json:"ipv6,omitempty"`
	MAC        string    `json:"mac,omitempty"`
	GIDs       []api.GID `json:"gids"`
	// GIDIndex is the RoCE v2 GID index of the endpoint's IPv4 address (of
	// its IPv6 address on IPv6-only networks): what NCCL_IB_GID_INDEX and
	// ib_write_bw -x want. Nil when the entry is not in the table.
	GIDIndex *int `json:"gid_index"`
	// RDMAReady is the daemon's word; nil when it could not be asked.
	RDMAReady  *bool  `json:"rdma_ready"`
	RDMAReason string `json:"rdma_reason,omitempty"`
	// GIDDrift are the daemon's entries of the endpoint that moved after
	// it was ready: the index its workload was given and the current one.
	GIDDrift []api.GIDMove `json:"gid_drift,omitempty"`
	// AddressConflicts are the endpoint's addresses another MAC on the
	// parent's segment answered for (the daemon's probe at its start).
	AddressConflicts []api.AddressConflict `json:"address_conflicts,omitempty"`

	// addr is the address of the GIDIndex entry; table the port's whole
	// table when it could be read (for rdmaenv.Vars).
	addr  netip.Addr
	table []rdmaenv.Entry
}

// inspectNetwork is a network with the endpoints shown.
type inspectNetwork struct {
	lsNetwork
	Endpoints []inspectEndpoint `json:"endpoints"`
	// subnets are the network's subnets as the engine has them.
	subnets []netip.Prefix
}

// inspectContainer is one container and its rdma-macvlan networks.
type inspectContainer struct {
	Name    string `json:"name"`
	ID      string `json:"id"`
	Running bool   `json:"running"`
	// Devices are the container's --device host paths and CDI devices.
	Devices  []string         `json:"devices"`
	IPCLock  bool             `json:"ipc_lock"`
	Memlock  string           `json:"memlock"`
	Networks []inspectNetwork `json:"networks"`
	// Env is the environment an RDMA application in the container needs:
	// what rdma-exec exports in a container started by docker rdma run.
	Env []string `json:"env"`
	// EnvNotes say what Env cannot express.
	EnvNotes []string `json:"env_notes,omitempty"`
	// GIDMismatch, when not empty, says on which rails NCCL or UCX would
	// use another entry than the container's own with Env: rdma-exec then
	// does not start the workload (status 121) unless AcceptMismatch.
	GIDMismatch    []string `json:"gid_mismatch,omitempty"`
	AcceptMismatch bool     `json:"accept_gid_mismatch,omitempty"`
	// QoSConflict, when not empty, says which networks ask for different
	// traffic classes or service levels: rdma-exec then does not start
	// the workload (status 120) unless the user set the variables.
	QoSConflict []string `json:"qos_conflict,omitempty"`
	// GIDChoice is the RoCE version and address family of the GID index.
	GIDChoice string   `json:"gid_choice"`
	Problems  []string `json:"problems,omitempty"`
}

type inspectOutput struct {
	Containers []inspectContainer `json:"containers"`
	Networks   []inspectNetwork   `json:"networks"`
}

func cmdInspect(s *session, args []string) int {
	fs, format := newFlagSet("inspect", s.env)
	commonFlags(s, fs)
	fs.StringVar(&s.sysfsRootFlag, "sysfs-root", "", "read sysfs under this root (default: the plugin's sysfs mount, else /)")
	names, status, ok := parseCommand(s, fs, format, args, true)
	if !ok {
		return status
	}
	if len(names) == 0 {
		tprintf(s.env.Stderr, "Usage:  %s\n", usages["inspect"])
		return exitUsage
	}
	out := inspectOutput{Containers: []inspectContainer{}, Networks: []inspectNetwork{}}
	failed := false
	for _, name := range names {
		if c, cerr := s.cli.ContainerInspect(s.ctx, name); cerr == nil {
			ic, err := containerEntry(s, c)
			if err != nil {
				tprintf(s.env.Stderr, "docker rdma inspect: %s: %v\n", name, err)
				failed = true
				continue
			}
			out.Containers = append(out.Containers, ic)
			continue
		}
		n, nerr := s.cli.NetworkInspect(s.ctx, name)
		if nerr != nil {
			tprintf(s.env.Stderr, "docker rdma inspect: %s: no such container or network\n", name)
			failed = true
			continue
		}
		if !s.isRDMADriver(n.Driver) {
			tprintf(s.env.Stderr, "docker rdma inspect: network %s has driver %s, not rdma-macvlan", n.Name, n.Driver)
			if !builtinDriver(n.Driver) {
				tprintf(s.env.Stderr, " (%s)", s.notRDMAHint(n.Driver))
			}
			fmt.Fprintln(s.env.Stderr)
			failed = true
			continue
		}
		out.Networks = append(out.Networks, networkEntry(s, n))
	}
	if *format == "json" {
		writeJSON(s.env.Stdout, out)
	} else {
		renderInspect(s.env.Stdout, out)
	}
	if failed {
		return 1
	}
	return 0
}

// describeNetwork resolves a network into its row; a missing or disabled
// plugin is a problem of the row.
func describeNetwork(s *session, n docker.Network) (inspectNetwork, *netView) {
	in := inspectNetwork{lsNetwork: lsNetwork{Name: n.Name, ID: n.ID, Driver: n.Driver, Parent: n.Options["parent"],
		Containers: len(n.Containers), DeviceFlags: []string{}}, Endpoints: []inspectEndpoint{}}
	for _, c := range n.IPAM.Config {
		if p, err := netip.ParsePrefix(c.Subnet); err == nil {
			in.subnets = append(in.subnets, p.Masked())
			in.Subnets = append(in.Subnets, lsSubnet{Subnet: c.Subnet, IPRange: c.IPRange})
		}
	}
	v, err := s.resolveNetwork(n)
	if err != nil {
		in.Problems = append(in.Problems, err.Error())
		return in, v
	}
	in.Parent, in.netFacts = v.Parent, v.netFacts
	for _, d := range v.Nodes {
		in.DeviceNodes = append(in.DeviceNodes, d.Path)
	}
	if useCDI, _ := s.cdiSpecInEngine(v); useCDI {
		in.DeviceFlags = []string{"--device", v.cdiDevice()}
	} else {
		for _, p := range in.DeviceNodes {
			in.DeviceFlags = append(in.DeviceFlags, "--device", p)
		}
	}
	return in, v
}

// networkEntry is network n as docker rdma inspect shows it.
func networkEntry(s *session, n docker.Network) inspectNetwork {
	in, v := describeNetwork(s, n)
	if v == nil {
		return in
	}
	byEndpoint := map[string]string{}
	ids := make([]string, 0, len(n.Containers))
	for id, c := range n.Containers {
		byEndpoint[c.EndpointID] = id
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return n.Containers[ids[i]].Name < n.Containers[ids[j]].Name })
	seen := map[string]bool{}
	for _, id := range ids {
		c := n.Containers[id]
		ep := endpointEntry(s, v, c.EndpointID, addrOnly(c.IPv4Address), addrOnly(c.IPv6Address), c.MacAddress, rdmaenv.DefaultChoice)
		ep.Container, ep.ContainerID = c.Name, id
		seen[c.EndpointID] = true
		in.Endpoints = append(in.Endpoints, ep)
	}
	if v.Status != nil {
		// Endpoints the daemon has and Docker does not show (not yet
		// joined, or left behind).
		for _, e := range v.Status.Endpoints {
			if !seen[e.ID] {
				in.Endpoints = append(in.Endpoints, endpointEntry(s, v, e.ID, "", "", "", rdmaenv.DefaultChoice))
			}
		}
	}
	return in
}

// endpointEntry describes one endpoint from the daemon's status, or else from
// Docker's addresses and the GID table in sysfs.
func endpointEntry(s *session, v *netView, id, ipv4, ipv6, mac string, choice rdmaenv.Choice) inspectEndpoint {
	ep := inspectEndpoint{ID: id, IPv4: ipv4, IPv6: ipv6, MAC: mac, GIDs: []api.GID{}}
	var st *api.Endpoint
	if v.Status != nil {
		for i := range v.Status.Endpoints {
			if v.Status.Endpoints[i].ID == id {
				st = &v.Status.Endpoints[i]
			}
		}
	}
	sys := v.sys
	if sys == nil && v.HCA != "" {
		if local, _ := s.local(); local {
			sys = rdma.NewSysfs(s.sysfsRoot(v.Backend))
		}
	}
	var table []rdmaenv.Entry
	if sys != nil && v.HCA != "" {
		table, _ = sys.GIDs(v.HCA, v.Port)
	}
	if st != nil {
		ep.HostIfname = st.Ifname
		ep.IPv4, ep.IPv6, ep.MAC = firstNonEmpty(st.IPv4, ep.IPv4), firstNonEmpty(st.IPv6, ep.IPv6), firstNonEmpty(st.MAC, ep.MAC)
		ep.GIDs = append(ep.GIDs, st.GIDs...)
		ready := st.RDMAReady
		ep.RDMAReady, ep.RDMAReason = &ready, st.RDMAReason
		ep.GIDDrift = st.GIDDrift
		ep.AddressConflicts = st.AddressConflicts
	} else {
		for _, ip := range []string{ep.IPv4, ep.IPv6} {
			if a, err := netip.ParseAddr(ip); err == nil {
				for _, g := range rdma.GIDsWithIP(table, a) {
					ep.GIDs = append(ep.GIDs, api.GID{Index: g.Index, Type: g.Type, GID: rdma.GIDFromIP(g.GID.AsSlice())})
				}
			}
		}
	}
	// The entry rdma-exec picks: the same rule on the endpoint's entries.
	own := make([]rdmaenv.Entry, 0, len(ep.GIDs))
	for _, g := range ep.GIDs {
		if a, err := netip.ParseAddr(g.GID); err == nil {
			own = append(own, rdmaenv.Entry{Index: g.Index, GID: a, Type: g.Type})
		}
	}
	var addrs []netip.Addr
	for _, ip := range []string{ep.IPv4, ep.IPv6} {
		if a, err := netip.ParseAddr(ip); err == nil {
			addrs = append(addrs, a)
		}
	}
	if e, a, ok := rdmaenv.Pick(own, addrs, "", choice); ok {
		i := e.Index
		ep.GIDIndex, ep.addr = &i, a
		for _, g := range table {
			if g.Index == i {
				ep.Ifname = g.Ndev
			}
		}
	}
	ep.table = table
	return ep
}

// helperArgs is what rdma-exec was told in a container started through it:
// its GID choice (--roce-version, --gid-family; else the default), the
// names of its networks in the order of its --net flags (the order of the
// devices it exports) and --accept-gid-mismatch.
func helperArgs(c docker.Container) (choice rdmaenv.Choice, order []string, accept bool) {
	if c.Path != rdmaexec.ContainerPath {
		return rdmaenv.DefaultChoice, nil, false
	}
	var version, family string
	for i := 0; i < len(c.Args) && c.Args[i] != "--"; i++ {
		if c.Args[i] == "--accept-gid-mismatch" {
			accept = true
		}
		if i+1 < len(c.Args) {
			switch c.Args[i] {
			case "--roce-version":
				version = c.Args[i+1]
			case "--gid-family":
				family = c.Args[i+1]
			case "--net":
				for _, f := range strings.Split(c.Args[i+1], ",") {
					if name, ok := strings.CutPrefix(f, "name="); ok {
						order = append(order, name)
					}
				}
			}
		}
	}
	ch, err := rdmaenv.ParseChoice(version, family)
	if err != nil {
		ch = rdmaenv.DefaultChoice
	}
	return ch, order, accept
}

// byHelperOrder sorts names in the order rdma-exec was given them, names
// it was not given last, each group by name.
func byHelperOrder(names, order []string) {
	pos := map[string]int{}
	for i, n := range order {
		if _, ok := pos[n]; !ok {
			pos[n] = i
		}
	}
	sort.SliceStable(names, func(i, j int) bool {
		pi, iok := pos[names[i]]
		pj, jok := pos[names[j]]
		switch {
		case iok && jok:
			return pi < pj
		case iok != jok:
			return iok
		}
		return names[i] < names[j]
	})
}

// containerEntry is container c and its rdma-macvlan networks as docker
// rdma inspect shows them.
func containerEntry(s *session, c docker.Container) (inspectContainer, error) {
	ic := inspectContainer{Name: strings.TrimPrefix(c.Name, "/"), ID: c.ID, Running: c.State.Running,
		Devices: []string{}, Networks: []inspectNetwork{}, Env: []string{}}
	for _, d := range c.HostConfig.Devices {
		ic.Devices = append(ic.Devices, d.PathOnHost)
	}
	for _, r := range c.HostConfig.DeviceRequests {
		if r.Driver == "cdi" {
			ic.Devices = append(ic.Devices, r.DeviceIDs...)
		}
	}
	// The rdma-macvlan runtime gives a container on rdma-macvlan networks
	// their devices, CAP_IPC_LOCK and memlock unless its env says not to.
	byRuntime := c.HostConfig.Runtime == api.RuntimeName && envOf(c.Config.Env, api.EnvDevices) != api.DevicesNone
	ic.IPCLock = c.HostConfig.Privileged || addsCap(c.HostConfig.CapAdd, "IPC_LOCK") ||
		byRuntime && envOf(c.Config.Env, api.EnvIPCLock) != "0" && !addsCap(c.HostConfig.CapDrop, "IPC_LOCK")
	ic.Memlock = "engine default"
	if byRuntime {
		ic.Memlock = "the runtime's (unlimited, unless the engine sets a default)"
	}
	for _, u := range c.HostConfig.Ulimits {
		if u.Name == "memlock" {
			ic.Memlock = limitText(u.Soft) + ":" + limitText(u.Hard)
		}
	}
	choice, order, accept := helperArgs(c)
	if byRuntime {
		if ch, err := rdmaenv.ParseChoice(envOf(c.Config.Env, api.EnvRoCEVersion), envOf(c.Config.Env, api.EnvGIDFamily)); err == nil {
			choice = ch
		}
		accept = envOf(c.Config.Env, api.EnvAcceptMismatch) == "1"
	}
	ic.GIDChoice = choice.String()
	ic.AcceptMismatch = accept
	names := make([]string, 0, len(c.NetworkSettings.Networks))
	for name := range c.NetworkSettings.Networks {
		names = append(names, name)
	}
	byHelperOrder(names, order)
	for _, name := range names {
		es := c.NetworkSettings.Networks[name]
		n, err := s.cli.NetworkInspect(s.ctx, firstNonEmpty(es.NetworkID, name))
		if err != nil || !s.isRDMADriver(n.Driver) {
			continue
		}
		in, v := describeNetwork(s, n)
		if v != nil {
			ep := endpointEntry(s, v, es.EndpointID, es.IPAddress, es.GlobalIPv6Address, es.MacAddress, choice)
			ep.Container, ep.ContainerID = ic.Name, c.ID
			in.Endpoints = append(in.Endpoints, ep)
			if !byRuntime && !hasDevices(ic.Devices, c.HostConfig.Privileged, v) {
				ic.Problems = append(ic.Problems, fmt.Sprintf("no device of %s was given to the container: RDMA software in it will find no RDMA devices (run it with docker rdma run or docker run --runtime rdma-macvlan, or add %s)",
					firstNonEmpty(v.HCA, "the network's HCA"), strings.Join(in.DeviceFlags, " ")))
			}
		}
		ic.Networks = append(ic.Networks, in)
	}
	if len(ic.Networks) == 0 {
		return ic, fmt.Errorf("container %s is on no rdma-macvlan network", ic.Name)
	}
	if !ic.IPCLock {
		ic.Problems = append(ic.Problems, "no CAP_IPC_LOCK (the rdma-macvlan runtime adds it: docker rdma run, or docker run --runtime rdma-macvlan)")
	}
	if ic.Memlock == "engine default" {
		ic.Problems = append(ic.Problems, "no --ulimit memlock: pinned memory is limited to the engine's default (often 64 KiB or 8 MiB); ibv_reg_mr fails with ENOMEM above it")
	}
	ic.Env, ic.EnvNotes, ic.GIDMismatch, ic.QoSConflict = containerEnv(ic.Networks, choice, c.Config.Env)
	return ic, nil
}

// hasDevices reports whether the container was given the network's HCA:
// its CDI device, or every node, or everything (--privileged).
func hasDevices(devices []string, privileged bool, v *netView) bool {
	if privileged {
		return true
	}
	if name := v.cdiDevice(); name != "" && slices.Contains(devices, name) {
		return true
	}
	if len(v.Nodes) == 0 {
		return true // not known: do not accuse
	}
	for _, n := range v.Nodes {
		if !slices.Contains(devices, n.Path) {
			return false
		}
	}
	return true
}

// containerEnv is the environment RDMA software in the container needs to
// pick the right devices, ports and GIDs, as rdma-exec exports it
// (rdmaenv.Vars) from the same entries: a variable already in the
// container's environment (own) is kept, as rdma-exec keeps it. mismatch
// says where NCCL or UCX would take another entry than the container's;
// conflict which networks ask for different QoS.
func containerEnv(nets []inspectNetwork, choice rdmaenv.Choice, own []string) (env, notes, mismatch, conflict []string) {
	var ports []rdmaenv.Port
	for _, n := range nets {
		if n.HCA == "" || len(n.Endpoints) == 0 {
			continue
		}
		ep := n.Endpoints[0]
		p := rdmaenv.Port{HCA: n.HCA, Port: n.Port, Ifname: ep.Ifname, Index: -1, Addr: ep.addr, Table: ep.table,
			QoS: rdmaenv.QoS{Network: n.Name, TrafficClass: n.TrafficClass, ServiceLevel: n.ServiceLevel}, Subnets: n.subnets}
		if n.GIDTable != nil {
			p.Slots = n.GIDTable.Size
		}
		if ep.GIDIndex != nil {
			p.Index = *ep.GIDIndex
		}
		ports = append(ports, p)
	}
	given := func(name string) (string, bool) {
		for i := len(own) - 1; i >= 0; i-- {
			if k, v, ok := strings.Cut(own[i], "="); ok && k == name {
				return v, true
			}
		}
		return "", false
	}
	plan := rdmaenv.Vars(ports, choice, given)
	env = make([]string, 0, len(plan.Vars))
	notes = plan.Notes
	for _, v := range plan.Vars {
		if old, ok := given(v.Name); ok {
			env = append(env, v.Name+"="+old)
			if old != v.Value {
				notes = append(notes, fmt.Sprintf("%s=%s is the container's own setting (-e or the image's ENV), kept; what it would get here: %s", v.Name, old, v.Value))
			}
			continue
		}
		env = append(env, v.String())
	}
	return env, notes, plan.Mismatch, plan.QoSConflict
}

func renderInspect(w io.Writer, out inspectOutput) {
	for i, c := range out.Containers {
		if i > 0 {
			fmt.Fprintln(w)
		}
		state := "not running"
		if c.Running {
			state = "running"
		}
		tprintf(w, "container %s (%s), %s\n", c.Name, shortID(c.ID), state)
		tprintf(w, "  devices    %s\n", dash(strings.Join(c.Devices, " ")))
		tprintf(w, "  IPC_LOCK   %s\n", yesNo(c.IPCLock))
		tprintf(w, "  memlock    %s\n", c.Memlock)
		for _, n := range c.Networks {
			fmt.Fprintln(w)
			renderNetworkHead(w, n.lsNetwork)
			for _, ep := range n.Endpoints {
				renderEndpoint(w, ep)
			}
		}
		for _, p := range c.Problems {
			tprintf(w, "problem: %s\n", p)
		}
		if len(c.Env) > 0 {
			tprintf(w, "\n# environment for RDMA applications in %s (docker exec -e, or an env file)\n", c.Name)
			tprintf(w, "# (what rdma-exec exports in a container started by docker rdma run; GID: %s)\n", c.GIDChoice)
			for _, e := range c.Env {
				tprintln(w, e)
			}
			for _, n := range c.EnvNotes {
				tprintf(w, "# %s\n", n)
			}
			if len(c.GIDMismatch) > 0 {
				what := fmt.Sprintf("rdma-exec does not start the workload (status %d; docker rdma run --accept-gid-mismatch starts it anyway)", api.ExitGIDMismatch)
				if c.AcceptMismatch {
					what = "started with --accept-gid-mismatch"
				}
				tprintf(w, "# GID mismatch: the container's own entries have different indexes on its rails and no setting makes every library use them; %s:\n", what)
				for _, m := range c.GIDMismatch {
					tprintf(w, "#   %s\n", m)
				}
			}
			if len(c.QoSConflict) > 0 {
				tprintf(w, "# QoS conflict: the networks ask for different values of variables that take one for every device; rdma-exec does not start the workload (status %d) unless you set them (-e):\n", api.ExitQoSConflict)
				for _, m := range c.QoSConflict {
					tprintf(w, "#   %s\n", m)
				}
			}
		} else {
			fmt.Fprintln(w, "\n# environment not known: the network's HCA could not be found")
		}
	}
	for i, n := range out.Networks {
		if i > 0 || len(out.Containers) > 0 {
			fmt.Fprintln(w)
		}
		renderNetworkHead(w, n.lsNetwork)
		tprintf(w, "  containers %d\n\n", n.Containers)
		tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
		fmt.Fprintln(tw, "CONTAINER\tINTERFACE\tIPV4\tIPV6\tGID INDEX\tGIDS\tMOVED (GIVEN->NOW)\tRDMA")
		for _, ep := range n.Endpoints {
			idx := "-"
			if ep.GIDIndex != nil {
				idx = strconv.Itoa(*ep.GIDIndex)
			}
			var gids []string
			for _, g := range ep.GIDs {
				gids = append(gids, strconv.Itoa(g.Index))
			}
			tprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", dash(firstNonEmpty(ep.Container, "? endpoint "+shortID(ep.ID))),
				dash(ep.Ifname), dash(ep.IPv4), dash(ep.IPv6), idx, dash(strings.Join(gids, ",")), dash(movedCell(ep.GIDDrift)), readiness(ep))
		}
		_ = tw.Flush()
	}
}

func renderNetworkHead(w io.Writer, n lsNetwork) {
	tprintf(w, "network %s (%s), driver %s\n", n.Name, shortID(n.ID), n.Driver)
	port := "-"
	if n.HCA != "" {
		port = fmt.Sprintf("%s port %d", n.HCA, n.Port)
		if n.PortState != "" {
			port += " " + n.PortState
		}
		if n.LinkLayer != "" {
			port += " " + n.LinkLayer
		}
	}
	tprintf(w, "  parent     %s\n", dash(n.Parent))
	for _, sn := range n.Subnets {
		if sn.IPRange != "" && sn.IPRange != sn.Subnet {
			tprintf(w, "  subnet     %s, this host's range %s\n", sn.Subnet, sn.IPRange)
		} else {
			tprintf(w, "  subnet     %s (no --ip-range: hosts that share the subnet need ranges of their own)\n", sn.Subnet)
		}
	}
	tprintf(w, "  HCA        %s\n", port)
	if n.NetnsMode != "" {
		tprintf(w, "  netns mode %s\n", n.NetnsMode)
	}
	tprintf(w, "  GID table  %s\n", gidCell(n.GIDTable))
	if n.GIDCheck != "" {
		check := n.GIDCheck
		if n.GIDCheckNote != "" {
			check += " (works as warn here: " + n.GIDCheckNote + ")"
		}
		tprintf(w, "  gid check  %s\n", check)
	}
	if n.TrafficClass != nil || n.ServiceLevel != nil {
		var q []string
		if n.TrafficClass != nil {
			q = append(q, fmt.Sprintf("traffic class %d (DSCP %d)", *n.TrafficClass, *n.TrafficClass>>2))
		}
		if n.ServiceLevel != nil {
			q = append(q, fmt.Sprintf("service level %d", *n.ServiceLevel))
		}
		tprintf(w, "  QoS        %s\n", strings.Join(q, ", "))
	}
	tprintf(w, "  run flags  %s\n", dash(strings.Join(n.DeviceFlags, " ")))
	for _, p := range n.Problems {
		tprintf(w, "  problem:   %s\n", p)
	}
	for _, m := range n.Missing {
		tprintf(w, "  not known: %s\n", m)
	}
}

func renderEndpoint(w io.Writer, ep inspectEndpoint) {
	ifname := dash(ep.Ifname)
	if ep.HostIfname != "" {
		ifname += " (host link " + ep.HostIfname + ")"
	}
	tprintf(w, "  interface  %s\n", ifname)
	var addrs []string
	for _, a := range []struct{ k, v string }{{"IPv4", ep.IPv4}, {"IPv6", ep.IPv6}, {"MAC", ep.MAC}} {
		if a.v != "" {
			addrs = append(addrs, a.k+" "+a.v)
		}
	}
	tprintf(w, "  addresses  %s\n", dash(strings.Join(addrs, ", ")))
	if len(ep.GIDs) == 0 {
		tprintf(w, "  GIDs       -\n")
	}
	for i, g := range ep.GIDs {
		label := "  GIDs       "
		if i > 0 {
			label = "             "
		}
		tprintf(w, "%s%d  %-10s  %s\n", label, g.Index, g.Type, g.GID)
	}
	if len(ep.GIDDrift) > 0 {
		tprintf(w, "  moved      %s (given->now, -1: gone): the workload keeps the index it was given; restart the container to give it the new one (NCCL 2.21 and later follow it when started with -e NCCL_IB_GID_INDEX=-1)\n", movedCell(ep.GIDDrift))
	}
	for _, c := range ep.AddressConflicts {
		held := "is also held by"
		if c.Probed {
			held = "was probed for by"
		}
		tprintf(w, "  DUPLICATE  %s %s MAC %s on the parent's segment (found %s): RDMA traffic for it may reach the other holder; give each host its own --ip-range of the subnet, then restart the container\n", c.Address, held, c.MAC, c.Seen)
	}
	tprintf(w, "  RDMA       %s\n", readiness(ep))
}

// movedCell shows the entries of an endpoint that moved after it was
// ready: "3->5,2->4", "" when none.
func movedCell(moves []api.GIDMove) string {
	cells := make([]string, len(moves))
	for i, m := range moves {
		cells[i] = fmt.Sprintf("%d->%d", m.GivenIndex, m.Index)
	}
	return strings.Join(cells, ",")
}

func readiness(ep inspectEndpoint) string {
	switch {
	case ep.RDMAReady == nil:
		if ep.GIDIndex != nil {
			return "GID entries present (readiness not known without the daemon)"
		}
		return "not known (the daemon could not be asked)"
	case *ep.RDMAReady:
		return "ready"
	case ep.RDMAReason != "":
		return "not ready: " + ep.RDMAReason
	}
	return "not ready"
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func limitText(v int64) string {
	if v < 0 {
		return "unlimited"
	}
	return strconv.FormatInt(v, 10)
}

// firstNonEmpty is the first of its arguments that is not "".
var firstNonEmpty = cmp.Or[string]

// addrOnly strips a prefix length: 192.168.7.2/24 -> 192.168.7.2.
func addrOnly(cidr string) string {
	if ip, _, err := net.ParseCIDR(cidr); err == nil {
		return ip.String()
	}
	return cidr
}

// addsCap reports whether caps (--cap-add values) give capability c:
// by name, with or without CAP_, in any case, or ALL.
func addsCap(caps []string, c string) bool {
	for _, a := range caps {
		if n := strings.TrimPrefix(strings.ToUpper(strings.TrimSpace(a)), "CAP_"); n == c || n == "ALL" {
			return true
		}
	}
	return false
}

// envOf is the value of the variable key in env (KEY=VALUE), "" when it
// is not set; the last one counts, as in docker run -e.
func envOf(env []string, key string) string {
	v := ""
	for _, kv := range env {
		if k, val, ok := strings.Cut(kv, "="); ok && k == key {
			v = val
		}
	}
	return v
}
