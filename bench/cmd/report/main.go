// Command report turns the raw results of scripts/bench.sh into a table on
// stdout, BENCHMARKS.md, the plots docs/bench-endpoints.png and
// docs/bench-start.png (with gnuplot), and a copy of the raw samples under
// docs/bench/. Hand-written findings in docs/bench/notes.md are included in
// BENCHMARKS.md as they are.
//
//	report -in DIR [-md BENCHMARKS.md -docs docs] [-elapsed SECONDS]
package main

import (
	"bufio"
	"encoding/csv"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/rdma-macvlan/rdma-macvlan/bench"
)

func main() {
	in := flag.String("in", "", "directory with the raw results (required)")
	md := flag.String("md", "", "write this Markdown report")
	docs := flag.String("docs", "", "write plots and raw samples under this directory")
	elapsed := flag.Int("elapsed", 0, "seconds the whole run took")
	flag.Parse()
	if *in == "" {
		fmt.Fprintln(os.Stderr, "report: -in is required")
		os.Exit(2)
	}
	if err := run(*in, *md, *docs, *elapsed); err != nil {
		fmt.Fprintln(os.Stderr, "report:", err)
		os.Exit(1)
	}
}

// data is everything one run measured.
type data struct {
	machine   map[string]string
	load      []float64                    // 1-minute load average samples
	start     map[string][]pair            // by engine
	life      map[int]map[string][]float64 // live -> op -> ms
	lifePass  []passInfo
	restart   []float64
	restartN  int
	endpoints endpointsJSON
	tput      map[string]map[string][]float64 // engine -> net -> Gbit/s by round
	rr        map[string]map[string][]float64 // engine -> net -> p50 us by round
	rr99      map[string]map[string][]float64
	conc      map[string][]concRun // by engine, in the order run
}

// concRun is one driver's turn in a round of concurrent starts (conc.csv).
type concRun struct {
	round                         int
	driver                        string
	first                         bool
	n                             int
	wallMS, rmMS, settleMS        float64
	errors, notRunning, leakCount int
}

type pair struct {
	rdma, macvlan float64
	rdmaFirst     bool
}

type passInfo struct{ pass, live int }

type endpointsJSON struct {
	Table    int    `json:"gid_table_size"`
	Cycles   int    `json:"cycles_per_pass"`
	Levels   []int  `json:"levels"`
	LogLevel string `json:"log_level"`
	Memory   []struct {
		When  string `json:"when"`
		RSSKB int    `json:"rss_kb"`
		HWMKB int    `json:"hwm_kb"`
	} `json:"memory"`
	StatusMS []float64 `json:"status_ms"`
	CPU      []struct {
		Live          int     `json:"live"`
		MSPerCycle    float64 `json:"ms_per_cycle"`
		ReadsPerCycle float64 `json:"read_syscalls_per_cycle"`
	} `json:"daemon_cpu"`
}

func readCSV(path string) ([][]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r := csv.NewReader(f)
	r.FieldsPerRecord = -1
	rows, err := r.ReadAll()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(rows) > 0 {
		rows = rows[1:] // header
	}
	return rows, nil
}

func num(s string) float64 {
	v, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil {
		return math.NaN()
	}
	return v
}

