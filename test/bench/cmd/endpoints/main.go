// Command endpoints measures the rdma-macvlan daemon at its socket with real
// netlink: the endpoint life cycle (CreateEndpoint, Join, the move into a
// network namespace the way libnetwork does it, Leave, the move back,
// DeleteEndpoint) with 10, 100 and 1000 live endpoints on one parent, the
// time from process start to serving with 1000 endpoints in state, and the
// daemon's memory at 1000 endpoints.
//
// Everything happens in a network namespace it creates (a veth parent p0,
// one namespace per live endpoint standing in for its container) against a
// fake rxe sysfs tree with a GID table large enough for every endpoint; it
// adds each endpoint's GID entry to the fake table once its address is set
// and removes it with the address, as the kernel would (untimed), so GID
// watches end as they do on a host. Levels run in the order 10, 100, 1000, 1000,
// 100, 10, so that slow drift of a noisy machine shows up in both halves;
// restarts are taken between the two 1000 passes.
//
// Needs root and nsenter. Leaves nothing behind: the namespaces go with
// their handles, the daemon is stopped (and killed with this process by
// Pdeathsig), the temporary directory is removed, also on SIGINT/SIGTERM.
//
// Output in -out: lifecycle.csv (pass,live,op,ms per sample), restart.csv
// (run,endpoints,ms,rss_kb), endpoints.json (memory and settings).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/docker/go-plugins-helpers/network"
	"github.com/rdma-macvlan/rdma-macvlan/driver"
	"github.com/rdma-macvlan/rdma-macvlan/netns"
	"github.com/rdma-macvlan/rdma-macvlan/netns/netnstest"
	"github.com/rdma-macvlan/rdma-macvlan/plugin"
	"github.com/rdma-macvlan/rdma-macvlan/plugin/plugintest"
	"github.com/rdma-macvlan/rdma-macvlan/rdma"
	"github.com/rdma-macvlan/rdma-macvlan/rdma/rdmatest"
	"github.com/rdma-macvlan/rdma-macvlan/test/bench"
	"github.com/sirupsen/logrus"
	"golang.org/x/sys/unix"
)

const (
	parent  = "p0"
	hca     = "rxe0"
	sandbox = "/var/run/docker/netns/bench"
	// The network's pool; live endpoints take 10.200.0.2 upwards, the
	// measured one 10.200.250.1 (addresses exist only in namespaces this
	// program makes; no traffic is sent).
	pool    = "10.200.0.0/16"
	gateway = "10.200.255.254/16"
)

type options struct {
	out        string
	bin        string
	levels     []int
	cycles     int
	warmup     int
	restarts   int
	table      int
	inproc     bool
	cpuprofile string
	logLevel   string
}

func main() {
	var o options
	var levels string
	flag.StringVar(&o.out, "out", "", "directory for the results (required)")
	flag.StringVar(&o.bin, "bin", "", "daemon binary (default: go build ./cmd/rdma-macvlan into a temporary directory)")
	flag.StringVar(&levels, "levels", "10,100,1000", "live endpoint counts, ascending; run up and then down again")
	flag.IntVar(&o.cycles, "cycles", 200, "measured life cycles per level and pass")
	flag.IntVar(&o.warmup, "warmup", 10, "unmeasured life cycles before each pass")
	flag.IntVar(&o.restarts, "restarts", 10, "timed restarts with the largest level in state (0: none)")
	flag.IntVar(&o.table, "table", 1024, "GID table size of the fake rxe port (rxe has 1024: room for 1000 IPv4 endpoints and the default GID)")
	flag.BoolVar(&o.inproc, "inproc", false, "serve the daemon's handler in this process (for -cpuprofile) instead of running the binary")
	flag.StringVar(&o.cpuprofile, "cpuprofile", "", "write a CPU profile of the measured cycles (needs -inproc)")
	flag.StringVar(&o.logLevel, "log-level", "info", "the daemon's log level (its default is info)")
	flag.Parse()
	for _, f := range strings.Split(levels, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 0 {
			fatalf("-levels %q: want counts like 10,100,1000", levels)
		}
		o.levels = append(o.levels, n)
	}
	if o.out == "" {
		fatalf("-out is required")
	}
	if o.cpuprofile != "" && !o.inproc {
		fatalf("-cpuprofile needs -inproc (the daemon binary has no profiling hook)")
	}
	if os.Geteuid() != 0 {
		fatalf("needs root (network namespaces and links)")
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "endpoints:", err)
		os.Exit(1)
	}
}

