package main

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/rdma-macvlan/rdma-macvlan/test/bench"
)

// check is one target of one run and whether it held. what names the
// target (with its engine where it has one): the page's headline keeps the
// latest run's check of each what.
type check struct {
	part                   int
	what, target, measured string
	ok                     bool
}

func yes(ok bool) string {
	if ok {
		return "holds"
	}
	return "**missed**"
}

// part is one part of the benchmarks: whether a run measured it, and its
// section of the page with the targets it checks.
type part struct {
	n      int
	title  string
	has    func(*data) bool
	render func(*data) (string, []check)
}

var parts = []part{
	{1, "Container start", func(d *data) bool { return len(engines(d.start)) > 0 }, startPart},
	{2, "Endpoint life cycle at the plugin", func(d *data) bool { return len(d.life) > 0 }, lifePart},
	{3, "Restart and memory", func(d *data) bool { return len(d.restart) > 0 || len(d.endpoints.Memory) > 0 }, restartPart},
	{4, "Data plane", func(d *data) bool { return len(d.tput) > 0 }, dataplanePart},
	{5, "Concurrent starts", func(d *data) bool { return len(d.conc) > 0 }, concPart},
	{6, "Starting through the runtime: rdma-macvlan-runtime against runc", func(d *data) bool { return len(engines(d.rdma)) > 0 }, runtimePart},
}

// checks returns every target a run measured, in the order of the parts.
func checks(d *data) []check {
	var out []check
	for _, p := range parts {
		if p.has(d) {
			_, cs := p.render(d)
			out = append(out, cs...)
		}
	}
	return out
}

func startPart(d *data) (string, []check) {
	var b strings.Builder
	var cs []check
	b.WriteString("`docker run --rm --network NET busybox true`, wall time seen by the CLI, on rdma-macvlan (managed plugin, fake mlx5 sysfs for a veth parent) and Docker's built-in macvlan on the same veth parent and engine. Each pair runs both, in alternating order; the ratio is taken per pair.\n")
	var noise []string
	for _, e := range engines(d.start) {
		ps := d.start[e]
		var r, m []float64
		for _, p := range ps {
			r = append(r, p.rdma)
			m = append(m, p.macvlan)
		}
		rs, ms := bench.Summarize(r), bench.Summarize(m)
		ratio := bench.Summarize(bench.Ratios(r, m))
		fmt.Fprintf(&b, "\n**%s**, %d interleaved pairs (order alternates in each pair):\n\n", engineName(d, e), len(ps))
		fmt.Fprintf(&b, "| `docker run --rm` | median ms | p90 ms | IQR ms | min-max ms | median 95%% CI |\n|---|---|---|---|---|---|\n")
		row(&b, "built-in macvlan", ms, f1)
		row(&b, "rdma-macvlan", rs, f1)
		row(&b, "ratio rdma-macvlan / macvlan, per pair", ratio, f3)
		cs = append(cs, check{1, "1. container start, " + e, "median paired ratio <= 1.03",
			fmt.Sprintf("%s (95%% CI %s-%s; medians %s vs %s ms)", f3(ratio.Median), f3(ratio.MedianLo), f3(ratio.MedianHi), f1(rs.Median), f1(ms.Median)), ratio.Median <= 1.03})
		noise = append(noise, fmt.Sprintf("built-in macvlan start on %s: IQR %s%% of the median, max/min %s", e, f1(100*ms.RelIQR()), f2(ms.Max/ms.Min)))
	}
	fmt.Fprintf(&b, "\nSpread of the reference alone: %s.\n", strings.Join(noise, "; "))
	b.WriteString("\n![start-time distributions](docs/bench-start.png)\n")
	return b.String(), cs
}

// row writes one line of a summary table: median, p90, IQR, min-max, the
// median's 95% interval.
func row(b *strings.Builder, name string, s bench.Summary, f func(float64) string) {
	fmt.Fprintf(b, "| %s | %s | %s | %s | %s-%s | %s-%s |\n", name, f(s.Median), f(s.P90), f(s.IQR()), f(s.Min), f(s.Max), f(s.MedianLo), f(s.MedianHi))
}