func load(in string) (*data, error) {
	d := &data{machine: map[string]string{}, start: map[string][]pair{}, life: map[int]map[string][]float64{},
		tput: map[string]map[string][]float64{}, rr: map[string]map[string][]float64{}, rr99: map[string]map[string][]float64{},
		conc: map[string][]concRun{}}
	if f, err := os.Open(filepath.Join(in, "machine.env")); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), "="); ok {
				d.machine[k] = v
			}
		}
		f.Close()
	}
	if f, err := os.Open(filepath.Join(in, "load.csv")); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if fs := strings.Split(sc.Text(), ","); len(fs) >= 2 {
				d.load = append(d.load, num(fs[1]))
			}
		}
		f.Close()
	}
	if rows, err := readCSV(filepath.Join(in, "start.csv")); err == nil {
		// engine,pair,driver,position,ms
		byKey := map[string]*pair{}
		var order []string
		for _, r := range rows {
			if len(r) < 5 {
				continue
			}
			k := r[0] + "/" + r[1]
			p, ok := byKey[k]
			if !ok {
				p = &pair{}
				byKey[k] = p
				order = append(order, k)
			}
			switch r[2] {
			case "rdma":
				p.rdma = num(r[4])
				p.rdmaFirst = r[3] == "1"
			case "macvlan":
				p.macvlan = num(r[4])
			}
		}
		for _, k := range order {
			eng, _, _ := strings.Cut(k, "/")
			d.start[eng] = append(d.start[eng], *byKey[k])
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	if rows, err := readCSV(filepath.Join(in, "conc.csv")); err == nil {
		// engine,round,driver,position,n,wall_ms,errors,not_running,rm_ms,settle_ms,leaks
		for _, r := range rows {
			if len(r) < 11 {
				continue
			}
			atoi := func(s string) int { v, _ := strconv.Atoi(strings.TrimSpace(s)); return v }
			d.conc[r[0]] = append(d.conc[r[0]], concRun{round: atoi(r[1]), driver: r[2], first: r[3] == "1", n: atoi(r[4]),
				wallMS: num(r[5]), errors: atoi(r[6]), notRunning: atoi(r[7]), rmMS: num(r[8]), settleMS: num(r[9]), leakCount: atoi(r[10])})
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	if rows, err := readCSV(filepath.Join(in, "lifecycle.csv")); err == nil {
		seen := map[int]bool{}
		for _, r := range rows {
			if len(r) < 4 {
				continue
			}
			pass, _ := strconv.Atoi(r[0])
			live, _ := strconv.Atoi(r[1])
			if d.life[live] == nil {
				d.life[live] = map[string][]float64{}
			}
			d.life[live][r[2]] = append(d.life[live][r[2]], num(r[3]))
			if !seen[pass] {
				seen[pass] = true
				d.lifePass = append(d.lifePass, passInfo{pass, live})
			}
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	if rows, err := readCSV(filepath.Join(in, "restart.csv")); err == nil {
		for _, r := range rows {
			if len(r) >= 3 {
				d.restart = append(d.restart, num(r[2]))
				d.restartN, _ = strconv.Atoi(r[1])
			}
		}
	}
	if b, err := os.ReadFile(filepath.Join(in, "endpoints.json")); err == nil {
		if err := json.Unmarshal(b, &d.endpoints); err != nil {
			return nil, fmt.Errorf("endpoints.json: %w", err)
		}
	}
	// The copy under docs/bench/ keeps the data plane as one CSV instead of
	// the iperf3 and tcprr answers.
	if rows, err := readCSV(filepath.Join(in, "dataplane.csv")); err == nil {
		for _, r := range rows {
			if len(r) >= 6 {
				add(d.tput, r[0], r[1], num(r[3]))
				add(d.rr, r[0], r[1], num(r[4]))
				add(d.rr99, r[0], r[1], num(r[5]))
			}
		}
		return d, nil
	}
	files, _ := filepath.Glob(filepath.Join(in, "iperf-*.json"))
	for _, f := range files {
		eng, net, ok := engineNet(f, "iperf-")
		if !ok {
			continue
		}
		var r struct {
			End struct {
				SumReceived struct {
					BitsPerSecond float64 `json:"bits_per_second"`
				} `json:"sum_received"`
			} `json:"end"`
		}
		b, err := os.ReadFile(f)
		if err != nil || json.Unmarshal(b, &r) != nil || r.End.SumReceived.BitsPerSecond == 0 {
			return nil, fmt.Errorf("%s: no iperf3 result", f)
		}
		add(d.tput, eng, net, r.End.SumReceived.BitsPerSecond/1e9)
	}
	files, _ = filepath.Glob(filepath.Join(in, "rr-*.json"))
	for _, f := range files {
		eng, net, ok := engineNet(f, "rr-")
		if !ok {
			continue
		}
		var r struct {
			P50 float64 `json:"p50_us"`
			P99 float64 `json:"p99_us"`
		}
		b, err := os.ReadFile(f)
		if err != nil || json.Unmarshal(b, &r) != nil || r.P50 == 0 {
			return nil, fmt.Errorf("%s: no tcprr result", f)
		}
		add(d.rr, eng, net, r.P50)
		add(d.rr99, eng, net, r.P99)
	}
	return d, nil
}

// engineNet parses PREFIX-ENGINE-NET-ROUND.json. Files are globbed in
// lexical order; rounds are kept in numeric order by sortRounds.
func engineNet(path, prefix string) (string, string, bool) {
	base := strings.TrimSuffix(filepath.Base(path), ".json")
	fs := strings.Split(strings.TrimPrefix(base, prefix), "-")
	if len(fs) != 3 {
		return "", "", false
	}
	return fs[0], fs[1], true
}

func add(m map[string]map[string][]float64, a, b string, v float64) {
	if m[a] == nil {
		m[a] = map[string][]float64{}
	}
	m[a][b] = append(m[a][b], v)
}

// check is one target and whether it held.
type check struct {
	what, target, measured string
	ok                     bool
}

func yes(ok bool) string {
	if ok {
		return "holds"
	}
	return "**missed**"
}

func f1(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }
func f2(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) }
func f3(v float64) string { return strconv.FormatFloat(v, 'f', 3, 64) }

var engineOrder = []string{"debian", "current"}

func engines(m map[string][]pair) []string {
	var out []string
	for _, e := range engineOrder {
		if _, ok := m[e]; ok {
			out = append(out, e)
		}
	}
	return out
}

// engineLabel names the engines as scripts/engines.sh provides them.
var engineLabel = map[string]string{"debian": "Debian's Docker", "current": "moby"}

func engineName(d *data, e string) string {
	if v := d.machine["engine_"+e]; v != "" {
		return fmt.Sprintf("%s (%s %s)", e, engineLabel[e], v)
	}
	return e
}

var pluginOps = []string{"create", "join", "leave", "delete"}

var opNames = map[string]string{
	"create": "CreateEndpoint", "join": "Join", "leave": "Leave", "delete": "DeleteEndpoint",
	"plugin": "the four calls", "move": "move into netns", "moveback": "move back", "cycle": "whole cycle",
	"kadd": "kernel: add macvlan", "kdel": "kernel: delete macvlan",
}

func run(in, mdPath, docs string, elapsed int) error {
	d, err := load(in)
	if err != nil {
		return err
	}
	var checks []check
	var md strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&md, format, args...) }

	// 1. Container start.
	var start strings.Builder
	for _, e := range engines(d.start) {
		ps := d.start[e]
		var r, m []float64
		for _, p := range ps {
			r = append(r, p.rdma)
			m = append(m, p.macvlan)
		}
		rs, ms := bench.Summarize(r), bench.Summarize(m)
		ratio := bench.Summarize(bench.Ratios(r, m))
		fmt.Fprintf(&start, "\n**%s**, %d interleaved pairs (order alternates in each pair):\n\n", engineName(d, e), len(ps))
		fmt.Fprintf(&start, "| `docker run --rm` | median ms | p90 ms | IQR ms | min-max ms | median 95%% CI |\n|---|---|---|---|---|---|\n")
		fmt.Fprintf(&start, "| built-in macvlan | %s | %s | %s | %s-%s | %s-%s |\n", f1(ms.Median), f1(ms.P90), f1(ms.IQR()), f1(ms.Min), f1(ms.Max), f1(ms.MedianLo), f1(ms.MedianHi))
		fmt.Fprintf(&start, "| rdma-macvlan | %s | %s | %s | %s-%s | %s-%s |\n", f1(rs.Median), f1(rs.P90), f1(rs.IQR()), f1(rs.Min), f1(rs.Max), f1(rs.MedianLo), f1(rs.MedianHi))
		fmt.Fprintf(&start, "| ratio rdma-macvlan / macvlan, per pair | %s | %s | %s | %s-%s | %s-%s |\n", f3(ratio.Median), f3(ratio.P90), f3(ratio.IQR()), f3(ratio.Min), f3(ratio.Max), f3(ratio.MedianLo), f3(ratio.MedianHi))
		checks = append(checks, check{"1. container start, " + e, "median paired ratio <= 1.03",
			fmt.Sprintf("%s (95%% CI %s-%s; medians %s vs %s ms)", f3(ratio.Median), f3(ratio.MedianLo), f3(ratio.MedianHi), f1(rs.Median), f1(ms.Median)), ratio.Median <= 1.03})
	}

	// 2. Endpoint life cycle.
	var life strings.Builder
	levels := sortedKeys(d.life)
	if len(levels) > 0 {
		lo, hi := levels[0], levels[len(levels)-1]
		fmt.Fprintf(&life, "\n| operation | %s |\n|---|%s\n", strings.Join(mapStr(levels, func(l int) string { return fmt.Sprintf("p50 / p99 ms at %d live", l) }), " | "), strings.Repeat("---|", len(levels)))
		for _, op := range append(append([]string{}, pluginOps...), "plugin", "move", "moveback", "cycle", "kadd", "kdel") {
			cells := mapStr(levels, func(l int) string {
				s := bench.Summarize(d.life[l][op])
				return f2(s.Median) + " / " + f2(s.P99)
			})
			fmt.Fprintf(&life, "| %s | %s |\n", opNames[op], strings.Join(cells, " | "))
		}
		if len(d.endpoints.CPU) > 0 {
			cpu := map[int][]float64{}
			reads := map[int][]float64{}
			for _, c := range d.endpoints.CPU {
				cpu[c.Live] = append(cpu[c.Live], c.MSPerCycle)
				reads[c.Live] = append(reads[c.Live], c.ReadsPerCycle)
			}
			cells := mapStr(levels, func(l int) string {
				return fmt.Sprintf("%s ms, %.0f reads", f1(bench.Summarize(cpu[l]).Mean), bench.Summarize(reads[l]).Mean)
			})
			fmt.Fprintf(&life, "| daemon CPU and read syscalls per cycle (mean of the passes) | %s |\n", strings.Join(cells, " | "))
		}
		n := len(d.life[lo]["create"])
		fmt.Fprintf(&life, "\n%d samples per level (%d per pass), GID table of %d slots.\n", n, d.endpoints.Cycles, d.endpoints.Table)
		for _, op := range pluginOps {
			var worst50, worst99 float64
			for _, l := range levels {
				s := bench.Summarize(d.life[l][op])
				worst50 = max(worst50, s.Median)
				worst99 = max(worst99, s.P99)
			}
			r := bench.Summarize(d.life[hi][op]).Median / bench.Summarize(d.life[lo][op]).Median
			checks = append(checks,
				check{"2. " + opNames[op] + " p50", "<= 2 ms at every level", "worst " + f2(worst50) + " ms", worst50 <= 2},
				check{"2. " + opNames[op] + " p99", "<= 10 ms at every level", "worst " + f2(worst99) + " ms", worst99 <= 10},
				check{"2. " + opNames[op] + fmt.Sprintf(" p50 at %d / at %d", hi, lo), "<= 1.2", f2(r), r <= 1.2})
		}
	}

	// 3. Restart and memory.
	var rst strings.Builder
	if len(d.restart) > 0 {
		s := bench.Summarize(d.restart)
		fmt.Fprintf(&rst, "\nTime from process start to `/v1/status` answering, %d restarts with %d endpoints in state: median %s ms, p90 %s ms, max %s ms.\n", s.N, d.restartN, f1(s.Median), f1(s.P90), f1(s.Max))
		checks = append(checks, check{"3. restart to serving", "< 1 s", fmt.Sprintf("median %s ms, max %s ms (%d endpoints)", f1(s.Median), f1(s.Max), d.restartN), s.Max < 1000})
	}
	if len(d.endpoints.Memory) > 0 {
		fmt.Fprintf(&rst, "\n| daemon memory | VmRSS MiB | VmHWM MiB |\n|---|---|---|\n")
		worst := 0
		for _, m := range d.endpoints.Memory {
			fmt.Fprintf(&rst, "| %s | %s | %s |\n", m.When, f1(float64(m.RSSKB)/1024), f1(float64(m.HWMKB)/1024))
			worst = max(worst, m.RSSKB, m.HWMKB)
		}
		checks = append(checks, check{"3. RSS at 1000 endpoints", "< 30 MB", "peak " + f1(float64(worst)/1024) + " MiB (VmHWM)", float64(worst)*1024 < 30e6})
	}
	if len(d.endpoints.StatusMS) > 0 {
		s := bench.Summarize(d.endpoints.StatusMS)
		fmt.Fprintf(&rst, "\n`GET /v1/status` with %d endpoints (it reads the whole GID table twice per port): median %s ms, p90 %s ms.\n", d.restartN, f1(s.Median), f1(s.P90))
	}

	// 4. Data plane.
	var dp strings.Builder
	for _, e := range engineOrder {
		t := d.tput[e]
		if t == nil {
			continue
		}
		fmt.Fprintf(&dp, "\nOn %s, %d interleaved rounds (network order rotates each round):\n\n", engineName(d, e), len(t["macvlan"]))
		fmt.Fprintf(&dp, "| network | TCP Gbit/s median (min-max) | RR p50 us median (min-max) | RR p99 us median |\n|---|---|---|---|\n")
		for _, n := range []string{"rdma", "macvlan", "bridge"} {
			ts, rs, r99 := bench.Summarize(t[n]), bench.Summarize(d.rr[e][n]), bench.Summarize(d.rr99[e][n])
			name := map[string]string{"rdma": "rdma-macvlan", "macvlan": "built-in macvlan", "bridge": "bridge (user-defined)"}[n]
			fmt.Fprintf(&dp, "| %s | %s (%s-%s) | %s (%s-%s) | %s |\n", name, f2(ts.Median), f2(ts.Min), f2(ts.Max), f1(rs.Median), f1(rs.Min), f1(rs.Max), f1(r99.Median))
		}
		tr := bench.Summarize(bench.Ratios(t["rdma"], t["macvlan"]))
		lr := bench.Summarize(bench.Ratios(d.rr[e]["macvlan"], d.rr[e]["rdma"]))
		fmt.Fprintf(&dp, "\nPer round, rdma-macvlan / macvlan: throughput ratio median %s (min %s, max %s); latency as speed (macvlan p50 / rdma-macvlan p50) median %s (min %s, max %s).\n",
			f3(tr.Median), f3(tr.Min), f3(tr.Max), f3(lr.Median), f3(lr.Min), f3(lr.Max))
		checks = append(checks,
			check{"4. TCP throughput vs macvlan", ">= 0.98x", fmt.Sprintf("%sx (median of per-round ratios, 95%% CI %s-%s)", f3(tr.Median), f3(tr.MedianLo), f3(tr.MedianHi)), tr.Median >= 0.98},
			check{"4. TCP latency vs macvlan", ">= 0.98x (macvlan p50 / rdma-macvlan p50)", fmt.Sprintf("%sx (95%% CI %s-%s)", f3(lr.Median), f3(lr.MedianLo), f3(lr.MedianHi)), lr.Median >= 0.98})
	}

	// 5. Concurrent starts.
	var conc strings.Builder
	for _, e := range engineOrder {
		runs := d.conc[e]
		if len(runs) == 0 {
			continue
		}
		type side struct {
			wall, rm                  []float64
			errors, notRunning, leaks int
		}
		by := map[string]*side{"rdma": {}, "macvlan": {}}
		wall := map[int]map[string]float64{}
		var rounds []int
		n := 0
		for _, c := range runs {
			s := by[c.driver]
			if s == nil {
				continue
			}
			s.wall = append(s.wall, c.wallMS)
			s.rm = append(s.rm, c.rmMS)
			s.errors += c.errors
			s.notRunning += c.notRunning
			s.leaks += c.leakCount
			if wall[c.round] == nil {
				wall[c.round] = map[string]float64{}
				rounds = append(rounds, c.round)
			}
			wall[c.round][c.driver] = c.wallMS
			n = c.n
		}
		var ratios []float64
		var cells []string
		for _, r := range rounds {
			if w := wall[r]; w["rdma"] > 0 && w["macvlan"] > 0 {
				ratios = append(ratios, w["rdma"]/w["macvlan"])
				cells = append(cells, f3(w["rdma"]/w["macvlan"]))
			}
		}
		ratio := bench.Summarize(ratios)
		fmt.Fprintf(&conc, "\n**%s**, %d rounds (the driver that goes first alternates):\n\n", engineName(d, e), len(rounds))
		fmt.Fprintf(&conc, "| %d `docker run -d` at once | wall s, median (min-max) | `docker rm -f` of all, wall s, median | failed runs | not running | leaks |\n|---|---|---|---|---|---|\n", n)
		for _, drv := range []string{"macvlan", "rdma"} {
			s := by[drv]
			ws, rs := bench.Summarize(s.wall), bench.Summarize(s.rm)
			name := map[string]string{"rdma": "rdma-macvlan", "macvlan": "built-in macvlan"}[drv]
			fmt.Fprintf(&conc, "| %s | %s (%s-%s) | %s | %d | %d | %d |\n", name, f2(ws.Median/1000), f2(ws.Min/1000), f2(ws.Max/1000), f2(rs.Median/1000), s.errors, s.notRunning, s.leaks)
		}
		fmt.Fprintf(&conc, "\nWall-time ratio rdma-macvlan / macvlan per round: %s; median %s.\n", strings.Join(cells, ", "), f3(ratio.Median))
		r, m := by["rdma"], by["macvlan"]
		bad := r.errors + r.notRunning + r.leaks + m.errors + m.notRunning + m.leaks
		checks = append(checks, check{fmt.Sprintf("5. %d concurrent docker run -d, %s", n, e), "median per-round wall ratio <= 1.05, 0 errors, 0 leaks",
			fmt.Sprintf("%s (rounds %s; medians %s vs %s s); errors %d / %d, leaks %d / %d (rdma-macvlan / macvlan)", f3(ratio.Median), strings.Join(cells, ", "),
				f2(bench.Summarize(r.wall).Median/1000), f2(bench.Summarize(m.wall).Median/1000), r.errors+r.notRunning, m.errors+m.notRunning, r.leaks, m.leaks),
			len(ratios) > 0 && ratio.Median <= 1.05 && bad == 0})
	}

	// Noise.
	var noise strings.Builder
	if len(d.load) > 0 {
		l := bench.Summarize(d.load)
		fmt.Fprintf(&noise, "1-minute load average during the run (sampled every 2 s, %d samples, on %s cores): median %s, min %s, max %s.", l.N, d.machine["nproc"], f2(l.Median), f2(l.Min), f2(l.Max))
	}
	for _, e := range engines(d.start) {
		var m []float64
		for _, p := range d.start[e] {
			m = append(m, p.macvlan)
		}
		s := bench.Summarize(m)
		fmt.Fprintf(&noise, " Built-in macvlan start on %s: IQR %s%% of the median, max/min %s.", e, f1(100*s.RelIQR()), f2(s.Max/s.Min))
	}

	// Table on stdout.
	fmt.Println()
	fmt.Printf("%-46s %-44s %-60s %s\n", "benchmark", "target", "measured", "")
	for _, c := range checks {
		fmt.Printf("%-46s %-44s %-60s %s\n", c.what, c.target, c.measured, strings.Trim(yes(c.ok), "*"))
	}
	fmt.Println()
	fmt.Println(noise.String())

	if mdPath == "" {
		return nil
	}
	notes := ""
	if docs != "" {
		if b, err := os.ReadFile(filepath.Join(docs, "bench", "notes.md")); err == nil {
			notes = string(b)
		}
	}
	w("# Benchmarks\n\n")
	w("Taken %s on %s: %s cores (%s), %s, kernel %s, %s, Go %s, commit %s.", d.machine["date"], "a shared development machine", d.machine["nproc"], d.machine["cpu"], d.machine["memory"], d.machine["kernel"], d.machine["os"], strings.TrimPrefix(d.machine["go"], "go"), d.machine["commit"])
	for _, e := range engineOrder {
		if v := d.machine["engine_"+e]; v != "" {
			w(" Engine %s: %s %s.", e, engineLabel[e], v)
		}
	}
	w("\n\nReproduce (root, Debian 12; installs Debian's Docker, iperf3 and gnuplot when missing, uses the current engine when `scripts/engines.sh bindir` finds it built):\n\n    sudo make bench        # = bash scripts/bench.sh [debian] [current]\n\n")
	if elapsed > 0 {
		w("This run took %d s. ", elapsed)
	}
	w("Raw samples: [docs/bench/](docs/bench/). Benchmarks are not tests: `make test` asserts no time.\n\n")
	w("**Noise.** Other builds and Docker tests ran on this machine at the same time. %s Absolute times drift with that load; the paired, interleaved ratios are the figures to compare.\n\n", noise.String())
	w("## Targets\n\n| benchmark | target | measured | |\n|---|---|---|---|\n")
	for _, c := range checks {
		w("| %s | %s | %s | %s |\n", c.what, c.target, c.measured, yes(c.ok))
	}
	w("\n## 1. Container start\n\n`docker run --rm --network NET busybox true`, wall time seen by the CLI, on rdma-macvlan (managed plugin, fake mlx5 sysfs for a veth parent) and Docker's built-in macvlan on the same veth parent and engine. Each pair runs both, in alternating order; the ratio is taken per pair.\n")
	w("%s\n![start-time distributions](docs/bench-start.png)\n", start.String())
	w("\n## 2. Endpoint life cycle at the plugin\n\nThe daemon binary in its own network namespace with a veth parent and a fake rxe sysfs, driven over its socket as Docker drives it; the link moved into a namespace and back as libnetwork does (`netnstest.MoveInto`/`MoveBack`). Live endpoints are joined, each in its own namespace, with their GID entries in the table. Levels run 10, 100, 1000, 1000, 100, 10 (two passes per level, against drift). The kernel rows add and delete a macvlan child of the same parent directly in every cycle: the floor under CreateEndpoint and DeleteEndpoint.\n")
	w("%s\n![endpoint latency vs live endpoints](docs/bench-endpoints.png)\n", life.String())
	w("\n## 3. Restart and memory\n%s", rst.String())
	w("\n## 4. Data plane\n\niperf3 (%ss per run after one omitted second, one stream) and a TCP request/response loop (bench/cmd/tcprr, 64-byte messages, 5000 round trips) between two containers on the same network, run in the containers' network namespaces with `nsenter -t PID -n`.\n%s", d.machine["iperf_seconds"], dp.String())
	if conc.Len() > 0 {
		w("\n## 5. Concurrent starts\n\n%s `docker run -d` at once on one network (each CLI started in the background, the wall time until the last has returned), on rdma-macvlan and the built-in macvlan on the same parent and engine, both in each round; then `docker rm -f` of all of them at once. A run is failed when it exits non-zero or writes to stderr; not running counts containers that are not running once every run has returned. Leaks are what is left %s s after the removals: containers, macvlan children of the parent and the plugin's links in the host netns, endpoints in the plugin's `/v1/status` and endpoint state files. The plugin's GID watches end at their first look (the fake table holds the containers' entries).\n%s", d.machine["conc"], d.machine["conc_settle"], conc.String())
	}
	if notes != "" {
		w("\n%s", notes)
	}
	if err := os.WriteFile(mdPath, []byte(md.String()), 0o644); err != nil {
		return err
	}
	return writeDocs(in, docs, d)
}

func sortedKeys(m map[int]map[string][]float64) []int {
	var out []int
	for k := range m {
		out = append(out, k)
	}
	sort.Ints(out)
	return out
}

func mapStr(xs []int, f func(int) string) []string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = f(x)
	}
	return out
}

