package plugin_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/docker/go-plugins-helpers/network"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/rdma-macvlan/rdma-macvlan/api"
	"github.com/rdma-macvlan/rdma-macvlan/driver"
	"github.com/rdma-macvlan/rdma-macvlan/driver/drivertest"
	"github.com/rdma-macvlan/rdma-macvlan/metrics"
	"github.com/rdma-macvlan/rdma-macvlan/plugin"
	"github.com/rdma-macvlan/rdma-macvlan/rdma"
	"github.com/rdma-macvlan/rdma-macvlan/rdma/rdmatest"
)

// metricsEnv is the daemon's handler with metrics on a fake mlx5 port
// (p0, mlx5_0 port 1) and in-memory links.
type metricsEnv struct {
	t        *testing.T
	srv      *plugin.Server
	links    *drivertest.Links
	sysfs    string
	stateDir string
}

func newMetricsEnv(t *testing.T, o rdmatest.MLX5Options, gidTimeout time.Duration) *metricsEnv {
	t.Helper()
	o.Netdev = "p0"
	e := &metricsEnv{t: t, links: drivertest.NewLinks("p0"), sysfs: t.TempDir(), stateDir: t.TempDir()}
	if err := rdmatest.BuildMLX5(e.sysfs, o); err != nil {
		t.Fatal(err)
	}
	m := metrics.New("v9.9.9-test", "0123456789abcdef")
	d, err := driver.New(driver.Config{StateDir: e.stateDir, Links: e.links, Log: quietLogger(), Sysfs: rdma.NewSysfs(e.sysfs),
		CDIDir: t.TempDir(), GIDTimeout: gidTimeout, GIDPoll: 5 * time.Millisecond, Observer: m})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	e.srv = plugin.NewServer(quietLogger())
	e.srv.SetMetrics(m)
	e.srv.SetDriver(d)
	return e
}

// call posts a protocol call and reports whether it succeeded.
func (e *metricsEnv) call(op string, req any) bool {
	e.t.Helper()
	body, err := json.Marshal(req)
	if err != nil {
		e.t.Fatal(err)
	}
	rec := serve(e.t, e.srv, op, body)
	return rec.Code == http.StatusOK
}

func (e *metricsEnv) mustCall(op string, req any) {
	e.t.Helper()
	if !e.call(op, req) {
		e.t.Fatalf("%s %+v failed", op, req)
	}
}

func (e *metricsEnv) status() api.Status {
	e.t.Helper()
	rec := httptest.NewRecorder()
	e.srv.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, plugin.StatusPath, nil))
	var st api.Status
	if err := json.Unmarshal(rec.Body.Bytes(), &st); err != nil {
		e.t.Fatalf("status %q: %v", rec.Body, err)
	}
	return st
}

// scraped is one scrape, parsed by the Prometheus text parser.
type scraped map[string]*dto.MetricFamily

func scrape(t *testing.T, h http.Handler) scraped {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, plugin.MetricsPath, nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("GET %s: %d %s", plugin.MetricsPath, rec.Code, rec.Body)
	}
	if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Fatalf("GET %s: Content-Type %q, want the text format", plugin.MetricsPath, ct)
	}
	text := rec.Body.String()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		t.Fatalf("parse the scrape: %v\n%s", err, text)
	}
	return fams
}

// value is the value of the one series of family name whose labels
// include want; ok false when there is none. A histogram gives its count.
func (s scraped) value(name string, want map[string]string) (float64, bool) {
	f, ok := s[name]
	if !ok {
		return 0, false
	}
next:
	for _, m := range f.GetMetric() {
		have := map[string]string{}
		for _, l := range m.GetLabel() {
			have[l.GetName()] = l.GetValue()
		}
		for k, v := range want {
			if have[k] != v {
				continue next
			}
		}
		switch {
		case m.Gauge != nil:
			return m.GetGauge().GetValue(), true
		case m.Counter != nil:
			return m.GetCounter().GetValue(), true
		case m.Histogram != nil:
			return float64(m.GetHistogram().GetSampleCount()), true
		}
	}
	return 0, false
}

func (s scraped) must(t *testing.T, name string, labels map[string]string, want float64) {
	t.Helper()
	got, ok := s.value(name, labels)
	if !ok {
		t.Errorf("%s%v: no such series", name, labels)
		return
	}
	if got != want {
		t.Errorf("%s%v = %v, want %v", name, labels, got, want)
	}
}