func fatalf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "endpoints: "+format+"\n", args...)
	os.Exit(2)
}

func say(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "endpoints: "+format+"\n", args...)
}

// world is everything this run made.
type world struct {
	o       options
	host    *netns.Handle
	base    string
	sysfs   string
	state   string
	cdi     string
	sock    string
	daemon  daemon
	c       *plugintest.Client
	nid     string
	live    []*liveEP
	samples *os.File
	over    overheads
}

// overheads are the plugin's own time per call, by live level: above the
// kernel's macvlan add (CreateEndpoint) and delete (DeleteEndpoint) timed
// in the same cycle; Join and Leave have no kernel floor.
type overheads map[int]*[4][]float64

var overheadOps = [4]string{"CreateEndpoint", "Join", "Leave", "DeleteEndpoint"}

func (o *overheads) add(live int, v ...float64) {
	if *o == nil {
		*o = overheads{}
	}
	if (*o)[live] == nil {
		(*o)[live] = new([4][]float64)
	}
	for i := range overheadOps {
		(*o)[live][i] = append((*o)[live][i], v[i])
	}
}

// overhead is one row of results.Overhead.
type overhead struct {
	Live int     `json:"live"`
	Op   string  `json:"op"`
	P50  float64 `json:"p50_ms"`
	P99  float64 `json:"p99_ms"`
}

// summary returns p50 and p99 per level and call, and prints them.
func (o overheads) summary(levels []int) []overhead {
	var out []overhead
	for _, live := range levels {
		if o[live] == nil {
			continue
		}
		for i, op := range overheadOps {
			s := bench.Summarize(o[live][i])
			out = append(out, overhead{Live: live, Op: op, P50: s.Median, P99: s.P99})
			say("overhead above the kernel floor, %d live: %s p50 %.2f ms, p99 %.2f ms", live, op, s.Median, s.P99)
		}
	}
	return out
}

type liveEP struct {
	id, ip string
	ns     *netns.Handle
}