func lifePart(d *data) (string, []check) {
	var b strings.Builder
	var cs []check
	b.WriteString("The daemon binary in its own network namespace with a veth parent and a fake rxe sysfs, driven over its socket as Docker drives it; the link moved into a namespace and back as libnetwork does (`netnstest.MoveInto`/`MoveBack`). Live endpoints are joined, each in its own namespace, with their GID entries in the table. Levels run 10, 100, 1000, 1000, 100, 10 (two passes per level, against drift). The kernel rows add and delete a macvlan child of the same parent directly in every cycle: the floor under CreateEndpoint and DeleteEndpoint.\n")
	levels := sortedKeys(d.life)
	lo, hi := levels[0], levels[len(levels)-1]
	fmt.Fprintf(&b, "\n| operation | %s |\n|---|%s\n", strings.Join(mapStr(levels, func(l int) string { return fmt.Sprintf("p50 / p99 ms at %d live", l) }), " | "), strings.Repeat("---|", len(levels)))
	for _, op := range append(append([]string{}, pluginOps...), "plugin", "move", "moveback", "cycle", "kadd", "kdel") {
		cells := mapStr(levels, func(l int) string {
			s := bench.Summarize(d.life[l][op])
			return f2(s.Median) + " / " + f2(s.P99)
		})
		fmt.Fprintf(&b, "| %s | %s |\n", opNames[op], strings.Join(cells, " | "))
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
		fmt.Fprintf(&b, "| daemon CPU and read syscalls per cycle (mean of the passes) | %s |\n", strings.Join(cells, " | "))
	}
	n := len(d.life[lo]["create"])
	fmt.Fprintf(&b, "\n%d samples per level (%d per pass), GID table of %d slots.\n", n, d.endpoints.Cycles, d.endpoints.Table)
	b.WriteString("\n![endpoint latency vs live endpoints](docs/bench-endpoints.png)\n")
	for _, op := range pluginOps {
		var worst50, worst99 float64
		for _, l := range levels {
			s := bench.Summarize(d.life[l][op])
			worst50 = max(worst50, s.Median)
			worst99 = max(worst99, s.P99)
		}
		r := bench.Summarize(d.life[hi][op]).Median / bench.Summarize(d.life[lo][op]).Median
		cs = append(cs,
			check{2, "2. " + opNames[op] + " p50", "<= 2 ms at every level", "worst " + f2(worst50) + " ms", worst50 <= 2},
			check{2, "2. " + opNames[op] + " p99", "<= 10 ms at every level", "worst " + f2(worst99) + " ms", worst99 <= 10},
			check{2, "2. " + opNames[op] + fmt.Sprintf(" p50 at %d / at %d", hi, lo), "<= 1.2", f2(r), r <= 1.2})
	}
	return b.String(), cs
}

func restartPart(d *data) (string, []check) {
	var b strings.Builder
	var cs []check
	if len(d.restart) > 0 {
		s := bench.Summarize(d.restart)
		fmt.Fprintf(&b, "Time from process start to `/v1/status` answering, %d restarts with %d endpoints in state: median %s ms, p90 %s ms, max %s ms.\n", s.N, d.restartN, f1(s.Median), f1(s.P90), f1(s.Max))
		cs = append(cs, check{3, "3. restart to serving", "< 1 s", fmt.Sprintf("median %s ms, max %s ms (%d endpoints)", f1(s.Median), f1(s.Max), d.restartN), s.Max < 1000})
	}
	if len(d.endpoints.Memory) > 0 {
		fmt.Fprintf(&b, "\n| daemon memory | VmRSS MiB | VmHWM MiB |\n|---|---|---|\n")
		worst := 0
		for _, m := range d.endpoints.Memory {
			fmt.Fprintf(&b, "| %s | %s | %s |\n", m.When, f1(float64(m.RSSKB)/1024), f1(float64(m.HWMKB)/1024))
			worst = max(worst, m.RSSKB, m.HWMKB)
		}
		cs = append(cs, check{3, "3. RSS at 1000 endpoints", "< 30 MB", "peak " + f1(float64(worst)/1024) + " MiB (VmHWM)", float64(worst)*1024 < 30e6})
	}
	if len(d.endpoints.StatusMS) > 0 {
		s := bench.Summarize(d.endpoints.StatusMS)
		fmt.Fprintf(&b, "\n`GET /v1/status` with %d endpoints (it reads the whole GID table twice per port): median %s ms, p90 %s ms.\n", d.restartN, f1(s.Median), f1(s.P90))
	}
	return b.String(), cs
}

