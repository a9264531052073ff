package main

import (
	"os/exec"
	"strings"
	"testing"
)

// notInTheRuntime are packages the runtime must not link: it runs on every
// container start, so it reads the plugin's status through package api and
// links neither the daemon nor netlink, logging or the plugin protocol.
var notInTheRuntime = []string{
	"github.com/rdma-macvlan/rdma-macvlan/driver",
	"github.com/rdma-macvlan/rdma-macvlan/plugin",
	"github.com/rdma-macvlan/rdma-macvlan/rdma",
	"github.com/rdma-macvlan/rdma-macvlan/netns",
	"github.com/vishvananda/netlink",
	"github.com/docker/go-plugins-helpers",
	"github.com/sirupsen/logrus",
	"github.com/prometheus/client_golang",
}

func TestRuntimeLinksNoDaemonPackage(t *testing.T) {
	gocmd, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("this test lists the runtime's dependencies with go list: %v", err)
	}
	out, err := exec.Command(gocmd, "list", "-deps", "-f", "{{.ImportPath}}", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 10 {
		t.Fatalf("go list -deps listed %d packages; expected the runtime's whole closure:\n%s", len(deps), out)
	}
	var bad []string
	for _, d := range deps {
		for _, f := range notInTheRuntime {
			if d == f || strings.HasPrefix(d, f+"/") {
				bad = append(bad, d)
			}
		}
	}
	if len(bad) > 0 {
		t.Fatalf("rdma-macvlan-runtime links %v (go list -deps ./cmd/rdma-macvlan-runtime)", bad)
	}
}
