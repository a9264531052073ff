package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rdma-macvlan/rdma-macvlan/test/bench"
)

// runsDir is where the raw samples of every run are kept, under -docs.
const runsDir = "bench/runs"

// stored is one run kept under docs/bench/runs/.
type stored struct {
	id     string // its directory's name: when it was taken, and the commit
	d      *data
	checks []check
}

func (r *stored) link() string {
	return fmt.Sprintf("[%s](docs/%s/%s/)", r.d.machine["date"], runsDir, r.id)
}

// histLink is link from docs/bench/history.md, beside runs/.
func (r *stored) histLink() string {
	return fmt.Sprintf("[%s](runs/%s/)", r.d.machine["date"], r.id)
}

func (r *stored) from() string {
	return fmt.Sprintf("From the run of %s, commit %s.", r.link(), r.d.machine["commit"])
}

// runID names a run's directory: its date (UTC, sortable) and commit.
func runID(d *data) (string, error) {
	t, err := time.Parse("2006-01-02 15:04 MST", d.machine["date"])
	if err != nil {
		return "", fmt.Errorf("machine.env: date=%q is not YYYY-MM-DD HH:MM UTC: %v", d.machine["date"], err)
	}
	c := d.machine["commit"]
	if c == "" || strings.ContainsAny(c, "/ \t") {
		return "", fmt.Errorf("machine.env: commit=%q: want a commit name (git rev-parse --short)", c)
	}
	return t.UTC().Format("2006-01-02T1504Z") + "-" + c, nil
}

func run(in, mdPath, docs string, elapsed int) error {
	if in != "" {
		d, err := load(in)
		if err != nil {
			return err
		}
		cs := checks(d)
		printTable(os.Stdout, d, cs)
		if mdPath == "" {
			return nil
		}
		if len(cs) == 0 {
			return fmt.Errorf("%s: the run measured nothing (no part's raw samples): nothing to store", in)
		}
		if _, err := store(in, filepath.Join(docs, runsDir), d, elapsed); err != nil {
			return err
		}
	}
	runs, err := loadRuns(filepath.Join(docs, runsDir))
	if err != nil {
		return err
	}
	if len(runs) == 0 {
		return fmt.Errorf("no runs stored under %s: run test/bench/bench.sh (make bench) first", filepath.Join(docs, runsDir))
	}
	notes := ""
	if b, err := os.ReadFile(filepath.Join(docs, "bench", "notes.md")); err == nil {
		notes = string(b)
	} else if !errors.Is(err, os.ErrNotExist) {
		return err
	}
	pg, hist, src := page(runs, notes)
	if err := os.WriteFile(mdPath, []byte(pg), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(docs, "bench", "history.md"), []byte(hist), 0o644); err != nil {
		return err
	}
	var life, start *data
	if r := src[2]; r != nil {
		life = r.d
	}
	if r := src[1]; r != nil {
		start = r.d
	}
	return plot(docs, life, start)
}

// printTable prints a run's targets and its noise.
func printTable(w io.Writer, d *data, cs []check) {
	fmt.Fprintln(w)
	fmt.Fprintf(w, "%-46s %-44s %-60s %s\n", "benchmark", "target", "measured", "")
	for _, c := range cs {
		fmt.Fprintf(w, "%-46s %-44s %-60s %s\n", c.what, c.target, c.measured, strings.Trim(yes(c.ok), "*"))
	}
	fmt.Fprintln(w)
	if len(d.load) > 0 {
		l := bench.Summarize(d.load)
		fmt.Fprintf(w, "1-minute load average during the run (sampled every 2 s, %d samples, on %s cores): median %s, min %s, max %s.\n", l.N, d.machine["nproc"], f2(l.Median), f2(l.Min), f2(l.Max))
	}
}