var (
	metricsNet = strings.Repeat("ab", 32)
	metricsEP1 = strings.Repeat("e1", 32)
	metricsEP2 = strings.Repeat("e2", 32)
	metricsEP3 = strings.Repeat("e3", 32)
)

func createNetworkReq(id string, opts map[string]string) map[string]any {
	return map[string]any{
		"NetworkID": id,
		"Options":   map[string]any{"com.docker.network.generic": opts},
		"IPv4Data":  []map[string]string{{"AddressSpace": "LocalDefault", "Pool": "10.5.0.0/24", "Gateway": "10.5.0.1/24"}},
	}
}

func endpointReq(eid, ip string) network.CreateEndpointRequest {
	return network.CreateEndpointRequest{NetworkID: metricsNet, EndpointID: eid, Interface: &network.EndpointInterface{Address: ip}}
}

// The gauges are what GET /v1/status says for the same port and
// endpoints; the counters count the calls, refusals, state writes and the
// readiness the life cycle went through; names, help and labels pass
// Prometheus's lint, and no label carries an endpoint or network ID.
func TestMetricsMatchStatus(t *testing.T) {
	// 10 slots: the two default GIDs and four containers of two entries.
	e := newMetricsEnv(t, rdmatest.MLX5Options{TableSize: 10}, 300*time.Millisecond)
	e.mustCall("CreateNetwork", createNetworkReq(metricsNet, map[string]string{"parent": "p0"}))
	if e.call("CreateNetwork", createNetworkReq(strings.Repeat("cd", 32), map[string]string{"parent": "p0", "mtus": "9000"})) {
		t.Fatal("a misspelt option was accepted")
	}
	// e1: joined, its GIDs appear: ready. e2: joined, never gets them:
	// timed out. e3: created, not joined.
	e.mustCall("CreateEndpoint", endpointReq(metricsEP1, "10.5.0.2/24"))
	e.mustCall("CreateEndpoint", endpointReq(metricsEP2, "10.5.0.3/24"))
	e.mustCall("CreateEndpoint", endpointReq(metricsEP3, "10.5.0.4/24"))
	e.mustCall("Join", network.JoinRequest{NetworkID: metricsNet, EndpointID: metricsEP1, SandboxKey: "/sb/1"})
	e.mustCall("Join", network.JoinRequest{NetworkID: metricsNet, EndpointID: metricsEP2, SandboxKey: "/sb/2"})
	if _, err := rdmatest.AddAddress(e.sysfs, "mlx5_0", 1, "10.5.0.2", "eth0"); err != nil {
		t.Fatal(err)
	}
	var st api.Status
	deadline := time.Now().Add(5 * time.Second)
	for {
		st = e.status()
		eps := st.Networks[0].Endpoints
		if eps[0].RDMAReady && strings.Contains(eps[1].RDMAReason, "did not appear") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("endpoints never settled: %+v", eps)
		}
		time.Sleep(10 * time.Millisecond)
	}
	// Admission has room for one container more: 6 of 10 slots are free,
	// and e2 and e3 hold 2 each until their entries are there.
	if e.call("CreateEndpoint", endpointReq(strings.Repeat("e4", 32), "10.5.0.5/24")) == false {
		t.Fatal("admission refused a container the table has room for")
	}
	if e.call("CreateEndpoint", endpointReq(strings.Repeat("e5", 32), "10.5.0.6/24")) {
		t.Fatal("admission took a container the table has no room for")
	}
	// A GET where the protocol posts.
	rec := httptest.NewRecorder()
	e.srv.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/NetworkDriver.Join", nil))
	if rec.Code != http.StatusMethodNotAllowed {
		t.Fatalf("GET Join: %d", rec.Code)
	}

	st = e.status()
	s := scrape(t, e.srv)
	n := st.Networks[0]
	if n.GIDTable == nil || n.RoCETypes != 2 {
		t.Fatalf("status of the network: %+v", n)
	}
	port := map[string]string{"hca": "mlx5_0", "port": "1"}
	s.must(t, "rdma_macvlan_gid_table_size", port, float64(n.GIDTable.Size))
	s.must(t, "rdma_macvlan_gid_table_used", port, float64(n.GIDTable.Used))
	s.must(t, "rdma_macvlan_gid_table_free", port, float64(n.GIDTable.Free))
	// The headroom is admission's: e5 was refused, since e2, e3 and e4 hold
	// the 6 free slots; Free/2 would say 3 more fit.
	if n.GIDTable.Room == nil || *n.GIDTable.Room != 0 {
		t.Errorf("status gid_table room %v: want 0 (6 free, 6 held by e2, e3, e4)", n.GIDTable.Room)
	}
	s.must(t, "rdma_macvlan_gid_admission_headroom_containers", port, 0)
	if n.GIDTable.Size != 10 || n.GIDTable.Used != 4 {
		t.Errorf("status gid_table %+v: want 4 of 10 used (the default GIDs and e1's pair)", n.GIDTable)
	}
	s.must(t, "rdma_macvlan_networks", nil, float64(len(st.Networks)))
	s.must(t, "rdma_macvlan_status_problems", nil, 0)
	byReason := map[[2]string]float64{}
	for _, ep := range n.Endpoints {
		state, reason := metrics.Readiness(ep)
		byReason[[2]string{state, reason}]++
	}
	want := map[[2]string]float64{{"ready", "none"}: 1, {"not_ready", "gid_timeout"}: 1, {"not_ready", "not_in_container"}: 2}
	for k, v := range want {
		if byReason[k] != v {
			t.Errorf("status: %v endpoints %s/%s, want %v", byReason[k], k[0], k[1], v)
		}
		s.must(t, "rdma_macvlan_endpoints", map[string]string{"hca": "mlx5_0", "port": "1", "state": k[0], "reason": k[1]}, v)
	}
	if len(s["rdma_macvlan_endpoints"].GetMetric()) != len(want) {
		t.Errorf("rdma_macvlan_endpoints has %d series, want %d", len(s["rdma_macvlan_endpoints"].GetMetric()), len(want))
	}

	s.must(t, "rdma_macvlan_plugin_calls_total", map[string]string{"method": "CreateNetwork", "outcome": "ok"}, 1)
	s.must(t, "rdma_macvlan_plugin_calls_total", map[string]string{"method": "CreateNetwork", "outcome": "refused"}, 1)
	s.must(t, "rdma_macvlan_plugin_calls_total", map[string]string{"method": "CreateEndpoint", "outcome": "ok"}, 4)
	s.must(t, "rdma_macvlan_plugin_calls_total", map[string]string{"method": "CreateEndpoint", "outcome": "refused"}, 1)
	s.must(t, "rdma_macvlan_plugin_calls_total", map[string]string{"method": "Join", "outcome": "ok"}, 2)
	s.must(t, "rdma_macvlan_plugin_calls_total", map[string]string{"method": "Join", "outcome": "refused"}, 1)
	s.must(t, "rdma_macvlan_plugin_call_duration_seconds", map[string]string{"method": "CreateEndpoint"}, 5)
	s.must(t, "rdma_macvlan_refusals_total", map[string]string{"reason": "invalid_option"}, 1)
	s.must(t, "rdma_macvlan_refusals_total", map[string]string{"reason": "gid_table_full"}, 1)
	s.must(t, "rdma_macvlan_refusals_total", map[string]string{"reason": "bad_request"}, 1)
	s.must(t, "rdma_macvlan_refusals_total", map[string]string{"reason": "gid_check_strict"}, 0)
	s.must(t, "rdma_macvlan_gid_ready_seconds", nil, 1)
	s.must(t, "rdma_macvlan_gid_watch_timeouts_total", nil, 1)
	// Written: the network, four endpoints, two joins, two watch outcomes.
	s.must(t, "rdma_macvlan_state_writes_total", map[string]string{"outcome": "ok"}, 9)
	s.must(t, "rdma_macvlan_state_writes_total", map[string]string{"outcome": "failed"}, 0)
	s.must(t, "rdma_macvlan_state_write_duration_seconds", nil, 9)
	s.must(t, "rdma_macvlan_build_info", map[string]string{"version": "v9.9.9-test", "commit": "0123456789abcdef"}, 1)

	var fams []*dto.MetricFamily
	for _, f := range s {
		fams = append(fams, f)
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				for _, id := range []string{metricsNet, metricsEP1, metricsEP2, metricsEP3} {
					if strings.Contains(l.GetValue(), driver.ShortID(id)) {
						t.Errorf("%s: label %s=%q carries an ID", f.GetName(), l.GetName(), l.GetValue())
					}
				}
			}
		}
	}
	problems, err := promlint.NewWithMetricFamilies(fams).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
}