func run(ctx context.Context, o options) (retErr error) {
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return err
	}
	base, err := os.MkdirTemp("", "rmv-bench-ep.")
	if err != nil {
		return err
	}
	w := &world{o: o, base: base, sysfs: filepath.Join(base, "sysfs"), state: filepath.Join(base, "state"),
		cdi: filepath.Join(base, "cdi"), sock: filepath.Join(base, "run", "p.sock")}
	defer func() {
		if err := w.teardown(retErr == nil); err != nil && retErr == nil {
			retErr = err
		}
	}()
	if w.host, err = netnstest.Make(); err != nil {
		return err
	}
	if err := netnstest.CreateVeth(w.host, parent, parent+"peer", 1500); err != nil {
		return err
	}
	p0, err := w.host.LinkByName(parent)
	if err != nil {
		return err
	}
	if err := rdmatest.BuildRXE(w.sysfs, rdmatest.RXEOptions{HCA: hca, Netdev: parent, MAC: p0.MAC.String(), TableSize: o.table}); err != nil {
		return err
	}
	if o.inproc {
		w.daemon = &inproc{w: w, logLevel: o.logLevel}
	} else {
		bin := o.bin
		if bin == "" {
			bin = filepath.Join(base, "rdma-macvlan")
			say("building the daemon")
			cmd := exec.Command("go", "build", "-trimpath", "-o", bin, "./cmd/rdma-macvlan")
			cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
			if out, err := cmd.CombinedOutput(); err != nil {
				return fmt.Errorf("go build: %w\n%s", err, out)
			}
		}
		w.daemon = &proc{w: w, bin: bin, logLevel: o.logLevel}
	}
	if _, err := w.daemon.start(); err != nil {
		return err
	}
	w.c = plugintest.NewClient(w.sock)
	w.nid = strings.Repeat("ab", 32)
	err = w.c.Call("CreateNetwork", map[string]any{
		"NetworkID": w.nid,
		"Options":   map[string]any{"com.docker.network.generic": map[string]string{"parent": parent}},
		"IPv4Data":  []network.IPAMData{{AddressSpace: "LocalDefault", Pool: pool, Gateway: gateway}},
	}, nil)
	if err != nil {
		return fmt.Errorf("create network: %w", err)
	}
	if w.samples, err = os.Create(filepath.Join(o.out, "lifecycle.csv")); err != nil {
		return err
	}
	fmt.Fprintln(w.samples, "pass,live,op,ms")

	res := results{Table: o.table, Cycles: o.cycles, Levels: o.levels, InProcess: o.inproc, LogLevel: o.logLevel}
	var prof *os.File
	if o.cpuprofile != "" {
		if prof, err = os.Create(o.cpuprofile); err != nil {
			return err
		}
		defer prof.Close()
		if err := pprof.StartCPUProfile(prof); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	order := append([]int{}, o.levels...)
	for i := len(o.levels) - 1; i >= 0; i-- {
		order = append(order, o.levels[i])
	}
	top := o.levels[len(o.levels)-1]
	for pass, live := range order {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := w.setLive(ctx, live); err != nil {
			return err
		}
		if err := w.waitReady(ctx); err != nil {
			return err
		}
		say("pass %d: %d live endpoints: %d cycles", pass+1, live, o.cycles)
		cpu0, reads0 := w.daemonCPU(), w.daemonReads()
		if err := w.cycles(ctx, pass+1, live); err != nil {
			return err
		}
		if cpu0 >= 0 {
			n := float64(o.warmup + o.cycles)
			pc := passCPU{Pass: pass + 1, Live: live, MSPerCycle: (w.daemonCPU() - cpu0) / n, ReadsPerCycle: float64(w.daemonReads()-reads0) / n}
			res.CPU = append(res.CPU, pc)
			say("pass %d: daemon CPU %.2f ms and %.0f read syscalls per life cycle", pass+1, pc.MSPerCycle, pc.ReadsPerCycle)
		}
		if live != top {
			continue
		}
		if m, ok := w.daemon.(*proc); ok {
			rss, hwm := m.memory()
			res.Memory = append(res.Memory, memory{When: fmt.Sprintf("after pass %d (%d live endpoints, %d life cycles served)", pass+1, live, (pass+1)*(o.cycles+o.warmup)), RSSKB: rss, HWMKB: hwm})
		}
		res.StatusMS = append(res.StatusMS, w.statusTimes(20)...)
		if pass+1 == len(o.levels) && o.restarts > 0 && !o.inproc {
			if err := w.restarts(ctx, o.restarts, live, &res); err != nil {
				return err
			}
		}
	}
	if err := w.setLive(ctx, 0); err != nil {
		return err
	}
	if err := w.c.Call("DeleteNetwork", network.DeleteNetworkRequest{NetworkID: w.nid}, nil); err != nil {
		return fmt.Errorf("delete network: %w", err)
	}
	if err := w.samples.Close(); err != nil {
		return err
	}
	res.Overhead = w.over.summary(o.levels)
	data, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(o.out, "endpoints.json"), append(data, '\n'), 0o644)
}

type memory struct {
	When  string `json:"when"`
	RSSKB int    `json:"rss_kb"`
	HWMKB int    `json:"hwm_kb"`
}

// passCPU is the daemon's CPU time (user + system) per life cycle in one
// pass, its GID watches included.
type passCPU struct {
	Pass       int     `json:"pass"`
	Live       int     `json:"live"`
	MSPerCycle float64 `json:"ms_per_cycle"`
	// ReadsPerCycle counts read syscalls (/proc/PID/io syscr): sysfs reads
	// dominate them, so they count GID table reads without timing noise.
	ReadsPerCycle float64 `json:"read_syscalls_per_cycle"`
}