// store keeps the raw samples of the run in dir (the files with samples,
// the data plane as one CSV) under runs/ID/ and returns that directory.
// Storing the same run again replaces it.
func store(in, runs string, d *data, elapsed int) (string, error) {
	id, err := runID(d)
	if err != nil {
		return "", fmt.Errorf("%s: %w", in, err)
	}
	dir := filepath.Join(runs, id)
	if err := os.RemoveAll(dir); err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	for _, name := range []string{"machine.env", "load.csv", "start.csv", "conc.csv", "runtime.csv", "lifecycle.csv", "restart.csv", "endpoints.json"} {
		b, err := os.ReadFile(filepath.Join(in, name))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return "", err
		}
		// A CSV with its header only: the part did not run.
		if strings.HasSuffix(name, ".csv") && name != "load.csv" && strings.Count(strings.TrimSpace(string(b)), "\n") == 0 {
			continue
		}
		if name == "machine.env" && elapsed > 0 && d.machine["elapsed_s"] == "" {
			b = append(b, fmt.Sprintf("elapsed_s=%d\n", elapsed)...)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			return "", err
		}
	}
	if len(d.tput) > 0 {
		// The data plane as one small CSV instead of the iperf3 and tcprr answers.
		var dp strings.Builder
		dp.WriteString("engine,network,round,gbit_s,rr_p50_us,rr_p99_us\n")
		for _, e := range engineOrder {
			for _, n := range []string{"rdma", "macvlan", "bridge"} {
				for i := range d.tput[e][n] {
					fmt.Fprintf(&dp, "%s,%s,%d,%.6f,%.3f,%.3f\n", e, n, i+1, d.tput[e][n][i], at(d.rr[e][n], i), at(d.rr99[e][n], i))
				}
			}
		}
		if err := os.WriteFile(filepath.Join(dir, "dataplane.csv"), []byte(dp.String()), 0o644); err != nil {
			return "", err
		}
	}
	return dir, nil
}

// loadRuns loads every run under dir, oldest first.
func loadRuns(dir string) ([]*stored, error) {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []*stored
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		d, err := load(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, fmt.Errorf("run %s: %w", e.Name(), err)
		}
		if d.machine["date"] == "" || d.machine["commit"] == "" {
			return nil, fmt.Errorf("run %s: machine.env has no date or commit", filepath.Join(dir, e.Name()))
		}
		out = append(out, &stored{id: e.Name(), d: d, checks: checks(d)})
	}
	// The names begin with the date: their order is the runs' order.
	slices.SortFunc(out, func(a, b *stored) int { return strings.Compare(a.id, b.id) })
	return out, nil
}

// headRow is a target in the headline: its latest check and the run of it.
type headRow struct {
	c check
	r *stored
}

// headline returns, for every target any run measured, the check of the
// latest run that measured it, in the order of the parts (and within a
// part, in the order the runs first measured its targets).
func headline(runs []*stored) []headRow {
	var keys []string
	latest := map[string]headRow{}
	for _, p := range parts {
		for _, r := range runs {
			for _, c := range r.checks {
				if c.part != p.n {
					continue
				}
				if _, ok := latest[c.what]; !ok {
					keys = append(keys, c.what)
				}
				latest[c.what] = headRow{c, r} // runs are oldest first
			}
		}
	}
	out := make([]headRow, len(keys))
	for i, k := range keys {
		out[i] = latest[k]
	}
	return out
}

