package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/docker/go-plugins-helpers/network"
	"github.com/rdma-macvlan/rdma-macvlan/driver"
	"github.com/rdma-macvlan/rdma-macvlan/metrics"
	"github.com/rdma-macvlan/rdma-macvlan/netns"
	"github.com/rdma-macvlan/rdma-macvlan/netns/netnstest"
	"github.com/rdma-macvlan/rdma-macvlan/plugin/plugintest"
	"github.com/rdma-macvlan/rdma-macvlan/rdma/rdmatest"
	"github.com/sirupsen/logrus"
	"golang.org/x/sys/unix"
)

func TestParseFlagsEnvTwins(t *testing.T) {
	t.Setenv("RDMA_MACVLAN_STATE_DIR", "/from/env")
	t.Setenv("RDMA_MACVLAN_LOG_LEVEL", "debug")
	t.Setenv("RDMA_MACVLAN_SYSFS_ROOT", "/host")
	c, err := parseFlags([]string{"--log-level", "warn"})
	if err != nil {
		t.Fatal(err)
	}
	if c.stateDir != "/from/env" || c.sysfsRoot != "/host" {
		t.Fatalf("env twins not applied: %+v", c)
	}
	if c.logLevel != "warn" {
		t.Fatalf("a flag must win over its env twin: %+v", c)
	}
	if c.socket != "/run/docker/plugins/rdma-macvlan.sock" || c.cdiDir != "/var/run/cdi" {
		t.Fatalf("defaults changed: %+v", c)
	}
	if _, err := parseFlags([]string{"extra"}); err == nil {
		t.Fatal("stray argument accepted")
	}
	if _, err := newLogger(config{logLevel: "loud", logFormat: "text"}); err == nil || !strings.Contains(err.Error(), "use one of trace, debug, info, warn, error") {
		t.Errorf("--log-level loud: %v", err)
	}
	for _, lvl := range append(logLevels, "fatal") { // fatal: as older versions took it
		if _, err := newLogger(config{logLevel: lvl, logFormat: "text"}); err != nil {
			t.Errorf("--log-level %s: %v", lvl, err)
		}
	}
}

// TestConfigJSONDeclaresEveryFlag: the managed plugin can set only the
// variables its config.json declares, so each flag's environment twin is
// declared there (and settable, but for the socket Docker fixes), nothing
// else is, and what config.json says of the log levels is what the daemon
// takes.
func TestConfigJSONDeclaresEveryFlag(t *testing.T) {
	raw, err := os.ReadFile("../../config.json")
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		Env []struct {
			Name, Description, Value string
			Settable                 []string
		}
	}
	if err := json.Unmarshal(raw, &cfg); err != nil {
		t.Fatal(err)
	}
	declared := map[string]int{}
	for i, e := range cfg.Env {
		declared[e.Name] = i
	}
	var c config
	twins := map[string]bool{}
	newFlagSet(&c).VisitAll(func(f *flag.Flag) {
		name, ok := envTwin(f.Name)
		if !ok {
			return
		}
		twins[name] = true
		i, ok := declared[name]
		if !ok {
			t.Errorf("config.json does not declare %s (--%s): the managed plugin cannot set it; add it to env", name, f.Name)
			return
		}
		if settable := slices.Contains(cfg.Env[i].Settable, "value"); settable != (f.Name != "socket") {
			t.Errorf("config.json: %s settable %v", name, settable)
		}
	})
	for name := range declared {
		if !twins[name] {
			t.Errorf("config.json declares %s, which is no flag's twin", name)
		}
	}
	if i, ok := declared["RDMA_MACVLAN_LOG_LEVEL"]; ok {
		if want := "log level: " + strings.Join(logLevels, ", "); !strings.HasPrefix(cfg.Env[i].Description, want) {
			t.Errorf("config.json's log levels %q, want %q: the daemon refuses the others", cfg.Env[i].Description, want)
		}
	}
}

