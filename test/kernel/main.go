// Command kerneltest checks the rdma-macvlan daemon against a real kernel
// RDMA stack: it runs inside the Soft-RoCE test VM (test/kernel/vm/run.sh), as
// root in the VM's initial network namespace, with a freshly built daemon.
//
// It starts the daemon as a legacy plugin on the real /sys, drives it over
// its socket the way libnetwork does (CreateNetwork, CreateEndpoint, Join,
// then moving the link into a new network namespace, renaming it eth0 and
// setting its MAC and addresses; Leave, moving it back, DeleteEndpoint,
// DeleteNetwork) and compares what the daemon reports with what the kernel
// shows: rdma link show, sysfs, ibv_devinfo, the device nodes and dmesg.
//
// Output: one "ok - ..." or "not ok - ..." line per check, "# ..." notes,
// "# finding: ..." for kernel behaviour that differs from what the project
// documents, and a closing "N passed, N failed" line. The exit status is 1
// when a check failed.
package main

import (
	"flag"
	"fmt"
	"os"
	"regexp"
	"strings"
	"time"
)

func main() {
	daemon := flag.String("daemon", "/opt/rmv/bin/rdma-macvlan", "the rdma-macvlan binary to test")
	run := flag.String("run", "", "run only the phases matching this regexp (setup, exclusive and teardown always run)")
	gidTimeout := flag.Duration("wait", 60*time.Second, "how long to wait for the kernel (GID entries, links) before a check fails")
	flag.Parse()

	var filter *regexp.Regexp
	if *run != "" {
		re, err := regexp.Compile(*run)
		if err != nil {
			fmt.Fprintf(os.Stderr, "kerneltest: -run: %v\n", err)
			os.Exit(2)
		}
		filter = re
	}
	s := &suite{out: os.Stdout, start: time.Now()}
	e := &env{s: s, daemonPath: *daemon, wait: *gidTimeout}
	e.runAll(filter)
	s.summary()
	if s.failed > 0 {
		os.Exit(1)
	}
}

// suite counts checks and prints them.
type suite struct {
	out            *os.File
	start          time.Time
	passed, failed int
	findings       []string
}

// check records one assertion. detail (printed only on failure) says what
// was seen.
func (s *suite) check(ok bool, name, detail string, args ...any) bool {
	if ok {
		s.passed++
		fmt.Fprintf(s.out, "ok - %s\n", name)
		return true
	}
	s.failed++
	fmt.Fprintf(s.out, "not ok - %s\n", name)
	if detail != "" {
		for _, l := range strings.Split(fmt.Sprintf(detail, args...), "\n") {
			fmt.Fprintf(s.out, "#     %s\n", l)
		}
	}
	return false
}

// fail records a failed step that stops the current phase.
func (s *suite) fail(name string, err error) {
	s.check(false, name, "%v", err)
}

func (s *suite) note(format string, args ...any) {
	fmt.Fprintf(s.out, "# %s\n", fmt.Sprintf(format, args...))
}

// finding records kernel behaviour that the project's code or documents
// describe differently. It is not a check: it is repeated at the end.
func (s *suite) finding(format string, args ...any) {
	f := fmt.Sprintf(format, args...)
	s.findings = append(s.findings, f)
	fmt.Fprintf(s.out, "# finding: %s\n", f)
}

func (s *suite) summary() {
	if len(s.findings) > 0 {
		fmt.Fprintf(s.out, "# %d finding(s), not counted as checks:\n", len(s.findings))
		for _, f := range s.findings {
			fmt.Fprintf(s.out, "#   - %s\n", f)
		}
	}
	fmt.Fprintf(s.out, "# kerneltest took %s\n", time.Since(s.start).Round(100*time.Millisecond))
	fmt.Fprintf(s.out, "%d passed, %d failed\n", s.passed, s.failed)
}