// page writes BENCHMARKS.md from the runs (oldest first), and the history
// page, docs/bench/history.md: the figures later runs replaced, then the
// notes. It returns the run each part's section comes from (nil when none
// has it).
func page(runs []*stored, notes string) (string, string, map[int]*stored) {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	head := headline(runs)
	src := map[int]*stored{}
	for _, p := range parts {
		for _, r := range runs {
			if p.has(r.d) {
				src[p.n] = r
			}
		}
	}
	current := map[*stored]bool{}
	for _, h := range head {
		current[h.r] = true
	}
	for _, r := range src {
		current[r] = true
	}

	w("# Benchmarks\n\n")
	w("The current figures of every target of `make bench`, each from the latest run that measured it, then the details of each part from that run. The figures later runs replaced and notes on earlier work are in [docs/bench/history.md](docs/bench/history.md). `make bench` (test/bench/bench.sh, test/bench/cmd/report) writes both pages from the raw samples of the runs under [docs/%s/](docs/%s/); only the notes are written by hand ([docs/bench/notes.md](docs/bench/notes.md)). Benchmarks are not tests: `make test` asserts no time.\n\n", runsDir, runsDir)
	w("## Current figures\n\n| benchmark | target | measured | | commit | run |\n|---|---|---|---|---|---|\n")
	for _, h := range head {
		w("| %s | %s | %s | %s | %s | %s |\n", h.c.what, h.c.target, h.c.measured, yes(h.c.ok), h.r.d.machine["commit"], h.r.link())
	}
	w("\nA run of some parts (`BENCH_PARTS`) replaces the rows of those parts only. The runs above, all on a shared development machine:\n\n")
	for i := len(runs) - 1; i >= 0; i-- {
		if current[runs[i]] {
			w("- %s\n", describe(runs[i]))
		}
	}
	w("\n**Noise.** Other builds and Docker tests ran on this machine during the runs (the load averages above, on %s cores). Absolute times drift with that load; the paired, interleaved ratios are the figures to compare.\n\n", runs[len(runs)-1].d.machine["nproc"])
	w("Reproduce (root, Debian 12; installs Debian's Docker, iperf3 and gnuplot when missing, uses the current engine when `scripts/engines.sh bindir` finds it built):\n\n")
	w("    sudo make bench                        # = bash test/bench/bench.sh [debian] [current]\n")
	w("    sudo BENCH_PARTS=runtime make bench    # some parts: endpoints (2, 3), docker (1, 4), concurrent (5), runtime (6)\n")
	for _, p := range parts {
		r := src[p.n]
		if r == nil {
			continue
		}
		body, _ := p.render(r.d)
		w("\n## %d. %s\n\n%s\n\n%s", p.n, p.title, r.from(), body)
	}

	var hb strings.Builder
	w = func(format string, args ...any) { fmt.Fprintf(&hb, format, args...) }
	w("# Benchmark history\n\nKept for the record: the figures of earlier runs that a later run of the same target replaced, and notes on the work of earlier commits, with the figures of their time. The current figures are in [BENCHMARKS.md](../../BENCHMARKS.md). `make bench` writes this page; only the notes are written by hand ([notes.md](notes.md)).\n")
	first := true
	for i := len(runs) - 1; i >= 0; i-- {
		r := runs[i]
		var old []check
		for _, c := range r.checks {
			if h := find(head, c.what); h.r != r {
				old = append(old, c)
			}
		}
		if len(old) == 0 {
			continue
		}
		if first {
			w("\n### Figures replaced by later runs\n")
			first = false
		}
		w("\n**The run of %s**, commit %s:\n\n| benchmark | target | measured | |\n|---|---|---|---|\n", r.histLink(), r.d.machine["commit"])
		for _, c := range old {
			w("| %s | %s | %s | %s |\n", c.what, c.target, c.measured, yes(c.ok))
		}
	}
	if notes != "" {
		w("\n%s", notes)
	}
	return b.String(), hb.String(), src
}

func find(head []headRow, what string) headRow {
	for _, h := range head {
		if h.c.what == what {
			return h
		}
	}
	return headRow{}
}

// describe says what a run measured, on what, how long it took and under
// what load.
func describe(r *stored) string {
	m := r.d.machine
	var ps []string
	for _, p := range parts {
		if p.has(r.d) {
			ps = append(ps, strconv.Itoa(p.n))
		}
	}
	s := fmt.Sprintf("%s, commit %s: parts %s", r.link(), m["commit"], strings.Join(ps, ", "))
	if e := m["elapsed_s"]; e != "" {
		s += fmt.Sprintf(" (%s s)", e)
	}
	s += fmt.Sprintf("; %s cores (%s), %s, kernel %s, %s, Go %s", m["nproc"], m["cpu"], m["memory"], m["kernel"], m["os"], strings.TrimPrefix(m["go"], "go"))
	for _, e := range engineOrder {
		if v := m["engine_"+e]; v != "" {
			s += fmt.Sprintf("; %s = %s %s", e, engineLabel[e], v)
		}
	}
	if len(r.d.load) > 0 {
		l := bench.Summarize(r.d.load)
		s += fmt.Sprintf("; 1-minute load average median %s, max %s", f2(l.Median), f2(l.Max))
	}
	return s + "."
}
