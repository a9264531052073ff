package ociruntime

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"tags.cncf.io/container-device-interface/pkg/cdi"

	"github.com/rdma-macvlan/rdma-macvlan/api"
	"github.com/rdma-macvlan/rdma-macvlan/internal/rdmaenv"
	"github.com/rdma-macvlan/rdma-macvlan/internal/rdmaexec"
)

// Choice is what the container asked for through its environment.
type Choice struct {
	// Devices is RDMA_MACVLAN_DEVICES: nil for auto, else the names given.
	Devices []string
	None    bool
	NoWait  bool
	// GIDTimeout is RDMA_MACVLAN_GID_TIMEOUT; 0 when unset.
	GIDTimeout     time.Duration
	RoCE           rdmaenv.Choice
	AcceptMismatch bool
	NoIPCLock      bool
	HostSysfs      bool
	// Limit is the RDMA cgroup limit asked; nil for none.
	Limit *specs.LinuxRdma
}

// flag is a yes/no variable: 1/true/yes or 0/false/no (or unset: def).
func flagVar(env []string, name string, def bool) (bool, error) {
	v, ok := rdmaexec.LookupEnv(env, name)
	if !ok || v == "" {
		return def, nil
	}
	switch strings.ToLower(v) {
	case "1", "true", "yes":
		return true, nil
	case "0", "false", "no":
		return false, nil
	}
	return false, fmt.Errorf("%s=%q: want 1 or 0", name, v)
}

// ParseChoice reads the container's variables; an invalid value is an
// error that names the variable.
func ParseChoice(env []string) (Choice, error) {
	var c Choice
	switch v, _ := rdmaexec.LookupEnv(env, api.EnvDevices); strings.TrimSpace(v) {
	case "", api.DevicesAuto:
	case api.DevicesNone:
		c.None = true
		return c, nil
	default:
		for _, n := range strings.Split(v, ",") {
			if n = strings.TrimSpace(n); n != "" {
				c.Devices = append(c.Devices, n)
			}
		}
		if len(c.Devices) == 0 {
			return c, fmt.Errorf("%s=%q: want auto, none or a comma list of HCA or CDI device names", api.EnvDevices, v)
		}
	}
	var err error
	if c.NoWait, err = flagVar(env, api.EnvNoWait, false); err != nil {
		return c, err
	}
	if c.AcceptMismatch, err = flagVar(env, api.EnvAcceptMismatch, false); err != nil {
		return c, err
	}
	ipcLock, err := flagVar(env, api.EnvIPCLock, true)
	if err != nil {
		return c, err
	}
	c.NoIPCLock = !ipcLock
	if v, ok := rdmaexec.LookupEnv(env, api.EnvGIDTimeout); ok && v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			return c, fmt.Errorf("%s=%q: want a duration such as 10s or 1m", api.EnvGIDTimeout, v)
		}
		c.GIDTimeout = d
	}
	version, _ := rdmaexec.LookupEnv(env, api.EnvRoCEVersion)
	family, _ := rdmaexec.LookupEnv(env, api.EnvGIDFamily)
	if c.RoCE, err = rdmaenv.ParseChoice(version, family); err != nil {
		return c, fmt.Errorf("%s/%s: %w", api.EnvRoCEVersion, api.EnvGIDFamily, err)
	}
	switch v, _ := rdmaexec.LookupEnv(env, api.EnvSysfs); v {
	case "", api.SysfsFiltered:
	case api.SysfsHost:
		c.HostSysfs = true
	default:
		return c, fmt.Errorf("%s=%q: want %s or %s", api.EnvSysfs, v, api.SysfsFiltered, api.SysfsHost)
	}
	if v, ok := rdmaexec.LookupEnv(env, api.EnvRDMALimit); ok && v != "" {
		if c.Limit, err = parseLimit(v); err != nil {
			return c, err
		}
	}
	return c, nil
}

// parseLimit reads "hca_handle=N,hca_object=M" (either or both).
func parseLimit(v string) (*specs.LinuxRdma, error) {
	var l specs.LinuxRdma
	bad := fmt.Errorf("%s=%q: want %s=N,%s=M (either or both; N and M from 0 to %d)", api.EnvRDMALimit, v, api.RDMALimitHandle, api.RDMALimitObject, math.MaxInt32)
	for _, f := range strings.Split(v, ",") {
		k, val, ok := strings.Cut(strings.TrimSpace(f), "=")
		n, err := strconv.ParseUint(val, 10, 31)
		if !ok || err != nil {
			return nil, bad
		}
		u := uint32(n)
		switch k {
		case api.RDMALimitHandle:
			l.HcaHandles = &u
		case api.RDMALimitObject:
			l.HcaObjects = &u
		default:
			return nil, bad
		}
	}
	return &l, nil
}

