package commands

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rdma-macvlan/rdma-macvlan/api"
	"github.com/rdma-macvlan/rdma-macvlan/rdma"
)

const selftestUsage = `Usage:  docker rdma selftest [OPTIONS] NETWORK IMAGE

Proves RDMA on this host's hardware: starts two containers on the
rdma-macvlan network NETWORK from IMAGE with the rdma-macvlan runtime, checks
that each sees only its HCA and was given the kernel's GID index, then runs
the data path between them: an RC ping-pong over their own GIDs
(ibv_rc_pingpong -g), an rdma_cm connection (rping), and, when perftest is in
the image, a short ib_write_bw and ib_write_lat. It stops at the first step
that fails, says why and how to reproduce it, removes its containers and exits 1.

IMAGE needs rdma-core's tools: on Debian or Ubuntu the packages ibverbs-utils
(ibv_rc_pingpong), rdmacm-utils (rping) and, for the bandwidth and latency,
perftest; on RHEL and Fedora libibverbs-utils, librdmacm-utils and perftest.

Options:
      --json             a machine-readable report on stdout
      --timeout DURATION how long each step may take (default 60s)
`

// pingpongRE is ibv_rc_pingpong's closing line.
var pingpongRE = regexp.MustCompile(`(?m)^\d+ iters in [\d.]+ seconds = [\d.]+ usec/iter`)

// selftestStep is one step of the self-test and its verdict.
type selftestStep struct {
	Name    string `json:"name"`
	Status  string `json:"status"` // ok, fail, skip
	Detail  string `json:"detail"`
	Command string `json:"command,omitempty"` // how to reproduce it
}

// selftestReport is what --json prints.
type selftestReport struct {
	Network string         `json:"network"`
	Image   string         `json:"image"`
	HCA     string         `json:"hca,omitempty"`
	Port    int            `json:"port,omitempty"`
	Steps   []selftestStep `json:"steps"`
	Passed  bool           `json:"passed"`
}

// selftest runs the steps; a failed one ends it.
type selftest struct {
	s       *session
	net     string
	image   string
	timeout time.Duration
	report  selftestReport
	names   [2]string // the containers, a (server) and b (client)
	ips     [2]string
	idx     [2]int
	rxe     bool // the HCA is Soft-RoCE: no RDMA between macvlans
}

func cmdSelftest(s *session, args []string) int {
	fs := flag.NewFlagSet("selftest", flag.ContinueOnError)
	fs.SetOutput(s.env.Stderr)
	asJSON := fs.Bool("json", false, "")
	timeout := fs.Duration("timeout", 60*time.Second, "")
	fs.Usage = func() { fmt.Fprint(s.env.Stderr, selftestUsage) }
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return exitUsage
	}
	if fs.NArg() != 2 || *timeout <= 0 {
		fmt.Fprint(s.env.Stderr, selftestUsage)
		return exitUsage
	}
	t := &selftest{s: s, net: fs.Arg(0), image: fs.Arg(1), timeout: *timeout}
	t.report = selftestReport{Network: t.net, Image: t.image, Steps: []selftestStep{}}
	suffix := strconv.FormatInt(time.Now().UnixNano()%1e9, 36)
	t.names = [2]string{"rdma-selftest-" + suffix + "-a", "rdma-selftest-" + suffix + "-b"}
	defer t.cleanup()
	t.report.Passed = t.run(!*asJSON)
	if *asJSON {
		b, _ := json.MarshalIndent(t.report, "", "  ")
		fmt.Fprintln(s.env.Stdout, string(b))
	} else if t.report.Passed {
		fmt.Fprintf(s.env.Stdout, "PASS: RDMA works between two containers on %s (%s port %d)\n", t.net, t.report.HCA, t.report.Port)
	} else {
		fmt.Fprintf(s.env.Stdout, "FAIL: see the step above\n")
	}
	if !t.report.Passed {
		return 1
	}
	return 0
}

// add records a step and, with print, says it as it ends.
func (t *selftest) add(print bool, st selftestStep) bool {
	t.report.Steps = append(t.report.Steps, st)
	if print {
		fmt.Fprintf(t.s.env.Stdout, "%-4s  %-16s %s\n", strings.ToUpper(st.Status), st.Name, st.Detail)
		if st.Status == "fail" && st.Command != "" {
			fmt.Fprintf(t.s.env.Stdout, "      %-16s reproduce: %s\n", "", st.Command)
		}
	}
	return st.Status != "fail"
}

