package main

import (
	"os/exec"
	"strings"
	"testing"
)

// daemonOnly are packages docker rdma must not link: the daemon's own
// packages and the libraries only the daemon needs. The CLI reads the
// daemon's status through package api, which holds the wire format.
//
// github.com/vishvananda/netlink is not in the list: doctor asks the
// kernel for the RDMA netns mode through package netns.
var daemonOnly = []string{
	"github.com/rdma-macvlan/rdma-macvlan/driver",
	"github.com/rdma-macvlan/rdma-macvlan/plugin",
	"github.com/rdma-macvlan/rdma-macvlan/cmd/rdma-macvlan",
	"github.com/docker/go-plugins-helpers",
	"github.com/docker/go-connections",
	"github.com/coreos/go-systemd",
	"github.com/sirupsen/logrus",
}

// goCmd is the go command in PATH, as go test has it.
func goCmd(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("this test lists the CLI's dependencies with go list: %v", err)
	}
	return p
}

func TestCLILinksNoDaemonPackage(t *testing.T) {
	out, err := exec.Command(goCmd(t), "list", "-deps", "-f", "{{.ImportPath}}", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 10 {
		t.Fatalf("go list -deps listed %d packages; expected the CLI's whole closure:\n%s", len(deps), out)
	}
	var bad []string
	for _, d := range deps {
		for _, f := range daemonOnly {
			if d == f || strings.HasPrefix(d, f+"/") {
				bad = append(bad, d)
			}
		}
	}
	if len(bad) > 0 {
		t.Fatalf("docker rdma links daemon-only packages %v: read the daemon's status with package api, not driver or plugin (go list -deps ./cmd/docker-rdma)", bad)
	}
}
