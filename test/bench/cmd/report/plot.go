package main

import (
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/rdma-macvlan/rdma-macvlan/test/bench"
)

// gpQuote makes s a single-quoted gnuplot string.
func gpQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

func at(xs []float64, i int) float64 {
	if i < len(xs) {
		return xs[i]
	}
	return math.NaN()
}

// plot draws docs/bench-endpoints.png from life and docs/bench-start.png
// from start (either may be nil): it writes the gnuplot data and script into
// a temporary directory and runs gnuplot.
func plot(docs string, life, start *data) error {
	if life == nil && start == nil {
		return nil
	}
	tmp, err := os.MkdirTemp("", "rmv-bench-plot.")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	var gp strings.Builder
	gp.WriteString("set terminal pngcairo size 1200,500 font ',10'\nset grid\nset key top left\n")

	if life != nil {
		d := life
		levels := sortedKeys(d.life)
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

	if start != nil {
		d := start
		engs := engines(d.start)
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