func dataplanePart(d *data) (string, []check) {
	var b strings.Builder
	var cs []check
	fmt.Fprintf(&b, "iperf3 (%ss per run after one omitted second, one stream) and a TCP request/response loop (test/bench/cmd/tcprr, 64-byte messages, 5000 round trips) between two containers on the same network, run in the containers' network namespaces with `nsenter -t PID -n`.\n", d.machine["iperf_seconds"])
	for _, e := range engineOrder {
		t := d.tput[e]
		if t == nil {
			continue
		}
		fmt.Fprintf(&b, "\nOn %s, %d interleaved rounds (network order rotates each round):\n\n", engineName(d, e), len(t["macvlan"]))
		fmt.Fprintf(&b, "| network | TCP Gbit/s median (min-max) | RR p50 us median (min-max) | RR p99 us median |\n|---|---|---|---|\n")
		for _, n := range []string{"rdma", "macvlan", "bridge"} {
			ts, rs, r99 := bench.Summarize(t[n]), bench.Summarize(d.rr[e][n]), bench.Summarize(d.rr99[e][n])
			name := map[string]string{"rdma": "rdma-macvlan", "macvlan": "built-in macvlan", "bridge": "bridge (user-defined)"}[n]
			fmt.Fprintf(&b, "| %s | %s (%s-%s) | %s (%s-%s) | %s |\n", name, f2(ts.Median), f2(ts.Min), f2(ts.Max), f1(rs.Median), f1(rs.Min), f1(rs.Max), f1(r99.Median))
		}
		tr := bench.Summarize(bench.Ratios(t["rdma"], t["macvlan"]))
		lr := bench.Summarize(bench.Ratios(d.rr[e]["macvlan"], d.rr[e]["rdma"]))
		fmt.Fprintf(&b, "\nPer round, rdma-macvlan / macvlan: throughput ratio median %s (min %s, max %s); latency as speed (macvlan p50 / rdma-macvlan p50) median %s (min %s, max %s).\n",
			f3(tr.Median), f3(tr.Min), f3(tr.Max), f3(lr.Median), f3(lr.Min), f3(lr.Max))
		cs = append(cs,
			check{4, "4. TCP throughput vs macvlan", ">= 0.98x", fmt.Sprintf("%sx (median of per-round ratios, 95%% CI %s-%s)", f3(tr.Median), f3(tr.MedianLo), f3(tr.MedianHi)), tr.Median >= 0.98},
			check{4, "4. TCP latency vs macvlan", ">= 0.98x (macvlan p50 / rdma-macvlan p50)", fmt.Sprintf("%sx (95%% CI %s-%s)", f3(lr.Median), f3(lr.MedianLo), f3(lr.MedianHi)), lr.Median >= 0.98})
	}
	return b.String(), cs
}

func concPart(d *data) (string, []check) {
	var b strings.Builder
	var cs []check
	fmt.Fprintf(&b, "%s `docker run -d` at once on one network (each CLI started in the background, the wall time until the last has returned), on rdma-macvlan and the built-in macvlan on the same parent and engine, both in each round; then `docker rm -f` of all of them at once. A run is failed when it exits non-zero or writes to stderr; not running counts containers that are not running once every run has returned. Leaks are what is left %s s after the removals: containers, macvlan children of the parent and the plugin's links in the host netns, endpoints in the plugin's `/v1/status` and endpoint state files. The plugin's GID watches end at their first look (the fake table holds the containers' entries).\n", d.machine["conc"], d.machine["conc_settle"])
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
		fmt.Fprintf(&b, "\n**%s**, %d rounds (the driver that goes first alternates):\n\n", engineName(d, e), len(rounds))
		fmt.Fprintf(&b, "| %d `docker run -d` at once | wall s, median (min-max) | `docker rm -f` of all, wall s, median | failed runs | not running | leaks |\n|---|---|---|---|---|---|\n", n)
		for _, drv := range []string{"macvlan", "rdma"} {
			s := by[drv]
			ws, rs := bench.Summarize(s.wall), bench.Summarize(s.rm)
			name := map[string]string{"rdma": "rdma-macvlan", "macvlan": "built-in macvlan"}[drv]
			fmt.Fprintf(&b, "| %s | %s (%s-%s) | %s | %d | %d | %d |\n", name, f2(ws.Median/1000), f2(ws.Min/1000), f2(ws.Max/1000), f2(rs.Median/1000), s.errors, s.notRunning, s.leaks)
		}
		fmt.Fprintf(&b, "\nWall-time ratio rdma-macvlan / macvlan per round: %s; median %s.\n", strings.Join(cells, ", "), f3(ratio.Median))
		r, m := by["rdma"], by["macvlan"]
		bad := r.errors + r.notRunning + r.leaks + m.errors + m.notRunning + m.leaks
		cs = append(cs, check{5, fmt.Sprintf("5. %d concurrent docker run -d, %s", n, e), "median per-round wall ratio <= 1.05, 0 errors, 0 leaks",
			fmt.Sprintf("%s (rounds %s; medians %s vs %s s); errors %d / %d, leaks %d / %d (rdma-macvlan / macvlan)", f3(ratio.Median), strings.Join(cells, ", "),
				f2(bench.Summarize(r.wall).Median/1000), f2(bench.Summarize(m.wall).Median/1000), r.errors+r.notRunning, m.errors+m.notRunning, r.leaks, m.leaks),
			len(ratios) > 0 && ratio.Median <= 1.05 && bad == 0})
	}
	return b.String(), cs
}

