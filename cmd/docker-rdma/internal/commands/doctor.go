package commands

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"unicode"

	"github.com/rdma-macvlan/rdma-macvlan/cmd/docker-rdma/internal/docker"
	"github.com/rdma-macvlan/rdma-macvlan/cmd/docker-rdma/internal/fabric"
	"github.com/rdma-macvlan/rdma-macvlan/cmd/docker-rdma/internal/gpu"
	"github.com/rdma-macvlan/rdma-macvlan/cmd/docker-rdma/internal/runflags"
	"github.com/rdma-macvlan/rdma-macvlan/netns"
	"github.com/rdma-macvlan/rdma-macvlan/rdma"
)

// Check results, worst last.
const (
	statusOK   = "ok"
	statusInfo = "info"
	statusWarn = "warn"
	statusFail = "fail"
)

// check is one line of docker rdma doctor.
type check struct {
	Name   string `json:"name"`
	Status string `json:"status"`
	Detail string `json:"detail"`
	Fix    string `json:"fix,omitempty"`
}

type doctorOutput struct {
	SysfsRoot string  `json:"sysfs_root"`
	Checks    []check `json:"checks"`
	Failures  int     `json:"failures"`
	Warnings  int     `json:"warnings"`
	// OK is false when something blocks RDMA in containers.
	OK bool `json:"ok"`
	// Fabric and GPUTopology are the facts behind the fabric and GPU
	// checks (doctor_lossless.go).
	Fabric      []fabric.Report `json:"fabric,omitempty"`
	GPUTopology *gpuTopology    `json:"gpu_topology,omitempty"`
}

type doctor struct {
	s       *session
	root    string
	image   string
	memlock string
	// trafficClass is --traffic-class, -1 when not given.
	trafficClass int
	out          doctorOutput
}

func (d *doctor) add(name, status, detail, fix string) {
	d.out.Checks = append(d.out.Checks, check{Name: name, Status: status, Detail: detail, Fix: fix})
	switch status {
	case statusFail:
		d.out.Failures++
	case statusWarn:
		d.out.Warnings++
	}
}

func cmdDoctor(s *session, args []string) int {
	fs, format := newFlagSet("doctor", s.env)
	commonFlags(s, fs)
	d := &doctor{s: s}
	fs.StringVar(&d.root, "sysfs-root", "/", "root under which sys/ is read (a test tree, or the host's /)")
	fs.StringVar(&d.image, "image", "", "a local image with cat, to measure the engine's memlock limits (never pulled)")
	fs.StringVar(&d.memlock, "memlock", "", "the memlock limit to try with --image (default unlimited, as docker rdma run)")
	fs.IntVar(&d.trafficClass, "traffic-class", -1, "the traffic class (IP ToS byte, 0-255) RoCE is sent with: check that it lands on a PFC priority (default: each network's -o traffic_class)")
	if _, status, ok := parseCommand(s, fs, format, args, false); !ok {
		return status
	}
	if d.trafficClass < -1 || d.trafficClass > 255 {
		tprintf(s.env.Stderr, "docker rdma doctor: --traffic-class %d: want 0-255 (the IP ToS byte, as NCCL_IB_TC takes it)\n", d.trafficClass)
		return exitUsage
	}
	memlock, err := runflags.ParseMemlock(d.memlock)
	if err != nil {
		tprintf(s.env.Stderr, "docker rdma doctor: --memlock: %v\n", err)
		return exitUsage
	}
	if strings.HasPrefix(d.image, "-") || strings.ContainsFunc(d.image, unicode.IsSpace) || strings.ContainsFunc(d.image, unicode.IsControl) {
		tprintf(s.env.Stderr, "docker rdma doctor: --image %s is not an image name: pass a local image, e.g. --image busybox\n", shellQuote(d.image))
		return exitUsage
	}
	d.out.SysfsRoot = d.root
	d.out.Checks = []check{}
	engine := d.checkEngine()
	if engine {
		d.checkPlugins()
	}
	d.checkRDMA()
	if engine {
		d.checkCDI()
		d.checkMemlock(memlock)
	}
	d.checkLossless(engine)
	d.out.OK = d.out.Failures == 0
	if *format == "json" {
		writeJSON(s.env.Stdout, d.out)
	} else {
		renderDoctor(s.env.Stdout, d.out)
	}
	if !d.out.OK {
		return 1
	}
	return 0
}