// A state write that fails counts as failed, and the call that asked for
// it as an error (not a refusal).
func TestMetricsCountStateWriteFailures(t *testing.T) {
	e := newMetricsEnv(t, rdmatest.MLX5Options{}, time.Second)
	netDir := filepath.Join(e.stateDir, "networks")
	if err := os.RemoveAll(netDir); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(netDir, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if e.call("CreateNetwork", createNetworkReq(metricsNet, map[string]string{"parent": "p0"})) {
		t.Fatal("CreateNetwork succeeded without a networks directory")
	}
	s := scrape(t, e.srv)
	s.must(t, "rdma_macvlan_state_writes_total", map[string]string{"outcome": "failed"}, 1)
	s.must(t, "rdma_macvlan_state_writes_total", map[string]string{"outcome": "ok"}, 0)
	s.must(t, "rdma_macvlan_plugin_calls_total", map[string]string{"method": "CreateNetwork", "outcome": "error"}, 1)
	for _, r := range []string{"invalid_option", "bad_request", "conflict", "host_setup", "gid_table_full", "gid_check_strict", "other"} {
		s.must(t, "rdma_macvlan_refusals_total", map[string]string{"reason": r}, 0)
	}
}

// gid_check=strict failing a start is counted as a refusal of its own.
func TestMetricsCountStrictRefusal(t *testing.T) {
	e := newMetricsEnv(t, rdmatest.MLX5Options{}, 200*time.Millisecond)
	e.mustCall("CreateNetwork", createNetworkReq(metricsNet, map[string]string{"parent": "p0", "gid_check": "strict"}))
	e.mustCall("CreateEndpoint", endpointReq(metricsEP1, "10.5.0.2/24"))
	e.mustCall("Join", network.JoinRequest{NetworkID: metricsNet, EndpointID: metricsEP1, SandboxKey: "/sb/1"})
	// Docker 28+ asks once the link is in the container.
	if _, err := e.links.MoveToSandbox(driver.LinkName(metricsEP1)); err != nil {
		t.Fatal(err)
	}
	if e.call("ProgramExternalConnectivity", network.ProgramExternalConnectivityRequest{NetworkID: metricsNet, EndpointID: metricsEP1}) {
		t.Fatal("strict let a container without GID entries start")
	}
	s := scrape(t, e.srv)
	s.must(t, "rdma_macvlan_refusals_total", map[string]string{"reason": "gid_check_strict"}, 1)
	s.must(t, "rdma_macvlan_plugin_calls_total", map[string]string{"method": "ProgramExternalConnectivity", "outcome": "refused"}, 1)
	s.must(t, "rdma_macvlan_gid_watch_timeouts_total", nil, 1)
}

// While the driver starts, /metrics answers with the counters and without
// the gauges; it takes GET only; a server without metrics has none.
func TestMetricsWhileStarting(t *testing.T) {
	srv := plugin.NewServer(quietLogger())
	srv.SetMetrics(metrics.New("v1", "c1"))
	s := scrape(t, srv)
	s.must(t, "rdma_macvlan_build_info", map[string]string{"version": "v1"}, 1)
	if _, ok := s["rdma_macvlan_gid_table_size"]; ok {
		t.Error("gauges of the status before the driver is ready")
	}
	if _, ok := s["rdma_macvlan_networks"]; ok {
		t.Error("rdma_macvlan_networks before the driver is ready")
	}
	rec := httptest.NewRecorder()
	srv.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, plugin.MetricsPath, nil))
	if rec.Code != http.StatusMethodNotAllowed {
		t.Errorf("POST %s: %d, want 405", plugin.MetricsPath, rec.Code)
	}
	bare := plugin.NewServer(quietLogger())
	rec = httptest.NewRecorder()
	bare.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, plugin.MetricsPath, nil))
	if rec.Code != http.StatusNotFound {
		t.Errorf("GET %s without metrics: %d, want 404", plugin.MetricsPath, rec.Code)
	}
}
