// Package metrics is the daemon's Prometheus metrics: what GET /metrics
// answers on the plugin socket and, when --metrics-address is set, on a TCP
// address. Two kinds:
//
//   - counters and histograms of events, which the plugin server (calls,
//     refusals) and the driver (state writes, GID readiness) report as they
//     happen (Metrics' methods);
//   - gauges read at scrape time from the same status document GET
//     /v1/status serves (status.go): GID table fill, admission headroom,
//     endpoints by readiness. Nothing keeps a second copy of those numbers.
//
// Every label value comes from a fixed list (methods, outcomes, reasons) or
// from the HCA ports in use; endpoint and network IDs are never labels.
package metrics

import (
	"net/http"
	"runtime"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/rdma-macvlan/rdma-macvlan/api"
)

// Path is where the plugin socket and the metrics address serve the metrics.
const Path = "/metrics"

// Outcomes of a plugin call (label outcome of rdma_macvlan_plugin_calls_total).
const (
	CallOK        = "ok"        // answered without error
	CallRefused   = "refused"   // refused: see rdma_macvlan_refusals_total
	CallError     = "error"     // failed (state write, kernel, timeout)
	CallAbandoned = "abandoned" // the caller went away, or the daemon stopped, before an answer
)

// Reasons of a refusal (label reason of rdma_macvlan_refusals_total).
const (
	RefusalGIDTableFull    = "gid_table_full"   // admission: the port's GID table cannot hold the container's entries
	RefusalGIDCheckStrict  = "gid_check_strict" // -o gid_check=strict: the container's GID entries did not appear
	RefusalInvalidOption   = "invalid_option"   // a wrong option or value (network create -o, --subnet, --driver-opt)
	RefusalBadRequest      = "bad_request"      // a request that is not what the engine sends
	RefusalConflict        = "conflict"         // clashes with an object that exists
	RefusalHostSetup       = "host_setup"       // the host is not ready (no RDMA device, not RoCE, exclusive netns mode)
	RefusalAddressConflict = "address_conflict" // -o address_check=strict: another MAC on the parent's segment holds the container's address
	RefusalOther           = "other"            // a kind of refusal this version does not name
)

var refusalReasons = []string{RefusalGIDTableFull, RefusalGIDCheckStrict, RefusalInvalidOption, RefusalBadRequest, RefusalConflict, RefusalHostSetup, RefusalAddressConflict, RefusalOther}

// Outcomes of a state write (label outcome of rdma_macvlan_state_writes_total).
const (
	WriteOK         = "ok"
	WriteNotDurable = "not_durable" // done, but the fsync failed: a crash may undo it
	WriteFailed     = "failed"      // not done: the call that asked for it failed
)

// Metrics holds the daemon's metrics and serves them.
type Metrics struct {
	reg *prometheus.Registry

	calls        *prometheus.CounterVec
	callSeconds  *prometheus.HistogramVec
	refusals     *prometheus.CounterVec
	writes       *prometheus.CounterVec
	writeSeconds prometheus.Histogram
	readySeconds prometheus.Histogram
	timeouts     prometheus.Counter

	mu     sync.Mutex
	status func() api.Status // nil until the driver is ready
}

// New returns the metrics of a daemon of release version and commit.
func New(version, commit string) *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry()}
	m.calls = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "rdma_macvlan_plugin_calls_total",
		Help: "Calls of Docker's network plugin protocol the daemon answered, by method (CreateNetwork, Join, ...) and outcome (ok, refused, error, abandoned).",
	}, []string{"method", "outcome"})
	m.callSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "rdma_macvlan_plugin_call_duration_seconds",
		Help:    "Time the daemon took to answer a plugin protocol call, by method, from its arrival to its answer (a gid_check=strict start includes its wait for the GID entries).",
		Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
	}, []string{"method"})
	m.refusals = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "rdma_macvlan_refusals_total",
		Help: "Requests refused, by reason: gid_table_full (admission: the port's GID table cannot hold one more container), gid_check_strict (a strict network's container start failed: its GID entries did not appear), invalid_option, bad_request, conflict, host_setup, address_conflict (an address_check=strict network's container start failed: another host holds its address), other.",
	}, []string{"reason"})
	m.writes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "rdma_macvlan_state_writes_total",
		Help: "Changes of the state directory (a network or endpoint record written or removed), by outcome: ok, not_durable (done, but the disk failed to sync it) or failed (not done; the request that asked for it failed).",
	}, []string{"outcome"})
	m.writeSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "rdma_macvlan_state_write_duration_seconds",
		Help:    "Time one change of the state directory took, syncs included (slow disks slow every container start).",
		Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, 1},
	})
	m.readySeconds = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "rdma_macvlan_gid_ready_seconds",
		Help:    "Time from a container's Join to the moment its RoCE GID entries were found in the port's table (RDMA-ready).",
		Buckets: []float64{.01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
	})
	m.timeouts = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "rdma_macvlan_gid_watch_timeouts_total",
		Help: "Containers whose GID entries did not appear within the GID timeout (--gid-timeout) after they joined: not RDMA-ready.",
	})
	info := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "rdma_macvlan_build_info",
		Help:        "The daemon's build: release version, source commit and Go version, as labels; the value is always 1.",
		ConstLabels: prometheus.Labels{"version": version, "commit": commit, "goversion": runtime.Version()},
	})
	info.Set(1)
	for _, r := range refusalReasons {
		m.refusals.WithLabelValues(r)
	}
	for _, o := range []string{WriteOK, WriteNotDurable, WriteFailed} {
		m.writes.WithLabelValues(o)
	}
	m.reg.MustRegister(m.calls, m.callSeconds, m.refusals, m.writes, m.writeSeconds, m.readySeconds, m.timeouts, info,
		statusCollector{m},
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// SetStatus gives the gauges their source: the function that builds GET
// /v1/status's document (the driver's Status). Until then they are absent.
func (m *Metrics) SetStatus(status func() api.Status) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.status = status
}

// Handler serves the metrics in the Prometheus text format (or what the
// scraper asks for). A metric that fails to be gathered is left out and
// the rest served.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}

// Call counts one plugin protocol call of method (a fixed name of the
// protocol, never the request's path as sent) with its outcome and time.
func (m *Metrics) Call(method, outcome string, took time.Duration) {
	m.calls.WithLabelValues(method, outcome).Inc()
	m.callSeconds.WithLabelValues(method).Observe(took.Seconds())
}

// Refusal counts one refusal; reason is one of the Refusal constants.
func (m *Metrics) Refusal(reason string) { m.refusals.WithLabelValues(reason).Inc() }

// StateWrite counts one change of the state directory (outcome: one of the
// Write constants) and its time.
func (m *Metrics) StateWrite(took time.Duration, outcome string) {
	m.writes.WithLabelValues(outcome).Inc()
	m.writeSeconds.Observe(took.Seconds())
}

// GIDsReady records the time from a container's Join to its GID entries
// being found.
func (m *Metrics) GIDsReady(sinceJoin time.Duration) { m.readySeconds.Observe(sinceJoin.Seconds()) }

// GIDsTimedOut counts a container whose GID entries did not appear in time.
func (m *Metrics) GIDsTimedOut() { m.timeouts.Inc() }