func (d *doctor) checkEngine() bool {
	info, err := d.s.dockerInfo()
	if err != nil {
		d.add("docker", statusFail, err.Error(), "start the Docker daemon, or point docker at it (DOCKER_HOST, --context)")
		return false
	}
	d.add("docker", statusOK, fmt.Sprintf("Docker %s on %s, kernel %s", info.ServerVersion, info.Name, info.KernelVersion), "")
	if local, host := d.s.local(); !local {
		d.add("host", statusWarn, "Docker runs on "+host+"; the sysfs and /dev checks below describe this machine", "run docker rdma doctor on "+host)
	}
	return true
}

// checkPlugins checks that an rdma-macvlan plugin is installed and enabled
// and that its daemon answers, and reports the networks' problems.
func (d *doctor) checkPlugins() {
	s := d.s
	var backends []*backend
	if s.opts.socket != "" {
		backends = append(backends, s.backendAt(s.opts.socket, nil, "--socket"))
		d.add("plugin", statusInfo, "using the daemon at "+s.opts.socket+" (--socket)", "")
	} else {
		if _, err := s.allPlugins(); err != nil {
			d.add("plugin", statusWarn, "docker plugin ls: "+err.Error(), "")
		}
		ps := s.rdmaPlugins()
		for i := range ps {
			p := ps[i]
			d.checkMounts(p)
			if !p.Enabled {
				d.add("plugin", statusFail, fmt.Sprintf("managed plugin %s (id %s) is disabled", p.Name, shortID(p.ID)), "docker plugin enable "+p.Name)
				continue
			}
			d.add("plugin", statusOK, fmt.Sprintf("managed plugin %s (id %s) is enabled; its networks: docker network create -d %s ...", p.Name, shortID(p.ID), p.Name), "")
			if src := p.MountSource("sysfs"); src != "" && filepath.Clean(src) != filepath.Join(d.root, "sys") {
				d.add("plugin", statusInfo, fmt.Sprintf("plugin %s reads sysfs from %s; the checks below read %s", p.Name, src, filepath.Join(d.root, "sys")),
					"to check what the plugin sees: docker rdma doctor --sysfs-root "+filepath.Dir(src))
			}
			backends = append(backends, s.backendAt(s.pluginSocket(p), &ps[i], "managed plugin "+p.Name))
		}
		legacy := filepath.Join(s.env.PluginsDir, legacyName+".sock")
		if s.opts.plugin != "" {
			legacy = filepath.Join(s.env.PluginsDir, trimTag(s.opts.plugin)+".sock")
		}
		if _, err := os.Stat(legacy); err == nil || errors.Is(err, fs.ErrPermission) {
			d.add("plugin", statusOK, "legacy plugin socket "+legacy+" is there; its networks: docker network create -d "+trimTag(firstNonEmpty(s.opts.plugin, legacyName))+" ...", "")
			backends = append(backends, s.backendAt(legacy, nil, "legacy plugin"))
		}
		if len(ps) == 0 && len(backends) == 0 {
			what := "no managed plugin with rdma-macvlan's manifest (socket rdma-macvlan.sock, entrypoint /rdma-macvlan)"
			if s.opts.plugin != "" {
				what = "no managed network plugin named " + s.opts.plugin
			}
			d.add("plugin", statusFail, "no rdma-macvlan plugin: "+what+" and no legacy socket "+legacy, installHint)
		}
	}
	names := map[string]string{}
	if nets, err := s.cli.Networks(s.ctx); err == nil {
		for _, n := range nets {
			names[n.ID] = n.Name
		}
	}
	for _, b := range backends {
		st, err := s.status(b)
		if err != nil {
			status, fix := statusFail, "check the plugin's log (the daemon's journal: journalctl -u docker | grep rdma-macvlan)"
			if errors.Is(err, fs.ErrPermission) || strings.Contains(err.Error(), "cannot read the daemon's socket") {
				status, fix = statusWarn, "run as root (sudo docker rdma doctor) to see GID readiness"
			}
			d.add("daemon", status, err.Error(), fix)
			continue
		}
		nEP, nReady := 0, 0
		for _, n := range st.Networks {
			for _, e := range n.Endpoints {
				nEP++
				if e.RDMAReady {
					nReady++
				}
			}
		}
		d.add("daemon", statusOK, fmt.Sprintf("answers on %s: %d network(s), %d endpoint(s), %d RDMA-ready", b.Socket, len(st.Networks), nEP, nReady), "")
		for _, n := range st.Networks {
			name := firstNonEmpty(names[n.ID], shortID(n.ID)+" (unknown to Docker)")
			for _, p := range n.Problems {
				d.add("network "+name, statusFail, p, "")
			}
			if n.HCA != "" && n.PortState != "" && n.PortState != "ACTIVE" {
				d.add("network "+name, statusFail, fmt.Sprintf("port %s/%d is %s", n.HCA, n.Port, n.PortState), "bring the link up: ip link set "+n.Parent+" up; check the cable and switch port")
			}
			for _, e := range n.Endpoints {
				if e.Sandbox != "" && !e.RDMAReady {
					d.add("network "+name, statusWarn, fmt.Sprintf("endpoint %s (%s) is not RDMA-ready: %s", shortID(e.ID), firstNonEmpty(e.IPv4, e.IPv6), e.RDMAReason), "docker rdma inspect "+name)
				}
			}
		}
	}
}