type results struct {
	Table     int       `json:"gid_table_size"`
	Cycles    int       `json:"cycles_per_pass"`
	Levels    []int     `json:"levels"`
	InProcess bool      `json:"in_process"`
	LogLevel  string    `json:"log_level"`
	Memory    []memory  `json:"memory"`
	CPU       []passCPU `json:"daemon_cpu"`
	StatusMS  []float64 `json:"status_ms"`
	// Overhead is the plugin's time per call above the kernel floor.
	Overhead []overhead `json:"overhead"`
}

func (w *world) teardown(clean bool) error {
	var errs []error
	if w.samples != nil {
		w.samples.Close()
	}
	for _, l := range w.live {
		l.ns.Close()
	}
	if w.daemon != nil {
		if err := w.daemon.stop(); err != nil && clean {
			errs = append(errs, err)
		}
	}
	if w.host != nil {
		w.host.Close() // the namespace and every link left in it go with it
	}
	if clean {
		// Anything the plugin should have deleted, it did not.
		for _, sub := range []string{"networks", "endpoints"} {
			if ents, _ := os.ReadDir(filepath.Join(w.state, sub)); len(ents) > 0 {
				errs = append(errs, fmt.Errorf("state left in %s: %d files", sub, len(ents)))
			}
		}
	}
	if err := os.RemoveAll(w.base); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func epID(prefix string, i int) string {
	// 64 hex characters like Docker's, distinct in their first 12 (the
	// link name).
	return fmt.Sprintf("%s%010x", prefix, i) + strings.Repeat("0", 52)
}

func liveIP(i int) string { return fmt.Sprintf("10.200.%d.%d", i/250, i%250+2) }

func ipnet(addr string) *net.IPNet {
	ip, n, err := net.ParseCIDR(addr)
	if err != nil {
		panic(err)
	}
	n.IP = ip
	return n
}

// setLive adds or removes live endpoints until n are joined and in their
// own namespaces, with their GID entries in the fake table.
func (w *world) setLive(ctx context.Context, n int) error {
	for len(w.live) < n {
		if err := ctx.Err(); err != nil {
			return err
		}
		i := len(w.live)
		l := &liveEP{id: epID("b1", i), ip: liveIP(i)}
		if err := w.c.Call("CreateEndpoint", network.CreateEndpointRequest{NetworkID: w.nid, EndpointID: l.id,
			Interface: &network.EndpointInterface{Address: l.ip + "/16"}}, nil); err != nil {
			return fmt.Errorf("live endpoint %d: %w", i, err)
		}
		if err := w.c.Call("Join", network.JoinRequest{NetworkID: w.nid, EndpointID: l.id, SandboxKey: sandbox + strconv.Itoa(i)}, nil); err != nil {
			return fmt.Errorf("live endpoint %d: %w", i, err)
		}
		ns, err := netnstest.Make()
		if err != nil {
			return err
		}
		l.ns = ns
		w.live = append(w.live, l)
		if err := netnstest.MoveInto(w.host, ns, driver.LinkName(l.id), "eth0", nil, ipnet(l.ip+"/16")); err != nil {
			return err
		}
		if _, err := rdmatest.AddAddress(w.sysfs, hca, 1, l.ip, "eth0"); err != nil {
			return err
		}
	}
	for len(w.live) > n {
		if err := ctx.Err(); err != nil {
			return err
		}
		l := w.live[len(w.live)-1]
		if err := w.c.Call("Leave", network.LeaveRequest{NetworkID: w.nid, EndpointID: l.id}, nil); err != nil {
			return err
		}
		if err := netnstest.MoveBack(l.ns, w.host, "eth0", driver.LinkName(l.id)); err != nil {
			return err
		}
		if _, err := rdmatest.RemoveAddress(w.sysfs, hca, 1, l.ip); err != nil {
			return err
		}
		if err := w.c.Call("DeleteEndpoint", network.DeleteEndpointRequest{NetworkID: w.nid, EndpointID: l.id}, nil); err != nil {
			return err
		}
		l.ns.Close()
		w.live = w.live[:len(w.live)-1]
	}
	return nil
}

// waitReady waits until the daemon reports every live endpoint RDMA-ready,
// so that no GID watch of theirs runs during a measurement.
func (w *world) waitReady(ctx context.Context) error {
	deadline := time.Now().Add(60 * time.Second)
	for {
		st, err := w.c.Status()
		if err != nil {
			return err
		}
		ready := 0
		for _, n := range st.Networks {
			for _, e := range n.Endpoints {
				if e.RDMAReady {
					ready++
				}
			}
		}
		if ready == len(w.live) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d live endpoints RDMA-ready after 60s", ready, len(w.live))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// ops are the columns of a cycle: the four plugin calls, libnetwork's two
// moves, their sums, and the kernel's own cost of adding and deleting a
// macvlan child of the same parent (the floor under CreateEndpoint and
// DeleteEndpoint), measured in the same cycle.
var ops = []string{"create", "join", "move", "leave", "moveback", "delete", "plugin", "cycle", "kadd", "kdel"}

// cycles runs warmup and then measured life cycles of one endpoint in a
// namespace standing in for its container.
func (w *world) cycles(ctx context.Context, pass, live int) error {
	sb, err := netnstest.Make()
	if err != nil {
		return err
	}
	defer sb.Close()
	addr := ipnet("10.200.250.1/16")
	for k := 0; k < w.o.warmup+w.o.cycles; k++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		id := epID(fmt.Sprintf("c%d", pass%10), k)
		ifname := driver.LinkName(id)
		// d holds the durations of create, join, move, leave, moveback and
		// delete; the fake kernel's work between them is not timed.
		var d [6]time.Duration
		timed := func(i int, fn func() error) error {
			t0 := time.Now()
			err := fn()
			d[i] = time.Since(t0)
			return err
		}
		err := timed(0, func() error {
			return w.c.Call("CreateEndpoint", network.CreateEndpointRequest{NetworkID: w.nid, EndpointID: id,
				Interface: &network.EndpointInterface{Address: addr.String()}}, nil)
		})
		if err == nil {
			err = timed(1, func() error {
				return w.c.Call("Join", network.JoinRequest{NetworkID: w.nid, EndpointID: id, SandboxKey: sandbox}, nil)
			})
		}
		if err == nil {
			err = timed(2, func() error { return netnstest.MoveInto(w.host, sb, ifname, "eth0", nil, addr) })
		}
		if err == nil {
			// The kernel adds the address's GID entry.
			_, err = rdmatest.AddAddress(w.sysfs, hca, 1, addr.IP.String(), "eth0")
		}
		if err == nil {
			err = timed(3, func() error {
				return w.c.Call("Leave", network.LeaveRequest{NetworkID: w.nid, EndpointID: id}, nil)
			})
		}
		if err == nil {
			err = timed(4, func() error { return netnstest.MoveBack(sb, w.host, "eth0", ifname) })
		}
		if err == nil {
			// ...and removes it with the address.
			_, err = rdmatest.RemoveAddress(w.sysfs, hca, 1, addr.IP.String())
		}
		if err == nil {
			err = timed(5, func() error {
				return w.c.Call("DeleteEndpoint", network.DeleteEndpointRequest{NetworkID: w.nid, EndpointID: id}, nil)
			})
		}
		if err != nil {
			return fmt.Errorf("pass %d (%d live) cycle %d: %w", pass, live, k, err)
		}
		// The kernel's floor: the same link operations without the plugin.
		k0 := time.Now()
		if _, err := w.host.CreateMacvlan(netns.MacvlanSpec{Name: "kbaseline0", Parent: parent, Mode: "bridge"}); err != nil {
			return err
		}
		k1 := time.Now()
		if err := w.host.DeleteLink("kbaseline0"); err != nil {
			return err
		}
		k2 := time.Now()
		if k < w.o.warmup {
			continue
		}
		ms := func(x time.Duration) float64 { return float64(x.Nanoseconds()) / 1e6 }
		vals := []float64{ms(d[0]), ms(d[1]), ms(d[2]), ms(d[3]), ms(d[4]), ms(d[5]),
			ms(d[0] + d[1] + d[3] + d[5]), ms(d[0] + d[1] + d[2] + d[3] + d[4] + d[5]),
			ms(k1.Sub(k0)), ms(k2.Sub(k1))}
		w.over.add(live, vals[0]-vals[8], vals[1], vals[3], vals[5]-vals[9])
		for i, op := range ops {
			fmt.Fprintf(w.samples, "%d,%d,%s,%.4f\n", pass, live, op, vals[i])
		}
	}
	return nil
}

// daemonCPU returns the daemon process's CPU time in ms, or -1 when it runs
// in this process.
func (w *world) daemonCPU() float64 {
	p, ok := w.daemon.(*proc)
	if !ok || p.cmd == nil {
		return -1
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.cmd.Process.Pid))
	if err != nil {
		return -1
	}
	// Fields after the command name (which may hold spaces): state is
	// field 3, utime 14, stime 15, in clock ticks.
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return -1
	}
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return (ut + st) * 1000 / clockTicks
}