// TestLogLevelsSplitByStream: Docker files a managed plugin's stdout under
// level=info and its stderr under level=error, so only error entries may go to
// stderr; the rest go to stdout, in either format, at the level asked.
func TestLogLevelsSplitByStream(t *testing.T) {
	for _, format := range []string{"text", "json"} {
		var out, errs bytes.Buffer
		log, err := newLoggerTo(config{logLevel: "debug", logFormat: format}, &out, &errs)
		if err != nil {
			t.Fatal(err)
		}
		log.Trace("trace-line")
		log.Debug("debug-line")
		log.Info("info-line")
		log.WithField("k", "v").Warn("warn-line")
		log.Error("error-line")
		o, e := out.String(), errs.String()
		for _, want := range []string{"debug-line", "info-line", "warn-line"} {
			if !strings.Contains(o, want) || strings.Contains(e, want) {
				t.Errorf("%s: %s must be on stdout only; stdout %q, stderr %q", format, want, o, e)
			}
		}
		if !strings.Contains(e, "error-line") || strings.Contains(o, "error-line") {
			t.Errorf("%s: error-line must be on stderr only; stdout %q, stderr %q", format, o, e)
		}
		if strings.Contains(o+e, "trace-line") {
			t.Errorf("%s: trace logged at level debug: %q", format, o+e)
		}
		if n := strings.Count(o, "\n"); n != 3 {
			t.Errorf("%s: want 3 lines on stdout (each entry once), got %d: %q", format, n, o)
		}
		if format == "json" && !strings.Contains(o, `"level":"warning"`) {
			t.Errorf("json: the entry's own level must stay in the line: %q", o)
		}
		if format == "text" && !strings.Contains(o, "level=warning") {
			t.Errorf("text: the entry's own level must stay in the line: %q", o)
		}
	}
}

// daemon runs the real binary inside a test namespace, as a user would run it
// by hand, and drives it over its socket.
type daemon struct {
	t        *testing.T
	bin      string
	host     *netns.Handle
	sock     string
	stateDir string
	sysfs    string
	cdiDir   string
	env      []string // extra environment
	args     []string // extra flags
	cmd      *exec.Cmd
	exited   chan error
}

// testVersion is the version buildDaemon links into the binary.
const testVersion = "v0.0.0-test.1"

// prebuiltEnv names a directory of daemons built beforehand, for a test
// binary run where there is no Go toolchain (the kernel test's VM):
// rdma-macvlan, and rdma-macvlan-<tags> for tagged builds, each linked with
// testVersion.
const prebuiltEnv = "RDMA_MACVLAN_TEST_DAEMONS"