// docker runs the docker CLI with args within the step's timeout and
// returns its output (stdout and stderr) and exit status (-1 when it could
// not run or ran out of time).
func (t *selftest) docker(args ...string) (string, int) {
	ctx, cancel := context.WithTimeout(t.s.ctx, t.timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, t.s.cli.Path, t.s.cli.Argv(args...)...)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return string(out), 0
	case ctx.Err() != nil:
		return string(out) + fmt.Sprintf("(no answer within %s)", t.timeout), -1
	case errors.As(err, &ee):
		return string(out), ee.ExitCode()
	default:
		return string(out) + err.Error(), -1
	}
}

func (t *selftest) cleanup() {
	for _, n := range t.names {
		cmd := exec.Command(t.s.cli.Path, t.s.cli.Argv("rm", "-f", n)...)
		_ = cmd.Run()
	}
}

func (t *selftest) run(print bool) bool {
	s := t.s
	// The runtime and the network.
	if err := checkRuntime(s); err != nil {
		return t.add(print, selftestStep{Name: "runtime", Status: "fail", Detail: err.Error(), Command: "docker info --format '{{json .Runtimes}}'"})
	}
	n, err := s.cli.NetworkInspect(s.ctx, t.net)
	if err != nil {
		return t.add(print, selftestStep{Name: "network", Status: "fail", Detail: err.Error(), Command: "docker network inspect " + t.net})
	}
	if !s.isRDMADriver(n.Driver) {
		return t.add(print, selftestStep{Name: "network", Status: "fail", Detail: fmt.Sprintf("network %s has driver %s, not rdma-macvlan: %s", t.net, n.Driver, s.createHint())})
	}
	v, err := s.resolveNetwork(n)
	if err != nil || v.HCA == "" {
		detail := fmt.Sprintf("network %s has no HCA port the plugin knows", t.net)
		if err != nil {
			detail += ": " + err.Error()
		} else if len(v.Problems) > 0 {
			detail += ": " + strings.Join(v.Problems, "; ")
		}
		return t.add(print, selftestStep{Name: "network", Status: "fail", Detail: detail, Command: "docker rdma inspect " + t.net})
	}
	t.report.HCA, t.report.Port = v.HCA, max(v.Port, 1)
	t.rxe = rdma.NewSysfs(s.sysfsRoot(v.Backend)).KernelDriver(v.HCA) == rdma.DriverRXE
	if !t.add(print, selftestStep{Name: "network", Status: "ok", Detail: fmt.Sprintf("%s: rdma-macvlan on parent %s, %s port %d", t.net, v.Parent, v.HCA, t.report.Port)}) {
		return false
	}
	// Two containers, started as any container on the network is.
	for _, name := range t.names {
		args := []string{"run", "-d", "--name", name, "--runtime", api.RuntimeName, "--net", t.net, t.image, "sleep", "3600"}
		if out, rc := t.docker(args...); rc != 0 {
			return t.add(print, selftestStep{Name: "start", Status: "fail", Detail: fmt.Sprintf("docker run of %s: exit %d: %s", name, rc, strings.TrimSpace(out)),
				Command: "docker " + shellJoin(args)})
		}
	}
	for i, name := range t.names {
		if !t.ready(print, i, name) {
			return false
		}
	}
	if !t.add(print, selftestStep{Name: "start", Status: "ok", Detail: fmt.Sprintf("%s (%s) and %s (%s) are RDMA-ready: rdma-exec started their process", t.names[0], t.ips[0], t.names[1], t.ips[1])}) {
		return false
	}
	// Only its HCA, and the kernel's index.
	for i, name := range t.names {
		if !t.devices(print, v, name) || !t.index(print, i, name) {
			return false
		}
	}
	// The tools.
	out, rc := t.docker("exec", t.names[0], "sh", "-c", "for t in ibv_rc_pingpong rping ib_write_bw ib_write_lat; do command -v $t >/dev/null && echo $t; done")
	have := strings.Fields(out)
	if rc != 0 || !slices.Contains(have, "ibv_rc_pingpong") || !slices.Contains(have, "rping") {
		return t.add(print, selftestStep{Name: "tools", Status: "fail",
			Detail:  fmt.Sprintf("image %s lacks ibv_rc_pingpong or rping (has: %s): install ibverbs-utils and rdmacm-utils (Debian, Ubuntu) or libibverbs-utils and librdmacm-utils (RHEL, Fedora), and perftest for the bandwidth", t.image, strings.Join(have, ", ")),
			Command: "docker run --rm " + t.image + " sh -c 'command -v ibv_rc_pingpong rping ib_write_bw'"})
	}
	t.add(print, selftestStep{Name: "tools", Status: "ok", Detail: "in the image: " + strings.Join(have, ", ")})
	// The data path.
	hca, port := t.report.HCA, strconv.Itoa(t.report.Port)
	if !t.pair(print, "rc pingpong",
		[]string{"ibv_rc_pingpong", "-d", hca, "-i", port, "-g", strconv.Itoa(t.idx[0]), "-n", "100"},
		[]string{"ibv_rc_pingpong", "-d", hca, "-i", port, "-g", strconv.Itoa(t.idx[1]), "-n", "100", t.ips[0]},
		func(out string) string {
			if m := pingpongRE.FindString(out); m != "" {
				return "an RC queue pair over each container's own GID: " + m
			}
			return ""
		}) {
		return false
	}
	if !t.pair(print, "rdma_cm",
		[]string{"rping", "-s", "-a", t.ips[0], "-C", "10"},
		[]string{"rping", "-c", "-a", t.ips[0], "-C", "10", "-v"},
		func(out string) string {
			if strings.Count(out, "ping data:") >= 10 {
				return fmt.Sprintf("rping: 10 round trips over rdma_cm, resolved from %s's address", t.names[0])
			}
			return ""
		}) {
		return false
	}
	for _, pt := range []struct {
		tool, unit string
		opts       []string
	}{{"ib_write_bw", "bandwidth", []string{"-D", "2", "--report_gbits"}}, {"ib_write_lat", "latency", []string{"-n", "1000"}}} {
		if !slices.Contains(have, pt.tool) {
			t.add(print, selftestStep{Name: pt.tool, Status: "skip", Detail: "no perftest in the image (install perftest for it)"})
			continue
		}
		if !t.pair(print, pt.tool,
			append([]string{pt.tool, "-d", hca, "-i", port, "-x", strconv.Itoa(t.idx[0])}, pt.opts...),
			append(append([]string{pt.tool, "-d", hca, "-i", port, "-x", strconv.Itoa(t.idx[1])}, pt.opts...), t.ips[0]),
			func(out string) string { return perftestFigure(out, pt.unit) }) {
			return false
		}
	}
	return true
}