// daemonReads returns the daemon's read syscall count, or -1.
func (w *world) daemonReads() int {
	p, ok := w.daemon.(*proc)
	if !ok || p.cmd == nil {
		return -1
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", p.cmd.Process.Pid))
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "syscr: "); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(v))
			return n
		}
	}
	return -1
}

// clockTicks is USER_HZ, 100 on Linux.
const clockTicks = 100

func (w *world) statusTimes(n int) []float64 {
	var out []float64
	for range n {
		t0 := time.Now()
		if _, err := w.c.Status(); err != nil {
			return out
		}
		out = append(out, float64(time.Since(t0).Nanoseconds())/1e6)
	}
	return out
}

// restarts stops the daemon and starts it again n times, timing each start
// until /v1/status answers, and records its memory once serving.
func (w *world) restarts(ctx context.Context, n, live int, res *results) error {
	f, err := os.Create(filepath.Join(w.o.out, "restart.csv"))
	if err != nil {
		return err
	}
	defer f.Close()
	fmt.Fprintln(f, "run,endpoints,ms,rss_kb")
	for i := 1; i <= n; i++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := w.daemon.stop(); err != nil {
			return err
		}
		d, err := w.daemon.start()
		if err != nil {
			return err
		}
		rss, _ := w.daemon.(*proc).memory()
		fmt.Fprintf(f, "%d,%d,%.3f,%d\n", i, live, float64(d.Nanoseconds())/1e6, rss)
		say("restart %d with %d endpoints in state: serving after %v, RSS %d kB", i, live, d.Round(time.Microsecond), rss)
	}
	w.c = plugintest.NewClient(w.sock) // the old one's connections died with the old process
	st, err := w.c.Status()
	if err != nil {
		return err
	}
	if got := len(st.Networks[0].Endpoints); got != live {
		return fmt.Errorf("after restart the daemon knows %d endpoints, want %d", got, live)
	}
	rss, hwm := w.daemon.(*proc).memory()
	res.Memory = append(res.Memory, memory{When: fmt.Sprintf("after %d restarts with %d endpoints in state, serving", n, live), RSSKB: rss, HWMKB: hwm})
	return nil
}

