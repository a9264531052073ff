package commands

import (
	"encoding/json"
	"strings"
	"testing"
)

// The self-test stops at the first step that fails, says why and how to
// reproduce it, prints a report with --json, exits 1, and removes the
// containers it started, also when it failed to start them.
func TestSelftestStopsAtTheFirstFailure(t *testing.T) {
	report := func(w *world) selftestReport {
		t.Helper()
		var r selftestReport
		if err := json.Unmarshal(w.stdout.Bytes(), &r); err != nil {
			t.Fatalf("--json: %v\n%s", err, w.stdout.String())
		}
		return r
	}
	last := func(r selftestReport) selftestStep { return r.Steps[len(r.Steps)-1] }

	w := standardWorld(t)
	w.infoRuntimes("28.2.2", []string{"runc"})
	if rc := w.run("selftest", "--json", "roce", "img"); rc != 1 {
		t.Fatalf("no runtime: status %d", rc)
	}
	if r := report(w); r.Passed || len(r.Steps) != 1 || last(r).Name != "runtime" || !strings.Contains(last(r).Detail, "docker rdma runtime install") {
		t.Errorf("no runtime: %+v", r)
	}

	w = standardWorld(t)
	if rc := w.run("selftest", "--json", "plain", "img"); rc != 1 {
		t.Fatalf("a bridge network: status %d", rc)
	}
	if r := report(w); last(r).Name != "network" || !strings.Contains(last(r).Detail, "network plain has driver bridge, not rdma-macvlan") {
		t.Errorf("a bridge network: %+v", r)
	}

	// docker run fails: the start step names the command; both containers
	// are removed.
	w = standardWorld(t)
	w.docker.onFirst("run", "", "docker: Error response from daemon: no such image: img\n", 125)
	w.docker.onFirst("rm", "", "", 0)
	if rc := w.run("selftest", "--json", "roce", "img"); rc != 1 {
		t.Fatalf("docker run fails: status %d", rc)
	}
	r := report(w)
	if s := r.Steps[0]; s.Name != "network" || s.Status != "ok" || r.HCA != "mlx5_0" {
		t.Errorf("network step: %+v (hca %q)", s, r.HCA)
	}
	if s := last(r); s.Name != "start" || !strings.Contains(s.Detail, "no such image: img") ||
		!strings.HasPrefix(s.Command, "docker run -d --name rdma-selftest-") || !strings.Contains(s.Command, "--runtime rdma-macvlan --net roce img sleep 3600") {
		t.Errorf("start step: %+v", s)
	}
	removed := 0
	for _, c := range w.docker.calls() {
		if len(c) == 3 && c[0] == "rm" && c[1] == "-f" && strings.HasPrefix(c[2], "rdma-selftest-") {
			removed++
		}
	}
	if removed != 2 {
		t.Errorf("removed %d containers, want both: %q", removed, w.docker.calls())
	}
}

// perftest's result table, as ib_write_bw --report_gbits and ib_write_lat
// print it.
func TestPerftestFigure(t *testing.T) {
	bw := ` RDMA_Write BW Test
 Dual-port       : OFF		Device         : mlx5_0
---------------------------------------------------------------------------------------
 #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]
 65536      345219           0.00               90.52  		   0.172645
---------------------------------------------------------------------------------------
`
	if got := perftestFigure(bw, "bandwidth"); got != "RDMA write between the containers, 65536-byte messages: 90.52 Gb/s average" {
		t.Errorf("bandwidth: %q", got)
	}
	lat := `---------------------------------------------------------------------------------------
 #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec]
 2       1000          1.64           4.75         1.68                1.70             0.06            1.89                    4.75
---------------------------------------------------------------------------------------
`
	if got := perftestFigure(lat, "latency"); got != "RDMA write between the containers, 2-byte messages: 1.70 usec average latency" {
		t.Errorf("latency: %q", got)
	}
	if got := perftestFigure("Couldn't connect to 10.0.0.2:18515\n", "bandwidth"); got != "" {
		t.Errorf("no table: %q", got)
	}
}