func runtimePart(d *data) (string, []check) {
	var b strings.Builder
	var cs []check
	memlock := d.machine["memlock"]
	fmt.Fprintf(&b, "`docker run --rm --runtime rdma-macvlan --network NET --ulimit memlock=%s busybox true` on the rdma-macvlan network (managed plugin, fake mlx5 sysfs for a veth parent; the runtime registered with `docker rdma runtime install`) against the same with `--runtime runc` and what the runtime adds given by hand (`--device` for the uverbs node and `rdma_cm`, `--cap-add IPC_LOCK`), then both on `--net none` (where the runtime changes nothing): the cost of the runtime on the start of an RDMA container and of one it leaves alone. Through the runtime the container also gets rdma-exec in front of `true`, which waits until the container's own GID entry is in the port's table (the fake table holds it before the start, as the kernel holds it once it has added it; rdma-exec reports its wait with `RDMA_EXEC_TIMING=1`). The runtime is asked on `create` only; `start`, `delete` and the rest go straight to runc. Each pair runs the four in an order that alternates; ratios are taken per pair, with the docker CLI of the engine's generation.\n", memlock)
	for _, e := range engines(d.rdma) {
		ps := d.rdma[e]
		var rt, runc, rtNone, runcNone, wait []float64
		looks := map[int]int{}
		for _, x := range ps {
			rt, runc = append(rt, x.rt), append(runc, x.runc)
			rtNone, runcNone = append(rtNone, x.rtNone), append(runcNone, x.runcNone)
			wait = append(wait, x.wait)
			looks[x.looks]++
		}
		ratio := bench.Summarize(bench.Ratios(rt, runc))
		noneRatio := bench.Summarize(bench.Ratios(rtNone, runcNone))
		ws := bench.Summarize(wait)
		cli := ""
		if v := d.machine["cli_"+e]; v != "" {
			cli = ", docker CLI " + v
		}
		fmt.Fprintf(&b, "\n**%s%s**, %d interleaved pairs:\n\n", engineName(d, e), cli, len(ps))
		fmt.Fprintf(&b, "| `docker run --rm ... busybox true` | median ms | p90 ms | IQR ms | min-max ms | median 95%% CI |\n|---|---|---|---|---|---|\n")
		row(&b, "`--runtime runc`, rdma-macvlan network, devices and IPC_LOCK by hand", bench.Summarize(runc), f1)
		row(&b, "`--runtime rdma-macvlan`, rdma-macvlan network", bench.Summarize(rt), f1)
		row(&b, "ratio rdma-macvlan / runc, per pair", ratio, f3)
		row(&b, "`--runtime runc`, `--net none`", bench.Summarize(runcNone), f1)
		row(&b, "`--runtime rdma-macvlan`, `--net none`", bench.Summarize(rtNone), f1)
		row(&b, "ratio rdma-macvlan / runc on `--net none`, per pair", noneRatio, f3)
		row(&b, "rdma-exec's wait for the GID entry (in the container)", ws, f2)
		var lk []string
		for _, n := range slices.Sorted(maps.Keys(looks)) {
			at := fmt.Sprintf("at look %d", n)
			if n == 1 {
				at = "at the first look"
			}
			lk = append(lk, fmt.Sprintf("%s in %d of %d runs", at, looks[n], len(ps)))
		}
		fmt.Fprintf(&b, "\nrdma-exec waits %s ms at the median in the container (the entry found %s).\n", f2(ws.Median), strings.Join(lk, ", "))
		cs = append(cs, check{6, "6. runtime vs runc, RDMA container, " + e, "median paired ratio <= 1.03",
			fmt.Sprintf("%s (95%% CI %s-%s; medians %s vs %s ms)", f3(ratio.Median), f3(ratio.MedianLo), f3(ratio.MedianHi),
				f1(bench.Summarize(rt).Median), f1(bench.Summarize(runc).Median)),
			ratio.Median <= 1.03})
		cs = append(cs, check{6, "6. runtime vs runc, --net none, " + e, "median paired ratio <= 1.01",
			fmt.Sprintf("%s (95%% CI %s-%s; medians %s vs %s ms)", f3(noneRatio.Median), f3(noneRatio.MedianLo), f3(noneRatio.MedianHi),
				f1(bench.Summarize(rtNone).Median), f1(bench.Summarize(runcNone).Median)),
			noneRatio.Median <= 1.01})
	}
	return b.String(), cs
}