// daemon is the plugin daemon under measurement.
type daemon interface {
	// start returns the time from starting the process until its socket
	// answers GET /v1/status.
	start() (time.Duration, error)
	stop() error
}

// proc runs the real binary inside the test namespace, as a user would.
type proc struct {
	w        *world
	bin      string
	logLevel string
	cmd      *exec.Cmd
	exited   chan error
}

func (p *proc) start() (time.Duration, error) {
	fd, err := unix.FcntlInt(uintptr(p.w.host.NsHandle()), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return 0, err
	}
	nsFile := os.NewFile(uintptr(fd), "netns")
	defer nsFile.Close()
	logf, err := os.OpenFile(filepath.Join(p.w.base, "daemon.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return 0, err
	}
	defer logf.Close()
	cmd := exec.Command("nsenter", "--net=/proc/self/fd/3", p.bin, "--socket", p.w.sock, "--log-level", p.logLevel)
	cmd.ExtraFiles = []*os.File{nsFile}
	cmd.Env = append(os.Environ(), "RDMA_MACVLAN_STATE_DIR="+p.w.state, "RDMA_MACVLAN_SYSFS_ROOT="+p.w.sysfs, "RDMA_MACVLAN_CDI_DIR="+p.w.cdi)
	cmd.Stdout, cmd.Stderr = logf, logf
	// The daemon dies with this program, whatever happens to it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	c := plugintest.NewClient(p.w.sock)
	t0 := time.Now()
	if err := cmd.Start(); err != nil {
		return 0, fmt.Errorf("start daemon: %w", err)
	}
	p.cmd = cmd
	p.exited = make(chan error, 1)
	go func(c *exec.Cmd, ch chan error) { ch <- c.Wait() }(cmd, p.exited)
	deadline := t0.Add(30 * time.Second)
	for {
		if _, err := c.Status(); err == nil {
			return time.Since(t0), nil
		}
		select {
		case err := <-p.exited:
			p.cmd = nil
			return 0, fmt.Errorf("daemon exited at start: %v\n%s", err, p.logTail())
		default:
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("daemon not serving after 30s\n%s", p.logTail())
		}
		time.Sleep(500 * time.Microsecond)
	}
}

func (p *proc) logTail() string {
	b, _ := os.ReadFile(filepath.Join(p.w.base, "daemon.log"))
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

func (p *proc) stop() error {
	if p.cmd == nil {
		return nil
	}
	defer func() { p.cmd = nil }()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-p.exited:
		if err != nil {
			return fmt.Errorf("daemon exit: %w", err)
		}
		return nil
	case <-time.After(15 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.exited
		return errors.New("daemon did not stop on SIGTERM within 15s")
	}
}

// memory returns the daemon's VmRSS and VmHWM in kB.
func (p *proc) memory() (rss, hwm int) {
	if p.cmd == nil {
		return 0, 0
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		return 0, 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		v, _ := strconv.Atoi(f[1])
		switch f[0] {
		case "VmRSS:":
			rss = v
		case "VmHWM:":
			hwm = v
		}
	}
	return rss, hwm
}

// inproc serves the daemon's real handler on the socket from this process,
// so that a CPU profile covers the daemon's side.
type inproc struct {
	w        *world
	logLevel string
	cancel   context.CancelFunc
	done     chan error
	d        *driver.Driver
	logf     *os.File
}

func (p *inproc) start() (time.Duration, error) {
	t0 := time.Now()
	log := logrus.New()
	lvl, err := logrus.ParseLevel(p.logLevel)
	if err != nil {
		return 0, err
	}
	log.SetLevel(lvl)
	if p.logf, err = os.OpenFile(filepath.Join(p.w.base, "daemon.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600); err != nil {
		return 0, err
	}
	log.SetOutput(p.logf)
	log.SetFormatter(&logrus.TextFormatter{FullTimestamp: true})
	l, err := plugin.Listen(p.w.sock)
	if err != nil {
		return 0, err
	}
	srv := plugin.NewServer(log)
	ctx, cancel := context.WithCancel(context.Background())
	p.cancel, p.done = cancel, make(chan error, 1)
	go func() { p.done <- srv.Serve(ctx, l) }()
	p.d, err = driver.New(driver.Config{StateDir: p.w.state, Links: p.w.host, Sysfs: rdma.NewSysfs(p.w.sysfs), CDIDir: p.w.cdi, Log: log,
		GIDTableMaxAge: driver.DefaultGIDTableMaxAge}) // as the daemon
	if err != nil {
		cancel()
		<-p.done
		return 0, err
	}
	srv.SetDriver(p.d)
	return time.Since(t0), nil
}

func (p *inproc) stop() error {
	if p.cancel == nil {
		return nil
	}
	p.cancel()
	err := <-p.done
	p.d.Close()
	p.logf.Close()
	p.cancel = nil
	return err
}
