package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeRun writes the raw results of a run into dir: machine.env with date
// and commit, and the given files.
func writeRun(t *testing.T, dir, date, commit string, files map[string]string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	files["machine.env"] = "date=" + date + "\nnproc=2\ncommit=" + commit + "\nmemlock=8388608\nengine_debian=20.10.24+dfsg1, API 1.41\nengine_current=2.0.0-beta.24, API 1.56\n"
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// startCSV: three pairs per engine, rdma-macvlan at ratio times the
// built-in macvlan's 100 ms.
func startCSV(ratio string) string {
	s := "engine,pair,driver,position,ms\n"
	for _, e := range []string{"debian", "current"} {
		for _, p := range []string{"1", "2", "3"} {
			s += e + "," + p + ",rdma,1," + ratio + "\n" + e + "," + p + ",macvlan,2,100\n"
		}
	}
	return s
}

// runtimeCSV: three pairs per engine given, the runtime taking rt ms
// against runc's 100 on the rdma-macvlan network and 100 against 100 on
// --net none, rdma-exec waiting 4 ms in one look.
func runtimeCSV(rt string, engines ...string) string {
	s := "engine,pair,kind,position,ms,wait_ms,looks\n"
	for _, e := range engines {
		for _, p := range []string{"1", "2", "3"} {
			s += e + "," + p + ",runtime,1," + rt + ",4.000,1\n" + e + "," + p + ",runc,2,100,,\n" +
				e + "," + p + ",runc-none,3,100,,\n" + e + "," + p + ",runtime-none,4,100,,\n"
		}
	}
	return s
}

// section returns the lines of the page from the line heading to the next
// line starting with "## ".
func section(page, heading string) string {
	_, rest, ok := strings.Cut(page, "\n"+heading+"\n")
	if !ok {
		return ""
	}
	if i := strings.Index(rest, "\n## "); i >= 0 {
		rest = rest[:i]
	}
	return rest
}

func line(text, prefix string) string {
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(l, prefix) {
			return l
		}
	}
	return ""
}

// The headline holds each target's latest measurement, whichever run it
// comes from; a newer run of some parts replaces those rows only, and the
// rows it replaces go under History. A run stored from -in joins them.
func TestHeadlineIsTheLatestMeasurementOfEachTarget(t *testing.T) {
	docs := t.TempDir()
	runs := filepath.Join(docs, runsDir)
	// Run A (older): container start on both engines and part 6 on debian.
	writeRun(t, filepath.Join(runs, "2026-01-01T1000Z-aaaaaaa"), "2026-01-01 10:00 UTC", "aaaaaaa",
		map[string]string{"start.csv": startCSV("110"), "runtime.csv": runtimeCSV("200", "debian")})
	// Run B (newer): part 6 only, on both engines.
	in := t.TempDir()
	writeRun(t, in, "2026-01-02 10:00 UTC", "bbbbbbb",
		map[string]string{"runtime.csv": runtimeCSV("102", "debian", "current"), "start.csv": "engine,pair,driver,position,ms\n"})
	d, err := load(in)
	if err != nil {
		t.Fatal(err)
	}
	dir, err := store(in, runs, d, 42)
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Base(dir) != "2026-01-02T1000Z-bbbbbbb" {
		t.Errorf("run stored as %s", dir)
	}
	if _, err := os.Stat(filepath.Join(dir, "start.csv")); !os.IsNotExist(err) {
		t.Errorf("a CSV with its header only was stored (%v)", err)
	}
	all, err := loadRuns(runs)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 2 || all[0].id != "2026-01-01T1000Z-aaaaaaa" {
		t.Fatalf("runs %v", all)
	}
	pg, hist, src := page(all, "### Notes\n\nhand-written\n")

	head := section(pg, "## Current figures")
	for _, want := range []struct{ row, figure, commit string }{
		{"| 1. container start, debian |", "| 1.100 (", "| aaaaaaa |"},
		{"| 1. container start, current |", "| 1.100 (", "| aaaaaaa |"},
		{"| 6. runtime vs runc, RDMA container, debian |", "| 1.020 (", "| bbbbbbb |"},
		{"| 6. runtime vs runc, RDMA container, current |", "| 1.020 (", "| bbbbbbb |"},
	} {
		l := line(head, want.row)
		if !strings.Contains(l, want.figure) || !strings.Contains(l, want.commit) || !strings.Contains(l, "/"+runsDir+"/2026-01") {
			t.Errorf("headline row %s: %q, want the figure %s of commit %s and its run", want.row, l, want.figure, want.commit)
		}
	}
	if n := strings.Count(head, "| 6. runtime vs runc, RDMA container, debian |"); n != 1 {
		t.Errorf("the debian row of part 6 is %d times in the headline:\n%s", n, head)
	}
	if strings.Contains(head, "2.000") {
		t.Errorf("the headline shows run A's replaced figure 2.000:\n%s", head)
	}
	if !strings.Contains(head, "commit bbbbbbb: parts 6 (42 s)") || !strings.Contains(head, "commit aaaaaaa: parts 1, 6") {
		t.Errorf("the headline does not describe both runs:\n%s", head)
	}
	if src[1] != all[0] || src[6] != all[1] {
		t.Errorf("sections from %v and %v, want part 1 from run A and part 6 from run B", src[1], src[6])
	}
	if s := section(pg, "## 6. Starting through the runtime: rdma-macvlan-runtime against runc"); !strings.Contains(s, "commit bbbbbbb.") || !strings.Contains(s, "| ratio rdma-macvlan / runc, per pair | 1.020 |") {
		t.Errorf("section 6 is not run B's:\n%s", s)
	}
	if strings.Contains(pg, "## History") || strings.Contains(pg, "hand-written") || !strings.Contains(pg, "(docs/bench/history.md)") {
		t.Errorf("BENCHMARKS.md holds history, or no link to it:\n%s", pg)
	}
	if l := line(hist, "| 6. runtime vs runc, RDMA container, debian |"); !strings.Contains(l, "2.000") || !strings.Contains(hist, "commit aaaaaaa:") {
		t.Errorf("run A's replaced row is not under History:\n%s", hist)
	}
	if strings.Contains(hist, "container start") || strings.Contains(hist, "1.020") {
		t.Errorf("History holds current figures:\n%s", hist)
	}
	if !strings.HasSuffix(hist, "### Notes\n\nhand-written\n") || !strings.HasPrefix(hist, "# Benchmark history\n") {
		t.Errorf("the history page does not start with its title and end with the notes:\n%s", hist)
	}
	if !strings.Contains(hist, "](runs/") || strings.Contains(hist, "](docs/") {
		t.Errorf("the history page's run links are not relative to docs/bench/:\n%s", hist)
	}
	if strings.Index(pg, "## Current figures") > strings.Index(pg, "## 1. ") {
		t.Errorf("the headline is not the first table")
	}
}

func TestRunIDNeedsDateAndCommit(t *testing.T) {
	for _, m := range []map[string]string{
		{"date": "yesterday", "commit": "abc"},
		{"date": "2026-01-01 10:00 UTC", "commit": ""},
		{"date": "2026-01-01 10:00 UTC", "commit": "../x"},
	} {
		if id, err := runID(&data{machine: m}); err == nil {
			t.Errorf("%v: id %q, want an error", m, id)
		}
	}
	if id, err := runID(&data{machine: map[string]string{"date": "2026-01-01 10:00 UTC", "commit": "abc1234-dirty"}}); err != nil || id != "2026-01-01T1000Z-abc1234-dirty" {
		t.Errorf("id %q, %v", id, err)
	}
}