// Filesystems a reboot empties (statfs magic numbers).
const (
	tmpfsMagic = 0x01021994
	ramfsMagic = 0x858458f6
)

// checkMounts checks that the host directories of plugin p's state and cdi
// mounts exist and are on a disk. The engine cannot enable a plugin whose
// mount source is missing, and when that happens at boot with a network on
// the plugin, Docker 20.10 and the current engine panic at start-up. Only
// on the engine's host: elsewhere the paths are not the engine's.
func (d *doctor) checkMounts(p docker.Plugin) {
	if local, _ := d.s.local(); !local || d.s.env.MountSource == nil {
		return
	}
	for _, m := range []struct{ name, what, fix string }{
		{"state", "its networks and endpoints", "/var/lib/rdma-macvlan"},
		{"cdi", "its CDI specs", "/etc/cdi"},
	} {
		src := p.MountSource(m.name)
		if src == "" {
			continue
		}
		name := "mount " + m.name
		reset := fmt.Sprintf("docker plugin disable -f %s && docker plugin set %s %s.source=%s && docker plugin enable %s", p.Name, p.Name, m.name, m.fix, p.Name)
		st, magic, err := d.s.env.MountSource(src)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			fix := fmt.Sprintf("mkdir -p %s && docker plugin enable %s", src, p.Name)
			if volatilePath(src) {
				fix = "mkdir -p " + m.fix + " && " + reset
			}
			d.add(name, statusFail, fmt.Sprintf("plugin %s mounts %s from %s, which does not exist: Docker cannot enable the plugin, and at boot Docker then panics if a network uses it", p.Name, m.what, src), fix)
			continue
		case err != nil:
			d.add(name, statusWarn, fmt.Sprintf("plugin %s mounts %s from %s: %v", p.Name, m.what, src, err), "run as root: sudo docker rdma doctor")
			continue
		case !st.IsDir():
			d.add(name, statusFail, fmt.Sprintf("plugin %s mounts %s from %s, which is not a directory", p.Name, m.what, src), reset)
			continue
		}
		if magic == tmpfsMagic || magic == ramfsMagic {
			d.add(name, statusFail, fmt.Sprintf("plugin %s mounts %s from %s, on a tmpfs that a reboot empties: at the next boot Docker cannot enable the plugin, and panics if a network uses it", p.Name, m.what, src),
				"mkdir -p "+m.fix+" && "+reset+" (or make sure "+src+" is created at every boot before Docker starts)")
			continue
		}
		d.add(name, statusOK, fmt.Sprintf("plugin %s mounts %s from %s, on a disk", p.Name, m.what, src), "")
	}
}

// volatilePath reports whether path is under /run (or /var/run, its usual
// link), which a reboot empties: a missing source there is best replaced.
func volatilePath(path string) bool {
	p := filepath.Clean(path)
	return p == "/run" || p == "/var/run" || strings.HasPrefix(p, "/run/") || strings.HasPrefix(p, "/var/run/")
}

