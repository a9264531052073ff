// Command report turns the raw results of test/bench/bench.sh into a table on
// stdout and, with -md and -docs, keeps the run's raw samples under
// docs/bench/runs/RUN/ and writes BENCHMARKS.md from every run stored there.
// The page's headline table holds, for each target, the latest run that
// measured it (each row names its commit and run), so a run of some parts
// leaves the other rows as they were; the sections below it show each part
// from the latest run that has it. Figures superseded by a later run and the
// hand-written notes of docs/bench/notes.md go to docs/bench/history.md. The plots
// docs/bench-endpoints.png and docs/bench-start.png (gnuplot) are drawn from
// the runs the sections show. Nothing on the page is typed by hand but the
// notes.
//
//	report -in DIR [-md BENCHMARKS.md -docs docs] [-elapsed SECONDS]
//	report -md BENCHMARKS.md -docs docs    (the page again from the stored runs)
package main

import (
	"bufio"
	"encoding/csv"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

func main() {
	in := flag.String("in", "", "directory with the raw results of a run")
	md := flag.String("md", "", "write this Markdown page (needs -docs)")
	docs := flag.String("docs", "", "directory of the plots, with the stored runs under bench/runs/")
	elapsed := flag.Int("elapsed", 0, "seconds the whole run took")
	flag.Parse()
	if *in == "" && *md == "" {
		fmt.Fprintln(os.Stderr, "report: give -in DIR (a run's raw results), -md and -docs (the page), or both")
		os.Exit(2)
	}
	if (*md == "") != (*docs == "") {
		fmt.Fprintln(os.Stderr, "report: -md and -docs go together: the page is made from the runs stored under DOCS/bench/runs/")
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
	conc      map[string][]concRun     // by engine, in the order run
	rdma      map[string][]runtimePair // by engine, in the order run
}

// runtimePair is one pair of part 6 (runtime.csv), in ms: docker run
// --rm --runtime rdma-macvlan of a container on the rdma-macvlan network
// and the same with --runtime runc and its devices, CAP_IPC_LOCK and
// memlock given by hand, then the two on --net none; rdma-exec's wait in
// the first as it reported it.
type runtimePair struct {
	rt, runc, rtNone, runcNone float64
	wait                       float64
	looks                      int
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
		conc: map[string][]concRun{}, rdma: map[string][]runtimePair{}}
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
	if rows, err := readCSV(filepath.Join(in, "runtime.csv")); err == nil {
		// engine,pair,kind,position,ms,wait_ms,looks
		byKey := map[string]*runtimePair{}
		var order []string
		for _, r := range rows {
			if len(r) < 7 {
				continue
			}
			k := r[0] + "/" + r[1]
			p, ok := byKey[k]
			if !ok {
				p = &runtimePair{}
				byKey[k] = p
				order = append(order, k)
			}
			switch r[2] {
			case "runtime":
				p.rt, p.wait = num(r[4]), num(r[5])
				p.looks, _ = strconv.Atoi(strings.TrimSpace(r[6]))
			case "runc":
				p.runc = num(r[4])
			case "runtime-none":
				p.rtNone = num(r[4])
			case "runc-none":
				p.runcNone = num(r[4])
			}
		}
		for _, k := range order {
			if p := byKey[k]; p.rt > 0 && p.runc > 0 && p.rtNone > 0 && p.runcNone > 0 {
				eng, _, _ := strings.Cut(k, "/")
				d.rdma[eng] = append(d.rdma[eng], *p)
			}
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
	// A run stored under docs/bench/runs/ keeps the data plane as one CSV instead of
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