// writeDocs copies the raw samples to docs/bench/ and draws the plots.
func writeDocs(in, docs string, d *data) error {
	raw := filepath.Join(docs, "bench")
	if err := os.MkdirAll(raw, 0o755); err != nil {
		return err
	}
	for _, name := range []string{"machine.env", "load.csv", "start.csv", "conc.csv", "lifecycle.csv", "restart.csv", "endpoints.json"} {
		if err := copyFile(filepath.Join(in, name), filepath.Join(raw, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	// The data plane as one small CSV.
	var dp strings.Builder
	dp.WriteString("engine,network,round,gbit_s,rr_p50_us,rr_p99_us\n")
	for _, e := range engineOrder {
		for _, n := range []string{"rdma", "macvlan", "bridge"} {
			for i := range d.tput[e][n] {
				fmt.Fprintf(&dp, "%s,%s,%d,%.6f,%.3f,%.3f\n", e, n, i+1, d.tput[e][n][i], at(d.rr[e][n], i), at(d.rr99[e][n], i))
			}
		}
	}
	if err := os.WriteFile(filepath.Join(raw, "dataplane.csv"), []byte(dp.String()), 0o644); err != nil {
		return err
	}
	return plot(docs, d)
}

// gpQuote makes s a single-quoted gnuplot string.
func gpQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

func at(xs []float64, i int) float64 {
	if i < len(xs) {
		return xs[i]
	}
	return math.NaN()
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// plot writes the gnuplot data and script into a temporary directory and
// runs gnuplot.
func plot(docs string, d *data) error {
	tmp, err := os.MkdirTemp("", "rmv-bench-plot.")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	var gp strings.Builder
	gp.WriteString("set terminal pngcairo size 1200,500 font ',10'\nset grid\nset key top left\n")

	levels := sortedKeys(d.life)
	if len(levels) > 0 {
		ops := []string{"create", "join", "leave", "delete", "plugin", "kdel"}
		var dat strings.Builder
		dat.WriteString("# live")
		for _, op := range ops {
			fmt.Fprintf(&dat, " %s_p50 %s_p99", op, op)
		}
		dat.WriteString("\n")
		for _, l := range levels {
			fmt.Fprintf(&dat, "%d", l)
			for _, op := range ops {
				s := bench.Summarize(d.life[l][op])
				fmt.Fprintf(&dat, " %.4f %.4f", s.Median, s.P99)
			}
			dat.WriteString("\n")
		}
		if err := os.WriteFile(filepath.Join(tmp, "endpoints.dat"), []byte(dat.String()), 0o644); err != nil {
			return err
		}
		fmt.Fprintf(&gp, "set output '%s'\n", filepath.Join(docs, "bench-endpoints.png"))
		gp.WriteString("set multiplot layout 1,2 title 'rdma-macvlan endpoint life cycle at the socket (real netlink)'\n")
		gp.WriteString("set logscale x\nset logscale y\nset xlabel 'live endpoints on one parent'\nset ylabel 'ms'\nset xtics (10,100,1000)\nset xrange [7:1400]\nset key below\n")
		for k, q := range []string{"p50", "p99"} {
			fmt.Fprintf(&gp, "set title '%s'\nplot ", q)
			for i, op := range ops {
				if i > 0 {
					gp.WriteString(", ")
				}
				dash := ""
				if op == "kdel" {
					dash = " dt 2"
				}
				fmt.Fprintf(&gp, "'%s' using 1:%d with linespoints lw 2%s title '%s'", filepath.Join(tmp, "endpoints.dat"), 2+2*i+k, dash, opNames[op])
			}
			gp.WriteString(", 2 with lines lc rgb 'red' dt 3 title 'target p50 2 ms', 10 with lines lc rgb 'black' dt 3 title 'target p99 10 ms'\n")
		}
		gp.WriteString("unset multiplot\nunset logscale\nunset xtics\nset xtics\nset autoscale x\nset key inside\n")
	}

	engs := engines(d.start)
	if len(engs) > 0 {
		fmt.Fprintf(&gp, "set output '%s'\n", filepath.Join(docs, "bench-start.png"))
		fmt.Fprintf(&gp, "set multiplot layout 1,%d title 'docker run --rm: distribution of start times (interleaved pairs)'\n", len(engs))
		gp.WriteString("set xlabel 'ms'\nset ylabel 'fraction of runs'\nset yrange [0:1]\nset key bottom right\n")
		for _, e := range engs {
			var r, m []float64
			for _, p := range d.start[e] {
				r = append(r, p.rdma)
				m = append(m, p.macvlan)
			}
			for name, xs := range map[string][]float64{"rdma": r, "macvlan": m} {
				v, f := bench.CDF(xs)
				var b strings.Builder
				for i := range v {
					fmt.Fprintf(&b, "%.3f %.4f\n", v[i], f[i])
				}
				if err := os.WriteFile(filepath.Join(tmp, "start-"+e+"-"+name+".dat"), []byte(b.String()), 0o644); err != nil {
					return err
				}
			}
			fmt.Fprintf(&gp, "set title %s\nplot '%s' using 1:2 with steps lw 2 title 'built-in macvlan', '%s' using 1:2 with steps lw 2 title 'rdma-macvlan'\n",
				gpQuote(engineName(d, e)), filepath.Join(tmp, "start-"+e+"-macvlan.dat"), filepath.Join(tmp, "start-"+e+"-rdma.dat"))
		}
		gp.WriteString("unset multiplot\n")
	}
	script := filepath.Join(tmp, "plots.gp")
	if err := os.WriteFile(script, []byte(gp.String()), 0o644); err != nil {
		return err
	}
	if out, err := exec.Command("gnuplot", script).CombinedOutput(); err != nil {
		return fmt.Errorf("gnuplot: %w\n%s", err, out)
	}
	return nil
}