// checkRDMA checks the RDMA devices, ports, GID tables, netns mode and
// device nodes under the sysfs root.
func (d *doctor) checkRDMA() {
	sys := rdma.NewSysfs(d.root)
	devs, err := sys.Devices()
	if err != nil {
		d.add("RDMA devices", statusFail, err.Error(), "load the NIC's RDMA driver (e.g. mlx5_ib) and ib_uverbs, rdma_ucm: modprobe ib_uverbs rdma_ucm; check: rdma dev show")
		return
	}
	if len(devs) == 0 {
		d.add("RDMA devices", statusFail, "no RDMA devices under "+filepath.Join(d.root, "sys/class/infiniband"), "install a RoCE NIC's RDMA driver (mlx5_ib, irdma, ...) or add Soft-RoCE: rdma link add rxe0 type rxe netdev IFNAME")
		return
	}
	d.checkNetnsMode(sys)
	activeRoCE := 0
	for _, dev := range devs {
		ports, err := sys.Ports(dev)
		if err != nil {
			d.add("RDMA "+dev, statusWarn, err.Error(), "")
			continue
		}
		for _, port := range ports {
			if d.checkPort(sys, dev, port) {
				activeRoCE++
			}
		}
		d.checkNodes(sys, dev)
	}
	if activeRoCE == 0 {
		d.add("RDMA ports", statusFail, "no active RoCE (Ethernet) port", "bring a RoCE port up: ip link set IFNAME up; check: rdma link show")
	}
}

func (d *doctor) checkNetnsMode(sys *rdma.Sysfs) {
	var fromNetlink func() (string, error)
	if d.root == "/" {
		// The live mode; the sysfs parameter is only the boot-time value.
		fromNetlink = func() (string, error) {
			h, err := netns.Current()
			if err != nil {
				return "", err
			}
			defer h.Close()
			return h.RdmaNetnsMode()
		}
	}
	mode, source, err := rdma.NetnsMode(fromNetlink, sys)
	switch {
	case err != nil:
		d.add("netns mode", statusWarn, err.Error(), "check: rdma system show netns")
	case mode == rdma.NetnsShared:
		d.add("netns mode", statusOK, "shared (from "+source+"): containers on this host can all use the HCAs", "")
	default:
		d.add("netns mode", statusFail, mode+" (from "+source+"): an HCA belongs to one network namespace, containers cannot share it",
			"switch to shared while no container runs: rdma system set netns shared; to keep it across reboots: "+permanentShared)
	}
	if err == nil {
		d.checkBootNetnsMode(mode)
	}
}

// permanentShared is how to make the shared mode the one a host boots in.
const permanentShared = "options ib_core netns_mode=1 in /etc/modprobe.d/ib_core.conf (and, where ib_core is in the initramfs, update-initramfs -u)"

// checkBootNetnsMode says whether the mode the host runs in now is also the
// one it starts in after a reboot: the mode cannot be switched while a
// container runs, so a host that boots exclusive cannot be fixed later
// without stopping every container.
func (d *doctor) checkBootNetnsMode(live string) {
	boot := rdma.BootNetnsMode(d.root)
	switch {
	case boot.Mode == rdma.NetnsShared && live == rdma.NetnsShared:
		d.add("netns mode at boot", statusOK, "shared after a reboot too (set by: "+boot.From+")", "")
	case boot.Mode == rdma.NetnsShared:
		d.add("netns mode at boot", statusInfo, "a reboot starts shared (set by: "+boot.From+"), so whatever switched it to exclusive is not in the boot configuration", "")
	case live == rdma.NetnsShared:
		d.add("netns mode at boot", statusWarn, "shared now, but the next boot starts exclusive (set by: "+boot.From+"): after a reboot containers cannot share the HCAs",
			"remove that setting, or set "+permanentShared)
	default:
		d.add("netns mode at boot", statusInfo, "exclusive at boot too (set by: "+boot.From+")", "to keep shared across reboots once switched: remove that setting, or set "+permanentShared)
	}
}

