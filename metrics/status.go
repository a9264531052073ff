package metrics

import (
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rdma-macvlan/rdma-macvlan/api"
)

// Readiness of an endpoint (labels state and reason of rdma_macvlan_endpoints).
const (
	StateReady    = "ready"
	StateNotReady = "not_ready"

	ReasonNone           = "none"             // ready
	ReasonNotInContainer = "not_in_container" // created, not joined (or left)
	ReasonWaiting        = "waiting_for_gids" // joined; its GID watch runs
	ReasonGIDTimeout     = "gid_timeout"      // its entries did not appear within the GID timeout
	ReasonGIDsMissing    = "gids_missing"     // its entries were there and are gone (or were never looked for)
	ReasonUnknown        = "unknown"          // no RDMA port, or its table could not be read: /v1/status lists the problem
	ReasonOther          = "other"            // a reason this version does not name
)

var (
	descTableSize = prometheus.NewDesc("rdma_macvlan_gid_table_size",
		"Slots of the RoCE GID table of an HCA port that a network of this daemon uses.", []string{"hca", "port"}, nil)
	descTableUsed = prometheus.NewDesc("rdma_macvlan_gid_table_used",
		"Slots of the port's GID table in use (the host's entries and every container's, on any network), read at scrape time.", []string{"hca", "port"}, nil)
	descTableFree = prometheus.NewDesc("rdma_macvlan_gid_table_free",
		"Free slots of the port's GID table, read at scrape time; the kernel silently drops the entries of a container that does not fit.", []string{"hca", "port"}, nil)
	descHeadroom = prometheus.NewDesc("rdma_macvlan_gid_admission_headroom_containers",
		"How many more containers with one IPv4 address the port's GID table can take (free slots / RoCE types per address); a dual-stack container takes up to three times as many slots. At 0 the next container is refused.", []string{"hca", "port"}, nil)
	descEndpoints = prometheus.NewDesc("rdma_macvlan_endpoints",
		"Endpoints (one per container and network) by RDMA readiness: state ready or not_ready, and why not (reason: not_in_container, waiting_for_gids, gid_timeout, gids_missing, unknown, other; none when ready), per HCA port.",
		[]string{"hca", "port", "state", "reason"}, nil)
	descNetworks = prometheus.NewDesc("rdma_macvlan_networks",
		"Networks of this driver.", nil, nil)
	descProblems = prometheus.NewDesc("rdma_macvlan_status_problems",
		"Problems GET /v1/status reports for the networks (an RDMA port or GID table that cannot be read, a parent gone, a duplicate address): 0 when all is well.", nil, nil)
	descConflicts = prometheus.NewDesc("rdma_macvlan_address_conflicts",
		"Addresses of containers on this daemon's networks that another MAC on the parent's segment answered for when they joined (another host gave out the same address; RDMA traffic for it may reach the other holder): 0 when all is well.", nil, nil)
)

// statusCollector reads the gauges from the status document at each scrape.
type statusCollector struct{ m *Metrics }

func (c statusCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descTableSize, descTableUsed, descTableFree, descHeadroom, descEndpoints, descNetworks, descProblems, descConflicts} {
		ch <- d
	}
}

func (c statusCollector) Collect(ch chan<- prometheus.Metric) {
	c.m.mu.Lock()
	status := c.m.status
	c.m.mu.Unlock()
	if status == nil {
		return // still starting
	}
	g := Gauges(status())
	for _, p := range g.Ports {
		l := []string{p.HCA, strconv.Itoa(p.Port)}
		ch <- prometheus.MustNewConstMetric(descTableSize, prometheus.GaugeValue, float64(p.Size), l...)
		ch <- prometheus.MustNewConstMetric(descTableUsed, prometheus.GaugeValue, float64(p.Used), l...)
		ch <- prometheus.MustNewConstMetric(descTableFree, prometheus.GaugeValue, float64(p.Free), l...)
		ch <- prometheus.MustNewConstMetric(descHeadroom, prometheus.GaugeValue, float64(p.Headroom), l...)
	}
	for k, n := range g.Endpoints {
		port := ""
		if k.HCA != "" {
			port = strconv.Itoa(k.Port)
		}
		ch <- prometheus.MustNewConstMetric(descEndpoints, prometheus.GaugeValue, float64(n), k.HCA, port, k.State, k.Reason)
	}
	ch <- prometheus.MustNewConstMetric(descNetworks, prometheus.GaugeValue, float64(g.Networks))
	ch <- prometheus.MustNewConstMetric(descProblems, prometheus.GaugeValue, float64(g.Problems))
	ch <- prometheus.MustNewConstMetric(descConflicts, prometheus.GaugeValue, float64(g.Conflicts))
}

// PortGauges are one HCA port's gauges.
type PortGauges struct {
	HCA                        string
	Port                       int
	Size, Used, Free, Headroom int
}

// EndpointKey groups endpoints for rdma_macvlan_endpoints.
type EndpointKey struct {
	HCA           string
	Port          int
	State, Reason string
}

// StatusGauges are the gauges one status document gives.
type StatusGauges struct {
	Ports     []PortGauges // in the order of the networks, each port once
	Endpoints map[EndpointKey]int
	Networks  int
	Problems  int
	// Conflicts counts the endpoints' addresses another MAC holds.
	Conflicts int
}

// Gauges computes the gauges of st: each port's GID table as the first
// network on it reports it (every network on a port reports the same read),
// and the endpoints counted by port and readiness.
func Gauges(st api.Status) StatusGauges {
	g := StatusGauges{Endpoints: map[EndpointKey]int{}, Networks: len(st.Networks)}
	seen := map[[2]string]bool{}
	for _, n := range st.Networks {
		g.Problems += len(n.Problems)
		if n.HCA != "" && n.GIDTable != nil {
			k := [2]string{n.HCA, strconv.Itoa(n.Port)}
			if !seen[k] {
				seen[k] = true
				g.Ports = append(g.Ports, PortGauges{HCA: n.HCA, Port: n.Port, Size: n.GIDTable.Size, Used: n.GIDTable.Used,
					Free: n.GIDTable.Free, Headroom: room(n.GIDTable) / max(n.RoCETypes, 1)})
			}
		}
		for _, e := range n.Endpoints {
			g.Conflicts += len(e.AddressConflicts)
			state, reason := Readiness(e)
			g.Endpoints[EndpointKey{HCA: n.HCA, Port: n.Port, State: state, Reason: reason}]++
		}
	}
	return g
}

// Readiness turns an endpoint's rdma_ready and rdma_reason, as GET
// /v1/status reports them, into bounded label values: the reason is
// free text naming GIDs and ports, never a label itself.
func Readiness(e api.Endpoint) (state, reason string) {
	if e.RDMAReady {
		return StateReady, ReasonNone
	}
	r := e.RDMAReason
	switch {
	case r == "":
		reason = ReasonUnknown
	case r == "not in a container":
		reason = ReasonNotInContainer
	case strings.HasPrefix(r, "waiting for the kernel"):
		reason = ReasonWaiting
	case strings.HasPrefix(r, "GID entries for ") && strings.Contains(r, "did not appear"):
		reason = ReasonGIDTimeout
	case r == "its GID entries are not in the table":
		reason = ReasonGIDsMissing
	default:
		reason = ReasonOther
	}
	return StateNotReady, reason
}

// room is what admission would still give new containers on a port: the
// status's room where the daemon worked it out, else every free slot.
func room(t *api.GIDTable) int {
	if t.Room != nil {
		return *t.Room
	}
	return t.Free
}