// Plan is what a container gets.
type Plan struct {
	// Ports are the qualified CDI names of its HCA ports; HCAs their HCAs.
	Ports []string
	HCAs  []string
	// Rails are its rdma-macvlan networks whose HCA port it gets:
	// rdma-exec waits for their entries.
	Rails []Rail
}

// Decide picks the container's ports: its rails' by default, the ones
// RDMA_MACVLAN_DEVICES names otherwise. A name must be a port the plugins
// serve (any of them, so that a --net host container can name one): the
// plugin publishes a port's CDI device only while a network uses it.
func Decide(c Choice, f *Found) (*Plan, error) {
	p := &Plan{}
	add := func(port, hca string) {
		if slices.Contains(p.Ports, port) {
			return
		}
		p.Ports = append(p.Ports, port)
		if !slices.Contains(p.HCAs, hca) {
			p.HCAs = append(p.HCAs, hca)
		}
	}
	if c.Devices == nil {
		for _, r := range f.Rails {
			add(r.CDIDevice, r.HCA)
		}
		p.Rails = f.Rails
		return p, nil
	}
	for _, name := range c.Devices {
		q := name
		if !strings.Contains(q, "=") {
			q = api.CDIKind + "=" + name
		}
		if hca, ok := f.Ports[q]; ok {
			add(q, hca)
			continue
		}
		n := 0
		for _, port := range slices.Sorted(maps.Keys(f.Ports)) {
			if hca := f.Ports[port]; hca == name {
				add(port, hca)
				n++
			}
		}
		if n == 0 {
			var have []string
			for port := range f.Ports {
				have = append(have, strings.TrimPrefix(port, api.CDIKind+"="))
			}
			sort.Strings(have)
			served := "none"
			if len(have) > 0 {
				served = strings.Join(have, ", ")
			}
			return nil, fmt.Errorf("%s names %q, which no rdma-macvlan network serves (served: %s); see `docker rdma ls`", api.EnvDevices, name, served)
		}
	}
	for _, r := range f.Rails {
		if slices.Contains(p.Ports, r.CDIDevice) {
			p.Rails = append(p.Rails, r)
		}
	}
	return p, nil
}

// Edit is what Apply needs besides the plan.
type Edit struct {
	CDIDir string
	// Helper is rdma-exec on the host; "" leaves the process as it is.
	Helper string
	// GIDTimeout is rdma-exec's wait (the container's, else the plugin's).
	GIDTimeout time.Duration
	// View is the host directory of the sysfs view ("" for none): its
	// infiniband and infiniband_verbs subdirectories are mounted.
	View string
}

// ExecEdits are what the processes docker exec starts in a container get
// too: the create's CAP_IPC_LOCK and memlock, so that they can use RDMA as
// the workload does, and read its /proc (the kernel lets a process read
// another's environ or trace it only if it holds every capability the
// other has). The engine builds an exec's process from the container's
// configuration, which never saw the runtime's edits.
type ExecEdits struct {
	IPCLock bool               `json:"ipc_lock,omitempty"`
	Memlock *specs.POSIXRlimit `json:"memlock,omitempty"`
}

// Apply gives process p the edits, as Apply gave the container's own.
func (x ExecEdits) Apply(p *specs.Process) {
	if x.IPCLock {
		addIPCLock(p.Capabilities)
	}
	if x.Memlock != nil && !hasRlimit(p.Rlimits, "RLIMIT_MEMLOCK") {
		p.Rlimits = append(p.Rlimits, *x.Memlock)
	}
}

func hasRlimit(rl []specs.POSIXRlimit, typ string) bool {
	for _, r := range rl {
		if r.Type == typ {
			return true
		}
	}
	return false
}