// buildDaemon builds the daemon with tags, or takes the prebuilt one from
// $RDMA_MACVLAN_TEST_DAEMONS.
func buildDaemon(t *testing.T, tags ...string) string {
	t.Helper()
	if dir := os.Getenv(prebuiltEnv); dir != "" {
		name := strings.Join(append([]string{"rdma-macvlan"}, tags...), "-")
		bin := filepath.Join(dir, name)
		if _, err := os.Stat(bin); err != nil {
			t.Fatalf("%s=%s: no prebuilt daemon %s: %v (build it with: go build -tags %q -ldflags \"-X github.com/rdma-macvlan/rdma-macvlan/internal/version.version=%s\" -o %s ./cmd/rdma-macvlan)",
				prebuiltEnv, dir, name, err, strings.Join(tags, ","), testVersion, bin)
		}
		return bin
	}
	bin := filepath.Join(t.TempDir(), "rdma-macvlan")
	args := []string{"build", "-o", bin, "-ldflags", "-X github.com/rdma-macvlan/rdma-macvlan/internal/version.version=" + testVersion}
	if len(tags) > 0 {
		args = append(args, "-tags", strings.Join(tags, ","))
	}
	out, err := exec.Command("go", append(args, ".")...).CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

func (d *daemon) start() {
	d.t.Helper()
	fd, err := unix.FcntlInt(uintptr(d.host.NsHandle()), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		d.t.Fatal(err)
	}
	nsFile := os.NewFile(uintptr(fd), "netns")
	defer nsFile.Close()
	d.cmd = exec.Command("nsenter", append([]string{"--net=/proc/self/fd/3", d.bin, "--socket", d.sock, "--log-level", "debug"}, d.args...)...)
	d.cmd.ExtraFiles = []*os.File{nsFile}
	d.cmd.Env = append(os.Environ(),
		"RDMA_MACVLAN_STATE_DIR="+d.stateDir,
		"RDMA_MACVLAN_SYSFS_ROOT="+d.sysfs,
		"RDMA_MACVLAN_CDI_DIR="+d.cdiDir)
	d.cmd.Env = append(d.cmd.Env, d.env...)
	logf, err := os.OpenFile(filepath.Join(d.stateDir, "..", "daemon.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		d.t.Fatal(err)
	}
	defer logf.Close()
	d.cmd.Stdout, d.cmd.Stderr = logf, logf
	if err := d.cmd.Start(); err != nil {
		d.t.Fatalf("start daemon: %v", err)
	}
	d.exited = make(chan error, 1)
	go func(c *exec.Cmd, ch chan error) { ch <- c.Wait() }(d.cmd, d.exited)
	c := plugintest.NewClient(d.sock)
	deadline := time.Now().Add(10 * time.Second)
	for {
		var caps network.CapabilitiesResponse
		if err := c.Call("GetCapabilities", struct{}{}, &caps); err == nil {
			if _, err := c.Status(); err == nil {
				return
			}
		}
		select {
		case err := <-d.exited:
			d.cmd = nil
			d.t.Fatalf("daemon exited at start: %v\n%s", err, d.log())
		default:
		}
		if time.Now().After(deadline) {
			d.t.Fatalf("daemon not serving after 10s\n%s", d.log())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (d *daemon) log() string {
	b, _ := os.ReadFile(filepath.Join(d.stateDir, "..", "daemon.log"))
	return string(b)
}

// stop sends sig and waits for the exit; it returns the exit error.
func (d *daemon) stop(sig syscall.Signal) error {
	d.t.Helper()
	if d.cmd == nil || d.cmd.Process == nil {
		return nil
	}
	_ = d.cmd.Process.Signal(sig)
	select {
	case err := <-d.exited:
		d.cmd = nil
		return err
	case <-time.After(15 * time.Second):
		_ = d.cmd.Process.Kill()
		<-d.exited
		d.cmd = nil
		d.t.Fatalf("daemon did not stop on %v", sig)
		return nil
	}
}

// TestVersionFlag: --version prints the version linked in and exits 0
// without starting anything (no socket, no state directory).
func TestVersionFlag(t *testing.T) {
	bin := buildDaemon(t)
	dir := t.TempDir()
	cmd := exec.Command(bin, "--version", "--socket", filepath.Join(dir, "s.sock"))
	cmd.Env = append(os.Environ(), "RDMA_MACVLAN_STATE_DIR="+filepath.Join(dir, "state"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("rdma-macvlan --version: %v\n%s", err, out)
	}
	if got, want := string(out), "rdma-macvlan version "+testVersion+"\n"; got != want {
		t.Fatalf("rdma-macvlan --version printed %q, want %q", got, want)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Fatalf("--version created %v", ents)
	}
}

// hostDaemon is the daemon binary (not started yet) on a namespace with a
// veth parent p0 and a fake mlx5 tree for it, its socket, state and CDI
// directories in a temp dir that none of them exists in yet; it is killed
// when the test ends. It skips the test without root or nsenter.
func hostDaemon(t *testing.T) *daemon {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root (network namespaces and links); run: sudo make test-root")
	}
	if _, err := exec.LookPath("nsenter"); err != nil {
		t.Skip("needs nsenter (util-linux)")
	}
	host := netnstest.NewHost(t)
	base := t.TempDir()
	p0, err := host.LinkByName("p0")
	if err != nil {
		t.Fatal(err)
	}
	d := &daemon{t: t, bin: buildDaemon(t), host: host, sock: filepath.Join(base, "run", "rdma-macvlan.sock"),
		stateDir: filepath.Join(base, "state"), sysfs: rdmatest.MLX5(t, rdmatest.MLX5Options{Netdev: "p0", MAC: p0.MAC.String()}),
		cdiDir: filepath.Join(base, "cdi")}
	t.Cleanup(func() { _ = d.stop(syscall.SIGKILL) })
	return d
}

func TestPrivilegedDaemonBinarySurvivesRestarts(t *testing.T) {
	d := hostDaemon(t)
	d.start()
	c := plugintest.NewClient(d.sock)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%v\n%s", err, d.log())
		}
	}
	// The version set at build time is in the start-up line and in /v1/status.
	st, err := c.Status()
	must(err)
	if st.Version != testVersion {
		t.Fatalf("/v1/status version %q, want %q (linked in)", st.Version, testVersion)
	}
	if !regexp.MustCompile(`msg=listening .*version=` + regexp.QuoteMeta(testVersion) + `(\s|$)`).MatchString(d.log()) {
		t.Fatalf("start-up line without version=%s:\n%s", testVersion, d.log())
	}
	nid := strings.Repeat("a1", 32)
	eid1, eid2 := strings.Repeat("e1", 32), strings.Repeat("e2", 32)
	must(c.Call("CreateNetwork", map[string]any{
		"NetworkID": nid,
		"Options":   map[string]any{"com.docker.network.generic": map[string]string{"parent": "p0", "mtu": "1400"}},
		"IPv4Data":  []network.IPAMData{{Pool: "10.8.0.0/24", Gateway: "10.8.0.1/24"}},
	}, nil))
	must(c.Call("CreateEndpoint", network.CreateEndpointRequest{NetworkID: nid, EndpointID: eid1,
		Interface: &network.EndpointInterface{Address: "10.8.0.2/24"}}, nil))
	if _, err := os.Stat(filepath.Join(d.cdiDir, "rdma-macvlan-mlx5_0.json")); err != nil {
		t.Fatalf("no CDI spec for mlx5_0 after CreateNetwork: %v", err)
	}
	var jr network.JoinResponse
	must(c.Call("Join", network.JoinRequest{NetworkID: nid, EndpointID: eid1, SandboxKey: "/sb/1"}, &jr))
	ctr, err := netnstest.Make()
	must(err)
	t.Cleanup(ctr.Close)
	ip, ipnet, _ := net.ParseCIDR("10.8.0.2/24")
	ipnet.IP = ip
	must(netnstest.MoveInto(d.host, ctr, jr.InterfaceName.SrcName, "eth0", nil, ipnet))

	// SIGTERM: a clean exit that leaves the container's link alone.
	if err := d.stop(syscall.SIGTERM); err != nil {
		t.Fatalf("daemon exit on SIGTERM: %v\n%s", err, d.log())
	}
	if _, err := ctr.LinkByName("eth0"); err != nil {
		t.Fatalf("SIGTERM touched the container's link: %v", err)
	}
	if _, err := os.Stat(d.sock); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("socket left after a clean stop: %v", err)
	}
	d.start()

	// SIGKILL in the middle of a second endpoint's life.
	must(c.Call("CreateEndpoint", network.CreateEndpointRequest{NetworkID: nid, EndpointID: eid2,
		Interface: &network.EndpointInterface{Address: "10.8.0.3/24"}}, nil))
	_ = d.stop(syscall.SIGKILL)
	d.start() // the stale socket file is replaced
	must(c.Call("Join", network.JoinRequest{NetworkID: nid, EndpointID: eid2, SandboxKey: "/sb/2"}, &jr))
	if l, err := d.host.LinkByName(driver.LinkName(eid2)); err != nil || l.MTU != 1400 {
		t.Fatalf("second endpoint's link after kill -9: %+v %v", l, err)
	}

	// Finish both life cycles.
	must(c.Call("Leave", network.LeaveRequest{NetworkID: nid, EndpointID: eid1}, nil))
	must(netnstest.MoveBack(ctr, d.host, "eth0", driver.LinkName(eid1)))
	for _, eid := range []string{eid1, eid2} {
		if eid == eid2 {
			must(c.Call("Leave", network.LeaveRequest{NetworkID: nid, EndpointID: eid}, nil))
		}
		must(c.Call("DeleteEndpoint", network.DeleteEndpointRequest{NetworkID: nid, EndpointID: eid}, nil))
	}
	must(c.Call("DeleteNetwork", network.DeleteNetworkRequest{NetworkID: nid}, nil))
	links, err := d.host.Links()
	must(err)
	for _, l := range links {
		if strings.HasPrefix(l.Name, driver.LinkPrefix) {
			t.Errorf("link %s left", l.Name)
		}
	}
	if err := d.stop(syscall.SIGTERM); err != nil {
		t.Fatalf("final stop: %v", err)
	}
	if ents, _ := os.ReadDir(d.cdiDir); len(ents) != 0 {
		t.Errorf("CDI specs left after the last network: %v", ents)
	}
	for _, sub := range []string{"networks", "endpoints"} {
		ents, _ := os.ReadDir(filepath.Join(d.stateDir, sub))
		if len(ents) != 0 {
			t.Errorf("state left in %s: %v", sub, ents)
		}
	}
}

// --metrics-address has its env twin, is off by default, and a wrong one
// fails the start naming the flag, before the plugin socket exists.
func TestMetricsAddressFlag(t *testing.T) {
	c, err := parseFlags(nil)
	if err != nil || c.metrics != "" {
		t.Fatalf("default --metrics-address %q (%v), want none", c.metrics, err)
	}
	t.Setenv("RDMA_MACVLAN_METRICS_ADDRESS", "127.0.0.1:9464")
	if c, err = parseFlags(nil); err != nil || c.metrics != "127.0.0.1:9464" {
		t.Fatalf("env twin: %q %v", c.metrics, err)
	}
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	for addr, want := range map[string]string{
		"9464":                   "want HOST:PORT",
		"127.0.0.1:":             "is not a number",
		"127.0.0.1:0":            "is not a number from 1",
		"127.0.0.1:70000":        "is not a number from 1",
		":9464":                  "name the address",
		"192.0.2.1:9464":         "pick an address of this host",
		busy.Addr().String():     "pick an address of this host and a free port",
		"localhost:metrics-port": "is not a number",
	} {
		dir := t.TempDir()
		sock := filepath.Join(dir, "p.sock")
		err := run([]string{"--metrics-address", addr, "--socket", sock, "--state-dir", filepath.Join(dir, "state"), "--cdi-dir", filepath.Join(dir, "cdi")})
		if err == nil || !strings.Contains(err.Error(), "--metrics-address (RDMA_MACVLAN_METRICS_ADDRESS) \""+addr+"\"") || !strings.Contains(err.Error(), want) {
			t.Errorf("--metrics-address %q: %v, want an error naming the flag and saying %q", addr, err, want)
		}
		if _, err := os.Stat(sock); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("--metrics-address %q: the plugin socket was made (%v)", addr, err)
		}
	}
}

// The TCP address serves GET /metrics and nothing of the plugin API.
func TestMetricsAddressServesMetricsOnly(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		serveMetrics(ctx, l, metrics.New("v-test", "c-test"), metricsMaxConns, logrus.New())
		close(done)
	}()
	defer func() { cancel(); <-done }()
	base := "http://" + l.Addr().String()
	get := func(method, path string) (int, string) {
		t.Helper()
		var body io.Reader
		if method != http.MethodGet {
			body = strings.NewReader("{}")
		}
		req, _ := http.NewRequest(method, base+path, body)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	if code, body := get(http.MethodGet, "/metrics"); code != http.StatusOK || !strings.Contains(body, `rdma_macvlan_build_info{commit="c-test"`) {
		t.Fatalf("GET /metrics: %d\n%s", code, body)
	}
	for _, p := range []string{"/v1/status", "/Plugin.Activate", "/NetworkDriver.CreateNetwork"} {
		if code, _ := get(http.MethodPost, p); code != http.StatusNotFound {
			t.Errorf("POST %s on the metrics address: %d, want 404", p, code)
		}
	}
	if code, _ := get(http.MethodPost, "/metrics"); code != http.StatusMethodNotAllowed {
		t.Errorf("POST /metrics: %d, want 405", code)
	}
}

// metricsAddress serves metrics on a fresh 127.0.0.1 port until the test
// ends and returns the address.
func metricsAddress(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	log := logrus.New()
	log.SetOutput(io.Discard)
	go func() { serveMetrics(ctx, l, metrics.New("v-test", "c-test"), metricsMaxConns, log); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return l.Addr().String()
}

// openFDs counts this process's open file descriptors.
func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// Idle connections to the metrics address are capped: a flood of them
// neither takes the daemon's file descriptors, which the plugin socket
// needs (its calls failed with accept4: too many open files), nor its
// memory, nor keeps a scrape out.
func TestMetricsAddressConnectionCap(t *testing.T) {
	addr := metricsAddress(t)
	const n = 300
	base := openFDs(t)
	conns := make([]net.Conn, 0, n)
	t.Cleanup(func() {
		for _, c := range conns {
			c.Close()
		}
	})
	for i := 0; i < n; i++ {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		conns = append(conns, c)
	}
	// The listener accepts in order: once this scrape is answered, every
	// connection of the flood has been accepted (and, over the cap, closed).
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	res, err := client.Get("http://" + addr + metrics.Path)
	if err != nil {
		t.Fatalf("scrape under %d idle connections: %v", n, err)
	}
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("scrape under %d idle connections: %s", n, res.Status)
	}
	// Our n client ends, the daemon's capped share and a few more.
	if fds := openFDs(t) - base; fds > n+metricsMaxConns+16 {
		t.Errorf("%d file descriptors open for %d idle client connections: the daemon holds about %d, more than its cap of %d", fds, n, fds-n, metricsMaxConns)
	}
}

// A GET or HEAD of the metrics that carries a body is refused, and its
// connection closed rather than kept alive with the body unread behind it.
func TestMetricsAddressRefusesBody(t *testing.T) {
	addr := metricsAddress(t)
	for _, c := range []struct {
		name, method, headers string
		body                  int
	}{
		{"GET with 2 MiB", http.MethodGet, "Content-Length: 2097152\r\n", 2 << 20},
		{"GET with 2 bytes", http.MethodGet, "Content-Length: 2\r\n", 2},
		{"GET chunked", http.MethodGet, "Transfer-Encoding: chunked\r\n", -1},
		{"HEAD with 2 bytes", http.MethodHead, "Content-Length: 2\r\n", 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			go func() {
				// The daemon may close before it all arrives.
				_, _ = io.WriteString(conn, c.method+" "+metrics.Path+" HTTP/1.1\r\nHost: x\r\n"+c.headers+"\r\n")
				switch {
				case c.body < 0:
					_, _ = io.WriteString(conn, "2\r\n{}\r\n0\r\n\r\n")
				default:
					_, _ = conn.Write(bytes.Repeat([]byte("a"), c.body))
				}
			}()
			_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
			r := bufio.NewReader(conn)
			res, err := http.ReadResponse(r, &http.Request{Method: c.method})
			if err != nil {
				t.Fatalf("no answer: %v", err)
			}
			b, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if res.StatusCode != http.StatusBadRequest || (c.method == http.MethodGet && !strings.Contains(string(b), "body")) {
				t.Fatalf("%s %s with a body: %s %q, want 400 naming the body", c.method, metrics.Path, res.Status, b[:min(len(b), 120)])
			}
			if !res.Close {
				t.Errorf("%s %s with a body: the answer keeps the connection alive", c.method, metrics.Path)
			}
			// Closed: at its end, or reset for the body left unread.
			var ne net.Error
			if _, err := io.Copy(io.Discard, r); errors.As(err, &ne) && ne.Timeout() {
				t.Errorf("connection still open after the refusal: %v", err)
			}
		})
	}
}