// ready waits until container i's process is the workload rdma-exec
// started (its environment has NCCL_IB_GID_INDEX) and reads its address.
func (t *selftest) ready(print bool, i int, name string) bool {
	deadline := time.Now().Add(t.timeout)
	for {
		c, err := t.s.cli.ContainerInspect(t.s.ctx, name)
		if err == nil && !c.State.Running {
			logs, _ := t.docker("logs", "--tail", "20", name)
			return t.add(print, selftestStep{Name: "start", Status: "fail", Detail: fmt.Sprintf("%s exited (status %d): %s", name, c.State.ExitCode, strings.TrimSpace(logs)),
				Command: "docker logs " + name})
		}
		env, rc := t.docker("exec", name, "sh", "-c", "tr '\\0' '\\n' </proc/1/environ")
		if err == nil && rc == 0 {
			if v, ok := envValue(env, "NCCL_IB_GID_INDEX"); ok {
				if t.idx[i], err = strconv.Atoi(v); err == nil {
					if ep, ok := c.NetworkSettings.Networks[t.net]; ok {
						t.ips[i] = ep.IPAddress
					}
					if t.ips[i] != "" {
						return true
					}
				}
			}
		}
		if time.Now().After(deadline) {
			return t.add(print, selftestStep{Name: "start", Status: "fail",
				Detail:  fmt.Sprintf("%s is not RDMA-ready within %s: its process has no NCCL_IB_GID_INDEX (is it started by the rdma-macvlan runtime? docker rdma inspect %s says why)", name, t.timeout, name),
				Command: "docker rdma inspect " + name})
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func envValue(env, name string) (string, bool) {
	for _, l := range strings.Split(env, "\n") {
		if k, v, ok := strings.Cut(l, "="); ok && k == name {
			return v, true
		}
	}
	return "", false
}

// devices checks that the container sees only the network's HCA.
func (t *selftest) devices(print bool, v *netView, name string) bool {
	out, rc := t.docker("exec", name, "ls", "/sys/class/infiniband")
	got := strings.Fields(out)
	if rc != 0 || !slices.Equal(got, []string{v.HCA}) {
		return t.add(print, selftestStep{Name: "devices", Status: "fail",
			Detail:  fmt.Sprintf("%s sees RDMA devices %q, want only %s (the runtime shows a container its networks' HCAs only, unless RDMA_MACVLAN_SYSFS=host)", name, got, v.HCA),
			Command: "docker exec " + name + " ls /sys/class/infiniband"})
	}
	var want []string
	for _, n := range v.Nodes {
		want = append(want, n.Path)
	}
	out, rc = t.docker("exec", name, "sh", "-c", "ls /dev/infiniband/* 2>/dev/null")
	nodes := strings.Fields(out)
	slices.Sort(nodes)
	slices.Sort(want)
	if rc != 0 || !slices.Equal(nodes, want) {
		return t.add(print, selftestStep{Name: "devices", Status: "fail",
			Detail:  fmt.Sprintf("%s has device nodes %q, want %q (its HCA's)", name, nodes, want),
			Command: "docker exec " + name + " ls /dev/infiniband"})
	}
	return t.add(print, selftestStep{Name: "devices", Status: "ok", Detail: fmt.Sprintf("%s sees only %s (%s)", name, v.HCA, strings.Join(nodes, ", "))})
}

// index checks that container i was given the index of its own entry as
// docker rdma inspect finds it in the kernel's table.
func (t *selftest) index(print bool, i int, name string) bool {
	c, err := t.s.cli.ContainerInspect(t.s.ctx, name)
	if err != nil {
		return t.add(print, selftestStep{Name: "gid index", Status: "fail", Detail: err.Error(), Command: "docker rdma inspect " + name})
	}
	ic, err := containerEntry(t.s, c)
	kernel := -1
	if err == nil {
		for _, n := range ic.Networks {
			if n.Name == t.net && len(n.Endpoints) > 0 && n.Endpoints[0].GIDIndex != nil {
				kernel = *n.Endpoints[0].GIDIndex
			}
		}
	}
	if kernel != t.idx[i] {
		return t.add(print, selftestStep{Name: "gid index", Status: "fail",
			Detail:  fmt.Sprintf("%s was given NCCL_IB_GID_INDEX=%d, but its own entry is at index %d in the kernel's table of %s port %d (-1: not found)", name, t.idx[i], kernel, t.report.HCA, t.report.Port),
			Command: "docker rdma inspect " + name})
	}
	return t.add(print, selftestStep{Name: "gid index", Status: "ok", Detail: fmt.Sprintf("%s (%s) was given index %d, its own entry's in the kernel's table", name, t.ips[i], kernel)})
}

// pair runs server in container a (detached) and client in container b,
// and judges the client's output with figure ("" is a failure).
func (t *selftest) pair(print bool, name string, server, client []string, figure func(string) string) bool {
	a, b := t.names[0], t.names[1]
	sargs := append([]string{"exec", "-d", a}, server...)
	cargs := append([]string{"exec", b}, client...)
	repro := "docker " + shellJoin(sargs) + "; sleep 1; docker " + shellJoin(cargs)
	if out, rc := t.docker(sargs...); rc != 0 {
		return t.add(print, selftestStep{Name: name, Status: "fail", Detail: fmt.Sprintf("the server in %s did not start: exit %d: %s", a, rc, strings.TrimSpace(out)), Command: repro})
	}
	time.Sleep(time.Second)
	out, rc := t.docker(cargs...)
	// The server ends with the client; one left over is killed.
	_, _ = t.docker("exec", a, "sh", "-c", "pkill -x "+server[0]+" 2>/dev/null; true")
	if f := figure(out); rc == 0 && f != "" {
		return t.add(print, selftestStep{Name: name, Status: "ok", Detail: f})
	}
	detail := fmt.Sprintf("from %s to %s: exit %d: %s", b, a, rc, lastLines(out, 4))
	if t.rxe {
		detail += fmt.Sprintf(". %s is Soft-RoCE (rxe), which cannot carry RDMA between macvlan children of its parent (ConnectX switches it in the NIC): "+
			"the steps above are what this host can prove; run the self-test on a host with a RoCE NIC", t.report.HCA)
	}
	return t.add(print, selftestStep{Name: name, Status: "fail", Detail: detail, Command: repro})
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}

// perftestFigure reads the average of perftest's result table, the line
// under its "#bytes" header: bandwidth (BW average[Gb/sec], the fourth
// column, with --report_gbits) or latency (t_avg[usec], the sixth).
func perftestFigure(out, unit string) string {
	lines := strings.Split(out, "\n")
	for i, l := range lines {
		if !strings.Contains(l, "#bytes") || i+1 >= len(lines) {
			continue
		}
		f := strings.Fields(lines[i+1])
		switch {
		case unit == "bandwidth" && len(f) >= 4:
			return fmt.Sprintf("RDMA write between the containers, %s-byte messages: %s Gb/s average", f[0], f[3])
		case unit == "latency" && len(f) >= 6:
			return fmt.Sprintf("RDMA write between the containers, %s-byte messages: %s usec average latency", f[0], f[5])
		}
	}
	return ""
}