// addIPCLock adds CAP_IPC_LOCK to the bounding set and to the effective and
// permitted sets where they hold anything (a non-root user's are empty);
// it reports whether it added it.
func addIPCLock(caps *specs.LinuxCapabilities) bool {
	if caps == nil || len(caps.Bounding) == 0 {
		return false
	}
	const ipcLock = "CAP_IPC_LOCK"
	caps.Bounding = addCap(caps.Bounding, ipcLock)
	if len(caps.Effective) > 0 {
		caps.Effective = addCap(caps.Effective, ipcLock)
	}
	if len(caps.Permitted) > 0 {
		caps.Permitted = addCap(caps.Permitted, ipcLock)
	}
	return true
}

// memlockUnlimited is RLIM_INFINITY.
const memlockUnlimited = math.MaxUint64

// Apply edits spec for plan; it returns what docker exec's processes must
// get too.
func Apply(spec *specs.Spec, plan *Plan, c Choice, e Edit) (ExecEdits, error) {
	var x ExecEdits
	if spec.Process == nil {
		return x, fmt.Errorf("config.json has no process")
	}
	cache, err := cdi.NewCache(cdi.WithSpecDirs(e.CDIDir), cdi.WithAutoRefresh(false))
	if err != nil && cache == nil {
		return x, fmt.Errorf("CDI specs in %s: %w", e.CDIDir, err)
	}
	if unresolved, err := cache.InjectDevices(spec, plan.Ports...); err != nil {
		if len(unresolved) > 0 {
			return x, fmt.Errorf("the CDI devices %s are not in %s: the runtime's --cdi-dir must be the plugin's cdi mount source (docker rdma runtime install sets it)", strings.Join(unresolved, ", "), e.CDIDir)
		}
		return x, fmt.Errorf("CDI devices %s: %w", strings.Join(plan.Ports, ", "), err)
	}
	memlock := hasRlimit(spec.Process.Rlimits, "RLIMIT_MEMLOCK")
	if !memlock {
		rl := specs.POSIXRlimit{Type: "RLIMIT_MEMLOCK", Hard: memlockUnlimited, Soft: memlockUnlimited}
		spec.Process.Rlimits = append(spec.Process.Rlimits, rl)
		x.Memlock = &rl
	}
	if !c.NoIPCLock {
		x.IPCLock = addIPCLock(spec.Process.Capabilities)
	}
	if c.Limit != nil {
		if spec.Linux == nil {
			spec.Linux = &specs.Linux{}
		}
		if spec.Linux.Resources == nil {
			spec.Linux.Resources = &specs.LinuxResources{}
		}
		if spec.Linux.Resources.Rdma == nil {
			spec.Linux.Resources.Rdma = map[string]specs.LinuxRdma{}
		}
		for _, h := range plan.HCAs {
			spec.Linux.Resources.Rdma[h] = *c.Limit
		}
	}
	if e.View != "" {
		for _, d := range viewDirs {
			spec.Mounts = append(spec.Mounts, specs.Mount{Destination: "/sys/class/" + d, Type: "bind",
				Source: e.View + "/" + d, Options: []string{"rbind", "ro", "nosuid", "nodev", "noexec"}})
		}
	}
	if e.Helper != "" && len(plan.Rails) > 0 {
		spec.Mounts = append(spec.Mounts, specs.Mount{Destination: rdmaexec.ContainerPath, Type: "bind",
			Source: e.Helper, Options: []string{"rbind", "ro", "nosuid", "nodev"}})
		args := []string{rdmaexec.ContainerPath}
		for _, r := range plan.Rails {
			args = append(args, "--net", rdmaexec.FormatNet(rdmaexec.Network{Name: r.Name, HCA: r.HCA, Port: r.Port,
				Subnets: r.Subnets, TrafficClass: r.TrafficClass, ServiceLevel: r.ServiceLevel}))
		}
		args = append(args, "--timeout", e.GIDTimeout.String())
		if c.RoCE.Version != rdmaenv.DefaultChoice.Version {
			args = append(args, "--roce-version", strconv.Itoa(c.RoCE.Version))
		}
		if c.RoCE.Family != "" {
			args = append(args, "--gid-family", c.RoCE.Family)
		}
		if c.AcceptMismatch {
			args = append(args, "--accept-gid-mismatch")
		}
		spec.Process.Args = append(append(args, "--"), spec.Process.Args...)
	}
	return x, nil
}

func addCap(set []string, c string) []string {
	if slices.Contains(set, c) {
		return set
	}
	return append(set, c)
}