// checkPort reports one port and its GID table; it returns whether the port
// is an active RoCE port.
func (d *doctor) checkPort(sys *rdma.Sysfs, dev string, port int) bool {
	name := fmt.Sprintf("port %s/%d", dev, port)
	pi, err := sys.Port(dev, port)
	if err != nil {
		d.add(name, statusWarn, err.Error(), "")
		return false
	}
	gids, gerr := sys.GIDs(dev, port)
	netdev := ""
	for _, g := range gids {
		if g.Ndev != "" {
			netdev = g.Ndev
			break
		}
	}
	desc := fmt.Sprintf("%s %s %s", pi.State, pi.PhysState, pi.LinkLayer)
	if netdev != "" {
		desc += ", netdev " + netdev
	}
	switch {
	case pi.LinkLayer != "Ethernet":
		d.add(name, statusInfo, desc+": not RoCE, rdma-macvlan cannot use it", "")
		return false
	case !pi.Active():
		fix := "check the cable and switch port; ip link set " + firstNonEmpty(netdev, "IFNAME") + " up"
		d.add(name, statusWarn, desc, fix)
		return false
	}
	d.add(name, statusOK, desc, "")
	if gerr != nil {
		d.add("GIDs "+dev+"/"+strconv.Itoa(port), statusWarn, gerr.Error(), "")
		return true
	}
	types := sys.RoCETypesPerAddress(dev, port)
	used, size := len(gids), pi.GIDTableSize
	free := max(size-used, 0)
	detail := fmt.Sprintf("%s %d/%d used, room for %d more IPv4 container(s) (%d entr%s each)", bar(used, size), used, size, free/max(types, 1), types, plural(types, "y", "ies"))
	switch {
	case free < types:
		d.add("GIDs "+dev+"/"+strconv.Itoa(port), statusFail, detail+": full, new containers get no RoCE GID",
			"remove stopped containers' endpoints (docker rm), or spread networks over more ports")
	case size > 0 && used*10 >= size*9:
		d.add("GIDs "+dev+"/"+strconv.Itoa(port), statusWarn, detail, "the table is nearly full: plan more ports, or IPv4-only networks (an IPv6 link-local costs entries too)")
	default:
		d.add("GIDs "+dev+"/"+strconv.Itoa(port), statusOK, detail, "")
	}
	return true
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// checkNodes checks that the device nodes of dev exist on the host as the
// right character devices, readable and writable by everyone.
func (d *doctor) checkNodes(sys *rdma.Sysfs, dev string) {
	name := "devices " + dev
	nodes, err := sys.DeviceNodes(dev)
	switch {
	case errors.Is(err, rdma.ErrNoUverbs):
		d.add(name, statusFail, err.Error(), "modprobe ib_uverbs")
		return
	case errors.Is(err, rdma.ErrNoRdmaCM):
		d.add("rdma_cm", statusWarn, "rdma_cm is not registered: librdmacm applications (rping, NCCL's, MPI's connection setup) will fail", "modprobe rdma_ucm")
	case err != nil:
		d.add(name, statusFail, err.Error(), "")
		return
	}
	var have, bad []string
	var fix []string
	worst := statusOK
	for _, n := range nodes {
		p := d.s.env.devPath(n.Path)
		fi, err := os.Stat(p)
		want := fmt.Sprintf("%d:%d", n.Major, n.Minor)
		if err != nil {
			bad = append(bad, fmt.Sprintf("%s (%s) missing", n.Path, want))
			fix = append(fix, fmt.Sprintf("mknod -m 666 %s c %d %d", n.Path, n.Major, n.Minor))
			worst = statusFail
			continue
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if fi.Mode()&fs.ModeCharDevice == 0 || !ok || fmt.Sprintf("%d:%d", unixMajor(st.Rdev), unixMinor(st.Rdev)) != want {
			bad = append(bad, fmt.Sprintf("%s is not the character device %s", n.Path, want))
			worst = statusFail
			continue
		}
		if fi.Mode().Perm()&0o006 != 0o006 {
			bad = append(bad, fmt.Sprintf("%s is mode %v: only root in a container can open it", n.Path, fi.Mode().Perm()))
			fix = append(fix, "chmod 666 "+n.Path+" (rdma-core's udev rules do this)")
			if worst == statusOK {
				worst = statusWarn
			}
			continue
		}
		have = append(have, n.Path+" "+want)
	}
	detail := strings.Join(append(have, bad...), ", ")
	if len(fix) > 0 && worst == statusFail {
		fix = append([]string{"udevadm trigger --subsystem-match=infiniband_verbs --subsystem-match=misc, or"}, fix...)
	}
	d.add(name, worst, detail, strings.Join(fix, "; "))
}

func unixMajor(dev uint64) uint64 { return (dev>>8)&0xfff | (dev>>32)&^0xfff }
func unixMinor(dev uint64) uint64 { return dev&0xff | (dev>>12)&^0xff }

func (d *doctor) checkCDI() {
	info, _ := d.s.dockerInfo()
	if len(info.CDISpecDirs) == 0 {
		d.add("CDI", statusInfo, fmt.Sprintf("Docker %s does not resolve CDI devices: rdma-macvlan-runtime injects the CDI edits itself (docker run --device rdma-macvlan/hca=... needs Docker 25 or later)", info.ServerVersion),
			"nothing to do; for --device rdma-macvlan/hca=NAME use Docker >= 28.2 (or 25-28.1 with \"features\": {\"cdi\": true})")
		return
	}
	d.add("CDI", statusOK, "the engine reads CDI specs from "+strings.Join(info.CDISpecDirs, ", "), "")
	for _, p := range d.s.rdmaPlugins() {
		src := p.MountSource("cdi")
		if src == "" {
			continue
		}
		if !slices.ContainsFunc(info.CDISpecDirs, func(dir string) bool { return filepath.Clean(dir) == filepath.Clean(src) }) {
			d.add("CDI", statusWarn, fmt.Sprintf("plugin %s writes its CDI specs to %s, which the engine does not read", p.Name, src),
				fmt.Sprintf("docker plugin disable %s && docker plugin set %s cdi.source=%s && docker plugin enable %s (or add %s to cdi-spec-dirs in daemon.json)",
					p.Name, p.Name, info.CDISpecDirs[0], p.Name, src))
		}
	}
}

// checkMemlock reports the engine's default memlock limit and whether it
// accepts the one docker rdma run asks for. Both need an image: without
// --image nothing is run (and nothing is ever pulled).
func (d *doctor) checkMemlock(memlock string) {
	info, _ := d.s.dockerInfo()
	if d.image == "" {
		def := "8 MiB"
		if newer, known := gpu.KernelAtLeast(info.KernelVersion, [2]int{5, 16}); known && !newer {
			def = "64 KiB"
		}
		d.add("memlock", statusInfo, fmt.Sprintf("not measured (pass --image IMAGE, a local image with cat); kernel %s gives processes %s by default, docker rdma run asks for memlock=%s", info.KernelVersion, def, memlock), "")
		return
	}
	base := []string{"run", "--rm", "--pull", "never", "--network", "none", "--entrypoint", "cat"}
	// "--" ends docker run's flags: the image is never read as one.
	out, err := d.s.cli.Output(d.s.ctx, append(base, "--", d.image, "/proc/self/limits")...)
	if err != nil {
		d.add("memlock", statusWarn, "could not measure with "+d.image+": "+err.Error(), "pass a local image that has cat (it is never pulled)")
		return
	}
	def := memlockOf(out)
	out, err = d.s.cli.Output(d.s.ctx, append(append(base[:len(base):len(base)], "--ulimit", "memlock="+memlock), "--", d.image, "/proc/self/limits")...)
	var de *docker.Error
	switch {
	case err != nil && errors.As(err, &de) && memlockRefused([]byte(de.Stderr)):
		d.add("memlock", statusFail, fmt.Sprintf("containers get %s by default; the engine refuses memlock=%s (it cannot raise RLIMIT_MEMLOCK)", def, memlock),
			"raise the engine's limit (LimitMEMLOCK=infinity in docker.service and containerd.service) or ask for less: docker rdma run --memlock SIZE, with SIZE at most the default's hard limit")
	case err != nil:
		d.add("memlock", statusWarn, fmt.Sprintf("containers get %s by default; trying memlock=%s failed: %v", def, memlock, err), "")
	default:
		d.add("memlock", statusOK, fmt.Sprintf("containers get %s by default; memlock=%s is accepted (gives %s)", def, memlock, memlockOf(out)), "")
	}
}

// memlockOf reads "Max locked memory  SOFT  HARD  bytes" from a
// /proc/PID/limits text.
func memlockOf(limits []byte) string {
	sc := bufio.NewScanner(strings.NewReader(string(limits)))
	for sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, "Max locked memory"); ok {
			f := strings.Fields(rest)
			if len(f) >= 2 {
				return f[0] + ":" + f[1]
			}
		}
	}
	return "an unknown limit"
}

func renderDoctor(w io.Writer, out doctorOutput) {
	tprintf(w, "docker rdma doctor (sysfs under %s)\n\n", out.SysfsRoot)
	width := 0
	for _, c := range out.Checks {
		width = max(width, len(c.Name))
	}
	for _, c := range out.Checks {
		tprintf(w, "%-4s  %-*s  %s\n", strings.ToUpper(c.Status), width, c.Name, c.Detail)
		if c.Fix != "" && c.Status != statusOK {
			tprintf(w, "      %-*s  fix: %s\n", width, "", c.Fix)
		}
	}
	renderGPUTopology(w, out.GPUTopology)
	fmt.Fprintln(w)
	switch {
	case out.Failures > 0:
		tprintf(w, "%d problem(s) block RDMA in containers, %d warning(s)\n", out.Failures, out.Warnings)
	case out.Warnings > 0:
		tprintf(w, "nothing blocks RDMA; %d warning(s)\n", out.Warnings)
	default:
		fmt.Fprintln(w, "nothing blocks RDMA")
	}
}
